"""Is a confirmation worth its rounds? The chance that an experiment of ``n`` paired rounds, at the lane's current
noise, finds a gain of a given size ``supported`` (its power), from the noise model the verdict will use.

A screen ranks a trunk's moves in a few rounds; each move it does not rule out is confirmed by an experiment of its
own (24 rounds of in-process pairs), the only thing that can be ``supported``. Beside a busy machine a round's σ
rises (pairs: 3-24 % per round beside the bench's 60 %-duty load, against about 1-6 % quiet), and a move screened at
+1 to +3 % cannot come out ``supported`` however it is run: beside the load (run L of bench/pairs_loop.py) such
confirmations took 20 device-seconds each and every one ended inconclusive. A move whose screened gain, taken as its
true gain, a confirmation would find ``supported`` less than one time in five (``MIN_POWER``) is set aside on this
trunk, with the figures (the retrospective lists it); on a quieter machine the same gain is worth its rounds, and a
keep it may depend on screens it again. The gain judged is the one believed once the move is read among its wave
(``shrink.shrink``: ``believed_pct``) where the wave had enough readings, else the screened gain. Only a screen's
own measurement on this trunk sets a move aside this way: a table's prior is a guess, and near-misses tried together
can interact (two near-misses of +1.5 % came out +8.7 % together in bench/loop_efficacy.py).

The same power sizes what the loop spends (``screen_rounds``, ``confirmation_rounds``: the loop file's rounds at most):

- a screen wave runs the fewest rounds (from ``MIN_SCREEN_ROUNDS``) at which a true +``SCREEN_GAIN_PCT`` % screens
  above zero and two moves ``RANK_GAP_PCT`` % apart rank right, ``SCREEN_FIND`` of the time at the lane's σ per
  round (2 rounds up to σ 1.15 %, all 4 from 1.25 %);
- a move the screen measured in one process is confirmed by in-process pairs of the fewest rounds (``2 r``, from
  ``2 * MIN_FIRST_ROUNDS``) whose first process alone (``r`` rounds, judged by ``stats.first_process`` on simulated
  rounds) finds its planned gain ``supported`` ``CONFIRM_POWER`` of the time: the planned gain is
  the screen's lower bound when that is above zero, else half its median (a screen's best gains lean high: they
  were picked for being high). Every other experiment (not screened, a combination, a promotion) runs the loop
  file's rounds. On the small preset a confirmation of a +14 % move took 12 rounds (the first process; about 115
  device-s each, bench/pairs_loop.py --lane small) where 6 find it at σ 1 %."""

from __future__ import annotations

import math
import random
import statistics

from ..experiments import stats
from ..experiments.noise import LaneNoise
from ..experiments.stats import ALPHA, PAIRS_LOOKS, looks, t_quantile
from .screen_table import change_key

MIN_POWER = 0.2
CONFIRM_POWER = 0.9
SCREEN_GAIN_PCT, RANK_GAP_PCT, SCREEN_FIND = 5.0, 2.0, 0.95
MIN_SCREEN_ROUNDS = 2
SIM_DRAWS = 400


def power(gain_pct: float, sigma_pct: float, rounds: int, n_looks: int = 1) -> float:
    """P(the interval of ``rounds`` paired rounds at σ ``sigma_pct`` per round lies above zero) for a true gain of
    ``gain_pct``: the normal approximation of the t-interval ``stats.paired`` builds (each look at ALPHA / looks)."""
    return _power_log(100 * math.log1p(gain_pct / 100), sigma_pct, rounds, n_looks)


def _power_log(g: float, sigma_pct: float, rounds: int, n_looks: int) -> float:
    """``power`` of a gain given as 100 × its log-ratio."""
    if rounds < 2 or sigma_pct <= 0:
        return 1.0 if g > 0 else 0.0
    se = sigma_pct / math.sqrt(rounds)
    tq = t_quantile(1 - ALPHA / (2 * n_looks), 2 * (rounds - 1))  # own rounds + as many from the lane's model
    return 0.5 * (1 + math.erf((g / se - tq) / math.sqrt(2)))


def confirmation(spec, screened_in: str) -> tuple[str, int, int]:
    """(noise model, rounds, looks) of the experiment that would confirm a move screened ``screened_in``: a flag
    move screened in one process is confirmed as in-process pairs, an environment move in processes."""
    if screened_in == "one process" and spec.pairs:
        return "pairs", spec.pairs_rounds, PAIRS_LOOKS
    return "processes", spec.max_repeats, looks(spec.min_repeats, spec.max_repeats)


def too_small(spec, noise: dict, screened: dict) -> str:
    """Why a screened move is not worth confirming on this trunk ("" when it is): its screened gain has less than
    ``MIN_POWER`` power in the confirmation the lane would run. ``noise``: ``Priors.noise``."""
    gain = screened.get("gain_pct")
    kind, rounds, n_looks = confirmation(spec, str(screened.get("screened_in") or ""))
    model = noise.get(kind) or {}
    sigma = model.get("sigma_pct")
    if not isinstance(gain, (int, float)) or not isinstance(sigma, (int, float)):
        return ""
    believed, (lo, hi) = screened.get("believed_pct"), screened.get("believed_range") or [None, None]
    if isinstance(believed, (int, float)) and isinstance(lo, (int, float)) and isinstance(hi, (int, float)):
        p = power(believed, sigma, rounds, n_looks)
        believed = f", believed {believed:+.1f} % [{lo:+.1f}, {hi:+.1f}] among its wave (loop/shrink.py)"
    else:
        p, believed = power(gain, sigma, rounds, n_looks), ""
    if p >= MIN_POWER:
        return ""
    need = next((g / 2 for g in range(1, 400) if power(g / 2, sigma, rounds, n_looks) >= 0.5), None)
    return (f"screened {gain:+.1f} % on this trunk{believed}: a confirmation of {rounds} rounds ({kind}) at the "
            f"lane's σ {sigma:.1f} % per round would find it supported {100 * p:.0f} % of the time (under "
            f"{100 * MIN_POWER:.0f} %; half the time from " + (f"{need:+.1f} %" if need else "beyond +200 %")
            + f"); {model.get('source') or 'the lane noise model'}")


def _sigma(noise: dict, kind: str) -> float | None:
    sigma = (noise.get(kind) or {}).get("sigma_pct")
    return float(sigma) if isinstance(sigma, (int, float)) and sigma > 0 else None


def screen_rounds(spec, noise: dict) -> tuple[int, str]:
    """Rounds of a screen wave on this trunk, and why (the loop file's ``screen:`` rounds at most): the fewest at
    which a true +``SCREEN_GAIN_PCT`` % screens above zero, and two moves ``RANK_GAP_PCT`` % apart are ranked
    right, each ``SCREEN_FIND`` of the time."""
    cap = spec.screen_rounds
    sigma = _sigma(noise, "pairs")
    if sigma is None or cap <= MIN_SCREEN_ROUNDS:
        return cap, ""
    n = next((n for n in range(MIN_SCREEN_ROUNDS, cap) if screen_finds(SCREEN_GAIN_PCT, sigma, n) >= SCREEN_FIND
              and ranked_right(RANK_GAP_PCT, sigma, n) >= SCREEN_FIND), cap)
    return n, (f"{n} of {cap} rounds: a true {SCREEN_GAIN_PCT:+g} % screens above zero, and two moves "
               f"{RANK_GAP_PCT:g} % apart rank right, {100 * SCREEN_FIND:g} % of the time at the lane's σ "
               f"{sigma:.2f} % per round")


def _median_of(rng: random.Random, gain_log: float, sigma_pct: float, rounds: int) -> float:
    return statistics.median(rng.gauss(gain_log, sigma_pct) for _ in range(rounds))


def screen_finds(gain_pct: float, sigma_pct: float, rounds: int) -> float:
    """How often a move with a true gain screens above zero in ``rounds`` rounds: its screened gain is the median
    of its rounds' ratios (``screen._gain``), rounds drawn with normal noise of σ per round; a fixed seed."""
    rng, g = random.Random(rounds), 100 * math.log1p(gain_pct / 100)
    return sum(_median_of(rng, g, sigma_pct, rounds) > 0 for _ in range(SIM_DRAWS)) / SIM_DRAWS


def ranked_right(gap_pct: float, sigma_pct: float, rounds: int) -> float:
    """How often a move ``gap_pct`` % better than another screens above it in ``rounds`` rounds (each a median,
    their noise drawn apart: a round's shared trunk would make them closer, so this errs towards more rounds).
    Two moves that do not compose (bf16 and the XLA flag on the template lane) make the first keep a road: in
    bench/pairs_loop.py a two-round screen at σ 2.3 % ranked bf16 over the flag and the loop ended at 0.94."""
    rng, g = random.Random(rounds), 100 * math.log1p(gap_pct / 100)
    return sum(_median_of(rng, g, sigma_pct, rounds) > _median_of(rng, 0.0, sigma_pct, rounds)
               for _ in range(SIM_DRAWS)) / SIM_DRAWS


def first_look_power(gain_pct: float, sigma_pct: float, rounds: int, band_pct: float, model: bool = True) -> float:
    """How often the look after a first pairs process of ``rounds`` rounds (``stats.first_process``, the verdict's
    own rule: interval, position allowance, separation and band) finds a true gain ``supported``, rounds drawn with
    normal noise of σ per round around it. ``model``: σ is the lane model's, which lends as many degrees of freedom
    as the rounds have (measured against this trunk: its own rounds replace it only on the F-test's evidence);
    else σ is the calibration's floor. A fixed seed: the same figure every call."""
    rng = random.Random(rounds)
    lane = LaneNoise(sigma_pct, rounds - 1, 1, rounds, 0, trunk_df=rounds - 1) if model else None
    noise = stats.Noise(sigma_floor_pct=sigma_pct, band_pct=band_pct, lane=lane)
    g = 100 * math.log1p(gain_pct / 100)
    base, hits = [1000.0] * rounds, 0
    for _ in range(SIM_DRAWS):
        var = [1000.0 * math.exp((g + rng.gauss(0, sigma_pct)) / 100) for _ in range(rounds)]
        t = stats.first_process(base, var, noise)
        hits += t is not None and t.decision == "supported"
    return hits / SIM_DRAWS


def confirmation_rounds(spec, noise: dict, screened: dict | None) -> tuple[int, str]:
    """Rounds of the pairs experiment that confirms a move (``spec.pairs_rounds`` at most), and why they are fewer
    ("" when they are not): sized from the screen's measurement of it on this trunk. ``screened``: its row in
    ``Priors.screens`` (None: not screened)."""
    cap = spec.pairs_rounds
    if not spec.pairs or not screened or screened.get("screened_in") != "one process":
        return cap, ""
    gain, sigma = screened.get("gain_pct"), _sigma(noise, "pairs")
    if not isinstance(gain, (int, float)) or gain <= 0 or sigma is None:
        return cap, ""
    band = float((noise.get("pairs") or {}).get("band_pct") or stats.RUN_TO_RUN_FLOOR_PCT)
    model = (noise.get("pairs") or {}).get("model", True) is not False
    lo = (screened.get("interval_pct") or [None])[0]
    plan = lo if isinstance(lo, (int, float)) and lo > 0 else gain / 2
    for r in range(stats.MIN_FIRST_ROUNDS, (cap + 1) // 2):
        if (p := first_look_power(plan, sigma, r, band, model)) >= CONFIRM_POWER:
            return 2 * r, (f"{2 * r} of {cap} rounds: screened {gain:+.1f} % (planned as {plan:+.1f} %); the first "
                           f"process's {r} rounds find that supported {100 * p:.0f} % of the time at the lane's σ "
                           f"{sigma:.2f} % per round (band {band:.2f} %, the variant's position worth "
                           f"{stats.POSITION_ALLOWANCE_PCT:g} %)")
    return cap, ""


def rounds_for(spec, priors, p, run_key: str) -> tuple[int, str]:
    """``confirmation_rounds`` of proposal ``p`` (a ``Proposal``) that runs as ``run_key``: sized when the screen
    of this trunk measured that very run (one knob, nothing else) and its own experiment has not run; a promotion
    (``p.repeats``), a combination, a repair or an earlier trunk's screen: the loop file's rounds."""
    if p.change.kind != "knobs" or len(p.change.knobs) != 1 or p.change.env or p.repeats or p.combines \
            or p.repair_of:
        return spec.pairs_rounds, ""
    screened = priors.screens.get(change_key(p.change.knobs))
    if not screened or screened.get("outcome") != "confirm" or screened.get("confirmed_by") \
            or screened.get("run_key") != run_key:
        return spec.pairs_rounds, ""
    return confirmation_rounds(spec, priors.noise, screened)
