"""Per-step deltas between two profile summaries: by source line, by matched op, by category.

Generated op names do not survive a recompile (``fusion.123`` in one run is ``fusion.131``, or a different op,
in the next), so ops are matched by what they are: (source line, category, signature of the fused computation),
then by (source line, category), then by (category, signature); pairs within a key go in program order. Source
lines are matched by location, and a line that only moved (same function and code text, new number) is matched
to its old place.
"""

from __future__ import annotations

from collections import defaultdict


def _per_step(s: dict) -> float:
    return float(max(s.get("n_steps") or 1, 1))


def _no_hlo(s: dict) -> bool:
    """A summary whose trace came without its optimized-HLO dump: no op has a category or a source line."""
    return bool(s.get("ops")) and not s.get("hlo_modules")


def diff(a: dict, b: dict, top: int = 15) -> dict:
    """Deltas of ``b`` against ``a``. A side without its HLO dump has every op ``unmapped`` and no source line:
    its lines and categories are not compared (each would read as all of its time moving), and a note says so."""
    if _no_hlo(a) or _no_hlo(b):
        sides = " and ".join(x for x, s in (("A", a), ("B", b)) if _no_hlo(s))
        a, b = ({**s, "source_lines": [], "categories": []} for s in (a, b))
        note = (f"{sides} has no optimized-HLO dump (its ops map to no source line or category): lines and "
                "categories are not compared, ops only by name")
    else:
        note = ""
    pa, pb = _per_step(a), _per_step(b)
    moved = _moved_lines(a.get("source_lines", []), b.get("source_lines", []))
    la = {r["location"]: r["self_us"] / pa for r in a.get("source_lines", [])}
    lb: dict[str, float] = defaultdict(float)
    code = {_b_key(r["location"], moved): r.get("code", "") for r in b.get("source_lines", [])}
    for r in b.get("source_lines", []):
        lb[_b_key(r["location"], moved)] += r["self_us"] / pb
    code.update({r["location"]: r.get("code", "") for r in a.get("source_lines", [])})
    lines = _delta(la, lb)
    back = {v: k for k, v in moved.items()}
    for r in lines:
        r["code"] = code.get(r["key"], "")
        if r["key"] in back:
            r["moved_to"] = back[r["key"]]
    ca = {c["category"]: c["self_us"] / pa for c in a.get("categories", [])}
    cb = {c["category"]: c["self_us"] / pb for c in b.get("categories", [])}
    ops, counts = match_ops(a.get("ops", []), b.get("ops", []), pa, pb, moved)
    return {
        "a": a.get("folder"), "b": b.get("folder"),
        "step_ms": (a.get("steps", {}).get("median_ms"), b.get("steps", {}).get("median_ms")),
        "op_time_ms": (a.get("total_op_self_us", 0) / pa / 1e3, b.get("total_op_self_us", 0) / pb / 1e3),
        "lines": lines[:top], "ops": ops[:top], "categories": _delta(ca, cb), "matched": counts,
        **({"note": note} if note else {}),
    }


def _b_key(location: str, moved: dict[str, str]) -> str:
    """B's line under A's name: its old place when it only moved; its own number otherwise, unless an A line that
    moved away had that number (a new line there is not the old one: ``file.py:186 (B)``)."""
    if not location or location in moved:
        return moved.get(location, location)
    return f"{location} (B)" if location in set(moved.values()) else location


def match_ops(a_ops: list[dict], b_ops: list[dict], pa: float = 1.0, pb: float = 1.0,
              moved: dict[str, str] | None = None) -> tuple[list[dict], dict]:
    """Pair the ops of two summaries across compiles; rows largest change first, and counts per match kind."""
    moved = moved or {}
    left_a = sorted(a_ops, key=lambda o: o.get("pos", 0))
    left_b = sorted(b_ops, key=lambda o: o.get("pos", 0))
    src = lambda o, side: _b_key(o.get("source", ""), moved) if side == "b" else o.get("source", "")  # noqa: E731
    keys = {"exact": lambda o, s: (src(o, s), o["category"], o.get("sig")),
            "line": lambda o, s: (src(o, s), o["category"]),
            "shape": lambda o, s: (o["category"], o.get("sig"))}
    rows, counts = [], {}
    for kind, key in keys.items():
        groups_b: dict = defaultdict(list)
        for o in left_b:
            groups_b[key(o, "b")].append(o)
        rest_a, used = [], set()
        for o in left_a:
            g = groups_b.get(key(o, "a"))
            if not o.get("sig" if kind != "line" else "source"):
                g = None  # no signature / no line: nothing to match on
            if g:
                p = g.pop(0)
                used.add(id(p))
                rows.append(_row(o, p, pa, pb, kind))
            else:
                rest_a.append(o)
        counts[kind] = len(left_a) - len(rest_a)
        left_a, left_b = rest_a, [o for o in left_b if id(o) not in used]
    if any(not o.get("sig") for o in left_a + left_b):  # a side without HLO: generated names are all there is
        by_name: dict[str, list[dict]] = defaultdict(list)
        for o in left_b:
            by_name[o["op"]].append(o)
        rest_a = []
        for o in left_a:
            g = [p for p in by_name.get(o["op"], []) if not (o.get("sig") and p.get("sig"))]
            if g:
                by_name[o["op"]].remove(g[0])
                rows.append(_row(o, g[0], pa, pb, "name"))
            else:
                rest_a.append(o)
        counts["name"] = len(left_a) - len(rest_a)
        left_a, left_b = rest_a, [o for g in by_name.values() for o in g]
    rows += [_row(o, None, pa, pb, "only in A") for o in left_a]
    rows += [_row(None, o, pa, pb, "only in B") for o in left_b]
    counts["only in A"], counts["only in B"] = len(left_a), len(left_b)
    return sorted(rows, key=lambda r: -abs(r["delta_us"])), counts


def _row(oa: dict | None, ob: dict | None, pa: float, pb: float, kind: str) -> dict:
    a_us = oa["self_us"] / pa if oa else 0.0
    b_us = ob["self_us"] / pb if ob else 0.0
    na, nb = (oa or {}).get("op", "—"), (ob or {}).get("op", "—")
    o = oa or ob
    return {"key": na if na == nb else f"{na} → {nb}", "a_op": na, "b_op": nb, "source": o.get("source", ""),
            "category": o["category"], "match": kind, "a_us": round(a_us, 3), "b_us": round(b_us, 3),
            "delta_us": round(b_us - a_us, 3)}


def _moved_lines(a_lines: list[dict], b_lines: list[dict]) -> dict[str, str]:
    """B location -> A location for lines whose code text changed place: B's code at that number is not A's,
    and exactly one A line and one B line of that file and function hold that code."""
    key = lambda r: (r["location"].rsplit(":", 1)[0], r.get("function"), r.get("code"))
    a_at = {r["location"]: r.get("code") for r in a_lines}
    a_by: dict[tuple, list[str]] = defaultdict(list)
    b_count: dict[tuple, int] = defaultdict(int)
    for r in a_lines:
        if r.get("code"):
            a_by[key(r)].append(r["location"])
    for r in b_lines:
        b_count[key(r)] += 1
    out = {}
    for r in b_lines:
        if not r.get("code") or a_at.get(r["location"]) == r["code"] or b_count[key(r)] != 1:
            continue
        cands = a_by.get(key(r), [])
        if len(cands) == 1 and cands[0] != r["location"]:
            out[r["location"]] = cands[0]
    return out


def _delta(a: dict[str, float], b: dict[str, float]) -> list[dict]:
    rows = [{"key": k, "a_us": round(a.get(k, 0.0), 3), "b_us": round(b.get(k, 0.0), 3),
             "delta_us": round(b.get(k, 0.0) - a.get(k, 0.0), 3)} for k in set(a) | set(b)]
    return sorted(rows, key=lambda r: (-abs(r["delta_us"]), r["key"]))


# ----------------------------------------------------------------------------- where did a gain come from?

def attribution_note(base_summary: dict, var_summary: dict, gain_pct: float, same_hlo: bool = False) -> str | None:
    """One sentence on where a tokens/s change (``gain_pct``, + is faster: the timed, interleaved one) came from,
    read from the two traced runs: idle/host time when the per-step op self time moved by less than a third of the
    traced step-time change, else the lines and categories whose op time moved most. Said so when the traces
    moved the other way, or both runs compiled the same optimized HLO (``same_hlo``). None without a gain or
    without step and op times in both summaries."""
    try:
        step_a = float(base_summary["steps"]["median_ms"])
        step_b = float(var_summary["steps"]["median_ms"])
        op_a = base_summary["total_op_self_us"] / _per_step(base_summary) / 1e3
        op_b = var_summary["total_op_self_us"] / _per_step(var_summary) / 1e3
        g = float(gain_pct)
    except (KeyError, TypeError, ValueError):
        return None
    if not g or g <= -100 or step_a <= 0 or not base_summary.get("n_steps") or not var_summary.get("n_steps"):
        return None
    what = f"the {g:+.1f} % tokens/s {'gain' if g > 0 else 'loss'}"
    if same_hlo:
        return (f"Both runs compiled the same optimized HLO: no op of it explains {what} (the traced step went "
                f"{step_a:.3f} → {step_b:.3f} ms); look at the host side (dispatch, Python, data) or the noise.")
    # the change the traces measured (a gain implies the step time it would save; the profiles are their own runs)
    d_step = step_a - step_b
    if not d_step or (d_step > 0) != (g > 0):
        return (f"The traced runs do not show {what}: their median step went {step_a:.3f} → {step_b:.3f} ms "
                "(the profiled run is one run, the timed gain the interleaved rounds'): nothing in the traces to "
                "attribute it to.")
    d_op = op_a - op_b  # op self time saved per step (ms)
    faster = g > 0
    ops_line = (f"XLA op self time per traced step went {op_a:.3f} → {op_b:.3f} ms ({-d_op:+.3f} ms) against a "
                f"traced step-time change of {-d_step:+.3f} ms ({step_a:.3f} → {step_b:.3f} ms)")
    if d_op * (1 if faster else -1) < abs(d_step) / 3:
        return (f"{what[0].upper()}{what[1:]} came from idle/host time (dispatch, Python, data) rather than from "
                f"{'faster' if faster else 'slower'} ops: {ops_line}.")
    d = diff(base_summary, var_summary, top=3)
    sign = -1 if faster else 1  # the direction that explains the change
    lines = [r for r in d["lines"] if r["delta_us"] * sign > 0][:3]
    cats = [r for r in d["categories"] if r["delta_us"] * sign > 0][:2]
    moved = "; ".join(f"`{r['key']}` {r['delta_us'] / 1e3:+.3f} ms" for r in lines) or "no single line"
    by_cat = ", ".join(f"{r['key']} {r['delta_us'] / 1e3:+.3f} ms" for r in cats)
    share = d_op / d_step
    how = "most of" if share >= 2 / 3 else "part of"
    return (f"Op time explains {how} {what} ({share:.0%} of the step-time change): {ops_line}. "
            f"Lines that moved most: {moved}"
            + (f"; by category: {by_cat}." if by_cat else "."))


# ----------------------------------------------------------------------------- markdown

def render_markdown(d: dict) -> str:
    sa, sb = d["step_ms"]
    oa, ob = d["op_time_ms"]
    m = d.get("matched", {})
    out = [f"A: `{d['a']}`", f"B: `{d['b']}`", "",
           f"Median traced step: {sa} ms → {sb} ms; op self time per step {oa:.3f} ms → {ob:.3f} ms.", ""]
    if d.get("note"):
        out += [f"**Note:** {d['note']}.", ""]
    out += ["**Source lines** (µs per step, largest change first)", "", "| line | A | B | Δ | code |",
            "|---|---:|---:|---:|---|"]
    for r in d["lines"]:
        where = f" (now `{r['moved_to']}`)" if r.get("moved_to") else ""
        out.append(f"| `{r['key']}` | {r['a_us']:.1f} | {r['b_us']:.1f} | {r['delta_us']:+.1f} | "
                   f"{_cell(r.get('code', ''))}{where} |")
    out += ["", "**Ops**, matched across compiles by source line, category and fused-computation signature ("
            + ", ".join(f"{v} {k}" for k, v in m.items() if v) + ")", "",
            "| A op → B op | line | category | match | A | B | Δ |", "|---|---|---|---|---:|---:|---:|"]
    out += [f"| `{r['key']}` | {r['source'] or '—'} | {r['category']} | {r['match']} | {r['a_us']:.1f} | "
            f"{r['b_us']:.1f} | {r['delta_us']:+.1f} |" for r in d["ops"]]
    out += ["", "**Categories** (µs per step)", "", "| category | A | B | Δ |", "|---|---:|---:|---:|"]
    out += [f"| {r['key']} | {r['a_us']:.1f} | {r['b_us']:.1f} | {r['delta_us']:+.1f} |" for r in d["categories"]]
    return "\n".join(out) + "\n"


def _cell(text: str, width: int = 70) -> str:
    text = text.replace("|", "\\|")
    return f"`{text[:width]}{'…' if len(text) > width else ''}`" if text else ""
