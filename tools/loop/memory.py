"""What a loop has learned, recomputed from its history (the ``state["history"]`` entries): per-category
tallies, closed topics, knob-space coverage, the current category streak and the frontier's idle count.

Pure: plain data in, plain data out. The engine feeds ``compute`` into ``Priors.memory``; the loop and
retrospective pages show the same numbers.
"""

from __future__ import annotations

import json
from typing import Any

from .proposal import CATEGORIES
from .spec import LoopSpec

VERDICT_COUNTS = ("supported", "refuted", "invalid", "inconclusive", "crash")
CLOSE_AFTER_REFUTED = 5  # a topic with this many refutations and no support is closed


def _category(entry: dict) -> str:
    return str(entry.get("category") or "")


def compute(history: list[dict]) -> dict[str, dict]:
    """Per category (every known one, in ``CATEGORIES`` order, then any others met): tried, one count per
    verdict, kept, best_gain_pct (best measured gain over the runs that count: not invalid, not crashed),
    last_iteration and closed (>= 5 refuted and none supported). Entries without a category (a baseline
    run) are left out."""
    out: dict[str, dict] = {c: _empty() for c in CATEGORIES}
    for e in history:
        cat = _category(e)
        if not cat:
            continue
        m = out.setdefault(cat, _empty())
        m["tried"] += 1
        verdict = str(e.get("verdict") or "")
        if verdict in VERDICT_COUNTS:
            m[verdict] += 1
        m["kept"] += bool(e.get("kept"))
        gain = e.get("gain_pct")
        if isinstance(gain, (int, float)) and verdict not in ("invalid", "crash"):
            m["best_gain_pct"] = gain if m["best_gain_pct"] is None else max(m["best_gain_pct"], gain)
        it = e.get("iteration")
        if isinstance(it, int) and (m["last_iteration"] is None or it > m["last_iteration"]):
            m["last_iteration"] = it
    for m in out.values():
        m["closed"] = m["refuted"] >= CLOSE_AFTER_REFUTED and m["supported"] == 0
    return out


def _empty() -> dict[str, Any]:
    return {"tried": 0, **{v: 0 for v in VERDICT_COUNTS}, "kept": 0, "best_gain_pct": None,
            "last_iteration": None, "closed": False}


def closed_topics(memory: dict[str, dict]) -> list[str]:
    return [c for c, m in memory.items() if m.get("closed")]


def value_key(v: Any) -> str:
    """A knob value as canonical JSON (values may be mappings: compare and show them this way)."""
    return json.dumps(v, sort_keys=True, default=str)


def _sort_key(v: Any) -> tuple:
    if isinstance(v, bool):
        return (0, int(v), "")
    if isinstance(v, (int, float)):
        return (1, v, "")
    if isinstance(v, str):
        return (2, 0, v)
    return (3, 0, value_key(v))


def knob_coverage(spec: LoopSpec, history: list[dict], include_start: bool = True) -> dict[str, dict]:
    """Knob -> {"values": number declared, "tried": sorted values that ran, "untried": declared values that
    never ran, in declared order}. A value ran when an entry's full ``config`` had it (or, without a config,
    when its knob change set it); with ``include_start`` the starting values count too (the baseline ran them)."""
    seen: dict[str, dict[str, Any]] = {name: {} for name in spec.knobs}
    if include_start:
        for name, knob in spec.knobs.items():
            seen[name][value_key(knob.start)] = knob.start
    for e in history:
        cfg = e.get("config")
        if not isinstance(cfg, dict) or not cfg:
            cfg = ((e.get("change") or {}).get("knobs") or {}) if isinstance(e.get("change"), dict) else {}
        for name, value in cfg.items():
            if name in seen:
                seen[name].setdefault(value_key(value), value)
    out = {}
    for name, knob in spec.knobs.items():
        tried = seen[name]
        out[name] = {"values": len(knob.values), "tried": sorted(tried.values(), key=_sort_key),
                     "untried": [v for v in knob.values if value_key(v) not in tried]}
    return out


def streak(history: list[dict]) -> tuple[str, int]:
    """(category, n): the run of consecutive latest entries from one category; ("", 0) for no history."""
    entries = [e for e in history if _category(e)]
    if not entries:
        return "", 0
    cat, n = _category(entries[-1]), 0
    for e in reversed(entries):
        if _category(e) != cat:
            break
        n += 1
    return cat, n


def since_frontier_move(history: list[dict]) -> int:
    """Non-improving iterations since the last kept entry (all of them when nothing was kept yet)."""
    last = max((i for i, e in enumerate(history) if e.get("kept")), default=-1)
    after = history[last + 1:]
    return len({e.get("iteration", f"#{i}") for i, e in enumerate(after)})


def change_kinds(history: list[dict]) -> dict[str, int]:
    """How many entries changed knobs (and how many of those a single knob), env or a code patch."""
    out = {"knobs": 0, "single_knob": 0, "env": 0, "patch": 0}
    for e in history:
        ch = e.get("change") if isinstance(e.get("change"), dict) else {}
        kind = str(ch.get("kind") or "")
        if kind in out:
            out[kind] += 1
        if kind == "knobs" and len(ch.get("knobs") or {}) == 1:
            out["single_knob"] += 1
    return out
