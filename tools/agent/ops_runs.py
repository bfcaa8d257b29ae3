"""Operations on experiments, hypotheses and loops: a lane's history with its analysis, one experiment, the current
best per variant; file and list hypotheses (the queue proposer reads what an agent files). Loops: ops_loop."""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from typing import Any

from pydantic import BaseModel, Field, field_validator

from .. import pages
from ..errors import ToolsError
from ..jsonvalues import bounded_values, plain, short_text, text_or_none
from ..experiments import records
from ..project import Project
from .registry import AgentError, op

NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")


def _name(value: str, what: str) -> str:
    if not NAME.fullmatch(value or ""):
        raise AgentError(f"{what} {value!r}: letters, digits, '.', '_', '-' only")
    return value


class LaneIn(BaseModel):
    model: str
    lane: str


class Run(BaseModel):
    exp_id: str
    version: int | None = None
    variant: str | None = None
    verdict: str | None = None
    role: str | None = None
    tokens_per_s: float | None = None
    gain_pct: float | None = None
    category: str | None = None
    shape: dict[str, Any] | None = None
    page: str


class HistoryOut(BaseModel):
    model: str
    lane: str
    runs: list[Run]
    filed: int
    keep_rate: float | None = Field(None, description="supported / judged variants (baselines and A/A runs aside)")
    verdicts: dict[str, int]
    frontier: list[Run] = Field(description="each run that moved the best tokens/s of its variant")
    plateau: int = Field(description="runs since the frontier last moved")
    categories: dict[str, dict[str, int]] = Field(description="per hypothesis category: tried, supported, refuted")


class ExpIn(BaseModel):
    model: str
    lane: str
    exp_id: str


class ExpOut(BaseModel):
    record: dict[str, Any]
    cut: bool = Field(False, description="a text of the record was cut to 2,000 characters, or a list to 200 "
                                         "entries (a hand-edited page; wiki_read reads the page itself)")


class BestOut(BaseModel):
    model: str
    lane: str
    best: dict[str, Run | None] = Field(description="variant -> its current best (or baseline); a variant run at "
                                                   "several shapes has one entry per shape, `variant (batch=16)`")


def _run(r: dict) -> dict:
    m = r.get("metrics") or {}
    return {"exp_id": r["exp_id"], "version": r.get("version"), "variant": text_or_none(r.get("variant")),
            "verdict": text_or_none(r.get("verdict")), "role": text_or_none(r.get("role")),
            "tokens_per_s": m.get("tokens_per_s"), "gain_pct": r.get("gain_pct"),
            "category": text_or_none(r.get("category")),
            "shape": r.get("shape") if isinstance(r.get("shape"), dict) else None, "page": r["page"]}


def _lane(project: Project, model: str, lane: str) -> list[dict]:
    recs = records.lane_records(project.wiki, _name(model, "model"), _name(lane, "lane"))
    if not recs:
        raise AgentError(f"no experiments in wiki/experiments/{model}/{lane}/")
    return recs


@op("exp.history", LaneIn, HistoryOut)
def history(project: Project, a: LaneIn) -> dict:
    """A lane's runs in order, with what an agent needs to see progress: keep rate, the frontier staircase, the
    plateau length, verdicts and per-category counts."""
    recs = [r for r in _lane(project, a.model, a.lane) if r.get("status") == "filed"]
    verdicts = Counter(str(r.get("verdict")) for r in recs)
    tested = Counter(str(r.get("verdict")) for r in recs if r.get("role") not in ("baseline", "calibration"))
    judged = sum(tested[v] for v in ("supported", "refuted", "inconclusive"))
    best: dict[tuple, float] = {}  # by variant and shape: a faster run of another batch moves no frontier
    frontier, since = [], 0
    for r in recs:
        tps = (r.get("metrics") or {}).get("tokens_per_s")
        v = (str(r.get("variant")), records.shape_key_of(r))
        moved = tps is not None and (r.get("role") == "baseline" and v not in best
                                     or r.get("verdict") == "supported" and tps > best.get(v, 0))
        if moved:
            best[v] = tps
            frontier.append(_run(r))
            since = 0
        else:
            since += 1
    cats: dict[str, Counter] = {}
    for r in recs:
        c = cats.setdefault(str(r.get("category") or "uncategorised"), Counter())
        c["tried"] += 1
        c[str(r.get("verdict"))] += 1
    return {"model": a.model, "lane": a.lane, "runs": [_run(r) for r in recs], "filed": len(recs),
            "keep_rate": round(tested["supported"] / judged, 3) if judged else None, "verdicts": dict(verdicts),
            "frontier": frontier, "plateau": since,
            "categories": {k: {x: v[x] for x in ("tried", "supported", "refuted")} for k, v in sorted(cats.items())}}


@op("exp.get", ExpIn, ExpOut)
def get(project: Project, a: ExpIn) -> dict:
    """One experiment's whole record (frontmatter of its page: metrics, timing, repeats, verdict, environment)."""
    r = records.find(_lane(project, a.model, a.lane), a.exp_id)
    if r is None:
        raise AgentError(f"no experiment {a.exp_id!r} in {a.model}/{a.lane}")
    record, cut = bounded_values(plain(r))
    return {"record": record, "cut": cut}


@op("exp.best", LaneIn, BestOut)
def best(project: Project, a: LaneIn) -> dict:
    """The current best run of each variant (a supported run that moved its frontier, else its baseline)."""
    recs = _lane(project, a.model, a.lane)
    out = {}
    for v in sorted({str(r.get("variant")) for r in recs}):
        vr = [r for r in recs if str(r.get("variant")) == v]
        keys = sorted({records.shape_key_of(r) for r in vr if r.get("metrics") and r.get("role") != "calibration"}
                      - {None})
        labels = records.shape_labels(keys)
        for key in keys if len(keys) > 1 else [None]:  # one entry per shape, as the model page's rows
            b = records.best_for(vr, v, key) or records.baseline_for(vr, v, key)
            out[v if key is None else f"{v} ({labels[key]})"] = _run(b) if b else None
    return {"model": a.model, "lane": a.lane, "best": out}


class CrashesIn(BaseModel):
    model: str | None = Field(None, description="only this model")
    lane: str | None = Field(None, description="only this lane (with model)")


class Signature(BaseModel):
    signature: str
    kind: str | None = None
    count: int
    message: str = ""
    last_seen: str
    lanes: list[str]
    page: str = Field(description="the signature page: every run that hit it, what they share, the first fix")


class CrashesOut(BaseModel):
    signatures: list[Signature]


@op("exp.crashes", CrashesIn, CrashesOut)
def crashes(project: Project, a: CrashesIn) -> dict:
    """Crash signatures (kind, normalized message, innermost model and framework frame) with their counts, kinds,
    lanes and last run, most frequent first; each has a page under observations/crashes/."""
    from ..experiments.crash_pages import signatures

    if a.lane and not a.model:
        raise AgentError("lane needs model")
    under = f"{_name(a.model, 'model')}/{_name(a.lane, 'lane')}" if a.lane else _name(a.model, "model") if a.model else ""
    return {"signatures": signatures(records.load_experiments(project.wiki, under))}


# ---------------------------------------------------------------- hypotheses

class HypothesisIn(BaseModel):
    model: str
    lane: str
    loop: str = Field(description="the loop whose queue takes it (loops/<name>.yml)")
    statement: str
    mechanism: str
    predicted_signal: str
    falsification: str
    change: dict[str, Any] = Field(description="{kind: knobs|env|patch, knobs: {...} | env: {...} | patch: '...'}")
    category: str
    expected_gain_pct: float = Field(0.0, allow_inf_nan=False)  # NaN sorted anywhere and made --json not JSON
    confidence: float = Field(0.5, allow_inf_nan=False)
    effort: float = Field(1.0, allow_inf_nan=False)
    author: str = Field("agent", description="who files it: a person's hypothesis goes first in the queue")


class HypothesisOut(BaseModel):
    path: str
    status: str
    duplicate: bool = Field(False, description="the same statement and change were filed before: that page stands")


class HypothesesIn(BaseModel):
    model: str | None = None
    lane: str | None = None
    status: str | None = Field("open", description=f"{', '.join(pages.HYPOTHESIS_STATUS)}; null for all")

    @field_validator("status")
    @classmethod
    def _known(cls, v: str | None) -> str | None:  # a typo ("opne") answered an empty list, as if none were open
        if v is not None and v not in pages.HYPOTHESIS_STATUS:
            raise ValueError(f"{v!r} is no hypothesis status: {', '.join(pages.HYPOTHESIS_STATUS)} "
                             "(or null for all)")
        return v


class Hypothesis(BaseModel):
    path: str
    title: str
    status: str | None = None
    category: str | None = None
    priority: float | None = None
    author: str | None = None


class HypothesesOut(BaseModel):
    total: int
    hypotheses: list[Hypothesis]


@op("hypotheses.file", HypothesisIn, HypothesisOut, writes=True)
def file_hypothesis(project: Project, a: HypothesisIn) -> dict:
    """File a structured hypothesis as an open page under hypotheses/<model>/<lane>/; the loop's queue proposer
    takes it (a person's first). Validated as the loop validates an LLM's proposal: one mechanism, a known category."""
    from types import SimpleNamespace

    from ..loop import spec as spec_mod
    from ..loop.admission import check_fits, patch_refusal
    from ..loop.hypotheses import hypothesis_page
    from ..loop.proposal import Proposal, ProposalError
    from ..loop.state import LoopPaths
    from ..writer import Writer

    loop_file = LoopPaths(project, _name(a.loop, "loop")).spec
    if not loop_file.is_file():
        raise AgentError(f"hypothesis refused: no loop file loops/{a.loop}.yml (the loop whose queue takes it)")
    try:
        loop = spec_mod.load(loop_file)
    except ToolsError as e:
        raise AgentError(f"hypothesis refused: {e}") from None
    if (loop.model, loop.lane) != (a.model, a.lane):
        raise AgentError(f"hypothesis refused: loop {a.loop!r} runs model {loop.model!r} lane {loop.lane!r}, "
                         f"not {a.model!r} {a.lane!r} (its queue would never take it)")
    d = a.model_dump()
    d["proposer"] = a.author
    try:
        proposal = Proposal.from_dict(d)
        check_fits(proposal, loop)
    except ProposalError as e:
        raise AgentError(f"hypothesis refused: {e}") from None
    if proposal.change.kind == "patch" and (why := patch_refusal(proposal.change.patch, loop.protected)):
        raise AgentError(f"hypothesis refused: {why}")  # as the loop's admission would refuse it
    spec = SimpleNamespace(model=_name(a.model, "model"), lane=_name(a.lane, "lane"), name=_name(a.loop, "loop"))
    # the same statement and change, however the change's keys are ordered or the statement's spaces fall
    digest = hashlib.sha1(f"{' '.join(a.statement.split())}|{json.dumps(a.change, sort_keys=True)}".encode()
                          ).hexdigest()[:8]
    hid = f"q-{digest}"
    page = hypothesis_page(spec, proposal, hid, "open", None)
    w = Writer(project.wiki)
    with w.exclusive():
        existing = _existing_hypothesis(w, page.path)
        if existing is not None:  # the same statement and change again: the first page, its author and its
            meta, body = existing      # history stay; a second filer is added to those who asked for it
            filers = [x for x in (meta.get("also_filed_by") or []) if isinstance(x, str)]
            if a.author != meta.get("author") and a.author not in filers:
                w.write_page(pages.Page(page.path, {**meta, "also_filed_by": filers + [a.author]}, body))
                w.log_changes("hypothesis filed again", page.path)
            return {"path": page.path, "status": str(meta.get("status") or "open"), "duplicate": True}
        w.write_page(page)
    w.log_changes("hypothesis", page.path)
    return {"path": page.path, "status": "open"}


def _existing_hypothesis(w, rel: str) -> tuple[dict, str] | None:
    from .. import safeio

    try:
        meta, body = pages.split(safeio.read_text(w.target(rel), 16 * 1024 * 1024))
    except (FileNotFoundError, pages.FrontmatterError):
        return None
    except safeio.Refused as e:
        raise AgentError(f"wiki/{rel}: {e}") from None
    return (meta or {}), body


@op("hypotheses.list", HypothesesIn, HypothesesOut)
def list_hypotheses(project: Project, a: HypothesesIn) -> dict:
    """Hypothesis pages, highest priority first (filtered by model, lane and status)."""
    from .ops_wiki import _scan

    out = []
    for p in _scan(project):
        m = p.meta or {}
        if m.get("type") != "hypothesis":
            continue
        if a.model and m.get("model") != a.model or a.lane and m.get("lane") != a.lane \
                or a.status and m.get("status") != a.status:
            continue
        prio = m.get("priority")
        out.append({"path": p.rel, "title": short_text(p.title), "status": text_or_none(m.get("status")),
                    "category": text_or_none(m.get("category")),
                    "priority": float(prio) if isinstance(prio, (int, float)) else None,
                    "author": text_or_none(m.get("author"))})
    out.sort(key=lambda h: (-(h["priority"] or 0), h["path"]))
    return {"total": len(out), "hypotheses": out}
