"""What one loop iteration hands the runner and keeps afterwards: the RunSpec, the same-shape semantics reference,
the frontmatter keys that tie a run to its loop, the trunk and history entries, and the filing of a change that
cannot run. Plain functions of the loop file and the records; the engine orders them."""

from __future__ import annotations

from pathlib import Path

from ..experiments import filing
from ..experiments.context import RunContext
from ..experiments.runner import RunSpec, slugify
from ..project import Project
from ..writer import Writer
from .priors import Priors
from .proposal import Proposal
from .spec import LoopSpec


def runspec(spec: LoopSpec, cfg: dict, env: dict, cwd: Path, *, description: str, slug: str, hypothesis: str,
            extra: dict, baseline: bool = False, repeats: int = 0, pairs_rounds: int = 0, **kw) -> RunSpec:
    """A run of configuration ``cfg`` (+ ``env``), interleaved repeats adaptive between the loop's bounds;
    ``pairs_rounds``: fewer pairs rounds than the loop file's (``power.rounds_for``)."""
    lo = max(spec.min_repeats, repeats or 0)
    return RunSpec(model=spec.model, lane=spec.lane, variant=spec.variant, command=spec.command_for(cfg),
                   hypothesis=hypothesis, description=description, slug=slug, profile=spec.profile,
                   timeout=spec.timeout_s, repeats=lo, min_repeats=lo, max_repeats=max(lo, spec.max_repeats),
                   baseline=baseline, env=spec.env_for(cfg, env), cwd=cwd, runner=spec.runner,
                   runner_options=spec.runner_options, statistic=spec.statistic, extra=extra,
                   memory_tol_pct=spec.memory_tol_pct, memory_max_gb=spec.memory_max_gb, hang_s=spec.hang_s,
                   trust_step_times=spec.trust_step_times,
                   protected=[e for e in spec.protected if not any(c in e for c in "*?[")],
                   compile_cache=spec.compile_cache and spec.runner == "local", pairs=spec.pairs,
                   pairs_rounds=min(pairs_rounds or spec.pairs_rounds, spec.pairs_rounds), **kw)


def reference(spec: LoopSpec, cfg: dict) -> tuple[list[str] | None, dict]:
    """A same-shape semantics reference: every knob at its reference value except the shape knobs (None when the
    shape is the reference shape: the lane's baseline already is one)."""
    if all(cfg[k.name] == k.reference for k in spec.knobs.values() if k.category == "shape"):
        return None, {}
    ref = {k.name: (cfg[k.name] if k.category == "shape" else k.reference) for k in spec.knobs.values()}
    return spec.command_for(ref), spec.env_for(ref)


def extra_keys(spec: LoopSpec, p: Proposal, n: int, cfg: dict, pend: dict) -> dict:
    """Frontmatter that ties an experiment page to its loop, iteration, hypothesis and configuration."""
    return {"loop": spec.name, "iteration": n, "category": p.category, "change": vars(p.change).copy(),
            "change_fingerprint": p.change.fingerprint(), "hypothesis_page": pend["hypothesis_page"],
            "proposer": p.proposer, "loop_config": cfg, "loop_started": pend.get("loop_started"),
            **({"pairs_rounds_why": pend["rounds_why"]} if pend.get("rounds_why") else {})}


def trunk_entry(rec: dict, cfg: dict, env: dict, commit: str) -> dict:
    m = rec.get("metrics") or {}
    return {"exp_id": rec["exp_id"], "config": cfg, "env": env, "commit": commit,
            "tokens_per_s": m.get("tokens_per_s"), "mfu_percent": m.get("mfu_percent"),
            "hlo_fingerprint": rec.get("hlo_fingerprint"), "page": rec.get("page") or ""}


def history_entry(p: Proposal, rec: dict, n: int, kept: bool, pend: dict) -> dict:
    return {"iteration": n, "exp_id": rec["exp_id"], "page": rec.get("page") or "",
            "hypothesis_page": pend["hypothesis_page"], "category": p.category, "change": vars(p.change).copy(),
            "fingerprint": p.change.fingerprint(), "describe": p.change.describe(), "run_key": pend["run_key"],
            "verdict": rec.get("verdict"), "gain_pct": rec.get("gain_pct"), "noise_band_pct": rec.get("noise_band_pct"),
            "interval_pct": (rec.get("timing") or {}).get("interval_pct"),
            "tokens_per_s": (rec.get("metrics") or {}).get("tokens_per_s"), "kept": kept,
            "proposer": p.proposer, "statement": p.statement, "expected_gain_pct": p.expected_gain_pct,
            "confidence": p.confidence, "effort": p.effort, "reasons": rec.get("reasons") or [],
            "config": pend["config"], "trunk_exp": pend["trunk_exp"], "repeats": rec.get("repeats"),
            "interrupted": pend.get("interrupted", 0),
            "crash": _crash_brief(rec.get("crash")), "repair_of": p.repair_of or None,
            "combines": list(p.combines) or None,
            **({"pairs_rounds_why": pend["rounds_why"]} if pend.get("rounds_why") else {})}


def _crash_brief(crash: dict | None) -> dict | None:
    """What the loop keeps of a crash: kind, signature, message, memory figures, and the innermost frames that
    are the model's or an ingested codebase's (a repair proposal reads them)."""
    if not crash:
        return None
    out = {k: v for k, v in crash.items() if k in ("kind", "signature", "message", "oom")}
    frames = [f for f in crash.get("frames") or [] if f.get("role") in ("model", "ingested", "framework")][-4:]
    if frames:
        out["frames"] = [{k: f.get(k) for k in ("role", "package", "rel", "line", "func", "code") if f.get(k)}
                         for f in frames]
    return out


def file_unrunnable(project: Project, writer: Writer, spec: LoopSpec, p: Proposal, cfg: dict, reason: str, n: int,
                    pend: dict) -> dict:
    """A change that cannot run (a patch that does not apply) is filed ``invalid`` with the reason, never run."""
    lane = filing.Lane(project, spec.model, spec.lane)
    slug = slugify(f"{spec.name}-{n:03d}-patch")
    with lane.locked():
        v = lane.next_version()
        exp_id = f"{writer.today}-v{v:03d}-{slug}"
        command = " ".join(spec.command_for(cfg))
        rec = {"title": f"{spec.model}/{spec.lane} v{v:03d}: {p.change.describe()} (not run)",
               "type": "experiment", "tags": ["experiment", spec.model, spec.lane, "loop"],
               "model": spec.model, "lane": spec.lane, "variant": spec.variant,
               "hypothesis": p.statement, "exp_id": exp_id, "status": "filed", "version": v, "slug": slug,
               "date": writer.today, "description": p.change.describe(), "command": command,
               "verdict": "invalid", "ledger_status": "discard", "role": "variant", "metrics": {},
               "reasons": [reason, "the change was not run"], "repeats": 0, **extra_keys(spec, p, n, cfg, pend)}
        rec["page"] = filing.file_record(writer, lane, rec, RunContext(command_line=command, crash_reason=reason,
                                                                       log_tail=reason))
    return rec


def device_seconds(rec: dict) -> float:
    """Seconds every arm of a run took (baseline reruns, profile and reference runs included)."""
    return float(rec.get("wall_s_total") or sum(rec.get("run_wall_s") or []))


def count_interrupted(state, rec: dict) -> None:
    """A run cut off by a stop: its device time counted apart (``usage.interrupted_s``), not against a budget;
    the resume runs it again and counts that run as any other."""
    state.usage["interrupted_s"] = round(float(state.usage.get("interrupted_s") or 0.0) + device_seconds(rec), 3)


def interrupted(rec: dict) -> bool:
    """A run cut off by a kill or a signal (not a verdict on its hypothesis)."""
    return rec.get("verdict") == "crash" and any("runner process" in str(r) or "stopped by" in str(r)
                                                 for r in rec.get("reasons") or [])


def priors_dump(p: Priors) -> dict:
    """The priors as saved with each iteration (``loops/<name>/iterations/NNN/priors.json``)."""
    d = {k: v for k, v in vars(p).items() if k != "spec"}
    d["attempts"] = [vars(a) for a in p.attempts]
    d["other_lanes"] = [vars(a) for a in p.other_lanes]
    d["refuted"] = [a.exp_id for a in p.refuted]
    d["open_hypotheses"] = [h["page"] for h in p.open_hypotheses]
    return d
