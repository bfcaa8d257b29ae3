"""Is a confirmation worth its rounds (``loop/power.py``): the power figure against the verdict's own rule on
simulated rounds, and the sweep setting aside a screened move its confirmation could hardly find."""

from __future__ import annotations

import dataclasses
import math
import random
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
