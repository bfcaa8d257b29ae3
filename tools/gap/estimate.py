"""How much of the gap each difference explains: each side's µs per token by op category (scaled to the basis the
verdict is read on), the speeds both sides are compared by, and each item's share of our step. Sides are
``compare.Side`` objects."""

from __future__ import annotations

import math
from typing import Any

from .facts import shape_of

Side = Any  # compare.Side (not imported: compare imports this module)
HOST = "host/idle"


def per_token(side: Side, total: float | None = None) -> dict[str, float]:
    """µs per token by op category, and host/idle (the traced step minus the op time), from the profile. With
    ``total`` (µs per token on the basis the verdict is read on), every category is scaled so they add up to it: a
    single run's traced median and its fastest step differ by the machine's noise, and an estimate read on one
    basis beside a gap read on another claimed more than the whole gap for one item."""
    s, tokens = side.summary, side.tokens_per_step
    if not s or not tokens or s.get("unreadable"):
        return {}
    n = max(int(s.get("n_steps") or 1), 1)
    out = {c["category"]: c["self_us"] / n / tokens for c in s.get("categories") or []}
    step_us = ((s.get("steps") or {}).get("median_ms") or 0) * 1e3
    op_us = sum(c["self_us"] for c in s.get("categories") or []) / n
    out[HOST] = max(step_us - op_us, 0.0) / tokens
    have = sum(out.values())
    if total and have > 0:
        out = {c: v * total / have for c, v in out.items()}
    return out


def align_tokens(ours: Side, ref: Side) -> None:
    """A side read from a folder (no record) counts its tokens as the other side's record counts them from the
    same kind of token input: ``s32[1,4,33]`` is 128 tokens when the record of an ``s32[1,4,33]`` run says 128
    (the input holds the shifted target too), so a run compared with its own folder is not 3 % apart."""
    for folder, rec in ((ours, ref), (ref, ours)):
        if folder.metrics.get("tokens_per_s") or not rec.metrics.get("tokens_per_s"):
            continue
        dims = shape_of(rec.facts.get("token_input") or "")[1]
        counted = rec.tokens_per_step
        if dims and counted and dims[-1] > 1 and abs(counted - math.prod(dims[:-1]) * (dims[-1] - 1)) < 0.5:
            folder.shifted = True


def estimate(items: list[dict], ours: Side, ref: Side, totals: tuple[float | None, float | None] = (None, None)
             ) -> dict:
    """Each item's share of our step: the categories where we spend more µs per token than the reference, each
    split evenly among the items that touch it. Returns the per-category deltas and what no item explains.
    ``totals``: each side's µs per token on the verdict's basis (``per_token``)."""
    po, pr = per_token(ours, totals[0]), per_token(ref, totals[1])
    deltas = {c: po.get(c, 0.0) - pr.get(c, 0.0) for c in set(po) | set(pr)}
    ours_total = sum(po.values())
    claim: dict[str, list[dict]] = {}
    for it in items:
        for c in it["touches"]:
            claim.setdefault(c, []).append(it)
    for it in items:
        it["us_per_token"] = 0.0
    for c, d in deltas.items():
        if d > 0 and claim.get(c):
            for it in claim[c]:
                it["us_per_token"] += d / len(claim[c])
    explained = 0.0
    gap = sum(po.values()) - sum(pr.values()) if po and pr else None
    # the gap is net of the categories where ours is faster; what we spend more is scaled down to it, so the items
    # together never claim more than the whole gap (we would pass the reference), and what no item touches keeps its
    # share as unexplained
    more = sum(d for d in deltas.values() if d > 0)
    scale = 1.0 if gap is None or more <= 0 else min(1.0, max(gap, 0.0) / more)
    for it in items:
        us = it.pop("us_per_token") * scale
        explained += us
        it["share_pct"] = round(100 * us / ours_total, 2) if ours_total else None
        it["gain_pct"] = round(100 * (ours_total / (ours_total - us) - 1), 2) if ours_total and us < ours_total \
            else None
    gap_us = ours_total - sum(pr.values()) if po and pr else None
    return {"deltas_us_per_token": {c: round(d, 5) for c, d in sorted(deltas.items(), key=lambda kv: -kv[1])},
            "ours_us_per_token": round(ours_total, 5) if po else None,
            "ref_us_per_token": round(sum(pr.values()), 5) if pr else None,
            "gap_us_per_token": round(gap_us, 5) if gap_us is not None else None,
            "unexplained_us_per_token": round(max(gap_us - explained, 0.0), 5) if gap_us is not None else None,
            "how": "per-token op time by category from each run's profile (host/idle: the traced step minus op "
                   "time); every category where ours spends more is split evenly among the items that touch it, "
                   "all of it scaled to the net gap"}


def speeds(ours: Side, ref: Side) -> tuple[float | None, float | None, str]:
    """Both sides' tokens/s and how they were read: each run's fastest steady step when both records have it (one
    profiled run each, and a shared machine's noise is delays), else each run's own measure."""
    bo, br = ours.metrics.get("tokens_per_s_best"), ref.metrics.get("tokens_per_s_best")
    if bo and br:
        return float(bo), float(br), "each run's fastest steady step"
    if not (ours.metrics.get("tokens_per_s") and ref.metrics.get("tokens_per_s")):
        # a folder has no record: both read on the same basis, each trace's median step
        so, sr, to, tr = ours.traced_ms, ref.traced_ms, ours.tokens_per_step, ref.tokens_per_step
        if so and sr and to and tr:
            return to / so * 1e3, tr / sr * 1e3, "each run's traced median step"
    return ours.tokens_per_s, ref.tokens_per_s, "each run's own measure"
