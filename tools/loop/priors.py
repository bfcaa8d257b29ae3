"""What a proposer reads before it proposes: built from the wiki by code (``engine.gather_priors``), plain data,
so the same priors can be rendered into a prompt and saved with the run for audit."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from .spec import LoopSpec


def run_key(spec: LoopSpec, config: dict, extra_env: dict | None, commit: str, patch_fingerprint: str = "") -> str:
    """What a run executes: its flag knobs, its environment (env knobs and ``extra_env``), the code. Two runs with
    the same key are duplicates, whatever the proposal said: an env knob counts by the variable it sets, so an `env`
    change setting FAKE_FAST=1 and the knob `fast: 1` are one run (each was tried once, the trunk measured twice)."""
    flags = {k: v for k, v in config.items() if not (k in spec.knobs and spec.knobs[k].env)}
    body = json.dumps({"config": flags, "env": spec.env_for(config, extra_env), "commit": commit,
                       "patch": patch_fingerprint}, sort_keys=True, default=str)
    return hashlib.sha256(body.encode()).hexdigest()[:16]


@dataclass
class Attempt:
    """One earlier experiment of this loop (or, with ``lane`` set, of another lane of this knowledge base)."""
    exp_id: str
    category: str
    change: dict                      # Change as a dict
    fingerprint: str
    verdict: str
    gain_pct: float | None = None
    kept: bool = False
    hypothesis_page: str = ""
    statement: str = ""
    config: dict = field(default_factory=dict)  # the full knob configuration that ran
    lane: str = ""
    run_key: str = ""                           # see run_key
    trunk_exp: str = ""                         # the trunk it was compared against
    repeats: int = 0
    crash: dict = field(default_factory=dict)   # a crash's kind, signature, message, memory figures, frames
    repair_of: str = ""                         # the crashed patch (exp_id) this attempt repaired


@dataclass
class Priors:
    spec: LoopSpec
    trunk: dict[str, Any]                       # knob configuration of the current frontier
    trunk_env: dict[str, str]                   # extra env on the trunk (from kept env changes)
    trunk_commit: str                           # model-code commit of the trunk ("" when no code repo)
    best: dict | None                           # the frontier's experiment record (tokens/s, MFU...)
    attempts: list[Attempt]                     # this loop's experiments, oldest first
    other_lanes: list[Attempt]                  # this knowledge base's results on other lanes and models
    refuted: list[Attempt]                      # refuted/invalid attempts (never proposed again)
    memory: dict[str, dict]                     # per category: tried, supported, refuted, best_gain_pct, closed
    open_hypotheses: list[dict]                 # hypothesis pages with status open (queue), people's first
    profile: dict | None                        # latest profile summary: top ops, categories, hot source lines
    concepts: list[dict]                        # related concept pages: title, path, excerpt
    kernels: list[dict]                         # kernels that exist in the ingested repos: name, backend, category
    retrospective: str                          # the last retrospective's text ("" before the first)
    guidance: str                               # program.md, layered (knowledge base, model, lane)
    avoid_category: str = ""                    # plateau rule: 3 in a row from one category: not this one next
    prefer_switch: bool = False                 # a few non-improving runs: switch category
    budget_left: dict[str, float] = field(default_factory=dict)
    knob_effects: dict[str, Any] = field(default_factory=dict)  # shipped table of knob effects by hardware
    refusals: list[dict] = field(default_factory=list)          # this iteration's refused proposals and why
    trunk_keys: list[str] = field(default_factory=list)         # run keys of every configuration the trunk held
    gap: list[dict] = field(default_factory=list)               # gap items of the trunk against the reference
    gap_summary: dict = field(default_factory=dict)             # the reference, the gap %, what is unexplained
    screens: dict[str, dict] = field(default_factory=dict)      # change -> what a screen measured (screen_table)
    noise: dict[str, dict] = field(default_factory=dict)        # pairs|processes -> {sigma_pct, source}: the lane's
                                                                # current noise, what a confirmation's interval uses

    @property
    def trunk_exp(self) -> str:
        return str((self.best or {}).get("exp_id") or "")
