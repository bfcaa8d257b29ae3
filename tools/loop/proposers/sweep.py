"""The default proposer (offline, no key): coordinate descent over the declared knob space.

Each iteration it takes the single-knob move from the trunk with the best prior score (expected gain × confidence
/ effort). Priors, strongest first: this loop's own results, this knowledge base's loop results on other lanes and
models, the shipped table of knob effects by hardware (tools/loop/knob_effects.json); an unknown move gets a small
exploratory prior. Screen, then confirm: every untried move is measured first; near-misses (inconclusive with a
positive gain) are tried together as one move; only then are the better half of them promoted, re-measured once
with twice the repeats. With ``screen:`` (tools/loop/screening.py) the first measure of a flag move is a wave of
them in one process: what it rules out is not proposed on that trunk, the rest rank by their screened gain, and one
screened at a gain its confirmation could hardly find at the lane's current noise is set aside (``loop/power.py``). Two
moves are neither proposed nor screened until a keep they may depend on: one that undoes a supported keep (the knob
set back: the keep's own comparison measured it), and one whose own runs on earlier trunks came out inconclusive at
no gain. The frontier is re-measured in every comparison (the runner reruns the trunk interleaved with each
candidate).
"""

from __future__ import annotations

import json
from functools import reduce

from .. import crash_lessons, power
from ..learn import chained_gain
from ..priors import Attempt, Priors, run_key
from ..proposal import Change, Proposal, may_depend
from ..screen_table import change_key
from . import Proposer

UNKNOWN_GAIN_PCT = 2.0      # a move nobody has measured: worth a look, behind anything with evidence of a gain
UNKNOWN_CONFIDENCE = 0.3
OWN_WEIGHT, OTHER_WEIGHT = 1.0, 0.5
COMBINE_NOTE = "near-misses together"
PROMOTION_NOTE = "promotion of"
MAX_COMBINED = 3            # near-misses tried together at most
GAP_NOTE = "measured gap to the reference"
ADOPT_NOTE = f"{GAP_NOTE}, every mapped item at once"
SCREEN_NOTE = "screened against this trunk:"
SCREENED_OUT = ("broken", "slower", "no gain")  # screening.RULED_OUT (not imported: the loop imports the sweep)
SCREEN_CONFIDENCE = 0.6     # a few rounds in one process: a ranking, above a table's prior, below a confirmation


def norm(name: str) -> str:
    return name.lstrip("-").replace("-", "_").lower()


def value_key(v) -> str:
    return json.dumps(v, sort_keys=True) if isinstance(v, (dict, list)) else str(v).lower()


def shown(v) -> str:
    """A knob value in a sentence: an empty or missing value reads "unset", not as nothing."""
    return "unset" if v in (None, "") else value_key(v)


class SweepProposer(Proposer):
    name = "sweep"

    def __init__(self, promote: bool = True, seed: int | None = None):
        self.promote = promote
        self.seed = seed  # shuffles moves of equal score (the efficacy benchmark runs several seeds)

    # ------------------------------------------------------------------ priors for one move

    def _table_prior(self, priors: Priors, knob, value) -> tuple[float, float, str] | None:
        table = priors.knob_effects
        if knob.env:
            row = table.get(str(value)) if value else None
            hit = (row or {}).get("on")
            return (hit["gain_pct"], hit.get("confidence", 0.5), hit.get("source", "")) if hit else None
        if isinstance(value, dict):
            parts = [self._table_prior_flat(table, k, v) for k, v in value.items()]
            parts = [p for p in parts if p]
            if not parts:
                return None
            return (sum(p[0] for p in parts), min(p[1] for p in parts), "; ".join(p[2] for p in parts))
        return self._table_prior_flat(table, knob.name, value) or self._table_prior_flat(table, knob.flag, value)

    @staticmethod
    def _table_prior_flat(table: dict, name: str, value) -> tuple[float, float, str] | None:
        rows = {norm(k): v for k, v in table.items() if not k.startswith("_")}
        hit = (rows.get(norm(name or "")) or {}).get(value_key(value))
        return (hit["gain_pct"], hit.get("confidence", 0.5), hit.get("source", "")) if hit else None

    @staticmethod
    def _evidence(attempts: list[Attempt], knob: str, value) -> list[float]:
        out = []
        for a in attempts:
            knobs = (a.change or {}).get("knobs") or {}
            if a.gain_pct is not None and knob in knobs and value_key(knobs[knob]) == value_key(value) \
                    and a.verdict in ("supported", "refuted", "inconclusive"):
                out.append(float(a.gain_pct))
        return out

    @staticmethod
    def _sets_only(a: Attempt, knob: str, value) -> bool:
        knobs = (a.change or {}).get("knobs") or {}
        return (a.change or {}).get("kind", "knobs") == "knobs" and list(knobs) == [knob] \
            and value_key(knobs[knob]) == value_key(value)

    @staticmethod
    def _undoes(priors: Priors) -> dict[tuple[str, str], Attempt]:
        """(knob, value) -> the kept single-knob experiment that moved the trunk away from that value, supported:
        setting it back was measured there already, in the opposite direction (a move that undoes a keep is only
        worth a run again after a keep it may depend on)."""
        by_id, out = {a.exp_id: a for a in priors.attempts}, {}
        for a in priors.attempts:
            knobs = (a.change or {}).get("knobs") or {}
            if not (a.kept and a.verdict == "supported" and len(knobs) == 1 and a.gain_pct is not None):
                continue
            before = by_id[a.trunk_exp].config if a.trunk_exp in by_id else priors.spec.start_config()
            (name, value), = knobs.items()
            if name in before and value_key(before[name]) != value_key(value):
                out[(name, value_key(before[name]))] = a
        return out

    @staticmethod
    def _stale_attempts(priors: Priors, category: str) -> set[str]:
        """The attempts of ``category`` made before a later keep in a category it may depend on: their trunk has
        moved in a way that may change what the move does."""
        stale, keeps = set(), []
        for a in reversed(priors.attempts):
            if any(may_depend(category, k) for k in keeps):
                stale.add(a.exp_id)
            if a.kept:
                keeps.append(a.category)
        return stale

    @staticmethod
    def _gap_items(priors: Priors, knob, value) -> list[dict]:
        """The measured gap items (trunk against the loop's reference) this move closes."""
        return [it for it in priors.gap if (it.get("knobs") or {}).keys() == {knob.name}
                and value_key(it["knobs"][knob.name]) == value_key(value)]

    def score(self, priors: Priors, knob, value) -> tuple[float, float, str]:
        """(expected gain %, confidence, where the prior comes from) for setting ``knob`` to ``value``. A move that
        closes a measured gap to the reference takes that gap's estimate (and is ranked before table priors)."""
        gap = self._gap_items(priors, knob, value)
        if gap:
            gain = max(sum(float(it.get("gain_pct") or 0) for it in gap), UNKNOWN_GAIN_PCT)
            what = "; ".join(it["what"] for it in gap)
            return gain, 0.7, f"{GAP_NOTE} {priors.gap_summary.get('ref')}: {what}"
        stale = self._stale_attempts(priors, knob.category)
        own = self._evidence([a for a in priors.attempts if a.exp_id not in stale], knob.name, value)
        moved = self._evidence([a for a in priors.attempts if a.exp_id in stale], knob.name, value)
        if (undone := self._undoes(priors).get((knob.name, value_key(value)))) is not None:
            # the keep that moved the trunk away from this value measured this move backwards: its gain reversed,
            # discounted as a move since made stale (the move is offered only after a keep it may depend on)
            moved.append(100 * (100 / (100 + float(undone.gain_pct)) - 1))
        other = self._evidence(priors.other_lanes, knob.name, value)
        if own or moved or other:
            w = [OWN_WEIGHT] * len(own) + [OTHER_WEIGHT] * (len(moved) + len(other))
            gain = sum(g * x for g, x in zip(own + moved + other, w)) / sum(w)
            conf = min(0.9, 0.4 + 0.15 * len(own) + 0.1 * (len(moved) + len(other)))
            return gain, conf, (f"{len(own)} earlier run(s) in this loop, {len(other)} on other lanes"
                                + (f", {len(moved)} before a keep it may depend on (discounted)" if moved else ""))
        table = self._table_prior(priors, knob, value)
        if table:
            return table[0], table[1], f"knob-effects table: {table[2]}"
        return UNKNOWN_GAIN_PCT, UNKNOWN_CONFIDENCE, "no prior: exploratory"

    # ------------------------------------------------------------------ candidates

    def candidates(self, priors: Priors) -> list[Proposal]:
        spec, trunk = priors.spec, priors.trunk
        self.refused: list[dict] = []  # moves a crash rules out, and why (candidates.json)
        tried = {a.run_key for a in priors.attempts if a.run_key} | set(priors.trunk_keys)
        refuted_here = {a.run_key for a in priors.attempts if a.verdict in ("refuted", "invalid", "crash")}
        undoes = self._undoes(priors)
        out: list[Proposal] = []
        for knob in spec.knobs.values():
            # a move refuted before a keep it may depend on is tried again (once: then it is refuted on this trunk)
            stale = self._stale_attempts(priors, knob.category)
            refuted_changes = {a.fingerprint for a in priors.attempts if a.verdict == "invalid"
                               or (a.verdict == "refuted" and a.exp_id not in stale)}
            for value in knob.values:
                if value_key(value) == value_key(trunk.get(knob.name)):
                    continue
                cfg = dict(trunk, **{knob.name: value})
                key = run_key(spec, cfg, priors.trunk_env, priors.trunk_commit)
                change = Change("knobs", knobs={knob.name: value})
                if key in tried or key in refuted_here or change.fingerprint() in refuted_changes:
                    continue
                undone = undoes.get((knob.name, value_key(value)))
                if undone is not None and undone.exp_id not in stale:
                    self.refused.append({"change": change.describe(), "why": (
                        f"it undoes {undone.exp_id} (supported, {undone.gain_pct:+.1f} %, kept), and no keep since "
                        f"is one a {knob.category} move may depend on")})
                    continue
                measured = [float(a.gain_pct) for a in priors.attempts if a.exp_id not in stale
                            and a.verdict == "inconclusive" and a.gain_pct is not None
                            and self._sets_only(a, knob.name, value)]
                if measured and sum(measured) <= 0:
                    self.refused.append({"change": change.describe(), "why": (
                        "inconclusive at " + ", ".join(f"{g:+.1f} %" for g in measured) + " on earlier trunks, "
                        f"with no keep since that a {knob.category} move may depend on: no gain to confirm")})
                    continue
                if why := crash_lessons.refusal(priors, cfg):
                    self.refused.append({"change": change.describe(), "why": why})
                    continue
                screened = priors.screens.get(change_key(change.knobs))
                if screened and screened.get("outcome") in SCREENED_OUT:
                    self.refused.append({"change": change.describe(), "why": screened.get("why") or "screened out"})
                    continue
                gain, conf, why = self.score(priors, knob, value)
                if screened and screened.get("outcome") == "confirm" and not why.startswith(GAP_NOTE) \
                        and not screened.get("confirmed_by") and isinstance(screened.get("gain_pct"), (int, float)):
                    if small := power.too_small(spec, priors.noise, screened):
                        self.refused.append({"change": change.describe(), "why": small})
                        continue
                    lo, hi = screened.get("interval_pct") or [None, None]
                    gain, conf = float(screened["gain_pct"]), SCREEN_CONFIDENCE
                    why = (f"{SCREEN_NOTE} {gain:+.1f} %" + (f" [{lo:+.1f}, {hi:+.1f}]" if lo is not None else "")
                           + f" over {screened.get('rounds')} rounds; before it: {why}")
                out.append(Proposal(
                    statement=f"Setting {knob.name} to {shown(value)} (from {shown(trunk.get(knob.name))}) "
                              f"raises tokens/s by about {gain:+.0f} %.",
                    mechanism=f"{knob.category} knob `{knob.flag or knob.env or knob.name}`; prior: {why}.",
                    predicted_signal="tokens/s beyond the noise band against the trunk, step time down, and a "
                                     "changed optimized HLO",
                    falsification="tokens/s within the noise band or slower, or the early loss trajectory moves "
                                  "beyond the tolerance",
                    change=change, category=knob.category,
                    expected_gain_pct=round(gain, 2), confidence=round(conf, 2), effort=1.0, proposer=self.name,
                    notes=why))
        refuted_changes = {a.fingerprint for a in priors.attempts if a.verdict in ("refuted", "invalid")}
        adopt = self._adopt_reference(priors, tried | refuted_here, refuted_changes)
        if adopt and (why := crash_lessons.refusal(priors, dict(trunk, **adopt.change.knobs))):
            self.refused.append({"change": adopt.change.describe(), "why": why})
        elif adopt:
            out.append(adopt)
        out += self._memory_moves(priors, tried | refuted_here, refuted_changes)
        out += self._near_misses_together(priors, tried | refuted_here, refuted_changes)
        if self.promote:
            out += self._promotions(priors, tried)
        # adopting the reference's whole mapped side goes first, then closing one measured gap, then the rest; the
        # promotions (confirmations at twice the repeats) last: every untried move is screened first, and
        # near-misses are tried together before any is re-measured alone
        gap_last = lambda p: (0 if p.notes.startswith(ADOPT_NOTE) else 1 if p.notes.startswith(GAP_NOTE)  # noqa: E731
                              else 3 if p.notes.startswith(PROMOTION_NOTE) else 2)
        if self.seed is not None:
            import random
            random.Random(self.seed).shuffle(out)
            out.sort(key=lambda p: (gap_last(p), -round(p.score, 6), -p.expected_gain_pct))
        else:
            out.sort(key=lambda p: (gap_last(p), -round(p.score, 6), -p.expected_gain_pct, p.change.describe()))
        return out

    def _adopt_reference(self, priors: Priors, skip: set[str], refuted_changes: set[str]) -> Proposal | None:
        """"Do what the reference does, and measure": every gap item a knob can close, in one run. Composed, the
        moves are measured once against the trunk instead of one by one, each inside the noise band on its own;
        if the whole is not kept, the single moves follow. None with fewer than two mapped knobs."""
        knobs: dict = {}
        items = []
        for it in priors.gap:
            ch = it.get("knobs") or {}
            if ch and not set(ch) & set(knobs):
                knobs.update(ch)
                items.append(it)
        if len(knobs) < 2:
            return None
        spec = priors.spec
        cfg = dict(priors.trunk, **knobs)
        change = Change("knobs", knobs=knobs)
        if run_key(spec, cfg, priors.trunk_env, priors.trunk_commit) in skip \
                or change.fingerprint() in refuted_changes:
            return None
        # every difference found maps to a knob: expect the whole measured gap; else the mapped items' estimates
        gain = sum(float(it.get("gain_pct") or 0) for it in items)
        whole = priors.gap_summary.get("gap_pct")
        if whole:
            gain = float(whole) if len(items) == len(priors.gap) else min(gain, float(whole))
        top = max(items, key=lambda it: float(it.get("gain_pct") or 0))
        ref = priors.gap_summary.get("ref")
        return Proposal(
            statement=f"Doing what the reference {ref} does on {len(items)} measured differences at once "
                      f"({change.describe()}) raises tokens/s by about {gain:+.0f} %.",
            mechanism="measured differences to the reference, each mapped to a declared knob: "
                      + "; ".join(it["what"] for it in items),
            predicted_signal="tokens/s beyond the noise band against the trunk, toward the reference's; the gap page "
                             "after the keep lists none of these items",
            falsification="tokens/s within the noise band or slower, or the early loss trajectory moves beyond the "
                          "tolerance",
            change=change, category=top.get("category") or spec.knobs[next(iter(top["knobs"]))].category,
            expected_gain_pct=round(max(gain, UNKNOWN_GAIN_PCT), 2), confidence=0.7, effort=1.0,
            proposer=self.name, notes=f"{ADOPT_NOTE} ({ref}): {len(items)} items")

    def _memory_moves(self, priors: Priors, skip: set[str], refuted_changes: set[str]) -> list[Proposal]:
        """After an out-of-memory move: the same move with one memory-side knob, the allocator's figures said."""
        out = []
        for knobs, a in crash_lessons.memory_moves(priors):
            cfg = dict(priors.trunk, **knobs)
            change = Change("knobs", knobs=knobs)
            if run_key(priors.spec, cfg, priors.trunk_env, priors.trunk_commit) in skip or \
                    change.fingerprint() in refuted_changes or crash_lessons.refusal(priors, cfg):
                continue
            moved = Change("knobs", knobs=(a.change or {}).get("knobs") or {}).describe()
            gain = max(self.score(priors, priors.spec.knobs[k], v)[0] for k, v in a.change["knobs"].items()
                       if k in priors.spec.knobs)
            out.append(Proposal(
                statement=f"{moved} ran out of memory in {a.exp_id}; with {change.describe()} it fits and raises "
                          f"tokens/s by about {gain:+.0f} %.",
                mechanism=f"memory-side fix for an out-of-memory crash ({crash_lessons.figures(a)}): the memory "
                          "knob trades compute or steps for the bytes the move needs",
                predicted_signal="the run completes, peak memory under the device's, tokens/s above the trunk's",
                falsification="it runs out of memory again, or is no faster than the trunk",
                change=change, category="memory", expected_gain_pct=round(gain, 2), confidence=0.4, effort=1.0,
                proposer=self.name, notes=f"memory fix for the OOM of {a.exp_id} ({a.crash.get('signature')})"))
        return out

    def _near_misses_together(self, priors: Priors, skip: set[str], refuted_changes: set[str]) -> list[Proposal]:
        """The near-misses of this trunk tried together: single-knob moves that came out inconclusive with a
        positive gain (each inside the noise alone), the best ones on disjoint knobs (up to ``MAX_COMBINED``), as one
        candidate expected to gain what its parts gain chained. Measured once, together: if the gains add, the sum
        clears the noise where neither part did; the loop page sets the measured gain against the sum (interaction)."""
        latest: dict[str, Attempt] = {}
        for a in priors.attempts:
            if a.trunk_exp == priors.trunk_exp and (a.change or {}).get("kind") == "knobs":
                latest[a.run_key] = a
        near = sorted((a for a in latest.values() if a.verdict == "inconclusive" and (a.gain_pct or 0) > 0),
                      key=lambda a: -(a.gain_pct or 0))
        parts, knobs = [], {}
        for a in near:
            ch = a.change.get("knobs") or {}
            if ch and not set(ch) & set(knobs) and len(parts) < MAX_COMBINED:
                parts.append(a)
                knobs.update(ch)
        if len(parts) < 2:
            return []
        cfg = dict(priors.trunk, **knobs)
        change = Change("knobs", knobs=knobs)
        if run_key(priors.spec, cfg, priors.trunk_env, priors.trunk_commit) in skip \
                or change.fingerprint() in refuted_changes or crash_lessons.refusal(priors, cfg):
            return []
        gain = reduce(chained_gain, [a.gain_pct for a in parts], 0.0)
        each = "; ".join(f"{Change('knobs', knobs=a.change['knobs']).describe()} {a.gain_pct:+.1f} % ({a.exp_id})"
                         for a in parts)
        return [Proposal(
            statement=f"Together, {len(parts)} near-misses ({change.describe()}) raise tokens/s by about {gain:+.0f} %, "
                      "what their parts gained alone, chained.",
            mechanism=f"each part gained inside the noise alone: {each}; gains of independent changes add, so the "
                      "sum clears the noise where the parts did not",
            predicted_signal="tokens/s beyond the noise band against the trunk, near the chained gain of the parts",
            falsification="tokens/s within the noise band or slower (the parts' gains were noise, or they interact)",
            change=change, category=parts[0].category, expected_gain_pct=round(gain, 2), confidence=0.55,
            effort=1.0, proposer=self.name, notes=f"{COMBINE_NOTE}: {', '.join(a.exp_id for a in parts)}",
            combines=[a.exp_id for a in parts])]

    def _promotions(self, priors: Priors, tried: set[str]) -> list[Proposal]:
        """Inconclusive moves with a positive gain on the current trunk: the better half, once, at 2× repeats."""
        here = [a for a in priors.attempts if a.trunk_exp == priors.trunk_exp and a.verdict == "inconclusive"
                and (a.gain_pct or 0) > 0 and (a.change or {}).get("kind") == "knobs"]
        # re-measured already: the same configuration ran twice (adaptive repeats reach the cap on a first measure
        # too, so the repeat count cannot tell a promotion from a first run)
        seen: dict[str, int] = {}
        for a in priors.attempts:
            seen[a.run_key] = seen.get(a.run_key, 0) + 1
        remeasured = {k for k, n in seen.items() if n > 1}
        pool = sorted((a for a in here if a.run_key not in remeasured), key=lambda a: -(a.gain_pct or 0))
        half = pool[: max(1, len(pool) // 2)] if pool else []
        out = []
        for a in half:
            knobs = a.change.get("knobs") or {}
            repeats = min(priors.spec.max_repeats * 2, max(priors.spec.min_repeats * 2, a.repeats * 2 or 4))
            if repeats <= (a.repeats or 0):
                continue  # no rounds to add (a pairs run had its `pairs:` rounds): admission would refuse a rerun
            out.append(Proposal(
                statement=f"Re-measured with more repeats, {Change('knobs', knobs=knobs).describe()} beats the trunk "
                          f"(first measure {a.gain_pct:+.1f} %, inconclusive).",
                mechanism="successive halving: the promising half of the inconclusive moves gets twice the repeats",
                predicted_signal="the gain stays positive and the interval clears the noise band",
                falsification="the gain falls inside the band again, or turns negative",
                change=Change("knobs", knobs=dict(knobs)), category=a.category,
                expected_gain_pct=float(a.gain_pct or 0), confidence=0.35, effort=1.5, proposer=self.name,
                repeats=repeats, notes=f"{PROMOTION_NOTE} {a.exp_id}"))
        return out

    # ------------------------------------------------------------------ the pick

    def propose(self, priors: Priors, record) -> Proposal | None:
        cands = self.candidates(priors)
        record("candidates.json", json.dumps([{"change": c.change.describe(), "category": c.category,
                                               "score": round(c.score, 3), "expected_gain_pct": c.expected_gain_pct,
                                               "confidence": c.confidence, "why": c.notes} for c in cands]
                                             + [dict(r, refused=True) for r in self.refused], indent=1))
        if not cands:
            return None
        last = priors.attempts[-1].category if priors.attempts else ""
        allowed = [c for c in cands if c.category != priors.avoid_category] or cands
        if priors.prefer_switch and last:  # near-misses together are a synthesis of categories, not a streak
            allowed = [c for c in allowed if c.category != last or c.combines] or allowed
        return allowed[0]

    def untried(self, priors: Priors, n: int = 10) -> list[Proposal]:
        """For the retrospective: the best ideas not yet run on this trunk."""
        return self.candidates(priors)[:n]

