"""Operations on an experiment's profile (its trace and optimized-HLO dump under raw/profiles/): overview, the
source line of an op, the ops of a source line, one op's HLO neighbourhood, and the diffs of two runs (by op and
source line; optimized HLO with ids stripped). Profiles are named by experiment id, never by a path, so nothing
outside the knowledge base is read."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from ..project import Project
from .registry import AgentError, op


def folder_of(project: Project, exp_id: str) -> Path:
    """The profile folder of the run ``exp_id`` names (its id, ``MODEL/LANE/EXP_ID`` or page; an id two lanes share
    is refused naming both), inside raw/."""
    from ..errors import InputError
    from ..experiments.records import load_experiments
    from ..profiling.locate import named

    try:
        r = named([r for r in load_experiments(project.wiki) if r.get("raw_dir")], exp_id)
    except InputError as e:
        raise AgentError(str(e)) from None
    if r is None:
        raise AgentError(f"{exp_id!r}: no experiment with a captured profile (run it with --profile)")
    p = (project.root / r["raw_dir"]).resolve()
    if not p.is_relative_to((project.root / "raw").resolve()) or not p.is_dir():
        raise AgentError(f"{exp_id}: its profile folder is not inside raw/ here")
    return p


_SUMMARIES: dict[tuple[str, float], dict] = {}


def _summary(project: Project, exp_id: str) -> dict:
    from ..profiling.summary import summarize

    folder = folder_of(project, exp_id)
    key = (str(folder), folder.stat().st_mtime)
    if key not in _SUMMARIES:
        _SUMMARIES[key] = summarize(folder, top=50, use_xprof=False, confine=project.root)
    return _SUMMARIES[key]


class ExpRef(BaseModel):
    exp: str = Field(description="experiment id, e.g. 2026-12-01-v002-bf16")
    top: int = Field(10, ge=1, le=200)


class OverviewOut(BaseModel):
    exp: str
    n_steps: int
    steps: dict[str, Any]
    total_op_self_us: float = Field(description="op self time summed over the n_steps traced steps (µs)")
    op_ms_per_step: float = Field(description="the same per step (ms); ops, categories and lines carry "
                                              "ms_per_step too, as the CLI and the pages show them")
    attributed_pct: float | None  # None: no XLA op in the trace
    hlo_modules: list[str]
    top_ops: list[dict[str, Any]]
    categories: list[dict[str, Any]]
    source_lines: list[dict[str, Any]]


@op("profile.overview", ExpRef, OverviewOut)
def overview(project: Project, a: ExpRef) -> dict:
    """Step-time breakdown, the slowest ops (with the source line each is credited to), time by category and by
    source line."""
    s = _summary(project, a.exp)
    return {"exp": a.exp, "n_steps": s["n_steps"], "steps": s["steps"], "total_op_self_us": s["total_op_self_us"],
            "op_ms_per_step": s["op_ms_per_step"], "attributed_pct": s["attributed_pct"], "hlo_modules": s["hlo_modules"], "top_ops": s["ops"][: a.top],
            "categories": s["categories"], "source_lines": s["source_lines"][: a.top]}


class OpIn(BaseModel):
    exp: str
    op: str = Field(description="an HLO op name as in top_ops, e.g. fusion.12")


class OpSourceOut(BaseModel):
    exp: str
    op: str
    rows: list[dict[str, Any]] = Field(description="the op in each module it appears in: time, category, source")


@op("profile.op_source", OpIn, OpSourceOut)
def op_source(project: Project, a: OpIn) -> dict:
    """The source line (file:line, function) an op's time is credited to, and how (metadata, fused dot, ...)."""
    rows = [o for o in _summary(project, a.exp)["ops"] if o["op"] == a.op]
    if not rows:
        raise AgentError(f"{a.exp}: no op {a.op!r} in the profile")
    return {"exp": a.exp, "op": a.op, "rows": rows}


class LineIn(BaseModel):
    exp: str
    location: str = Field(description="file:line as in source_lines, e.g. model.py:120")


class LineOpsOut(BaseModel):
    exp: str
    location: str
    line: dict[str, Any] | None
    ops: list[dict[str, Any]]


@op("profile.line_ops", LineIn, LineOpsOut)
def line_ops(project: Project, a: LineIn) -> dict:
    """The ops credited to one source line, slowest first."""
    s = _summary(project, a.exp)
    # the location as written, or ending it at a path boundary (`train.py:199` for `model/train.py:199`): never
    # any suffix (`9` was taken for `llama_train.py:199`)
    # also a longer path the tools print for it (`experiments/llama_train.py:201` on a crash page, an absolute one
    # from hlo-op) when it ends with the summary's own at a path boundary
    hits = [r for r in s["source_lines"] if r["location"] == a.location
            or (":" in a.location and r["location"].endswith("/" + a.location.lstrip("/")))
            or (":" in r["location"] and a.location.endswith("/" + r["location"].lstrip("/")))]
    if len({r["location"] for r in hits}) > 1:
        raise AgentError(f"{a.exp}: {a.location!r} names several lines: "
                         + ", ".join(sorted({r['location'] for r in hits})[:5]) + " (give more of the path)")
    line = hits[0] if hits else None
    if line is None:
        raise AgentError(f"{a.exp}: no op time is credited to {a.location!r} (give FILE:LINE as the summary shows "
                         "it)")
    return {"exp": a.exp, "location": line["location"], "line": line,
            "ops": [o for o in s["ops"] if o["source"] == line["location"]]}


class HloOpIn(BaseModel):
    exp: str
    op: str
    module: str | None = Field(None, description="HLO module name (default: the first that holds the op)")


class HloOpOut(BaseModel):
    exp: str
    module: str
    op: str
    opcode: str
    shape: str
    operands: list[dict[str, str]]
    users: list[dict[str, str]]
    fused: list[dict[str, str]] = Field(description="the fusion body, when the op is a fusion")
    source: list[str]


@op("profile.hlo_op", HloOpIn, HloOpOut)
def hlo_op(project: Project, a: HloOpIn) -> dict:
    """One op of the optimized HLO with its neighbourhood: operands and users (opcode, shape), the fusion body,
    and the source frames."""
    from ..profiling import hlo

    modules = hlo.load_modules(folder_of(project, a.exp))
    mods = [m for m in modules.values() if a.op in m.instrs and (a.module is None or m.name == a.module)]
    if not mods:
        raise AgentError(f"{a.exp}: no op {a.op!r} in the HLO dump ({len(modules)} modules)")
    m = mods[0]
    ins = m.instrs[a.op]

    def brief(name: str) -> dict[str, str]:
        i = m.instrs.get(name)
        return {"name": name, "opcode": i.opcode if i else "?", "shape": i.shape if i else ""}
    return {"exp": a.exp, "module": m.name, "op": a.op, "opcode": ins.opcode, "shape": ins.shape,
            "operands": [brief(o) for o in ins.operands], "users": [brief(u) for u in m.users().get(a.op, [])],
            "fused": [{"name": i.name, "opcode": i.opcode, "shape": i.shape} for i in m.fused(ins)]
            if ins.opcode == "fusion" else [],
            "source": [f"{f}:{ln} ({fn})" for f, ln, fn in m.source(a.op)]}


class PairIn(BaseModel):
    a: str = Field(description="experiment id of the first run")
    b: str = Field(description="experiment id of the second run")
    top: int = Field(15, ge=1, le=200)


class CompareOut(BaseModel):
    a: str
    b: str
    diff: dict[str, Any]


@op("profile.compare", PairIn, CompareOut)
def compare(project: Project, a: PairIn) -> dict:
    """Per-step deltas from run A to run B: by source line, by op (matched across compiles by line, category and
    fused-computation signature), by category."""
    from ..profiling import diff

    return {"a": a.a, "b": a.b, "diff": diff.diff(_summary(project, a.a), _summary(project, a.b), a.top)}


@op("profile.hlo_compare", PairIn, CompareOut)
def hlo_compare(project: Project, a: PairIn) -> dict:
    """Did the change reach the compiler? The optimized HLO of A and B with ids and metadata stripped."""
    from ..profiling import hlo_diff

    return {"a": a.a, "b": a.b, "diff": hlo_diff.hlo_diff(folder_of(project, a.a), folder_of(project, a.b))}


class XprofIn(BaseModel):
    exp: str = Field(description="experiment id")
    tool: Literal["overview_page", "op_profile", "roofline_model", "memory_profile", "hlo_stats"] = Field(
        "overview_page", description="the xprof tool to run on the trace")


class XprofOut(BaseModel):
    exp: str
    tool: str
    has_data: bool
    note: str = Field(description="what xprof gave, or why there is nothing ('no data on this backend')")
    data: Any = None


@op("profile.xprof", XprofIn, XprofOut)
def xprof(project: Project, a: XprofIn) -> dict:
    """xprof's own view of the trace (overview page, op profile, roofline, memory profile, HLO stats): TPU and GPU
    traces have them; a CPU trace reports "no data on this backend"."""
    from ..profiling.xprof_tools import tool_data

    return {"exp": a.exp, **tool_data(folder_of(project, a.exp), a.tool)}
