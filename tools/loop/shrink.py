"""How much of a screened gain to believe: a wave's gains read together (a normal hierarchical model, the spread
of the true gains integrated over; empirical Bayes in the manner of James and Stein).

A screen picks its moves for confirmation by their screened gains, and at a few rounds a noisy machine hands some
moves worth nothing a gain of a few percent: beside the bench's 60 %-duty load a re-screen at σ 6 % per round let
moves screened +3 to +4 % through, and every confirmation of them ran its 24 rounds to `inconclusive` (run O of
bench/pairs_loop.py). Read alone, a screened gain is an estimate of its move's; read among its wave it says more.
When the gains of a wave spread no wider than the wave's own noise explains, the moves' true gains are about zero
and a gain of +3 % is mostly noise; when one stands out (+20 % among moves near zero), or its own rounds agree, it
keeps most of its gain. So, per wave and per way of screening (one process, or processes):

- each move's screened gain ``g`` (100 × log) has the noise ``se``: the σ of its own rounds' log-ratios (from its
  interval), times how much noisier a median of ``n`` rounds is than a mean (simulated), over √n. Its own, not the
  wave's pooled σ: in one process a busy neighbour hits some arms' blocks and spares others (beside the bench's load
  a wave's pooled σ was 18 % per round while the XLA flag's own rounds, +10.4 % [+8.0, +13.7], spread 1.6 %; shrunk
  by the pooled σ it was believed +1.6 % and set aside, and that loop kept nothing);
- the true gains are drawn around zero with a spread ``τ``: given ``τ``, a move is believed ``N(B g, B se²)`` with
  ``B = τ² / (τ² + se²)``;
- ``τ`` is not taken at its point estimate (which is 0 whenever the gains spread no wider than their noise, and then
  believes every move worth exactly nothing: beside the load one screen's σ of 30 % per round did that to a bf16 whose
  own rounds read +8.5 % [+2.1, +16.2], and that loop kept nothing) but weighed over a grid by how well it explains
  the wave's gains (each ``N(0, τ² + se²)``, τ uniform a priori), so a wave too noisy to say much shrinks little.

``power.too_small`` then judges the mean of that belief, not the raw screened gain. A wave of fewer than
``MIN_MOVES`` readings is not shrunk: its spread says too little. Moves whose losses left the trunk's (another
program, the decoy "79 % faster") or that have no reading are left out."""

from __future__ import annotations

import functools
import math
import random
import statistics

from ..experiments.metrics import finite_number
from ..experiments.stats import t_quantile

MIN_MOVES = 3
TAU_POINTS, HERMITE_POINTS = 80, 12
MIN_SE = 0.05  # % : a move whose rounds agreed exactly still has a block's resolution of noise
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
    interval = row.get("interval_pct")
    lo, hi = interval if isinstance(interval, list) and len(interval) == 2 else (None, None)
    n = row.get("rounds")
    if not finite_number(lo) or not finite_number(hi) or not isinstance(n, int) or isinstance(n, bool) or n < 2 \
            or not -100 < lo <= hi:
        return None  # no interval, or one no screen writes (a state edited by hand): no reading
    half = 100 * (math.log1p(hi / 100) - math.log1p(lo / 100)) / 2
    return half * math.sqrt(n) / t_quantile(0.975, n - 1)


def shrink(rows: list[dict]) -> dict:
    """Annotate the rows of one wave screened the same way (in place): ``believed_pct`` (the gain believed: the mean
    of the belief, what ``power.too_small`` judges) and ``believed_range`` (the belief's middle 80 %); return the
    wave's figures ({} when it has too few readings)."""
    read = [r for r in rows if r.get("outcome") in READ and finite_number(r.get("gain_pct")) and r["gain_pct"] > -100
            and _round_sd(r) is not None]
    if len(read) < MIN_MOVES:
        return {}
    sds = [_round_sd(r) for r in read]
    dfs = [r["rounds"] - 1 for r in read]
    pooled = math.sqrt(sum(d * s * s for d, s in zip(dfs, sds)) / sum(dfs))
    se2 = [max(s * s * median_factor(r["rounds"]) / r["rounds"], MIN_SE ** 2) for s, r in zip(sds, read)]
    g = [100 * math.log1p(r["gain_pct"] / 100) for r in read]
    taus, weights = _spread(g, se2)
    nodes, node_w = _hermite()
    for r, x, s2 in zip(read, g, se2):
        pts, mean = [], 0.0
        for t, wt in zip(taus, weights):
            b = t * t / (t * t + s2)
            mean += wt * b * x
            pts += [(b * x + math.sqrt(b * s2) * z, wt * wz) for z, wz in zip(nodes, node_w)]
        lo, hi = _quantiles(pts, [0.1, 0.9])
        r["believed_pct"], r["believed_range"] = _pct(mean), [_pct(lo), _pct(hi)]
    lo, mid, hi = _quantiles(list(zip(taus, weights)), [0.1, 0.5, 0.9])
    return {"moves": len(read), "round_sd_pct": round(pooled, 3), "spread_pct": round(mid, 3),
            "spread_range": [round(lo, 3), round(hi, 3)]}


def _spread(g: list[float], se2: list[float]) -> tuple[list[float], list[float]]:
    """A grid of τ (100 × log) and its posterior weights: each gain drawn N(0, τ² + se²), τ uniform a priori (a
    flat prior on the spread: it neither collapses to 0 when the wave could be noise nor to a wide spread)."""
    top = 3 * (max(abs(x) for x in g) + math.sqrt(max(se2)))
    taus = [top * (i + 0.5) / TAU_POINTS for i in range(TAU_POINTS)]
    logs = [sum(-0.5 * (math.log(t * t + s2) + x * x / (t * t + s2)) for x, s2 in zip(g, se2)) for t in taus]
    top_log = max(logs)
    w = [math.exp(v - top_log) for v in logs]
    total = sum(w)
    return taus, [v / total for v in w]


@functools.lru_cache(maxsize=None)
def _hermite() -> tuple[tuple[float, ...], tuple[float, ...]]:
    from numpy.polynomial.hermite_e import hermegauss
    x, w = hermegauss(HERMITE_POINTS)
    return tuple(float(v) for v in x), tuple(float(v) / math.sqrt(2 * math.pi) for v in w)


def _quantiles(points: list[tuple[float, float]], qs: list[float]) -> list[float]:
    """Quantiles ``qs`` of a weighted set of points (weights summing to 1)."""
    pts = sorted(points)
    out = []
    for q in qs:
        acc = 0.0
        for v, w in pts:
            acc += w
            if acc >= q:
                out.append(v)
                break
        else:
            out.append(pts[-1][0])
    return out


def _pct(log_pct: float) -> float:
    return round(100 * math.expm1(log_pct / 100), 3)
