"""Near-misses tried together (``SweepProposer._near_misses_together``): what each combination measured against the
sum of its parts, chained. The difference is the interaction: about zero when the parts are independent (their
gains add), negative when they compete for the same resource, positive when one unlocks the other."""

from __future__ import annotations

import math


def combinations(state: dict) -> list[dict]:
    history = state.get("history") or []
    by_id = {h.get("exp_id"): h for h in history}
    out = []
    for h in history:
        if not h.get("combines"):
            continue
        parts = [by_id.get(e) or {"exp_id": e} for e in h["combines"]]
        gains = [p.get("gain_pct") for p in parts]
        expected = None  # the parts chained, as ``learn.chained_gain`` does (not imported: status stays light)
        if all(isinstance(g, (int, float)) for g in gains):
            expected = round(100 * (math.prod(1 + g / 100 for g in gains) - 1), 3)
        measured = h.get("gain_pct")
        out.append({"exp_id": h.get("exp_id"), "describe": h.get("describe"), "verdict": h.get("verdict"),
                    "kept": bool(h.get("kept")), "gain_pct": measured, "expected_gain_pct": expected,
                    "interaction_pct": (round(measured - expected, 3)
                                        if expected is not None and isinstance(measured, (int, float)) else None),
                    "parts": [{k: p.get(k) for k in ("exp_id", "describe", "verdict", "gain_pct")} for p in parts]})
    return out


def markdown(combos: list[dict]) -> list[str]:
    if not combos:
        return []
    out = ["## Near-misses combined", "",
           "Moves that gained inside the noise alone, measured together once. Interaction: the measured gain less "
           "the parts' gains chained (about zero: independent; below: they compete; above: one unlocks the other).",
           "", "| combination | parts (alone) | sum of parts | measured together | interaction | verdict |",
           "|---|---|---:|---:|---:|---|"]
    for c in combos:
        parts = "; ".join(f"{p.get('describe') or p['exp_id']} {_pct(p.get('gain_pct'))}" for p in c["parts"])
        out.append(f"| {c['describe']} | {parts} | {_pct(c['expected_gain_pct'])} | {_pct(c['gain_pct'])} | "
                   f"{_pct(c['interaction_pct'], 'pp')} | {c['verdict']}{' (kept)' if c['kept'] else ''} |")
    return out + [""]


def _pct(v, unit: str = "%") -> str:
    return "—" if not isinstance(v, (int, float)) else f"{v:+.1f} {unit}"
