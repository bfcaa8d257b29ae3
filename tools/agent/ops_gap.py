"""The gap to a reference as an operation: two runs compared on evidence (``tools/gap``), the items mapped to a loop's
knobs (``tools/loop/reference.py``), and, when asked, the analysis page and one open hypothesis page per item
(``author: tools gap``) that the loop's queue takes first. Runs are named by experiment id here; the CLI also takes
profile folders."""

from __future__ import annotations

import dataclasses
import posixpath
from typing import Any

from pydantic import BaseModel, Field

from ..errors import InputError
from ..project import Project
from .registry import AgentError, op


class GapIn(BaseModel):
    ours: str = Field(description="experiment id of our run (profiled)")
    ref: str = Field(description="experiment id of the reference run (profiled)")
    loop: str | None = Field(None, description="a loop whose knobs the items are mapped to (loops/<name>.yml)")
    file: bool = Field(True, description="write the analysis page and one hypothesis page per item")
    ref_codebase: str | None = Field(None, description="the ingested codebase (raw/code/<slug>) the reference runs: "
                                                       "its knob defaults join the evidence (found from the run's "
                                                       "command or folder when not given)")
    ours_codebase: str | None = Field(None, description="the same for our run")


class GapOut(BaseModel):
    ours: str
    ref: str
    gap_pct: float | None = Field(description="reference tokens/s over ours, minus 1, in % (each run's fastest steady step when both records have it, else its own measure)")
    reference_faster: bool
    verdict: str
    step: list[dict[str, Any]]
    categories_us_per_token: list[dict[str, Any]]
    estimate: dict[str, Any]
    items: list[dict[str, Any]] = Field(description="ranked: what, evidence, basis, share_pct, gain_pct, knobs")
    codebases: dict[str, Any] = Field(default_factory=dict, description="per side (ours, ref) whose code is an ingested "
                                      "codebase: its performance settings as run (key, concept, value, source, where)")
    differences: list[dict[str, Any]] = Field(description="what differs when the reference is not faster")
    page: str | None = Field(description="the analysis page written (wiki-relative), null when not filed")
    hypotheses: list[str]
    not_filed: list[str] = Field(description="items not filed, and why (refuted before on this lane)")
    retired: list[str] = Field(default_factory=list, description="open hypotheses an earlier run of this analysis "
                                                                 "filed and this one no longer lists: now abandoned")
    seconds: float
    ours_page: str | None = Field(None, description="our run's experiment page (wiki-relative), null for a folder")
    ref_page: str | None = Field(None, description="the reference's experiment page, null for a folder")
    stages: dict[str, Any] = Field(default_factory=dict, description="the HLO stage read per side (ours, ref)")
    config_items: list[str] = Field(default_factory=list, description="the items whose evidence is configuration "
                                                                      "(flags, environment), as `what`")


def analyze(project: Project, ours: str, ref: str, loop: str | None = None, file: bool = True,
            folders: bool = False, ref_codebase: str | None = None, ours_codebase: str | None = None) -> dict:
    """``folders``: ``ours``/``ref`` may be profile folders (the CLI; never an agent)."""
    import time

    from ..gap import compare, sides
    from ..loop import gather, reference
    from ..loop import spec as spec_mod

    t0 = time.perf_counter()
    spec_file = _loop_file(project, loop) if loop else None
    try:
        a, b = sides.resolve(project, ours, folders), sides.resolve(project, ref, folders)
        for side, slug in ((a, ours_codebase), (b, ref_codebase)):
            if slug:
                sides.with_codebase(project, side, slug, side.command)
        compare.same_model(a, b)
    except InputError as e:
        raise AgentError(str(e)) from None
    catalog = gather.kernels(project, "")
    result = compare.analyze(a, b, catalog)
    spec, trunk = None, {}
    if spec_file:
        spec = spec_mod.load(spec_file)
        trunk = _trunk_config(project, spec, sides.find_record(project, ours))
    reference.map_items(result["items"], spec, trunk)
    result.update(page=None, hypotheses=[], not_filed=[], retired=[])
    from ..gap.page import gap_path

    earlier = (project.wiki / gap_path(result["ours"], result["ref"], result.get("ours_page") or "",
                                       result.get("ref_page") or "")).is_file()
    if file and (result["items"] or earlier):  # run again with nothing to close: its page and hypotheses say so
        _file(project, result, a, b, spec)
    result["seconds"] = round(time.perf_counter() - t0, 3)
    return result


def _loop_file(project: Project, loop: str):
    """``loops/<loop>.yml`` of this knowledge base: a loop's name, never a path (an agent's argument)."""
    from ..loop.state import LoopPaths
    from .ops_runs import _name

    path = LoopPaths(project, _name(loop, "loop")).spec
    if not path.is_file():
        raise AgentError(f"no loop file loops/{loop}.yml")
    return path


def _trunk_config(project: Project, spec, rec: dict | None) -> dict:
    from ..loop import state as st

    s = st.load(st.LoopPaths(project, spec.name))
    if s and (s.get("trunk") or {}).get("config"):
        return dict(s["trunk"]["config"])
    return dict((rec or {}).get("loop_config") or spec.start_config())


def _file(project: Project, result: dict, ours, ref, spec) -> None:
    from ..experiments import records
    from ..gap.page import gap_path, render
    from ..loop import hypotheses, reference
    from ..loop.spec import LoopSpec
    from ..mdtext import slugify
    from ..wikiindex import rebuild
    from ..writer import Writer

    rec = (ours.page and next((r for r in records.load_experiments(project.wiki) if r.get("page") == ours.page),
                              None)) or {}
    model, lane = (spec.model, spec.lane) if spec else (rec.get("model") or "", rec.get("lane") or "")
    refuted = {r.get("change_fingerprint"): r.get("page") for r in (
        records.lane_records(project.wiki, model, lane) if model and lane else [])
        if r.get("verdict") in ("refuted", "invalid") and r.get("change_fingerprint")}
    if spec and not (project.wiki / "loops" / f"{spec.name}.md").is_file():
        spec = dataclasses.replace(spec, name="")  # the loop has no page yet: the hypotheses link none
    target = spec or LoopSpec(name="", path=project.root, model=model or "unknown", lane=lane or "unknown",
                              variant="", command=[], knobs={})
    writer = Writer(project.wiki)
    pages_by_rank: dict[int, str] = {}
    analysis_rel = gap_path(result["ours"], result["ref"], result.get("ours_page") or "", result.get("ref_page") or "")
    for it in result["items"]:
        p = reference.proposal(it, ref.label)
        back = posixpath.relpath(analysis_rel, posixpath.dirname(f"hypotheses/{target.model}/{target.lane}/x.md"))
        p.notes += f"; item {it['rank']} of the [gap analysis]({back})"
        if p.change.kind == "knobs" and p.change.fingerprint() in refuted:
            result["not_filed"].append(f"{it['what']}: refuted before in {refuted[p.change.fingerprint()]}")
            continue
        hid = slugify(f"gap-{ref.label}-{it['kind']}-{'-'.join(str(v) for v in (it.get('property') or {}).values())}")[:120]
        page = hypotheses.hypothesis_page(target, p, hid, "open", None)
        old = _meta(project, page.path)
        status = None if old is None else str(old.get("status") or "open")
        if status not in (None, "open"):
            result["not_filed"].append(f"{it['what']}: {page.path} is already {status}")
            pages_by_rank[it["rank"]] = page.path
            continue
        change = (old or {}).get("change")
        if p.change.kind != "knobs" and isinstance(change, dict) and change.get("kind") == "knobs":
            # an analysis run without its loop would make a loop's runnable knob change a code change to write
            result["not_filed"].append(f"{it['what']}: {page.path} kept, mapped to a loop's knobs (give --loop)")
            pages_by_rank[it["rank"]] = page.path
            continue
        writer.write_page(page)
        pages_by_rank[it["rank"]] = page.path
        result["hypotheses"].append(page.path)
    result["retired"] = _retire(project, writer, target, analysis_rel, set(pages_by_rank.values()))
    page = render(result, pages_by_rank, model, lane)
    status = writer.write_page(page)
    result["page"] = analysis_rel
    rebuild(project.wiki, writer, log=False)
    writer.append_log("gap", analysis_rel, [f"{status} wiki/{analysis_rel}: {result['verdict']}",
                                            f"{len(result['hypotheses'])} hypothesis pages"])


def _retire(project: Project, writer, target, analysis_rel: str, kept: set[str]) -> list[str]:
    """This analysis's open hypotheses from an earlier run of it that this run no longer lists: `abandoned`, saying
    why (they stayed open in the loop's queue, and an orphan)."""
    from .. import pages

    folder = f"hypotheses/{target.model}/{target.lane}"
    link = f"]({posixpath.relpath(analysis_rel, folder)})"
    out = []
    for p in sorted((project.wiki / folder).glob("gap-*.md")) if (project.wiki / folder).is_dir() else []:
        rel = f"{folder}/{p.name}"
        if rel in kept:
            continue

        def change(text: str) -> str | None:
            meta, body = pages.split(text)
            if not meta or meta.get("author") != "tools gap" or meta.get("status", "open") != "open" \
                    or f"of the [gap analysis{link}" not in body:
                return None
            note = (f"\n\nAbandoned: the [gap analysis{link}, run again on {writer.today}, no longer lists "
                    "this difference.\n")
            return pages.render({**meta, "status": "abandoned"}, body.rstrip("\n") + note)
        try:
            if writer.update_file(rel, change) != "unchanged":
                out.append(rel)
        except (OSError, pages.FrontmatterError):
            continue
    return out


def _meta(project: Project, rel: str) -> dict | None:
    """The frontmatter of a page this analysis would write (None: no readable page there)."""
    from .. import pages

    p = project.wiki / rel
    if not p.is_file() or p.is_symlink():
        return None
    try:
        meta, _ = pages.split(p.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, pages.FrontmatterError):
        return None
    return meta if isinstance(meta, dict) else {}


@op("gap.analyze", GapIn, GapOut, writes=True, destructive=True)  # retires stale hypotheses
def gap_analyze(project: Project, a: GapIn) -> dict:
    """Why is the reference faster? Two profiled runs compared on evidence (step time and time per token by op
    category; matmul dtypes, accumulation and layer loops, batch shape, remat, fusions, kernels and collectives from
    the HLO; flags, and an ingested codebase's knob defaults, as a separate source), each difference a gap item ranked
    by the share of our step it accounts for, mapped to a loop's knobs when ``loop`` is given, and filed as an
    analysis page with one hypothesis page per item."""
    return analyze(project, a.ours, a.ref, a.loop, a.file, ref_codebase=a.ref_codebase, ours_codebase=a.ours_codebase)
