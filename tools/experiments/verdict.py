"""Honest verdicts: a gain counts only when interleaved rounds decide it beyond the band (``stats``), with no
tracked regression and an unchanged early loss trajectory against a same-shape reference.

Measured on these machines (docs/experiments.md): one run against a stored number was falsely supported or
refuted ~45 % of the time; bf16 moved a 12-step loss trajectory by <= 0.011 while a layer-skipping decoy moved it
by >= 0.056.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from .stats import Timing

STALE_BASELINE_PCT = 6.0       # drift over an hour: the band shown when comparing against an old, stored number
SEMANTICS_STEPS = 12
SEMANTICS_TOL = 0.025
MEMORY_TOL_PCT = 5.0
NOOP_REASON = "no-op: the optimized HLO is identical to the parent's (ids and metadata stripped)"
SINGLE_RUN_REASON = ("one run against a stored number decides nothing: replayed on 56 runs of one command, that "
                     "comparison was falsely supported 45 % and falsely refuted 44 % of the time; use --repeats 2 "
                     "(or --max-repeats M) for interleaved rounds")


def shape_key(result: dict) -> str:
    """What fixes the math of a run: the script's ``shape`` (or its tokens per step)."""
    shape = result.get("shape") or {"tokens_per_step": result.get("tokens_per_step")}
    return json.dumps(shape, sort_keys=True)


@dataclass
class Semantics:
    status: str  # ok | changed | unchecked
    max_abs_delta: float | None = None
    steps: int = 0
    tol: float = SEMANTICS_TOL
    reference: str = ""
    reason: str = ""


def semantics(ref_losses: list[float] | None, losses: list[float] | None, reference: str = "",
              steps: int = SEMANTICS_STEPS, tol: float = SEMANTICS_TOL) -> Semantics:
    if not losses:
        return Semantics("unchecked", tol=tol, reason="the run reported no loss trajectory")
    if not ref_losses:
        return Semantics("unchecked", tol=tol, reason="no same-shape reference run in this lane")
    n = min(steps, len(ref_losses), len(losses))
    if n < min(steps, 3):
        return Semantics("unchecked", tol=tol, reason=f"only {n} comparable steps")
    d = max(abs(a - b) for a, b in zip(ref_losses[:n], losses[:n]))
    return Semantics("ok" if d <= tol else "changed", round(d, 6), n, tol, reference,
                     "" if d <= tol else f"max |Δloss| {d:.4f} > {tol} over the first {n} steps")


@dataclass
class Decision:
    verdict: str
    status: str  # ledger: keep | discard | crash
    reasons: list[str] = field(default_factory=list)


def decide(*, crash: str | None = None, violations: list[str] | None = None, bad_loss: str | None = None, sem: Semantics | None = None,
           role: str = "variant", timing: Timing | None = None, gain_pct: float | None = None,
           band_pct: float | None = None, memory_delta_pct: float | None = None, memory_gb: float | None = None,
           memory_tol_pct: float = MEMORY_TOL_PCT, memory_max_gb: float | None = None, noop: bool = False,
           no_comparison: str = "no baseline measurement to compare against",
           single_reason: str = SINGLE_RUN_REASON, unverified: str = "", doubted: str = "") -> Decision:
    """The verdict. A speed verdict (supported, refuted) needs ``timing``: interleaved paired rounds whose
    interval is decided (``stats.paired``); a single run against a stored number is at most inconclusive. Peak
    memory up by more than ``memory_tol_pct`` holds a gain back, unless ``memory_max_gb`` is declared and the run's
    peak stays under it (a larger batch is a trade the user allowed). ``unverified``: why no clock the program
    cannot move (the runner's on its step lines, the profiler's) confirmed the step times: a gain is then at most
    inconclusive. ``doubted``: why the baseline the variant beat is not the baseline that was filed (its reruns far
    slower than its record): a gain is then at most inconclusive."""
    if crash:
        return Decision("crash", "crash", [crash])
    if violations:  # evidence the program cannot fake disagrees with what it reported (``integrity``)
        also = [f"semantics changed: {sem.reason}"] if sem and sem.status == "changed" else []
        return Decision("invalid", "discard", violations + also + [
            "a speedup here is not a win: what the run reported is not what ran"])
    if bad_loss:
        return Decision("invalid", "discard", [bad_loss])
    if sem and sem.status == "changed":
        return Decision("invalid", "discard", [f"semantics changed: {sem.reason}; a speedup here is not a win"])
    if role == "calibration":
        return Decision("calibration", "discard", ["A/A calibration: the baseline's command against itself, "
                                                    "interleaved; later verdicts in this variant use its noise"])
    if role == "baseline":
        return Decision("baseline", "keep", ["baseline run: the reference this variant is compared against"])
    if noop:
        return Decision("inconclusive", "discard", [NOOP_REASON])
    if gain_pct is None:
        return Decision("inconclusive", "discard", [no_comparison])
    if timing is None:
        return Decision("inconclusive", "discard", [
            f"tokens/s {gain_pct:+.2f} % vs the baseline (band ±{band_pct or STALE_BASELINE_PCT} %)", single_reason])
    lo, hi = timing.interval_pct
    reasons = [f"tokens/s {gain_pct:+.2f} % vs baseline over {timing.rounds} interleaved rounds, "
               f"{timing.confidence_pct:g} % interval [{lo:+.2f}, {hi:+.2f}] %, band ±{timing.band_pct:.2f} %"]
    if timing.decision == "refuted":
        return Decision("refuted", "discard", reasons + [
            "slower beyond the band: the interval is below zero and the variant lost in every round"])
    if timing.decision == "within":
        return Decision("inconclusive", "discard", reasons + ["the interval lies inside the band: no change worth "
                                                              "calling one"])
    if timing.decision != "supported":
        why = ("the arms overlap (in some round the baseline beat the variant)" if timing.separated == 0
               else "the interval is not decided")
        return Decision("inconclusive", "discard", reasons + [f"{why}: more rounds (--max-repeats) or calibrate"])
    if memory_delta_pct is not None and memory_delta_pct > memory_tol_pct:
        grew = f"peak memory regressed {memory_delta_pct:+.1f} % (> {memory_tol_pct:g} %)"
        if memory_max_gb is None or memory_gb is None or memory_gb > memory_max_gb:
            limit = "" if memory_max_gb is None else f", and {memory_gb} GB is over the declared limit {memory_max_gb:g} GB"
            return Decision("inconclusive", "discard", reasons + [grew + limit])
        reasons = reasons + [f"{grew}, within the declared limit: {memory_gb} GB ≤ {memory_max_gb:g} GB"]
    if not sem or sem.status != "ok":
        why = sem.reason if sem else "not run"
        return Decision("inconclusive", "discard", reasons + [f"semantics check did not run: {why}"])
    if doubted:
        return Decision("inconclusive", "discard", reasons + [doubted])
    if unverified:
        return Decision("inconclusive", "discard", reasons + [
            f"the step times it reports were checked against no clock it cannot move ({unverified}): print a line "
            "per step, `{\"step\": i, \"loss\": ...}`, as it ends, or profile the run (--profile)"])
    return Decision("supported", "keep", reasons + [
        "the variant beat its baseline in every round",
        f"semantics held: max |Δloss| {sem.max_abs_delta} ≤ {sem.tol} over {sem.steps} steps"])
