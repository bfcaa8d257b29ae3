"""Is a confirmation worth its rounds? The chance that an experiment of ``n`` paired rounds, at the lane's current
noise, finds a gain of a given size ``supported`` (its power), from the noise model the verdict will use.

A screen ranks a trunk's moves in a few rounds; each move it does not rule out is confirmed by an experiment of its
own (24 rounds of in-process pairs), the only thing that can be ``supported``. Beside a busy machine a round's σ
rises (pairs: 3-24 % per round beside the bench's 60 %-duty load, against about 1-6 % quiet), and a move screened at
+1 to +3 % cannot come out ``supported`` however it is run: beside the load (run L of bench/pairs_loop.py) such
confirmations took 20 device-seconds each and every one ended inconclusive. A move whose screened gain, taken as its
true gain, a confirmation would find ``supported`` less than one time in five (``MIN_POWER``) is set aside on this
trunk, with the figures (the retrospective lists it); on a quieter machine the same gain is worth its rounds, and a
keep it may depend on screens it again. Only a screen's own measurement on this trunk sets a move aside this way:
a table's prior is a guess, and near-misses tried together can interact (two near-misses of +1.5 % came out +8.7 %
together in bench/loop_efficacy.py)."""

from __future__ import annotations

import math

from ..experiments.stats import ALPHA, PAIRS_LOOKS, looks, t_quantile

MIN_POWER = 0.2


def power(gain_pct: float, sigma_pct: float, rounds: int, n_looks: int = 1) -> float:
    """P(the interval of ``rounds`` paired rounds at σ ``sigma_pct`` per round lies above zero) for a true gain of
    ``gain_pct``: the normal approximation of the t-interval ``stats.paired`` builds (each look at ALPHA / looks)."""
    if rounds < 2 or sigma_pct <= 0:
        return 1.0 if gain_pct > 0 else 0.0
    se = sigma_pct / math.sqrt(rounds)
    tq = t_quantile(1 - ALPHA / (2 * n_looks), 2 * (rounds - 1))  # own rounds + as many from the lane's model
    g = 100 * math.log1p(gain_pct / 100)
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
    p = power(gain, sigma, rounds, n_looks)
    if p >= MIN_POWER:
        return ""
    need = next((g / 2 for g in range(1, 400) if power(g / 2, sigma, rounds, n_looks) >= 0.5), None)
    return (f"screened {gain:+.1f} % on this trunk: a confirmation of {rounds} rounds ({kind}) at the lane's σ "
            f"{sigma:.1f} % per round would find that supported {100 * p:.0f} % of the time (under "
            f"{100 * MIN_POWER:.0f} %; half the time from " + (f"{need:+.1f} %" if need else "beyond +200 %")
            + f"); {model.get('source') or 'the lane noise model'}")
