"""Honest verdicts: a gain counts only beyond the noise band, with no tracked regression and an
unchanged early loss trajectory against a same-shape reference.

Measured on these machines (docs/experiments.md): a CPU step varies ~2 % run to run and drifts up
to 6 % over an hour; bf16 moved a 12-step loss trajectory by <= 0.011 while a layer-skipping decoy
moved it by >= 0.056.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass, field

RUN_TO_RUN_FLOOR_PCT = 2.0     # run-to-run CV measured on CPU: the least band interleaved repeats get
STALE_BASELINE_PCT = 6.0       # drift over an hour: the band when comparing against an old, stored number
SEMANTICS_STEPS = 12
SEMANTICS_TOL = 0.025
MEMORY_TOL_PCT = 5.0


def shape_key(result: dict) -> str:
    """What fixes the math of a run: the script's ``shape`` (or its tokens per step)."""
    shape = result.get("shape") or {"tokens_per_step": result.get("tokens_per_step")}
    return json.dumps(shape, sort_keys=True)


def spread_pct(values: list[float]) -> float:
    """Half the range of repeated measurements relative to their median, in percent."""
    if len(values) < 2:
        return 0.0
    return 100 * (max(values) - min(values)) / 2 / statistics.median(values)


def noise_band(base_tps: list[float], var_tps: list[float], interleaved: bool) -> tuple[float, str]:
    """The band a gain must exceed, and how it was obtained."""
    if interleaved and len(base_tps) >= 2 and len(var_tps) >= 2:
        measured = max(spread_pct(base_tps), spread_pct(var_tps))
        band = max(measured, RUN_TO_RUN_FLOOR_PCT)
        return round(band, 2), (f"interleaved A/B, {len(base_tps)}+{len(var_tps)} runs: measured spread "
                                f"{measured:.2f} %, floor {RUN_TO_RUN_FLOOR_PCT} % (run-to-run CV)")
    measured = max(spread_pct(base_tps), spread_pct(var_tps))
    band = max(measured, STALE_BASELINE_PCT)
    return round(band, 2), (f"no interleaved repeats: compared with the stored baseline, band "
                            f"{STALE_BASELINE_PCT} % (measured drift over an hour); use --repeats N to measure it")


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


def separation(base_tps: list[float], var_tps: list[float]) -> int:
    """+1 when every variant run beat every baseline run, -1 when every one lost, 0 when the ranges overlap."""
    if not base_tps or not var_tps:
        return 0
    if min(var_tps) > max(base_tps):
        return 1
    if max(var_tps) < min(base_tps):
        return -1
    return 0


@dataclass
class Decision:
    verdict: str
    status: str  # ledger: keep | discard | crash
    reasons: list[str] = field(default_factory=list)


def decide(*, crashed: bool, is_baseline: bool, gain_pct: float | None, band_pct: float | None,
           sem: Semantics | None, memory_delta_pct: float | None, separated: int | None = None) -> Decision:
    """``separated`` (interleaved repeats only): see ``separation``; overlapping arms are never a verdict."""
    if crashed:
        return Decision("crash", "crash", ["the run crashed, timed out or printed no JSON result line"])
    if sem and sem.status == "changed":
        return Decision("invalid", "discard", [f"semantics changed: {sem.reason}; a speedup here is not a win"])
    if is_baseline:
        return Decision("inconclusive", "keep", ["baseline run: the reference this variant is compared against"])
    if gain_pct is None or band_pct is None:
        return Decision("inconclusive", "discard", ["no baseline measurement to compare against"])
    reasons = [f"tokens/s {gain_pct:+.2f} % vs baseline, noise band ±{band_pct:.2f} %"]
    if gain_pct < -band_pct and separated != 0:
        return Decision("refuted", "discard", reasons + ["slower than the baseline beyond the noise band"])
    if abs(gain_pct) <= band_pct:
        return Decision("inconclusive", "discard", reasons + ["the change is within the noise band"])
    if separated == 0:
        return Decision("inconclusive", "discard", reasons + [
            "the interleaved runs overlap (some baseline runs beat some variant runs): more --repeats"])
    if memory_delta_pct is not None and memory_delta_pct > MEMORY_TOL_PCT:
        return Decision("inconclusive", "discard",
                        reasons + [f"peak memory regressed {memory_delta_pct:+.1f} % (> {MEMORY_TOL_PCT} %)"])
    if not sem or sem.status != "ok":
        why = sem.reason if sem else "not run"
        return Decision("inconclusive", "discard", reasons + [f"semantics check did not run: {why}"])
    return Decision("supported", "keep", reasons + [
        f"semantics held: max |Δloss| {sem.max_abs_delta} ≤ {sem.tol} over {sem.steps} steps"])
