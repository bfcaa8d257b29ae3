"""A proposal: one structured, falsifiable hypothesis with exactly one change (one mechanism per run)."""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import asdict, dataclass, field
from typing import Any

from ..pages import LOOP_CATEGORIES as CATEGORIES
from .patchfiles import sections

# categories whose moves may change what another's do: after a keep in one, the other's moves measured on the old
# trunk are re-ranked (their evidence discounted), a refuted one is tried again and a screened one screened again (a
# batch change moves the memory trade-offs; bf16 halves the activations a remat policy saves; bf16 dots take other
# kernels: in 34 pairs loops of the bench a dot-fusion XLA flag supported at +7-10 % on the float32 start was
# confirmed 27 times on a later trunk from an old screen's +5 % or more, and came out between -6 and +2 % 22 times)
DEPENDS = {frozenset({"memory", "shape"}), frozenset({"memory", "precision"}), frozenset({"kernel", "shape"}),
           frozenset({"compiler", "precision"})}


def may_depend(a: str, b: str) -> bool:
    return a == b or frozenset({a, b}) in DEPENDS


CHANGE_KINDS = ("knobs", "env", "patch")
TEXT_FIELDS = ("statement", "mechanism", "predicted_signal", "falsification")
MAX_TEXT = 20_000       # characters of one text field (a proposal is read into every later prompt)
MAX_PATCH = 1_000_000   # characters of a patch


class ProposalError(ValueError):
    """A proposal that cannot be used as it is (missing field, two mechanisms, unknown knob...)."""


@dataclass
class Change:
    """What differs from the trunk. ``knobs``: flag overrides from the declared knob space; ``env``: environment
    variables (XLA_FLAGS etc.) set on top of the trunk's; ``patch``: a unified diff applied to the model code.
    ``runtime_only``: the change cannot show in the optimized HLO (the no-op check then does not apply)."""

    kind: str
    knobs: dict[str, Any] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    patch: str = ""
    runtime_only: bool = False

    def fingerprint(self) -> str:
        """Equal for two changes that do the same thing (duplicate detection)."""
        body = {"kind": self.kind, "knobs": self.knobs, "env": self.env,
                "patch": sorted([sorted(s.paths), "\n".join(s.lines)] for s in sections(self.patch))
                if self.patch else ""}  # per file: the same lines in another file are another change
        return hashlib.sha256(json.dumps(body, sort_keys=True, default=str).encode()).hexdigest()[:16]

    def describe(self) -> str:
        if self.kind == "knobs":
            return ", ".join(f"{k}={_short(v)}" for k, v in sorted(self.knobs.items()))
        if self.kind == "env":
            return ", ".join(f"{k}={v!r}" for k, v in sorted(self.env.items()))
        n = sum(1 for ln in self.patch.splitlines() if ln.startswith(("+", "-")) and not ln.startswith(("+++", "---")))
        return f"code patch ({n} changed lines)"


def _short(v: Any) -> str:
    return json.dumps(v, sort_keys=True, separators=(",", ":")) if isinstance(v, (dict, list)) else str(v)


@dataclass
class Proposal:
    statement: str                 # the falsifiable claim
    mechanism: str                 # why it should work
    predicted_signal: str          # what the profile / metrics should show if it is right
    falsification: str             # what result refutes it
    change: Change
    category: str
    expected_gain_pct: float = 0.0
    confidence: float = 0.5        # 0..1
    effort: float = 1.0            # 1 (a flag) .. 5 (a new kernel)
    proposer: str = ""             # sweep | llm | queue | ...
    hypothesis_page: str = ""      # set when the proposal comes from an existing page (queue)
    usage: dict[str, float] = field(default_factory=dict)  # llm: input_tokens, output_tokens, cost_usd
    notes: str = ""
    repeats: int = 0               # > 0: re-measure with at least this many interleaved repeats (successive halving)
    repair_of: str = ""            # the exp_id of a crashed patch this patch repairs (at most one repair each)
    combines: list[str] = field(default_factory=list)  # near-misses (exp_ids) this change tries together

    @property
    def score(self) -> float:
        """Rank: expected gain × confidence / effort."""
        return max(self.expected_gain_pct, 0.0) * self.confidence / max(self.effort, 0.1)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> Proposal:
        """Validate a proposal from untrusted data (an LLM's tool call, a hypothesis page); raises ProposalError."""
        if not isinstance(d, dict):
            raise ProposalError("proposal is not an object")
        missing = [k for k in ("statement", "mechanism", "predicted_signal", "falsification", "change", "category")
                   if not d.get(k)]
        if missing:
            raise ProposalError(f"missing fields: {', '.join(missing)}")
        long = [k for k in TEXT_FIELDS if len(str(d.get(k) or "")) > MAX_TEXT]
        if long:
            raise ProposalError(f"{', '.join(long)}: over {MAX_TEXT} characters (say it in a few sentences)")
        c = d["change"]
        if not isinstance(c, dict) or c.get("kind") not in CHANGE_KINDS:
            raise ProposalError(f"change.kind must be one of {', '.join(CHANGE_KINDS)}")
        for key in ("knobs", "env"):
            if c.get(key) is not None and not isinstance(c[key], dict):
                raise ProposalError(f"change.{key} must be an object (name: value), not {type(c[key]).__name__}")
        if not isinstance(c.get("patch") or "", str):
            raise ProposalError("change.patch must be a unified diff as text")
        if len(c.get("patch") or "") > MAX_PATCH:
            raise ProposalError(f"change.patch: over {MAX_PATCH} characters")
        change = Change(kind=c["kind"], knobs=dict(c.get("knobs") or {}), env={str(k): str(v) for k, v in
                                                                            (c.get("env") or {}).items()},
                        patch=str(c.get("patch") or ""), runtime_only=bool(c.get("runtime_only", False)))
        used = [k for k, v in (("knobs", change.knobs), ("env", change.env), ("patch", change.patch)) if v]
        if used != [change.kind]:
            raise ProposalError(f"one mechanism per run: change.kind is {change.kind!r} but it sets "
                                f"{', '.join(used) or 'nothing'}")
        if not isinstance(d["category"], str) or d["category"] not in CATEGORIES:
            raise ProposalError(f"category {d['category']!r} is not one of {', '.join(CATEGORIES)}")
        try:
            gain = float(d.get("expected_gain_pct", 0.0))
            conf = min(max(float(d.get("confidence", 0.5)), 0.0), 1.0)
            effort = min(max(float(d.get("effort", 1.0)), 1.0), 5.0)
            repeats = int(d.get("repeats") or 0)
        except (TypeError, ValueError) as e:
            raise ProposalError(f"expected_gain_pct, confidence, effort and repeats must be numbers: {e}") from None
        if not all(math.isfinite(v) for v in (gain, conf, effort)):
            raise ProposalError("expected_gain_pct, confidence and effort must be finite numbers (not NaN or infinity)")
        return cls(str(d["statement"]), str(d["mechanism"]), str(d["predicted_signal"]), str(d["falsification"]),
                   change, d["category"], gain, conf, effort, str(d.get("proposer") or ""),
                   str(d.get("hypothesis_page") or ""), dict(d.get("usage") or {}), str(d.get("notes") or ""),
                   repeats, str(d.get("repair_of") or ""),
                   [str(x) for x in d.get("combines") or [] if isinstance(x, str)])


# The JSON schema an LLM fills in (a forced tool call); Proposal.from_dict checks the rest.
PROPOSAL_SCHEMA: dict = {
    "type": "object",
    "additionalProperties": False,
    "required": ["statement", "mechanism", "predicted_signal", "falsification", "change", "category",
                 "expected_gain_pct", "confidence", "effort"],
    "properties": {
        "statement": {"type": "string", "description": "The falsifiable claim, one sentence."},
        "mechanism": {"type": "string", "description": "Why it should make the step faster."},
        "predicted_signal": {"type": "string", "description": "What the metrics or profile show if it is right."},
        "falsification": {"type": "string", "description": "Which result would refute it."},
        "change": {
            "type": "object", "additionalProperties": False, "required": ["kind"],
            "properties": {
                "kind": {"type": "string", "enum": list(CHANGE_KINDS)},
                "knobs": {"type": "object", "description": "knob name -> value, from the declared knob space"},
                "env": {"type": "object", "description": "environment variable -> value (e.g. XLA_FLAGS)",
                        "additionalProperties": {"type": "string"}},
                "patch": {"type": "string", "description": "a unified diff against the model code"},
                "runtime_only": {"type": "boolean"},
            },
        },
        "category": {"type": "string", "enum": list(CATEGORIES)},
        "expected_gain_pct": {"type": "number"},
        "confidence": {"type": "number", "minimum": 0, "maximum": 1},
        "effort": {"type": "number", "minimum": 1, "maximum": 5},
        "notes": {"type": "string"},
        "repair_of": {"type": "string", "description": "the exp_id of a crashed patch this patch repairs, read from "
                      "its linked frames (a crashed patch is repaired at most once)"},
    },
}
