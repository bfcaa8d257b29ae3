"""Iteration 0 of a loop: the baseline run (its configuration becomes the trunk, its commit the start every kept
change is measured from) and, with ``calibrate: N``, the A/A rounds of the trunk against itself. The engine calls
these before its first iteration; each saves the state when done."""

from __future__ import annotations

import os

from ..errors import ToolsError
from ..experiments import records
from ..experiments.runner import run_experiment
from ..runners.process import start_problem
from . import learn, runs
from .pending import LoopInterrupted


def loop_keys(loop) -> dict:
    """The frontmatter keys that mark a run as this loop's (the resume finds its runs by them)."""
    return {"loop": loop.spec.name, "iteration": 0, "loop_started": loop.state.started}


def filed(loop, role: str) -> dict | None:
    """This run of the loop's baseline or calibration (``role``), when it was filed and the state does not say so
    yet (a kill between the two): a resume takes it up instead of running it again."""
    spec = loop.spec
    mine = [r for r in records.lane_records(loop.project.wiki, spec.model, spec.lane)
            if r.get("loop") == spec.name and r.get("iteration") == 0 and r.get("loop_started") == loop.state.started
            and r.get("description") == f"loop {role}"]
    return mine[-1] if mine else None


def _interrupted(loop, out, what: str) -> None:
    if out.stopped_by:  # Ctrl-C or SIGTERM: filed as a crash; the resume runs it again
        runs.count_interrupted(loop.state, out.record)
        loop._stopped(f"interrupted by {out.stopped_by} during the {what}: `tools loop resume` runs it again")
        raise LoopInterrupted(out.stopped_by, f"the {what} was filed as a crash")


def baseline(loop) -> None:
    """Run the start configuration; refused before anything runs when its command cannot start, and the loop stops
    with the page to read when it crashes or is filed invalid. A baseline filed before a kill is taken up."""
    spec = loop.spec
    cfg = spec.start_config()
    prep = loop.workspace.prepare("000")
    rec = filed(loop, "baseline")
    if rec is not None and rec.get("verdict") not in ("crash", "invalid") and rec.get("status") != "in_progress":
        loop.say(f"baseline: filed before the loop was stopped: {rec['exp_id']}")
        _adopt_baseline(loop, rec, cfg, prep.commit)
        return
    loop.say(f"baseline: {' '.join(spec.command_for(cfg))}")
    run = runs.runspec(spec, cfg, {}, prep.cwd, description="loop baseline", slug=f"{spec.name}-baseline",
                       hypothesis="The starting configuration: the reference every change is compared with.",
                       extra=loop_keys(loop), baseline=True)
    if spec.runner == "local":
        why = start_problem(run.command, prep.cwd, dict(os.environ, **run.env))
        if why:
            loop._stopped(f"error: the baseline cannot start: {why}")
            raise ToolsError(f"loop {spec.name}: the baseline cannot start: {why} (command "
                             f"{' '.join(run.command)!r} in {prep.cwd}); nothing was run or filed")
    out = run_experiment(loop.project, run, loop.writer)
    rec = dict(out.record, page=out.page)
    _interrupted(loop, out, "baseline")
    if out.verdict in ("crash", "invalid"):
        loop._stopped(f"error: the baseline run was filed {out.verdict} ({'; '.join(out.reasons)}); its page "
                      "shows the log")
        raise ToolsError(f"loop {spec.name}: the baseline run {out.exp_id} was filed {out.verdict}: "
                         f"{'; '.join(out.reasons)} (the log's end is on wiki/{out.page})")
    _adopt_baseline(loop, rec, cfg, prep.commit)


def _adopt_baseline(loop, rec: dict, cfg: dict, commit: str) -> None:
    spec, state = loop.spec, loop.state
    state.trunk = runs.trunk_entry(rec, cfg, {}, commit)
    state.start_commit = commit
    state.frontier.append(learn.frontier_row(spec, 0, rec, cfg, {}, commit, "baseline", 0.0))
    state.usage["device_s"] += runs.device_seconds(rec)
    state.frontier[-1]["device_s_total"] = round(state.usage["device_s"], 3)
    loop.save()
    loop.writer.append_log("loop start", spec.name, [f"baseline {rec['exp_id']}: tokens/s "
                                                     f"{rec['metrics']['tokens_per_s']}", f"page {rec['page']}"])


def calibrate(loop) -> None:
    """A/A rounds of the trunk against itself: the lane's noise model starts from them (``experiments.noise``)."""
    spec, state = loop.spec, loop.state
    cfg, cwd = state.trunk["config"], loop.workspace.prepare("000").cwd
    how = " (in-process pairs)" if spec.pairs else ""
    loop.say(f"calibration: {spec.calibrate} A/A rounds of the baseline{how}")
    run = runs.runspec(spec, cfg, {}, cwd, description="loop calibration (A/A)", slug=f"{spec.name}-calibration",
                       hypothesis="The baseline against itself: how much a run of this lane moves by chance.",
                       extra=loop_keys(loop), calibrate=True, compare_to=state.trunk["exp_id"], compare_cwd=cwd)
    run.command = []  # the runner reruns the compared record's own command, code and environment
    run.repeats = run.min_repeats = run.max_repeats = spec.calibrate
    run.profile = False
    rec = filed(loop, "calibration (A/A)")
    if rec is None or not (rec.get("calibration") or {}).get("pair_sd_pct"):
        out = run_experiment(loop.project, run, loop.writer)
        _interrupted(loop, out, "calibration")
        rec = dict(out.record, page=out.page)
    else:
        loop.say(f"  filed before the loop was stopped: {rec['exp_id']}")
    cal = rec.get("calibration") or {}
    state.calibration = {"exp_id": rec["exp_id"], **{k: cal.get(k) for k in ("pair_sd_pct", "band_pct")}}
    state.usage["device_s"] += runs.device_seconds(rec)
    loop.save()
    by_min = spec.statistic == "min" and cal.get("pair_sd_min_pct") is not None  # the σ this loop's runs see
    loop.say(f"  → σ {cal.get('pair_sd_min_pct' if by_min else 'pair_sd_pct')} % per round"
             + (" (each run read by its fastest step)" if by_min else "")
             + f", band ±{cal.get('band_pct')} %  wiki/{rec['page']}")
