"""How much of a screened gain to believe: a wave's gains shrunk towards zero by what the wave itself measured
(empirical Bayes, the normal prior of James and Stein).

A screen picks its moves for confirmation by their screened gains, and at a few rounds a noisy machine hands some
moves worth nothing a gain of a few percent: beside the bench's 60 %-duty load a re-screen at σ 6 % per round let
moves screened +3 to +4 % through, and every confirmation of them ran its 24 rounds to `inconclusive` (run O of
bench/pairs_loop.py). Read alone, a screened gain is an estimate of its move's; read among its wave it says more.
When the gains of a wave spread no wider than the wave's own noise explains, the moves' true gains are about zero
and a gain of +3 % is mostly noise; when one stands out (+20 % among moves near zero) the spread is real and it
keeps most of its gain. So, per wave and per way of screening (one process, or processes):

- the noise of one move's screened gain ``se``: the σ of its rounds' log-ratios (from its interval), times how much
  noisier a median of ``n`` rounds is than a mean (simulated), over √n. Each move's own, not the wave's pooled: in
  one process a busy neighbour hits some arms' blocks and spares others (beside the bench's load a wave's pooled σ
  was 18 % per round while the XLA flag's own rounds, +10.4 % [+8.0, +13.7], spread 1.6 %; shrunk by the pooled σ
  it was believed +1.6 % and set aside, and that loop kept nothing);
- the spread of the true gains ``τ²`` = the mean of the squared gains (log scale) − the mean of ``se²``, at least 0;
- each move's gain after shrinking: ``B g`` with ``B = τ² / (τ² + se²)``, and how sure: a σ of ``√(B) se``.

``power.too_small`` then asks how often a confirmation would find the move ``supported`` averaged over that
belief, not at the raw screened gain. A wave of fewer than ``MIN_MOVES`` readings is not shrunk: its spread says
too little. Moves whose losses left the trunk's (another program, the decoy "79 % faster") or that have no reading
are left out of the spread."""

from __future__ import annotations

import functools
import math
import random
import statistics

from ..experiments.stats import t_quantile

MIN_MOVES = 3
READ = ("confirm", "no gain", "slower")  # outcomes whose gain is a speed reading of the trunk's program


@functools.lru_cache(maxsize=None)
def median_factor(n: int) -> float:
    """Var(median of ``n`` normal draws) × n / σ²: 1 for n ≤ 2 (the mean), about 1.35 at 3 and 1.19 at 4."""
    if n <= 2:
        return 1.0
    rng = random.Random(n)
    draws = [statistics.median(rng.gauss(0, 1) for _ in range(n)) for _ in range(20000)]
    return statistics.fmean(d * d for d in draws) * n


def _round_sd(row: dict) -> float | None:
    """σ of one round's log-ratio (100 × log) from the row's t-interval of the mean over its rounds."""
    lo, hi = row.get("interval_pct") or [None, None]
    n = row.get("rounds")
    if not isinstance(lo, (int, float)) or not isinstance(hi, (int, float)) or not isinstance(n, int) or n < 2:
        return None
    half = 100 * (math.log1p(hi / 100) - math.log1p(lo / 100)) / 2
    return half * math.sqrt(n) / t_quantile(0.975, n - 1)


def shrink(rows: list[dict]) -> dict:
    """Annotate the rows of one wave screened the same way (in place): ``shrunk_pct`` (the gain believed),
    ``shrunk_sd_pct`` (its σ, 100 × log) and ``shrink`` (B); return the wave's figures ({} when it has too few)."""
    read = [r for r in rows if r.get("outcome") in READ and isinstance(r.get("gain_pct"), (int, float))
            and _round_sd(r) is not None]
    if len(read) < MIN_MOVES:
        return {}
    sds = [_round_sd(r) for r in read]
    dfs = [r["rounds"] - 1 for r in read]
    pooled = math.sqrt(sum(d * s * s for d, s in zip(dfs, sds)) / sum(dfs))
    se2 = [s * s * median_factor(r["rounds"]) / r["rounds"] for s, r in zip(sds, read)]
    g = [100 * math.log1p(r["gain_pct"] / 100) for r in read]
    tau2 = max(0.0, statistics.fmean(x * x for x in g) - statistics.fmean(se2))
    for r, x, s2 in zip(read, g, se2):
        b = tau2 / (tau2 + s2) if tau2 + s2 > 0 else 0.0
        r["shrink"] = round(b, 3)
        r["shrunk_pct"] = round(100 * math.expm1(b * x / 100), 3)
        r["shrunk_sd_pct"] = round(math.sqrt(b * s2), 3)
    return {"moves": len(read), "round_sd_pct": round(pooled, 3), "spread_pct": round(math.sqrt(tau2), 3)}
