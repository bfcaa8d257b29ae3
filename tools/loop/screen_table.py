"""Screens as data (``screening`` runs them): which screened moves still speak for the current trunk, and the loop
page's section (each wave, what each move measured against its trunk in one process, and what the loop did with
it: confirmed on its own, or ruled out and why)."""

from __future__ import annotations

import json

from .proposal import may_depend


def change_key(knobs: dict) -> str:
    return json.dumps(knobs, sort_keys=True, default=str)


def current(state: dict) -> dict[str, dict]:
    """change key -> the latest screen row of that move that still holds: made on this trunk, or on an earlier one
    when no keep since then was in a category the move may depend on (``proposal.DEPENDS``). The kept move itself
    and anything a dependent keep moved are screened again."""
    kept = [(h.get("iteration") or 0, str(h.get("category") or "")) for h in state.get("history") or []
            if h.get("kept")]
    out: dict[str, dict] = {}
    for w in state.get("screens") or []:
        if w.get("error"):
            continue
        since = [c for i, c in kept if i >= (w.get("iteration") or 0)]
        for m in w.get("moves") or []:
            knobs = (m.get("change") or {}).get("knobs") or {}
            if knobs and not any(may_depend(str(m.get("category") or ""), c) for c in since):
                out[change_key(knobs)] = dict(m, wave=w.get("iteration"), trunk_exp=w.get("trunk_exp"))
    return out

OUTCOMES = {"confirm": "to confirm", "slower": "ruled out: slower", "no gain": "ruled out: no faster",
            "broken": "ruled out: invalid or broken"}


def _pct(v) -> str:
    return "—" if not isinstance(v, (int, float)) else f"{v:+.1f} %"


def markdown(state: dict) -> list[str]:
    waves = state.get("screens") or []
    if not waves:
        return []
    out = ["## Screens", "",
           "Before the first proposal on a trunk, its untried flag moves ran together in one process against it "
           "(rotating blocks, the fastest step of each), to rank them: a screen rules out, it never decides. A move "
           "it lets through is confirmed by an experiment of its own.", ""]
    for w in waves:
        out.append(f"**Before iteration {w.get('iteration')}**, on trunk `{w.get('trunk_exp')}`: "
                   f"{len(w.get('moves') or [])} moves, {w.get('rounds')} rounds, {w.get('device_s')} device-seconds"
                   + (f"; the screen failed: {w['error']}" if w.get("error") else "") + ".")
        out += ["", "| move | gain | 95 % interval | losses | outcome |", "|---|---:|---|---|---|"]
        for m in sorted(w.get("moves") or [], key=lambda m: -(m.get("gain_pct") or -1e9)):
            lo, hi = m.get("interval_pct") or [None, None]
            interval = "—" if lo is None else f"[{lo:+.1f}, {hi:+.1f}] %"
            losses = m.get("losses") or "unchecked"
            if m.get("loss_diff") is not None:
                losses += f" ({m['loss_diff']})"
            what = OUTCOMES.get(m.get("outcome"), m.get("outcome") or "")
            if m.get("problem"):
                what += f": {m['problem']}"
            out.append(f"| `{m.get('describe')}` | {_pct(m.get('gain_pct'))} | {interval} | {losses} | {what} |")
        out.append("")
    return out
