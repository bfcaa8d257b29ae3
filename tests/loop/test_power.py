"""Is a confirmation worth its rounds (``loop/power.py``): the power figure against the verdict's own rule on
simulated rounds, and the sweep setting aside a screened move its confirmation could hardly find."""

from __future__ import annotations

import dataclasses
import math
import random
import statistics
import sys
from pathlib import Path

import pytest

from tools.experiments import stats
from tools.experiments.noise import LaneNoise
from tools.loop import power, screen_table
from tools.loop.proposers.sweep import SweepProposer

sys.path.insert(0, str(Path(__file__).parent))
from llm_helpers import priors  # noqa: E402


def _supported_rate(gain_pct: float, sigma_pct: float, rounds: int, draws: int = 600) -> float:
    """How often ``stats.paired`` (the verdict's interval, separation and band, at the last of the pairs design's
    two looks) finds a true gain supported, rounds drawn with normal noise of σ per round around it."""
    rng = random.Random(7)
    noise = stats.Noise(lane=LaneNoise(sigma_pct, 60.0, 10, 120, 1))
    hits = 0
    for _ in range(draws):
        base = [1000.0] * rounds
        var = [1000.0 * math.exp((100 * math.log1p(gain_pct / 100) + rng.gauss(0, sigma_pct)) / 100)
               for _ in range(rounds)]
        t = stats.paired(base, var, noise, stats.PAIRS_LOOKS)
        hits += t is not None and t.decision == "supported"
    return hits / draws


@pytest.mark.parametrize("gain,sigma", [(8.0, 14.0), (3.0, 6.5), (2.0, 14.0), (10.0, 2.5), (1.0, 2.5)])
def test_power_is_what_the_verdict_finds_at_most(gain, sigma):
    p = power.power(gain, sigma, 24, stats.PAIRS_LOOKS)
    sim = _supported_rate(gain, sigma, 24)
    # an upper bound: the verdict also asks the variant to win all but a quarter of its rounds
    assert sim <= p + 0.05, (p, sim)
    if sigma / math.sqrt(24) < gain / 4:  # clearly resolvable: the two agree
        assert p > 0.95 and sim > 0.9, (p, sim)


def test_power_grows_with_the_gain_and_the_rounds_and_falls_with_the_noise():
    assert power.power(0.0, 10.0, 24) < 0.05
    assert power.power(2.0, 14.0, 24) < power.power(6.0, 14.0, 24) < power.power(6.0, 14.0, 96)
    assert power.power(6.0, 4.0, 24) > power.power(6.0, 14.0, 24)
    assert power.power(-5.0, 3.0, 24) < 0.001


def test_the_sweep_sets_aside_a_screened_gain_its_confirmation_could_hardly_find():
    p = priors()
    p.spec = dataclasses.replace(p.spec, pairs=True, pairs_rounds=24)
    small, big = {"remat": "dots_saveable"}, {"shape": {"batch": 32, "seq_len": 64}}
    move = lambda knobs, gain: {"change": {"kind": "knobs", "knobs": knobs}, "outcome": "confirm",  # noqa: E731
                                "gain_pct": gain, "interval_pct": [gain - 9, gain + 9], "rounds": 4,
                                "screened_in": "one process", "why": ""}
    p.screens = {screen_table.change_key(small): move(small, 2.0), screen_table.change_key(big): move(big, 12.0)}
    p.noise = {"pairs": {"sigma_pct": 14.0, "source": "lane noise model: σ 14.00 % per round"},
               "processes": {"sigma_pct": 20.0, "source": "x"}}
    sweep = SweepProposer()
    got = {c.change.describe() for c in sweep.candidates(p)}
    assert "remat=dots_saveable" not in got and 'shape={"batch":32,"seq_len":64}' in got, got
    why = next(r["why"] for r in sweep.refused if r["change"] == "remat=dots_saveable")
    assert why.startswith("screened +2.0 % on this trunk: a confirmation of 24 rounds (pairs) at the lane's σ 14.0 %")
    assert "lane noise model" in why, why
    # on a quiet machine the same screened gain is worth its rounds
    p.noise["pairs"]["sigma_pct"] = 2.0
    quiet = SweepProposer()
    assert "remat=dots_saveable" in {c.change.describe() for c in quiet.candidates(p)}
    # without a noise model (no calibration, no rounds yet) nothing is set aside this way
    p.noise = {}
    assert "remat=dots_saveable" in {c.change.describe() for c in SweepProposer().candidates(p)}


def _spec(**kw):
    return dataclasses.replace(priors().spec, pairs=True, pairs_rounds=24, screen_rounds=4, **kw)


def test_a_screen_runs_the_fewest_rounds_that_find_a_gain_and_rank_two_moves():
    spec = _spec()
    assert power.screen_rounds(spec, {})[0] == 4  # no noise model yet: the loop file's rounds
    quiet, why = power.screen_rounds(spec, {"pairs": {"sigma_pct": 0.8}})
    assert quiet == 2 and why.startswith("2 of 4 rounds: a true +5 % screens above zero, and two moves 2 % apart "
                                         "rank right, 95 % of the time at the lane's σ 0.80 %"), why
    assert power.screen_rounds(spec, {"pairs": {"sigma_pct": 2.3}})[0] == 4  # the template lane, quiet: all of them
    assert power.screen_rounds(dataclasses.replace(spec, screen_rounds=2), {"pairs": {"sigma_pct": 0.5}})[0] == 2
    rng = random.Random(3)
    median = lambda g, sigma, k: statistics.median(rng.gauss(g, sigma) for _ in range(k))  # noqa: E731
    above = lambda g, sigma, k: sum(median(g, sigma, k) > 0 for _ in range(3000)) / 3000  # noqa: E731
    ranked = lambda g, sigma, k: sum(median(g, sigma, k) > median(0, sigma, k) for _ in range(3000)) / 3000  # noqa: E731
    for sigma in (0.6, 1.0, 1.2):
        n = power.screen_rounds(spec, {"pairs": {"sigma_pct": sigma}})[0]
        assert n < 4 and above(4.88, sigma, n) >= 0.93 and ranked(1.98, sigma, n) >= 0.93, (sigma, n)
        if n > power.MIN_SCREEN_ROUNDS:  # and one round fewer would not do
            assert min(above(4.88, sigma, n - 1), ranked(1.98, sigma, n - 1)) < 0.97, (sigma, n)


def _first_look_rate(gain_pct: float, sigma_pct: float, rounds: int, band_pct: float, draws: int = 1500) -> float:
    """How often ``stats.first_process`` (the look after the first pairs process) finds a true gain supported, with
    other draws than ``power.first_look_power``'s and the lane model's σ measured over many rounds (60 df)."""
    rng = random.Random(1000 + rounds)
    noise = stats.Noise(band_pct=band_pct, lane=LaneNoise(sigma_pct, 60.0, 10, 120, 1))
    g = 100 * math.log1p(gain_pct / 100)
    hits = 0
    for _ in range(draws):
        var = [1000.0 * math.exp((g + rng.gauss(0, sigma_pct)) / 100) for _ in range(rounds)]
        t = stats.first_process([1000.0] * rounds, var, noise)
        hits += t is not None and t.decision == "supported"
    return hits / draws


@pytest.mark.slow
def test_a_screened_move_is_confirmed_in_the_rounds_its_planned_gain_needs():
    spec = _spec()
    noise = lambda sigma, band=0.5: {"pairs": {"sigma_pct": sigma, "band_pct": band}}  # noqa: E731
    row = lambda gain, lo: {"outcome": "confirm", "gain_pct": gain, "interval_pct": [lo, gain + 3],  # noqa: E731
                            "screened_in": "one process", "rounds": 2}
    rounds, why = power.confirmation_rounds(spec, noise(1.0), row(14.0, 11.0))
    assert rounds == 12 and why.startswith("12 of 24 rounds: screened +14.0 % (planned as +11.0 %)"), why
    # the plan is the screen's lower bound, or half its median when that bound is not above zero
    assert "planned as +6.0 %" in power.confirmation_rounds(spec, noise(1.0), row(12.0, -1.0))[1]
    # the first process's rounds find the planned gain supported about as often as promised, with other draws
    sized = 0
    for sigma, gain, lo, band in ((1.0, 14.0, 11.0, 0.5), (2.0, 9.0, 6.0, 0.5), (3.0, 14.0, 10.0, 1.0),
                                  (1.5, 6.0, 5.0, 0.5), (1.5, 6.0, 5.0, 2.0), (2.5, 12.0, 8.0, 0.5)):
        rounds, _ = power.confirmation_rounds(spec, noise(sigma, band), row(gain, lo))
        if rounds < 24:
            sized += 1
            rate = _first_look_rate(lo, sigma, rounds // 2, band)
            assert rate >= power.CONFIRM_POWER - 0.05, (sigma, gain, band, rounds, rate)
            if rounds > 12:  # and a round fewer would not do
                assert _first_look_rate(lo, sigma, rounds // 2 - 1, band) < power.CONFIRM_POWER + 0.05
    assert sized >= 4
    # a σ that is the calibration's floor, not a lane model, lends no degrees of freedom: never fewer rounds
    floor = {"pairs": {"sigma_pct": 2.0, "band_pct": 0.5, "model": False}}
    assert power.confirmation_rounds(spec, floor, row(9.0, 6.0))[0] >= power.confirmation_rounds(
        spec, noise(2.0), row(9.0, 6.0))[0]
    # never more than the loop file's rounds; the loop file's rounds where the plan cannot be found sooner
    assert power.confirmation_rounds(spec, noise(12.0), row(14.0, 2.0))[0] == 24
    assert power.confirmation_rounds(spec, noise(1.0), row(2.5, 1.0)) == (24, "")
    for odd in ({"pairs": {}}, {}):
        assert power.confirmation_rounds(spec, odd, row(14.0, 11.0)) == (24, "")
    assert power.confirmation_rounds(spec, noise(1.0), dict(row(14.0, 11.0), screened_in="processes")) == (24, "")
    assert power.confirmation_rounds(dataclasses.replace(spec, pairs_rounds=8), noise(1.0), row(40.0, 35.0)) == (8, "")


def test_only_a_move_a_screen_let_through_on_this_trunk_gets_fewer_rounds():
    from tools.loop.proposal import Change, Proposal

    p = priors()
    p.spec = _spec()
    p.noise = {"pairs": {"sigma_pct": 1.0}}
    knobs = {"remat": "dots_saveable"}
    p.screens = {screen_table.change_key(knobs): {"outcome": "confirm", "gain_pct": 20.0, "interval_pct": [15, 25],
                                                  "screened_in": "one process", "run_key": "k1"}}
    move = lambda **kw: Proposal("s", "m", "p", "f", Change("knobs", knobs=dict(kw.pop("knobs", knobs))),  # noqa: E731
                                 "remat", **kw)
    assert power.rounds_for(p.spec, p, move(), "k1")[0] == 12
    assert power.rounds_for(p.spec, p, move(), "k0") == (24, "")  # the screen measured another run (an earlier trunk)
    assert power.rounds_for(p.spec, p, move(repeats=4), "k1") == (24, "")  # a promotion
    assert power.rounds_for(p.spec, p, move(knobs=dict(knobs, scan=True)), "k1") == (24, "")  # several knobs
    assert power.rounds_for(p.spec, p, move(combines=["e1", "e2"]), "k1") == (24, "")  # near-misses together
    assert power.rounds_for(p.spec, p, move(knobs={"scan": True}), "k1") == (24, "")  # not screened
    p.screens[screen_table.change_key(knobs)]["confirmed_by"] = "exp-1"  # its own experiment ran already
    assert power.rounds_for(p.spec, p, move(), "k1") == (24, "")
