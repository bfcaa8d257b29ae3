"""Summarize one profile folder: step-time breakdown, top ops by self time, op categories,
and op time attributed to model source lines through the optimized HLO's metadata."""

from __future__ import annotations

import bisect
import json
import math
import os
import statistics
import tempfile
from collections import defaultdict
from pathlib import Path

from . import hlo as hlo_mod
from . import trace as trace_mod
from .attribution import CONTROL_OPS, Attributor, Credit, SourceLines


def summarize(folder: Path, top: int = 15, step_name: str = "train", use_xprof: bool = True,
              confine: Path | None = None) -> dict:
    """Everything a page or a diff needs, as plain data (times in microseconds). ``confine``: source lines are read
    only from files inside it (an agent-facing call never reads outside the knowledge base)."""
    folder = Path(folder)
    tr = trace_mod.read_trace(folder, step_name)
    programs = hlo_mod.load_programs(folder)
    modules = hlo_mod.largest_by_name(programs)  # the same objects: one parse, one attributor per program
    xprof_rows, xprof_note = (_xprof_hlo_stats(folder) if use_xprof else (None, "not tried"))

    n_steps = len(tr.steps)
    def module_of(module: str, program: int | None):
        """The dumped program an op ran in: by the id the trace gives it, else by its module's name alone (a
        program whose id or name has no dump maps nowhere: never to another program's op of the same name)."""
        if program is not None and program in programs:
            return programs[program]
        return _module_for(modules, module)

    if xprof_rows:
        per_op = {(r["op"], r["module"], xprof_program(r["module"])): [r["self_us"], r["count"]] for r in xprof_rows}
        op_source = "xprof hlo_stats"
    else:
        per_op = defaultdict(lambda: [0.0, 0])
        control = {(id(m), i.name) for m in programs.values() for i in m.instrs.values() if i.opcode in CONTROL_OPS}
        is_control = (lambda e: (id(module_of(e.module, e.program)), e.op) in control) if control else None
        outside = 0.0
        stepped = _stepped_programs(tr)
        for ev, self_us in trace_mod.self_times(tr.ops, is_control):
            if stepped is not None and (ev.module, ev.program) not in stepped:
                outside += self_us  # another program's, run between the steps (their data): no step's time
                continue
            acc = per_op[(ev.op, ev.module, ev.program)]
            acc[0] += self_us
            acc[1] += 1
        op_source = "trace events (direct read)" + (f"; {outside / 1e3:.3f} ms of ops of programs no annotated "
                                                     "step ran left out" if outside else "")
    measured = sum(v[0] for v in per_op.values())
    total = measured or 1.0  # a divisor: no op at all is said as such below

    sources = SourceLines([folder / "code"], confine=confine)
    attributors = {id(m): Attributor(m, sources) for m in programs.values()}
    ops, cats, lines, vias = [], defaultdict(float), {}, defaultdict(float)
    for (op, module, program), (self_us, count) in per_op.items():
        mod = module_of(module, program)
        ins = mod.instrs.get(op) if mod else None
        cat = hlo_mod.categorize(mod, ins) if ins else "unmapped"
        credit = attributors[id(mod)].credit(op) if ins else Credit(None, "none")
        loc = _loc(credit.frame) if credit.frame else ""
        ops.append({"op": op, "module": module, "category": cat, "self_us": round(self_us, 3), "count": count,
                    "pct": round(100 * self_us / total, 2), "source": loc, "via": credit.via,
                    "function": credit.frame[2] if credit.frame else "",
                    "sig": hlo_mod.signature(mod, ins) if ins else "", "pos": ins.pos if ins else -1})
        cats[cat] += self_us
        vias[credit.via] += self_us
        if credit.frame:
            f, ln, fn = credit.frame
            acc = lines.setdefault(loc, {"location": loc, "file": f, "line": ln, "function": fn, "self_us": 0.0,
                                         "ops": 0, "code": sources.line(f, ln), "categories": defaultdict(float)})
            acc["self_us"] += self_us
            acc["ops"] += 1
            acc["categories"][cat] += self_us
    ops.sort(key=lambda o: -o["self_us"])
    per = max(n_steps, 1)
    for o in ops:  # self_us totals the traced steps; ms_per_step is what the pages and the CLI show
        o["ms_per_step"] = round(o["self_us"] / per / 1e3, 6)
    for r in lines.values():
        r["ms_per_step"] = round(r["self_us"] / per / 1e3, 6)
        r["pct"] = round(100 * r["self_us"] / total, 2)
        r["self_us"] = round(r["self_us"], 3)
        r["category"] = max(r["categories"], key=r["categories"].get)
        r["categories"] = {c: round(t, 3) for c, t in sorted(r["categories"].items(), key=lambda x: -x[1])}
    return {
        "folder": str(folder),
        "trace": tr.source,
        "op_times_from": op_source,
        "xprof": xprof_note,
        "hlo_modules": sorted(modules),
        "n_steps": n_steps,
        "steps": _steps(tr),
        "total_op_self_us": round(measured, 3),
        "op_ms_per_step": round(measured / per / 1e3, 6),
        "n_ops": len(ops),
        "top_ops": ops[:top],
        "ops": ops,
        "categories": sorted(({"category": c, "self_us": round(t, 3), "ms_per_step": round(t / per / 1e3, 6),
                               "pct": round(100 * t / total, 2)}
                              for c, t in cats.items()), key=lambda c: -c["self_us"]),
        "source_lines": sorted(lines.values(), key=lambda r: -r["self_us"]),
        # None when the trace holds no XLA op at all (not "100 % credited" of nothing)
        "attributed_pct": round(100 * (total - vias.get("none", 0.0)) / total, 2) if measured else None,
        "attribution": {v: round(100 * t / total, 2) for v, t in sorted(vias.items(), key=lambda x: -x[1])},
    }


STEPPED_SHARE = 0.5  # of all op time, inside the annotated steps: else the annotations time a dispatch, not the work


def _stepped_programs(tr: trace_mod.Trace) -> set[tuple] | None:
    """The programs (module, program id) with op time inside an annotated step, on a host whose ops run as they are
    timed (a CPU: no device plane), where the steps hold most of the op time; None where every op counts (no step
    annotations, a device's ops, which lag the host's steps, or annotations around a dispatch only, whose program
    runs after them). A program whose ops all ran between the steps (data made between them, ``jit__randint``) is
    no step's work: counted as one, it took 0.47 ms a step of an MLP's profile."""
    if not tr.steps or any(p.startswith("/device:") for p in tr.planes):
        return None
    windows: list[list[float]] = []
    for start, end in sorted((s.start_us, s.start_us + s.dur_us) for s in tr.steps):  # merged: nested ones too
        if windows and start < windows[-1][1]:
            windows[-1][1] = max(windows[-1][1], end)
        else:
            windows.append([start, end])
    starts = [w[0] for w in windows]
    inside: dict[tuple, float] = {}
    total = within = 0.0
    for e in tr.ops:
        end, k, held = e.start_us + e.dur_us, bisect.bisect_left(starts, e.start_us + e.dur_us) - 1, 0.0
        while k >= 0 and windows[k][1] > e.start_us:  # every window it overlaps, strictly
            held += min(end, windows[k][1]) - max(e.start_us, windows[k][0])
            k -= 1
        total += e.dur_us
        within += held
        if held > 0:
            inside[(e.module, e.program)] = inside.get((e.module, e.program), 0.0) + held
    return set(inside) if inside and within >= STEPPED_SHARE * total else None


def _loc(frame: tuple[str, int, str]) -> str:
    return f"{Path(frame[0]).name}:{frame[1]}"


def _module_for(modules: dict, name: str):
    if name in modules:
        return modules[name]
    for k, m in modules.items():  # trace names may carry the program id, e.g. "jit_train_step(60)"
        if name.startswith(k + "("):
            return m
    return None


def _steps(tr: trace_mod.Trace) -> dict:
    if not tr.steps:
        return {"count": 0}
    walls = [s.dur_us for s in tr.steps]
    starts = sorted(s.start_us for s in tr.steps)
    began: dict[int, float] = {}  # each numbered step's start: its first annotation's (one step may have several)
    ended: dict[int, float] = {}  # ... and its end: its last annotation's
    for s in tr.steps:
        began[s.step] = min(began.get(s.step, s.start_us), s.start_us)
        ended[s.step] = max(ended.get(s.step, s.start_us + s.dur_us), s.start_us + s.dur_us)
    nums = sorted(began)
    # distinct sorted ints are consecutive when they span their count (no range built: a step_num may be 10**18)
    numbered = len(nums) > 1 and nums[-1] - nums[0] == len(nums) - 1 \
        and all(began[a] < began[b] for a, b in zip(nums, nums[1:]))
    timeline = trace_mod.BusyTimeline(tr.ops)
    busy = [timeline.busy(s.start_us, s.start_us + s.dur_us) for s in tr.steps]
    wall = sum(walls) or 1.0
    return {"count": len(walls), "median_ms": round(statistics.median(walls) / 1e3, 4),
            "min_ms": round(min(walls) / 1e3, 4), "max_ms": round(max(walls) / 1e3, 4),
            "op_busy_pct": round(100 * sum(busy) / wall, 2),
            "idle_or_host_pct": round(100 - 100 * sum(busy) / wall, 2),
            # any XLA op running, from the first annotated step's start to the last one's end: the ops of a step
            # timed (and annotated) at dispatch still run in there (the integrity check's figure)
            "span_busy_ms": round(timeline.busy(starts[0], max(s.start_us + s.dur_us for s in tr.steps)) / 1e3, 4),
            # from one step's start to the next, on the profiler's clock (the median: a traced first step that
            # compiles is one long interval, not the period)
            "period_ms": round(statistics.median(b - a for a, b in zip(starts, starts[1:])) / 1e3, 4)
            if len(starts) > 1 else None,
            # steps numbered first..last one after another: from the first one's start to the last one's, steps
            # first..last-1 ran (the integrity check sums what the program reported for those same steps)
            **({"first_step": nums[0], "last_step": nums[-1],
                "first_to_last_start_ms": round((began[nums[-1]] - began[nums[0]]) / 1e3, 4),
                # the annotated spans of steps first..last-1: the check's sign that the numbers are the program's
                # step indices (an honest timer covers its annotation)
                "numbered_spans_ms": round(math.fsum(ended[n] - began[n] for n in nums[:-1]) / 1e3, 4)}
               if numbered else {})}


def xprof_program(module) -> int | None:
    """xprof's hlo_stats names a row's module by its program id (``"60"``: the dump ``module_0060``)."""
    return int(module) if str(module).isdigit() else None


def _xprof_hlo_stats(folder: Path) -> tuple[list[dict] | None, str]:
    """Per-op self times from xprof's hlo_stats tool, analysed on a copy (xprof writes cache files).

    Returns (rows or None, a note saying what happened). On CPU traces there is no device plane and
    hlo_stats has no rows; the direct trace read is used then.
    """
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    with tempfile.TemporaryDirectory(prefix="xprof-copy-") as tmp:
        copies = trace_mod.copy_xplanes(folder, Path(tmp))
        if not copies:
            return None, "no xplane file"
        try:
            from xprof.convert import raw_to_tool_data
        except ImportError:
            return None, "xprof not installed"
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


_VIA = {"metadata": "own metadata", "fused dot": "fused dot", "fused op": "fused work", "producer": "producer's line",
        "consumer": "consumer's line", "control flow": "loop's own time", "wrapper line": "loop glue",
        "library": "library frame"}


def _code(text: str, width: int = 60) -> str:
    text = text.replace("|", "\\|")
    return f"`{text[:width]}{'…' if len(text) > width else ''}`" if text else ""


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
    if s.get("ops") and not s.get("hlo_modules"):
        out += ["No optimized-HLO dump beside the trace (`hlo/`, from `--xla_dump_to`): ops map to no source line "
                "or category (`unmapped`).", ""]
    if not s.get("ops"):  # a program that ran no XLA computation in its traced steps (plain Python, a replay)
        return "\n".join(out + ["**No XLA ops in the trace**: nothing ran on the device in the traced steps, so no "
                                 "op time, category or source line."]) + "\n"
    out += ["**Top ops by self time** (per step)", "",
            "| op | category | self ms/step | % | count | source |", "|---|---|---:|---:|---:|---|"]
    for o in s["top_ops"]:
        out.append(f"| `{o['op']}` | {o['category']} | {_ms(o['self_us'] / per)} | {o['pct']} | {o['count']} | "
                   f"{o['source'] or '—'} |")
    out += ["", "**Op categories**", "", "| category | self ms/step | % |", "|---|---:|---:|"]
    out += [f"| {c['category']} | {_ms(c['self_us'] / per)} | {c['pct']} |" for c in s["categories"]]
    via = s.get("attribution") or {}
    how = ", ".join(f"{_VIA.get(k, k)} {v} %" for k, v in via.items() if k != "none")
    out += ["", f"**Source lines** ({s['attributed_pct']} % of op time credited to a model line through HLO metadata"
            + (f"; by {how}" if how else "") + ")", "",
            "| line | function | self ms/step | % | ops | mostly | code |", "|---|---|---:|---:|---:|---|---|"]
    out += [f"| `{r['location']}` | {r['function']} | {_ms(r['self_us'] / per)} | {r['pct']} | {r['ops']} | "
            f"{r.get('category', '')} | {_code(r.get('code', ''))} |" for r in s["source_lines"][:lines]]
    return "\n".join(out) + "\n"
