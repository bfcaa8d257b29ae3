"""A lane's noise model that stays current: the σ of a round's log-ratio, estimated from every paired round the
lane has already run, newest first.

An A/A calibration measures the noise once, under the conditions of that moment; used as a floor, it outlives them:
a calibration made while another job shared the machine (σ 9.7 %) held every later comparison to its width when the
machine had gone quiet (an experiment's own rounds: σ 2.9 %), and two real +13 % gains needed twelve rounds each.
Every interleaved experiment measures the noise too: the residuals of its rounds around their own mean are noise
whatever the change did (a constant effect moves the mean, not the spread). So the model pools them:

- each filed experiment of the variant (same shape when known) that ran interleaved rounds gives its sum of squared
  residuals and ``n - 1`` degrees of freedom; an A/A calibration gives the same, as one more experiment (a prior,
  not a floor);
- a record ``k`` experiments older than the newest counts ``0.5 ** (k / HALF_LIFE)``: the model follows the
  machine as it drifts, and a calibration fades like any other round once newer rounds exist;
- σ² = Σ w·SS / Σ w·df, with Σ w·df its effective degrees of freedom; and no more than the robust σ of the newest
  rounds (1.4826 × their median absolute residual), as a calibration's is, so one disturbed round does not set it.

``stats.paired`` takes the larger of the experiment's own σ and the model's (the model is the floor now, a current
one), on the experiment's degrees of freedom plus at most as many again from the model (rounds of one machine are
not independent of its state: on recorded rounds, the model's full degrees of freedom gave 1.7 % false `supported`
quiet and 4.9 % under interference; capped, 0.0 %, with more power than the calibration floor). It judges an
experiment by its own rounds alone (a t-interval on its own degrees of freedom) when the model no longer describes
the machine: the
rounds are more than ``DISAGREE``× noisier (another job arrived: the wider interval stands), or more than
``DISAGREE``× quieter over at least ``MIN_OWN_ROUNDS`` rounds and either that quiet is improbable under the model
(F-test, p < ``STALE_P``) or the model holds no round against this baseline (the trunk moved: it is recalibrated
by the experiment's own rounds). Choosing the narrower σ only on such evidence keeps false `supported` under 1 %
(tests/experiments/test_noise.py; bench/noise_model.py replays recorded rounds)."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

HALF_LIFE = 6.0        # experiments: the rounds of one filed six experiments before the newest count half
MAX_RECORDS = 40       # the newest records read (older ones weigh < 1 %)
DISAGREE = 2.0         # σ ratio beyond which the model no longer describes this experiment's conditions
MIN_OWN_ROUNDS = 4     # an experiment's own σ replaces a larger model's only from this many rounds
STALE_P = 0.001        # ... and only when a σ that low is that unlikely under the model (F-test), unless the
                       # model holds no round against this experiment's baseline (the trunk moved since)


@dataclass(frozen=True)
class LaneNoise:
    sigma_pct: float       # σ of a round's log-ratio (100·ln ratio), per round
    df: float              # effective degrees of freedom (recency-weighted)
    experiments: int       # records that gave rounds
    rounds: int
    calibrations: int      # of them, A/A calibrations
    trunk_df: float = 0.0  # the effective df of rounds measured against the baseline being compared against

    def describe(self) -> str:
        cal = f", {self.calibrations} of them A/A" if self.calibrations else ""
        return (f"lane noise model: σ {self.sigma_pct:.2f} % per round from {self.rounds} rounds of "
                f"{self.experiments} experiments{cal}, recency-weighted (half-life {HALF_LIFE:g} experiments, "
                f"{self.df:.1f} effective df)")


def log_ratios(rec: dict, statistic: str = "median") -> list[float]:
    """The record's paired rounds as 100·ln(variant / baseline), read by ``statistic`` (its fastest step's figures
    for ``min`` when it kept them); [] when it ran no interleaved rounds."""
    runs = rec.get("runs_tokens_per_s_best") if statistic == "min" else None
    runs = runs if isinstance(runs, dict) else rec.get("runs_tokens_per_s")
    if not isinstance(runs, dict) or not rec.get("interleaved", True):
        return []
    base, var = runs.get("baseline") or [], runs.get("variant") or []
    if len(base) != len(var):  # an arm failed in some round: its pairing is not known
        return []
    try:
        return [100 * math.log(float(v) / float(b)) for b, v in zip(base, var) if float(b) > 0 and float(v) > 0]
    except (TypeError, ValueError):
        return []


def lane_noise(records: list[dict], variant: str, shape_key: str | None = None, statistic: str = "median",
               baseline: str | None = None, pairs: bool = False) -> LaneNoise | None:
    """The model from ``records`` (one lane's, oldest first); None when no record of the variant has two rounds.
    ``baseline``: the run the coming comparison is against (``trunk_df`` counts the rounds measured against it).
    ``pairs``: from the rounds of in-process pairs only (else of processes only): their noise is another's."""
    from .records import shape_key_of

    usable = []
    for r in records:
        if r.get("variant") != variant or r.get("status") != "filed" or r.get("verdict") == "crash" \
                or bool(r.get("pairs")) != pairs:
            continue
        k = shape_key_of(r)
        if shape_key is not None and k is not None and k != shape_key:
            continue
        rs = log_ratios(r, statistic)
        if len(rs) >= 2:
            usable.append((r, rs))
    usable = usable[-MAX_RECORDS:]
    if not usable:
        return None
    ss = df = trunk_df = 0.0
    rounds = cals = 0
    newest = len(usable) - 1
    recent: list[float] = []  # residuals of the records weighing at least a quarter, for the robust σ
    for i, (r, rs) in enumerate(usable):
        w = 0.5 ** ((newest - i) / HALF_LIFE)
        mean = statistics.fmean(rs)
        if newest - i <= 2 * HALF_LIFE:  # a residual around its own mean is √((n-1)/n) of the noise: undone
            recent += [abs(x - mean) * math.sqrt(len(rs) / (len(rs) - 1)) for x in rs]
        ss += w * sum((x - mean) ** 2 for x in rs)
        df += w * (len(rs) - 1)
        trunk_df += w * (len(rs) - 1) if baseline and r.get("baseline") == baseline else 0.0
        rounds += len(rs)
        cals += r.get("role") == "calibration"
    # robust as the calibration is (1.4826 × the median absolute residual): one round disturbed by another job
    # does not set the lane's σ; each experiment's own spread still widens its own interval
    sigma = min(math.sqrt(ss / df), 1.4826 * statistics.median(recent)) if recent else math.sqrt(ss / df)
    return LaneNoise(round(sigma, 4), round(df, 3), len(usable), rounds, cals, round(trunk_df, 3))


READINGS = ("median", "min")  # a run's tokens/s: over its median steady step, or its fastest


def choose_reading(records: list[dict], variant: str, shape_key: str | None = None, pairs: bool = False) -> dict:
    """``statistic: auto``: the reading whose lane model is steadier, from the rounds filed before this run (never
    from the run being judged, so choosing cannot flatter its verdict). Both readings are wall-clock tokens/s, so a
    change that moves only host time still shows; with no rounds read both ways yet, the median."""
    models = {r: lane_noise(records, variant, shape_key, r, pairs=pairs) for r in READINGS}
    both = [r for r in records if r.get("variant") == variant and r.get("runs_tokens_per_s_best")
            and bool(r.get("pairs")) == pairs]
    if not both or any(m is None for m in models.values()):
        return {"chosen": "median", "why": "no rounds read both ways yet: the median step"}
    sig = {r: m.sigma_pct for r, m in models.items()}
    chosen = min(READINGS, key=lambda r: sig[r])
    return {"chosen": chosen, "sigma_pct": {r: round(v, 3) for r, v in sig.items()},
            "why": f"the steadier reading over the lane's rounds: σ per round {sig['median']:.2f} % by the median "
                   f"step, {sig['min']:.2f} % by the fastest"}
