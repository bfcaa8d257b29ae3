"""``analyses/<loop>-retrospective-<n>.md``: where the loop stands (frontier, device time, streaks, change kinds,
the gap to a reference), category and knob coverage, and the best untried ideas ranked by ``Proposal.score`` with a
"what next" sentence built from them. Plain data in, a ``pages.Page`` out; the engine writes it."""

from __future__ import annotations

from .. import pages
from ..mdtext import code
from . import memory as mem
from .device_time import device_time
from .proposal import CATEGORIES, Proposal
from .reference import gap_section
from .report import (_category_table, _cell, _chained, _coverage_total, _knob_table, _link, _num, _pct, _prose,
                     _tags, loop_path, retrospective_path)
from .spec import LoopSpec

TOP_IDEAS = 10
TOP_SET_ASIDE = 20


def _what_next(ranked: list[Proposal], memory: dict[str, dict], history: list[dict]) -> str:
    closed = set(mem.closed_topics(memory))
    stuck = mem.since_frontier_move(history)
    cat, n = mem.streak(history)
    open_ideas = [p for p in ranked if p.category not in closed]
    if not open_ideas:
        return ("No untried idea is left outside the closed topics: widen the knob space in the loop file, or let a "
                "proposer write env changes or code patches.")
    top = open_ideas[0]
    if stuck >= 3 and n >= 2 and top.category == cat:
        other = next((p for p in open_ideas if p.category != cat), None)
        if other:
            top = other
    out = f"Next: {_prose(top.statement)} ({top.category}, {code(top.change.describe())}, score {top.score:.2f})"
    if stuck >= 3 and n >= 2 and top.category != cat:
        out += f", away from `{cat}`: the frontier has not moved for {stuck} iterations and the last {n} were `{cat}`"
    out += "."
    untouched = [c for c, m in memory.items() if m["tried"] == 0 and c in {p.category for p in open_ideas}]
    if untouched:
        out += f" Untried categories with ideas waiting: {', '.join(untouched)}."
    if closed:
        out += f" Leave the closed topics alone: {', '.join(sorted(closed))}."
    return out


def _device_line(dt: dict) -> str:
    per = "".join(f", {v:,.0f} s per {what}" for what, v in (("experiment", dt.get("per_experiment_s")),
                                                               ("kept gain", dt.get("per_kept_gain_s"))) if v)
    return f"- device time: {dt['total_s']:,.0f} s in all{per}."


def _set_aside_section(set_aside: list[dict]) -> list[str]:
    first: dict[str, dict] = {}
    for r in set_aside:
        if r.get("change"):
            first.setdefault(r["change"], r)  # a move refused twice (a sweep and its promotion): its first reason
    rows = list(first.values())
    if not rows:
        return []
    out = ["", "## Set aside on this trunk", "",
           "Moves of the knob space the sweep does not propose here, each with the evidence that rules it out "
           "(a screen, a screened gain too small to confirm at the lane's noise, a crash, a keep it would undo, its own "
           "inconclusive runs); a keep they may depend on brings them back.", "", "| move | why |", "|---|---|"]
    out += [f"| {code(r['change'])} | {_cell(r.get('why') or '')} |" for r in rows[:TOP_SET_ASIDE]]
    if len(rows) > TOP_SET_ASIDE:
        out += ["", f"{len(rows) - TOP_SET_ASIDE} more set aside."]
    return out


def retrospective_page(spec: LoopSpec, state: dict, memory: dict[str, dict], untried: list[Proposal],
                       n: int, set_aside: list[dict] | None = None) -> pages.Page:
    """``analyses/<loop>-retrospective-<n>.md``: frontier-stuck count, category and knob coverage, change kinds,
    the untried ideas ranked by ``Proposal.score``, the moves the sweep's rules set aside on this trunk and why
    (``set_aside``: ``{change, why}``; what a plateau stop leaves a reader asking), and a "what next" sentence."""
    name = str(state.get("name") or spec.name)
    src, history = retrospective_path(name, n), state.get("history") or []
    frontier, trunk = state.get("frontier") or [], state.get("trunk") or {}
    tried_fp = {e.get("fingerprint") for e in history}
    seen: set[str] = set()
    ideas = []
    for p in untried:
        fp = p.change.fingerprint()
        if fp not in tried_fp and fp not in seen:
            seen.add(fp)
            ideas.append(p)
    ranked = sorted(ideas, key=lambda p: -p.score)
    stuck = mem.since_frontier_move(history)
    last_move = frontier[-1].get("iteration", 0) if frontier else None
    cat, streak_n = mem.streak(history)
    kinds = mem.change_kinds(history)
    structural = kinds["env"] + kinds["patch"]
    gain = _chained(frontier)
    out = [f"Written at iteration {state.get('iteration', 0)} of {_link(src, 'loop ' + name, loop_path(name))} "
           f"(model `{spec.model}`, lane `{spec.lane}`).", "", "## Where the loop stands", "",
           f"- frontier: {_num(trunk.get('tokens_per_s'))} tokens/s, {_pct(gain)} over the baseline, "
           f"{max(len(frontier) - 1, 0)} moves.",
           _device_line(device_time(state)),
           f"- frontier stuck for **{stuck}** iterations" + (f" (last move at iteration {last_move})." if last_move is not None else "."),
           f"- current streak: {streak_n} in a row from `{cat}`." if streak_n else "- no streak yet.",
           f"- change kinds: {kinds['knobs']} knob changes ({kinds['single_knob']} of them a single knob), "
           f"{kinds['env']} env changes, {kinds['patch']} code patches; single-knob : structural = "
           f"{kinds['single_knob']} : {structural}"
           + (f" ({kinds['single_knob'] / structural:.1f})." if structural else " (no structural change tried yet)."),
           ""] + ([gap_section(state, src)] if gap_section(state, src) else []) + ["## Categories", ""] + _category_table(memory)
    closed = mem.closed_topics(memory)
    never = [c for c in CATEGORIES if memory.get(c, {}).get("tried", 0) == 0]
    out += ["", f"Closed topics: {', '.join(closed) or 'none'}. Never tried: {', '.join(never) or 'none'}.", "",
            "## Knob space", ""]
    cov = mem.knob_coverage(spec, history)
    if cov:
        tried, total = _coverage_total(cov)
        out += [f"{tried} of {total} declared values have run ({100 * tried / max(total, 1):.0f} %).", ""]
        out += _knob_table(cov, spec)
    else:
        out.append("No knobs declared.")
    out += ["", "## Untried ideas, best first", "",
            "Ranked by expected gain × confidence / effort.", "",
            "| rank | statement | change | category | expected gain | confidence | effort | score |",
            "|---:|---|---|---|---:|---:|---:|---:|"]
    for i, p in enumerate(ranked[:TOP_IDEAS], 1):
        flag = " (closed topic)" if p.category in closed else ""
        out.append(f"| {i} | {_cell(p.statement)} | {code(p.change.describe() or p.change.kind)} | {p.category}{flag} | "
                   f"{_pct(p.expected_gain_pct)} | {p.confidence:.2f} | {p.effort:g} | {p.score:.2f} |")
    if not ranked:
        out.append("| — | no untried idea | | | | | | |")
    elif len(ranked) > TOP_IDEAS:
        out += ["", f"{len(ranked) - TOP_IDEAS} more ideas ranked lower."]
    out += _set_aside_section(set_aside or [])
    out += ["", "## What next", "", _what_next(ranked, memory, history)]
    meta = {"title": f"{name}: retrospective {n}", "type": "analysis",
            "tags": _tags("loop", "retrospective", spec.model, spec.lane)}
    return pages.Page(src, meta, f"# {name}: retrospective {n}\n\n" + pages.region("retrospective", "\n".join(out) + "\n"))
