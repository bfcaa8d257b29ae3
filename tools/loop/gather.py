"""Priors from the wiki, by code: what the proposer reads before each iteration (tools/loop/priors.py)."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

from .. import pages
from ..experiments import comparison, noise, records
from ..project import Project
from . import memory, screen_table
from .priors import Attempt, Priors
from .spec import LoopSpec

# Which concept pages a category's hypotheses draw on (slugs from tools/concepts.py).
CATEGORY_CONCEPTS = {
    "memory": ("rematerialization", "host-offload", "gradient-accumulation"),
    "compiler": ("xla-flags", "scan-over-layers"),
    "kernel": ("pallas-kernels", "flash-attention", "splash-attention", "dot-product-attention"),
    "parallelism": ("sharding", "collective-matmul"),
    "precision": ("quantization",),
    "shape": ("gradient-accumulation",),
}
PROFILE_TOP = 10
EXCERPT_CHARS = 600
RETRO_CHARS = 4000
PEOPLE_FIRST = ("sweep", "llm", "loop")  # authors that are tools; anyone else is a person or an outside agent


def hardware(spec: LoopSpec, best: dict | None) -> str:
    """``cpu``, ``tpu`` or ``gpu``: from the trunk's measured platform, else the variant's ``/<hardware>``."""
    plat = str(((best or {}).get("metrics") or {}).get("platform") or "").lower()
    if plat in ("cpu", "tpu", "gpu", "cuda", "rocm"):
        return "gpu" if plat in ("cuda", "rocm") else plat
    hw = spec.variant.split("/", 1)[-1].lower()
    return "tpu" if hw.startswith(("v4", "v5", "v6", "v7", "tpu")) else "gpu" if hw.startswith(
        ("a100", "h100", "h200", "b200", "gpu", "l4")) else "cpu" if "cpu" in hw else hw


def knob_effects(hw: str) -> dict:
    table = json.loads(resources.files("tools").joinpath("loop/knob_effects.json").read_text(encoding="utf-8"))
    return table.get(hw, {})


def _meta(path: Path) -> tuple[dict, str]:
    try:
        meta, body = pages.split(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, pages.FrontmatterError):
        return {}, ""
    return meta or {}, body


def guidance(project: Project, spec: LoopSpec) -> str:
    """The method's layered program.md: knowledge base, then model, then lane; the nearer one overrides."""
    layers = (("knowledge base", project.root / "program.md"),
              (f"model {spec.model}", project.root / f"program.{spec.model}.md"),
              (f"lane {spec.model}/{spec.lane}", project.root / f"program.{spec.model}.{spec.lane}.md"))
    out = []
    for i, (what, p) in enumerate(layers):
        if p.is_file():
            text = p.read_text(encoding="utf-8", errors="replace").strip()
            head = f"## Guidance for the {what}" + (" (overrides the guidance above where they disagree)" if out else "")
            out.append(f"{head}\n\n{text}")
    return "\n\n".join(out)


def attempt_from_history(h: dict) -> Attempt:
    return Attempt(h.get("exp_id", ""), h.get("category", "other"), h.get("change") or {}, h.get("fingerprint", ""),
                   h.get("verdict", ""), h.get("gain_pct"), bool(h.get("kept")), h.get("hypothesis_page", ""),
                   h.get("statement", ""), h.get("config") or {}, "", h.get("run_key", ""), h.get("trunk_exp", ""),
                   int(h.get("repeats") or 0), dict(h.get("crash") or {}), str(h.get("repair_of") or ""))


def other_lanes(project: Project, spec: LoopSpec) -> list[Attempt]:
    """Loop runs of this knowledge base on other lanes and models: their change, verdict and gain."""
    out = []
    for r in records.load_experiments(project.wiki):
        if (r.get("model"), r.get("lane")) == (spec.model, spec.lane) or not r.get("change") or r.get("status") != "filed":
            continue
        out.append(Attempt(r.get("exp_id", ""), r.get("category", "other"), r.get("change") or {},
                           r.get("change_fingerprint", ""), r.get("verdict", ""), r.get("gain_pct"),
                           r.get("ledger_status") == "keep", r.get("hypothesis_page", ""), str(r.get("hypothesis") or ""),
                           r.get("loop_config") or {}, f"{r.get('model')}/{r.get('lane')}"))
    return out


def open_hypotheses(project: Project, spec: LoopSpec) -> list[dict]:
    """Open hypothesis pages for this model (and this lane, or no lane): people's first, then by priority."""
    folder = project.wiki / "hypotheses"
    out = []
    for p in sorted(folder.rglob("*.md")) if folder.is_dir() else []:
        if p.is_symlink():
            continue
        rel = p.relative_to(project.wiki).as_posix()
        try:
            meta, body = pages.split(p.read_text(encoding="utf-8"))
            meta = meta or {}
        except (OSError, UnicodeDecodeError, pages.FrontmatterError) as e:
            # a page of this model's folder (or of none) that cannot be read is said, not skipped in silence
            parts = rel.split("/")
            if len(parts) == 2 or parts[1] == spec.model:
                out.append({"page": rel, "meta": {}, "body": "", "person": True, "priority": 0.0,
                            "error": f"not read: {str(e).splitlines()[0] if str(e) else type(e).__name__}"})
            continue
        if meta.get("type") != "hypothesis" or meta.get("status", "open") != "open":
            continue
        if meta.get("model") not in (None, "", spec.model) or meta.get("lane") not in (None, "", spec.lane):
            continue
        person = str(meta.get("author") or "person") not in PEOPLE_FIRST
        out.append({"page": rel, "meta": meta, "body": body, "person": person,
                    "priority": float(meta.get("priority") or 0) if isinstance(meta.get("priority"), (int, float))
                    else 0.0})
    out.sort(key=lambda h: (not h["person"], -h["priority"], h["page"]))
    return out


def profile_of(project: Project, record: dict | None) -> dict | None:
    """The trunk's profile summary, trimmed to what a proposer needs."""
    if not record or not record.get("raw_dir"):
        return None
    p = project.root / str(record["raw_dir"]) / "summary.json"
    try:
        s = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return {"exp_id": record.get("exp_id"), "steps": s.get("steps"), "categories": (s.get("categories") or [])[:8],
            "top_ops": (s.get("top_ops") or [])[:PROFILE_TOP], "source_lines": (s.get("source_lines") or [])[:PROFILE_TOP],
            "attributed_pct": s.get("attributed_pct")}


def concepts(project: Project, spec: LoopSpec) -> list[dict]:
    """Concept pages that bear on the declared knob space (by category, and by name in the flags)."""
    folder = project.wiki / "concepts"
    wanted = {slug for k in spec.knobs.values() for slug in CATEGORY_CONCEPTS.get(k.category, ())}
    words = " ".join([*spec.command, *(k.flag or k.env or k.name for k in spec.knobs.values())]).lower()
    out = []
    for p in sorted(folder.glob("*.md")) if folder.is_dir() else []:
        meta, body = _meta(p)
        if meta.get("type") != "concept":
            continue
        names = [p.stem, str(meta.get("title") or "")] + [str(a) for a in meta.get("aliases") or []]
        if p.stem in wanted or any(n and n.lower().replace(" ", "-") in words for n in names[1:] if len(n) > 3):
            text = " ".join(ln for ln in body.splitlines() if ln and not ln.startswith(("#", "<!--", "|")))
            out.append({"title": meta.get("title") or p.stem, "page": f"concepts/{p.name}", "excerpt": text[:EXCERPT_CHARS]})
    return out


def kernels(project: Project, hw: str) -> list[dict]:
    """Library kernels that exist in the ingested repos, with backend (for a TPU lane: TPU kernels first)."""
    folder = project.wiki / "kernels"
    out = []
    for p in sorted(folder.rglob("*.md")) if folder.is_dir() else []:
        meta, _ = _meta(p)
        if meta.get("type") != "kernel" or meta.get("kind") not in ("library", None):
            continue
        out.append({"kernel": meta.get("title") or p.stem, "repo": meta.get("repo"), "backend": meta.get("backend"),
                    "category": meta.get("category"), "stability": meta.get("stability"),
                    "path": f"{meta.get('path')}:{meta.get('line')}", "page": p.relative_to(project.wiki).as_posix()})
    fits = {"tpu": ("tpu",), "gpu": ("gpu-triton", "gpu-mosaic")}.get(hw, ())
    out.sort(key=lambda k: (k["backend"] not in fits, str(k["category"]), str(k["kernel"])))
    return out[:80]


def last_retrospective(project: Project, state: dict) -> str:
    if not state.get("retrospectives"):
        return ""
    _, body = _meta(project.wiki / state["retrospectives"][-1]["page"])
    return body[:RETRO_CHARS]


def gather(project: Project, spec: LoopSpec, state: dict, budget_left: dict[str, float]) -> Priors:
    lane = records.lane_records(project.wiki, spec.model, spec.lane)
    trunk = state.get("trunk") or {}
    best = next((r for r in lane if r.get("exp_id") == trunk.get("exp_id")), None)
    history = state.get("history") or []
    attempts = [attempt_from_history(h) for h in history]
    mem = memory.compute(history)
    cat, n = memory.streak(history)
    hw = hardware(spec, best)
    gap, gap_summary = _gap(project, spec, state, best, trunk)
    return Priors(
        spec=spec, trunk=dict(trunk.get("config") or spec.start_config()), trunk_env=dict(trunk.get("env") or {}),
        trunk_commit=str(trunk.get("commit") or ""), best=best, attempts=attempts,
        other_lanes=other_lanes(project, spec),
        refuted=[a for a in attempts if a.verdict in ("refuted", "invalid")],
        memory=mem, open_hypotheses=open_hypotheses(project, spec), profile=profile_of(project, best),
        concepts=concepts(project, spec), kernels=kernels(project, hw),
        retrospective=last_retrospective(project, state), guidance=guidance(project, spec),
        avoid_category=cat if n >= 3 else "",
        prefer_switch=memory.since_frontier_move(history) >= 2,
        budget_left=budget_left, knob_effects=knob_effects(hw),
        trunk_keys=[f["run_key"] for f in state.get("frontier") or [] if f.get("run_key")],
        gap=gap, gap_summary=gap_summary,
        screens=screen_table.current(state, {k for k, knob in spec.knobs.items() if knob.env}),
        noise={kind: confirmation_noise(spec, lane, best, kind == "pairs") for kind in ("pairs", "processes")})


def confirmation_noise(spec: LoopSpec, lane: list[dict], best: dict | None, pairs: bool) -> dict:
    """The σ per round a comparison against the trunk would be built from now (``comparison.current_noise``: the
    lane's model, else its calibration's floor), for in-process pairs or processes."""
    statistic = spec.statistic
    if statistic == "auto":
        statistic = noise.choose_reading(lane, spec.variant, records.shape_key_of(best or {}), pairs)["chosen"]
    n = comparison.current_noise(lane, spec.variant, best, statistic, pairs)
    return {"sigma_pct": round(n.lane.sigma_pct if n.lane is not None else n.sigma_floor_pct, 3),
            "band_pct": n.band_pct, "model": n.lane is not None, "source": n.source}


def reference_record(project: Project, spec: LoopSpec, state: dict) -> dict | None:
    ref = state.get("reference") or {}
    if not ref.get("exp_id"):
        return None
    lane = ref.get("lane") or spec.reference_lane
    model = ref.get("model") or spec.model
    return next((r for r in records.lane_records(project.wiki, model, lane) if r.get("exp_id") == ref["exp_id"]),
                None)


def _gap(project: Project, spec: LoopSpec, state: dict, best: dict | None, trunk: dict) -> tuple[list, dict]:
    from .reference import gap_against, measured

    if not spec.reference:
        return [], {}
    analysis = gap_against(project, spec, best, reference_record(project, spec, state),
                           dict(trunk.get("config") or spec.start_config()), kernels(project, ""),
                           measured(state.get("reference"), (best or {}).get("exp_id")))
    if not analysis:
        return [], {}
    return analysis["items"], {k: analysis.get(k) for k in ("ours", "ref", "gap_pct", "reference_faster", "verdict")} | {
        "unexplained_us_per_token": (analysis.get("estimate") or {}).get("unexplained_us_per_token")}
