"""Whether a proposal may run, and why not: a knob or value outside the declared space, a configuration already
running, already the trunk's or already tried, a change refuted before, or a third run in a row from one category.
Pure: spec, state and priors in, a reason (or None) out."""

from __future__ import annotations

from .. import redact
from . import patchfiles
from .priors import Priors, run_key
from .proposal import Proposal, ProposalError
from .spec import LoopSpec
from .state import LoopState

REFUTED = ("refuted", "invalid")


def patch_files(patch: str) -> list[str]:
    """The files a unified diff touches, as ``git apply`` reads it (``patchfiles``; ``/dev/null`` left out)."""
    return patchfiles.files(patch)


def protected_touched(patch: str, protected: list[str]) -> list[str]:
    """The files of ``patch`` that a protected entry covers: the runner's own files, and the loop file's
    ``protected:`` paths and globs. An entry ``path::function`` is not refused here (a patch may change the rest
    of the file); the run's hash of that function files the run invalid when the patch changed it."""
    return patchfiles.covered(patch_files(patch), protected)


def patch_refusal(patch: str, protected: list[str]) -> str | None:
    """Why no loop runs ``patch`` (None: it may): a binary hunk, or a file the runner or the loop file protects.
    Asked when a proposal is admitted and when an agent files one (the queue would refuse it later anyway)."""
    if patchfiles.is_binary(patch):  # 885 KB of patch wrote a 150 MB file into the loop's repository
        return "the patch holds a binary hunk (GIT binary patch): a proposal's code change is text"
    if hit := protected_touched(patch, protected):
        return (f"the patch touches protected files ({', '.join(hit)}): the metric code and the runner are not the "
                "model's to change")
    return None


def check_fits(p: Proposal, spec: LoopSpec) -> None:
    """What a proposal's schema alone cannot enforce (raises ProposalError): the loop file's declared knobs and
    values, a code surface for patches."""
    for name, value in p.change.knobs.items():
        knob = spec.knobs.get(name)
        if knob is None:
            raise ProposalError(f"unknown knob {name!r} (declared: {', '.join(spec.knobs) or 'none'})")
        found, declared = knob.declared(value)
        if not found:
            raise ProposalError(f"knob {name!r}: {value!r} is not a declared value ({knob.values!r})")
        p.change.knobs[name] = declared
    if p.change.kind == "patch" and not spec.code:
        raise ProposalError("this loop has no code surface (`code:` in the loop file): use knobs or env")
    if any(not k.strip() for k in p.change.env):
        raise ProposalError("change.env has an empty variable name")


def trunk_outside_spec(spec: LoopSpec, trunk: dict | None) -> str | None:
    """Why a loop's state cannot go on under this loop file: its trunk runs a knob value the file no longer declares
    (a knob renamed or removed since the stop). Every command is built from the file's knobs, so the trunk's kept
    value would silently fall back to the start and each change be judged against the wrong configuration."""
    for k, v in ((trunk or {}).get("config") or {}).items():
        knob = spec.knobs.get(k)
        if knob is None or not knob.declared(v)[0]:
            what = "no longer declares the knob" if knob is None else "no longer declares this value of"
            return (f"the loop's trunk ({trunk.get('exp_id') or 'its baseline'}) runs {k}={v!r}, and the loop file "
                    f"{what} {k!r}: resumed, every command would run without it and every change be judged against "
                    f"another configuration. Declare it again (a renamed knob under its old name), or start over "
                    f"with `tools loop start {spec.name} --fresh`")
    return None


def config_of(spec: LoopSpec, trunk: dict, p: Proposal) -> tuple[dict, dict]:
    """The proposal's knobs and environment on top of the trunk's."""
    start = spec.start_config()  # knobs added to the loop file since: their starting value
    cfg = {k: trunk["config"].get(k, v) for k, v in start.items()} | p.change.knobs
    env = dict(trunk.get("env") or {})
    for k, v in p.change.env.items():
        env[k] = f"{env[k]} {v}".strip() if k in env and k.endswith("_FLAGS") else v
    return cfg, env


def key_of(spec: LoopSpec, trunk: dict, p: Proposal, cfg: dict, env: dict) -> str:
    """What makes two runs the same run: knobs, environment, the trunk's code and the patch."""
    return run_key(spec, cfg, env, trunk.get("commit", ""),
                   p.change.fingerprint() if p.change.kind == "patch" else "")


def refuse(spec: LoopSpec, state: LoopState, p: Proposal, priors: Priors, inflight: set[str] = frozenset()
           ) -> str | None:
    """Why this proposal may not run, else None."""
    knobs = spec.knobs
    for k, v in p.change.knobs.items():
        if k not in knobs:
            return f"unknown knob {k!r} (declared: {', '.join(knobs)})"
        found, declared = knobs[k].declared(v)
        if not found:
            return f"value {v!r} of knob {k!r} is outside the declared space {knobs[k].values}"
        p.change.knobs[k] = declared  # the declared value (2 for a proposed 2.0): its command and its fingerprint
    for k, v in p.change.env.items():  # a page never holds a secret: the writer put the mark in its place
        if redact.MARK in str(v):
            return (f"the value of {k} was redacted from the page it came from (a secret is never written): set "
                    f"{k} in the environment the loop runs in instead")
    if p.repair_of and (why := repair_refusal(state.history, p)):
        return why
    if p.change.kind == "patch" and (why := patch_refusal(p.change.patch, spec.protected)):
        return why
    cfg, env = config_of(spec, state.trunk, p)
    key = key_of(spec, state.trunk, p, cfg, env)
    if key in inflight:
        return "the same configuration is already running in this batch"
    for f in state.frontier:
        if f.get("run_key") == key:
            return f"the trunk already ran this configuration: {f.get('page') or f['exp_id']}"
    fp = p.change.fingerprint()
    for h in state.history:  # a refuted change stays refuted, whatever the trunk has become since
        if h.get("fingerprint") == fp and h.get("verdict") in REFUTED:
            return f"refuted by {h['page']} ({h['verdict']}, hypothesis {h.get('hypothesis_page')})"
    for h in state.history:
        if h.get("run_key") != key or (h.get("verdict") == "crash" and h.get("interrupted")):
            continue
        if h["verdict"] in REFUTED:
            return f"refuted by {h['page']} ({h['verdict']}, hypothesis {h.get('hypothesis_page')})"
        if h["verdict"] == "inconclusive" and p.repeats > int(h.get("repeats") or 0):
            continue  # successive halving: re-measure with more repeats
        return f"duplicate of {h['page']} ({h['verdict']}): the same configuration already ran"
    if priors.avoid_category and p.category == priors.avoid_category:
        return f"three runs in a row from category {p.category!r}: switch category"
    return None


def repair_refusal(history: list[dict], p: Proposal) -> str | None:
    """A patch repairs one crashed patch, once: not a run that did not crash, not a repair that crashed itself."""
    target = next((h for h in history if h.get("exp_id") == p.repair_of), None)
    if p.change.kind != "patch":
        return "repair_of: only a code patch repairs a crashed patch"
    if target is None or target.get("verdict") != "crash" or (target.get("change") or {}).get("kind") != "patch":
        return f"repair_of {p.repair_of!r} names no crashed patch of this loop"
    if target.get("repair_of"):
        return (f"{p.repair_of} was itself the repair of {target['repair_of']} and crashed: a crashed patch is "
                "retried at most once")
    done = next((h for h in history if h.get("repair_of") == p.repair_of), None)
    if done is not None:
        return f"{p.repair_of} was repaired once already ({done.get('exp_id')}, {done.get('verdict')})"
    return None


def closes_page(why: str) -> str | None:
    """The status a refused hypothesis page of a person gets, or None when the refusal only defers it."""
    if "in a row from category" in why:
        return None
    return "refuted" if why.startswith("refuted by") else "abandoned"
