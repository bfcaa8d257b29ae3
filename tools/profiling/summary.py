"""Summarize one profile folder: step-time breakdown, top ops by self time, op categories,
and op time attributed to model source lines through the optimized HLO's metadata."""

from __future__ import annotations

import json
import os
import shutil
import statistics
import tempfile
from collections import defaultdict
from pathlib import Path

from . import hlo as hlo_mod
from . import trace as trace_mod


def summarize(folder: Path, top: int = 15, step_name: str = "train", use_xprof: bool = True) -> dict:
    """Everything a page or a diff needs, as plain data (times in microseconds)."""
    folder = Path(folder)
    tr = trace_mod.read_trace(folder, step_name)
    modules = hlo_mod.load_modules(folder)
    xprof_rows, xprof_note = (_xprof_hlo_stats(folder) if use_xprof else (None, "not tried"))

    n_steps = len(tr.steps)
    if xprof_rows:
        per_op = {(r["op"], r["module"]): [r["self_us"], r["count"]] for r in xprof_rows}
        op_source = "xprof hlo_stats"
    else:
        per_op = defaultdict(lambda: [0.0, 0])
        for ev, self_us in trace_mod.self_times(tr.ops):
            acc = per_op[(ev.op, ev.module)]
            acc[0] += self_us
            acc[1] += 1
        op_source = "trace events (direct read)"
    total = sum(v[0] for v in per_op.values()) or 1.0

    ops, cats, lines = [], defaultdict(float), defaultdict(lambda: [0.0, 0, "", 0, ""])
    attributed = 0.0
    for (op, module), (self_us, count) in per_op.items():
        mod = _module_for(modules, module) or next((m for m in modules.values() if op in m.instrs), None)
        cat = mod.category(op) if mod else "unmapped"
        frames = mod.source(op) if mod else []
        loc = _loc(frames[0]) if frames else ""
        ops.append({"op": op, "module": module, "category": cat, "self_us": round(self_us, 3),
                    "count": count, "pct": round(100 * self_us / total, 2), "source": loc})
        cats[cat] += self_us
        if frames:
            attributed += self_us
            f, ln, fn = frames[0]
            acc = lines[loc]
            acc[0] += self_us
            acc[1] += 1
            acc[2], acc[3], acc[4] = f, ln, fn
    ops.sort(key=lambda o: -o["self_us"])
    steps = _steps(tr)
    return {
        "folder": str(folder),
        "trace": tr.source,
        "op_times_from": op_source,
        "xprof": xprof_note,
        "hlo_modules": sorted(modules),
        "n_steps": n_steps,
        "steps": steps,
        "total_op_self_us": round(total, 3),
        "n_ops": len(ops),
        "top_ops": ops[:top],
        "all_ops": {f"{o['module']}/{o['op']}": o["self_us"] for o in ops},
        "categories": sorted(({"category": c, "self_us": round(t, 3), "pct": round(100 * t / total, 2)}
                              for c, t in cats.items()), key=lambda c: -c["self_us"]),
        "source_lines": sorted(({"location": k, "file": v[2], "line": v[3], "function": v[4],
                                 "self_us": round(v[0], 3), "pct": round(100 * v[0] / total, 2), "ops": v[1]}
                                for k, v in lines.items()), key=lambda r: -r["self_us"]),
        "attributed_pct": round(100 * attributed / total, 2),
    }


def _loc(frame: tuple[str, int, str]) -> str:
    return f"{Path(frame[0]).name}:{frame[1]}"


def _module_for(modules: dict, name: str):
    if name in modules:
        return modules[name]
    for k, m in modules.items():  # trace names may carry a suffix, e.g. "jit_train_step(60)"
        if name.startswith(k) or k.startswith(name):
            return m
    return None


def _steps(tr: trace_mod.Trace) -> dict:
    if not tr.steps:
        return {"count": 0}
    walls = [s.dur_us for s in tr.steps]
    busy = [trace_mod.busy_time(tr.ops, s.start_us, s.start_us + s.dur_us) for s in tr.steps]
    wall = sum(walls) or 1.0
    return {"count": len(walls), "median_ms": round(statistics.median(walls) / 1e3, 4),
            "min_ms": round(min(walls) / 1e3, 4), "max_ms": round(max(walls) / 1e3, 4),
            "op_busy_pct": round(100 * sum(busy) / wall, 2),
            "idle_or_host_pct": round(100 - 100 * sum(busy) / wall, 2)}


def _xprof_hlo_stats(folder: Path) -> tuple[list[dict] | None, str]:
    """Per-op self times from xprof's hlo_stats tool, analysed on a copy (xprof writes cache files).

    Returns (rows or None, a note saying what happened). On CPU traces there is no device plane and
    hlo_stats has no rows; the direct trace read is used then.
    """
    runs = trace_mod.find_runs(folder)
    xplanes = sorted(runs[-1].glob("*.xplane.pb")) if runs else []
    if not xplanes:
        return None, "no xplane file"
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    try:
        from xprof.convert import raw_to_tool_data
    except ImportError:
        return None, "xprof not installed"
    with tempfile.TemporaryDirectory(prefix="xprof-copy-") as tmp:
        copies = []
        for p in xplanes:
            dst = Path(tmp) / p.name
            shutil.copy2(p, dst)
            copies.append(str(dst))
        try:
            data, _ = raw_to_tool_data.xspace_to_tool_data(copies, "hlo_stats", {})
        except Exception as e:  # xprof raises assorted errors on partial traces; say so, don't hide it
            return None, f"xprof hlo_stats failed: {type(e).__name__}: {e}"
    return parse_hlo_stats(data)


def parse_hlo_stats(data: str | bytes | None) -> tuple[list[dict] | None, str]:
    """Rows of xprof's hlo_stats DataTable (``cols`` + ``rows``) as {op, module, self_us, count}."""
    if isinstance(data, bytes):
        data = data.decode("utf-8", "replace")
    try:
        table = json.loads(data) if data else {}
    except ValueError:
        return None, "xprof hlo_stats returned non-JSON"
    if isinstance(table, list):
        table = table[0] if table else {}
    cols = [c.get("id") for c in table.get("cols", [])]
    rows = []
    for r in table.get("rows", []):
        v = {cid: (c or {}).get("v") for cid, c in zip(cols, r.get("c", []))}
        if v.get("hlo_op_name"):
            rows.append({"op": str(v["hlo_op_name"]), "module": str(v.get("program_id") or ""),
                         "self_us": float(v.get("total_self_time") or 0), "count": int(v.get("occurrences") or 0)})
    if not rows:
        return None, "xprof hlo_stats gave no rows (no device plane, e.g. a CPU trace): direct trace read used"
    return rows, f"xprof hlo_stats: {len(rows)} ops"


# ----------------------------------------------------------------------------- markdown

def _ms(us: float) -> str:
    return f"{us / 1e3:.3f}"


def render_markdown(s: dict, lines: int = 10) -> str:
    per = max(s.get("n_steps") or 1, 1)
    st = s["steps"]
    out = [f"Trace: `{s['trace']}`; op times from {s['op_times_from']}; xprof: {s['xprof']}.", ""]
    if st.get("count"):
        out += ["**Step-time breakdown** "
                f"({st['count']} traced steps): median {st['median_ms']} ms (min {st['min_ms']}, max {st['max_ms']}); "
                f"XLA ops busy {st['op_busy_pct']} %, host/idle {st['idle_or_host_pct']} % of step wall time.", ""]
    else:
        out += ["No step annotations in the trace (wrap steps in `jax.profiler.StepTraceAnnotation`).", ""]
    out += ["**Top ops by self time** (per step)", "",
            "| op | category | self ms/step | % | count | source |", "|---|---|---:|---:|---:|---|"]
    for o in s["top_ops"]:
        out.append(f"| `{o['op']}` | {o['category']} | {_ms(o['self_us'] / per)} | {o['pct']} | {o['count']} | "
                   f"{o['source'] or '—'} |")
    out += ["", "**Op categories**", "", "| category | self ms/step | % |", "|---|---:|---:|"]
    out += [f"| {c['category']} | {_ms(c['self_us'] / per)} | {c['pct']} |" for c in s["categories"]]
    out += ["", f"**Source lines** ({s['attributed_pct']} % of op time attributed through HLO metadata)", "",
            "| line | function | self ms/step | % | ops |", "|---|---|---:|---:|---:|"]
    out += [f"| `{r['location']}` | {r['function']} | {_ms(r['self_us'] / per)} | {r['pct']} | {r['ops']} |"
            for r in s["source_lines"][:lines]]
    return "\n".join(out) + "\n"
