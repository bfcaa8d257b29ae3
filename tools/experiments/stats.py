"""The timing decision of interleaved repeats: paired rounds, the interval of their mean log-ratio, the band.

Each round runs the baseline and then the variant on the same worker, so slow drift (thermal, other jobs, an hour
of file-cache churn) hits both arms of a round alike. A round gives r = 100·ln(variant tokens/s / baseline
tokens/s); over n rounds the mean r̄ has the interval r̄ ± t(1 − α/2, n−1)·σ/√n, where σ is the rounds' own
standard deviation floored by the lane's calibrated one (an A/A calibration, ``tools exp run --calibrate``) or,
uncalibrated, by ``DEFAULT_PAIR_SD_PCT``: two rounds that agree by luck never give a narrow interval. An adaptive
experiment that may stop at any of k looks gives each α = 5 %/k.

Rounds alternate the order of their arms (A B, then B A, ...): whatever the second run of a round gains or loses by
being second (a warmer file cache, a machine settling or drifting within the round) cancels over every two rounds,
so it needs no band of its own. An adaptive experiment looks at its interval after every even round (and at the
cap), where that position effect has cancelled.

A speed verdict needs all three: the interval on one side of zero, the gain beyond the band (the smallest change
worth calling one), and the arms separated round by round: the variant beyond its own round's baseline in all but
one round in four (slow drift moves both arms of a round alike, so comparing runs of different rounds would undo
the pairing; one disturbed round in a long series must not veto an interval that already excludes zero). Adaptive
repeats add rounds until that holds, the interval lies inside ±band (no change worth calling one), or the cap is hit.
"""

from __future__ import annotations

import functools
import math
import statistics
from dataclasses import asdict, dataclass

from .noise import DISAGREE, MIN_OWN_ROUNDS, STALE_P, LaneNoise

# A quiet CPU step varies ~2 % run to run (docs/experiments.md), so one round's log-ratio has σ ≈ 2 % × √2; on the
# shared 2-core machines it measured 18 % (140 runs): the rounds' own σ then dominates.
DEFAULT_PAIR_SD_PCT = 2.8
RUN_TO_RUN_FLOOR_PCT = 2.0     # the band when the lane is not calibrated
MIN_BAND_PCT = 0.5             # the least band a calibration can give (a quiet accelerator lane)
MIN_SIGMA_PCT = 0.25           # the least σ floor a calibration can give (five A/A rounds can agree by luck)
CALIBRATION_ROUNDS = 5

ALPHA = 0.05                   # two-sided error of one experiment's interval, shared out over its looks


def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the regularized incomplete beta function (Lentz's method)."""
    tiny = 1e-300
    c, d = 1.0, 1 - (a + b) * x / (a + 1)
    d = 1 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 300):
        for aa in (m * (b - m) * x / ((a - 1 + 2 * m) * (a + 2 * m)),
                   -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 1 + 2 * m))):
            d = 1 + aa * d
            d = 1 / (d if abs(d) > tiny else tiny)
            c = 1 + aa / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1) < 1e-12:
            break
    return h


def _betai(a: float, b: float, x: float) -> float:
    if x <= 0 or x >= 1:
        return max(0.0, min(1.0, x))
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log(1 - x))
    if x < (a + 1) / (a + b + 2):
        return front * _betacf(a, b, x) / a
    return 1 - front * _betacf(b, a, 1 - x) / b


@functools.lru_cache(maxsize=256)
def t_quantile(p: float, df: int) -> float:
    """The Student t quantile: P(T <= q) = p (p > 0.5), by bisection on the incomplete beta function."""
    if df < 1:
        return math.inf
    lo, hi = 0.0, 1e6
    for _ in range(200):
        mid = (lo + hi) / 2
        if 0.5 * _betai(df / 2, 0.5, df / (df + mid * mid)) > 1 - p:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def to_pct(log_pct: float) -> float:
    """A log-ratio in percent (100·ln ratio) as a plain percentage change."""
    return 100 * math.expm1(log_pct / 100)


@dataclass
class Noise:
    """What the interval is built from: the σ floor and the band, and where each came from."""
    sigma_floor_pct: float = DEFAULT_PAIR_SD_PCT
    band_pct: float = RUN_TO_RUN_FLOOR_PCT
    source: str = "uncalibrated lane: default σ floor and band"
    lane: LaneNoise | None = None  # the lane's current model (``noise.lane_noise``): with it, no floor


# what one run's tokens/s is read from: its median steady step, its fastest, or (auto) whichever of the two the
# lane's earlier rounds found steadier (``noise.choose_reading``)
STATISTICS = ("median", "min", "auto")


def noise_from_calibration(cal: dict | None, statistic: str = "median") -> Noise:
    """The noise a calibration record measured (its ``calibration`` frontmatter) for runs read by ``statistic``,
    else the defaults. A record filed before it kept the ``min`` σ gives its median one (wider, never narrower)."""
    c = dict((cal or {}).get("calibration") or {})
    if statistic == "min" and c.get("pair_sd_min_pct") is not None:
        c["pair_sd_pct"] = c["pair_sd_min_pct"]
    if not c.get("pair_sd_pct") and c.get("pair_sd_pct") != 0:
        return Noise()
    # the band is the least band whatever the record says: records filed before rounds alternated carried their
    # position effect in it
    band = MIN_BAND_PCT if int(c.get("rounds") or 0) >= 2 else RUN_TO_RUN_FLOOR_PCT
    return Noise(max(MIN_SIGMA_PCT, float(c["pair_sd_pct"])), band,
                 f"calibrated by {cal.get('exp_id')}: σ {c['pair_sd_pct']} % over {c.get('rounds')} A/A rounds")


def separation(base_tps: list[float], var_tps: list[float]) -> int:
    """+1 when the variant beat its round's baseline in all but ``n // 4`` of the n rounds, -1 when it lost in all
    but that many, 0 otherwise. Measured here: this machine drifts between regimes ~20 % apart within minutes; both
    arms of a round move together, so an unpaired rule (every variant run above every baseline run) rejected clear
    paired gains; and at six or eight rounds, one round caught by another job vetoed gains whose interval already
    excluded zero."""
    pairs = list(zip(base_tps, var_tps))
    if not pairs:
        return 0
    spare = len(pairs) // 4
    if sum(v <= b for b, v in pairs) <= spare:
        return 1
    if sum(v >= b for b, v in pairs) <= spare:
        return -1
    return 0


@dataclass
class Timing:
    rounds: int
    gain_pct: float              # geometric mean of the rounds' ratios, as a percentage change
    interval_pct: list[float]    # 95 % interval of the gain
    band_pct: float
    sigma_pct: float             # σ of a round's log-ratio used for the interval
    measured_sd_pct: float | None
    separated: int
    decision: str                # supported | refuted | within | undecided
    how: str
    confidence_pct: float = 95.0  # of the interval: above 95 % when an adaptive experiment shares it over looks
    df: float | None = None       # degrees of freedom of σ: the rounds', or pooled with the lane's noise model

    def as_record(self) -> dict:
        return {k: v for k, v in asdict(self).items() if v is not None}


def look_points(lo: int, hi: int) -> list[int]:
    """The round counts at which an adaptive experiment (``lo`` < ``hi``) looks at its interval: every even count
    from max(lo, 2) on (the arm order has alternated evenly there) and the cap."""
    return sorted({n for n in range(max(lo, 2), hi + 1) if n % 2 == 0} | {hi})


def looks(lo: int, hi: int) -> int:
    """How many times an adaptive experiment may look at its interval (``look_points``)."""
    return max(1, len(look_points(lo, hi))) if hi > lo else 1


def paired(base_tps: list[float], var_tps: list[float], noise: Noise, n_looks: int = 1) -> Timing | None:
    """The decision over paired rounds (``base_tps[i]`` and ``var_tps[i]`` ran in round i); None below 2 rounds.
    ``n_looks``: an adaptive experiment that may stop at any of that many looks gives each ``ALPHA / n_looks``
    (Bonferroni), so stopping at the first decided look does not multiply its false verdicts."""
    n = min(len(base_tps), len(var_tps))
    if n < 2:
        return None
    r = [100 * math.log(v / b) for b, v in zip(base_tps[:n], var_tps[:n])]
    mean = statistics.fmean(r)
    sd = statistics.stdev(r)
    sigma, df, whence = sigma_for(sd, n, noise)
    conf = 1 - ALPHA / n_looks
    half = t_quantile(1 - (1 - conf) / 2, df) * sigma / math.sqrt(n)
    lo, hi = to_pct(mean - half), to_pct(mean + half)
    gain = to_pct(mean)
    sep = separation(base_tps[:n], var_tps[:n])
    band = noise.band_pct
    if lo > 0 and gain > band and sep == 1:
        decision = "supported"
    elif hi < 0 and gain < -band and sep == -1:
        decision = "refuted"
    elif -band <= lo and hi <= band:
        decision = "within"
    else:
        decision = "undecided"
    how = (f"{n} paired rounds (A B): {100 * conf:g} % interval of the gain [{lo:+.2f}, {hi:+.2f}] %"
           + (f" ({100 * (1 - ALPHA):g} % shared over {n_looks} looks)" if n_looks > 1 else "")
           + f", from σ {sigma:.2f} % per round ({whence}); band ±{band:.2f} %; {noise.source}")
    return Timing(n, round(gain, 3), [round(lo, 3), round(hi, 3)], round(band, 3), round(sigma, 3), round(sd, 3),
                  sep, decision, how, round(100 * conf, 3), round(df, 2))


# In-process pairs: a look after the first of the two processes, where the variant is always arm B. The arm built
# and warmed second ran faster in A/A processes (bench/noise_model.py --kind pairs: +0.7 to +1.5 % on average,
# +2-3 % in the first rounds), so a verdict there must hold with the variant's position worth this much either way.
# Replayed on recorded A/A and +10 % processes it made no false `supported` and stopped 80 % of quiet +10 %
# experiments at half their rounds.
POSITION_ALLOWANCE_PCT = 3.0
PAIRS_LOOKS = 2             # the two-process design's looks: after the first process and after both
MIN_FIRST_ROUNDS = 6        # fewer rounds in the first process: no look there (the replay checked 6 and 12)


def first_process(base_tps: list[float], var_tps: list[float], noise: Noise) -> Timing | None:
    """The decision after the first pairs process (the variant as arm B in every round): ``supported`` when it holds
    with the variant's tokens/s cut by ``POSITION_ALLOWANCE_PCT``, ``refuted`` when it holds with them raised by as
    much; None otherwise (the swapped process runs). Each look has ``ALPHA / PAIRS_LOOKS``."""
    if min(len(base_tps), len(var_tps)) < MIN_FIRST_ROUNDS:
        return None
    for decision, sign in (("supported", -1), ("refuted", 1)):
        shift = math.exp(sign * POSITION_ALLOWANCE_PCT / 100)
        t = paired(base_tps, [v * shift for v in var_tps], noise, PAIRS_LOOKS)
        if t is not None and t.decision == decision:
            return t
    return None


def f_cdf(x: float, d1: float, d2: float) -> float:
    """P(F <= x) for the F distribution with (d1, d2) degrees of freedom."""
    return _betai(d1 / 2, d2 / 2, d1 * x / (d1 * x + d2)) if x > 0 else 0.0


def sigma_for(sd: float, n: int, noise: Noise) -> tuple[float, float, str]:
    """The σ per round an interval of ``n`` rounds (own σ ``sd``) is built from, its degrees of freedom, and how.
    Without a lane model: the own σ floored by the calibration's (or the default). With one: the own σ floored by
    the model's, on the own degrees of freedom plus at most as many from the model; the own rounds alone when the
    model no longer describes the machine (see ``noise``: busier, or quieter on enough evidence)."""
    lane = noise.lane
    if lane is None or lane.df <= 0:
        sigma = max(sd, noise.sigma_floor_pct)
        return sigma, n - 1, f"measured {sd:.2f} %, floor {noise.sigma_floor_pct:.2f} %"
    ratio = sd / lane.sigma_pct if lane.sigma_pct > 0 else (math.inf if sd > 0 else 1.0)  # 0 against 0: agree
    quieter = ratio < 1 / DISAGREE and n >= MIN_OWN_ROUNDS and (
        lane.trunk_df <= 0 or f_cdf(ratio ** 2, n - 1, lane.df) < STALE_P)
    if ratio > DISAGREE or quieter:
        return (max(sd, MIN_SIGMA_PCT), n - 1,
                f"its own {n} rounds: measured {sd:.2f} %, {ratio:.1f}x the lane model's {lane.sigma_pct:.2f} %, "
                f"which no longer describes the machine")
    sigma = max(sd, lane.sigma_pct, MIN_SIGMA_PCT)
    return (sigma, (n - 1) + min(n - 1, lane.df),
            f"measured {sd:.2f} %, the lane model's {lane.sigma_pct:.2f} %: the larger, on "
            f"{(n - 1) + min(n - 1, lane.df):.1f} df")


def calibration(base_tps: list[float], var_tps: list[float]) -> dict:
    """What an A/A calibration measured: the σ of a round's log-ratio (later intervals are never narrower), the
    apparent gain of a command over itself (the second run of a round against the first: a position effect when
    its interval excludes zero, reported as ``position_bias_pct``), and the band later verdicts use: the least
    band. The position effect cancels in later experiments, whose rounds alternate the arm order; the noise itself
    is in the σ floor, and counting either in the band too would ask every gain to clear it twice. Measured here:
    a drift during five A/A rounds (log-ratios +5.6, -21.7, -20.1, -33.2, -34.1 %) read as an 18.7 % position bias
    and, as the band, kept every smaller gain of that lane from ever being supported."""
    n = min(len(base_tps), len(var_tps))
    r = [100 * math.log(v / b) for b, v in zip(base_tps[:n], var_tps[:n])]
    mean = statistics.fmean(r) if r else 0.0
    sd = statistics.stdev(r) if n >= 2 else 0.0
    half = t_quantile(1 - ALPHA / 2, n - 1) * sd / math.sqrt(n) if n >= 2 else math.inf
    biased = n >= 2 and abs(mean) > half  # the A/A interval excludes zero: the arm order itself moves tokens/s
    # The floor later intervals get: a robust σ (1.4826 × the median absolute deviation), so one round disturbed by
    # another job does not set a 10 % floor for the whole lane; each experiment's own spread still widens its own
    # interval. Measured here: one contended round of five (53.2k vs 42.4k) made the plain σ 10.8 %.
    if n >= 3:
        med = statistics.median(r)
        robust = 1.4826 * statistics.median(abs(x - med) for x in r)
        sd = min(sd, max(robust, MIN_SIGMA_PCT))
    band = MIN_BAND_PCT if n >= 2 else RUN_TO_RUN_FLOOR_PCT
    out = {"rounds": n, "pair_sd_pct": round(sd, 3), "aa_gain_pct": round(to_pct(mean), 3),
           "band_pct": round(band, 3), "log_ratios_pct": [round(x, 3) for x in r]}
    if biased:
        out["position_bias_pct"] = round(to_pct(mean), 3)
    return out


def replay(series: list[float], lo: int, hi: int, noise: Noise | None = None, step: int = 1) -> dict:
    """False verdicts of the adaptive rule on runs of ONE command (any verdict but 'within'/'undecided' is false):
    windows of consecutive runs are read as rounds A B A B ... stopping as ``run_experiment`` does."""
    noise = noise or Noise()
    out = {"supported": 0, "refuted": 0, "windows": 0, "rounds": []}
    for start in range(0, len(series) - 2 * hi + 1, step):
        w = series[start:start + 2 * hi]
        base, var = w[0::2], w[1::2]
        t = None
        for n in (look_points(lo, hi) if hi > lo else [hi]):
            t = paired(base[:n], var[:n], noise, looks(lo, hi))
            if t.decision != "undecided":
                break
        out["windows"] += 1
        out["rounds"].append(t.rounds)
        if t.decision in ("supported", "refuted"):
            out[t.decision] += 1
    w = max(1, out["windows"])
    out["mean_rounds"] = round(statistics.fmean(out["rounds"]), 2) if out["rounds"] else 0
    out["false_supported_pct"] = round(100 * out["supported"] / w, 2)
    out["false_refuted_pct"] = round(100 * out["refuted"] / w, 2)
    del out["rounds"]
    return out
