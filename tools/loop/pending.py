"""The phases of a pending iteration: prepare the change and run it (``proposed`` → ``running`` → ``filed``),
several at once when ``parallel`` > 1, and, on resume, carry each one on from the phase it reached.

Each function takes the driver (``engine.Loop``: its spec, state, writer, workspace and save). A run cut off
mid-way (``kill -9``, a reboot) is filed as a crash by the runner's abandoned-run sweep and its proposal runs again
as a new experiment, at most ``MAX_INTERRUPTED_RETRIES`` times; a run stopped on request (SIGTERM, Ctrl-C) runs
again however often that happens.
"""

from __future__ import annotations

import threading

from ..errors import ToolsError
from ..experiments import abandoned, filing, records
from ..experiments.runner import run_experiment
from ..runners import process
from . import runs
from .proposal import Proposal
from .workspace import PatchError

MAX_INTERRUPTED_RETRIES = 2


class LoopInterrupted(ToolsError):
    """Ctrl-C or SIGTERM stopped a run; the loop's state says how to go on."""

    def __init__(self, how: str, what: str = "the run in flight was filed as a crash"):
        self.how = how
        self.exit_code = 143 if how == "SIGTERM" else 130
        super().__init__(f"interrupted by {how}: {what}; `tools loop resume` goes on from there")


def run(loop, pend: dict) -> None:
    """Prepare the change and run it; the pending entry ends in phase ``filed`` (the loop's learning takes it on)."""
    spec, n, p = loop.spec, pend["iteration"], Proposal.from_dict(pend["proposal"])
    cfg, env = pend["config"], pend["env"]
    key = f"{n:03d}"
    try:
        with loop._git:  # work trees of one repository: one git command at a time
            prep = loop.workspace.prepare(key, p.change.patch if p.change.kind == "patch" else "", spec.protected)
    except PatchError as e:
        rec = runs.file_unrunnable(loop.project, loop.writer, spec, p, cfg, str(e), n, pend)
        pend.update(phase="filed", exp_id=rec["exp_id"], record=rec, kept=False)
        loop.save()
        return
    pend.update(phase="running", cwd=str(prep.cwd), branch=prep.branch)
    loop.save()
    loop.say(f"iteration {n}: {p.category}: {p.change.describe()} (expected {p.expected_gain_pct:+.1f} %)")
    trunk = loop.state.trunk
    ref_cmd, ref_env = runs.reference(spec, cfg)
    spec_run = runs.runspec(spec, cfg, env, prep.cwd, description=p.change.describe(),
                            slug=f"{spec.name}-{n:03d}-{p.change.describe()}", hypothesis=p.statement,
                            extra=runs.extra_keys(spec, p, n, cfg, pend), compare_to=trunk["exp_id"],
                            compare_cwd=loop.workspace.cwd_in(loop.workspace.trunk_dir) if spec.code else None,
                            reference_command=ref_cmd, reference_env=ref_env,
                            parent_fingerprint=trunk.get("hlo_fingerprint"), runtime_only=p.change.runtime_only,
                            repeats=p.repeats, pairs_rounds=pend.get("pairs_rounds") or 0)
    if pend.get("rounds_why"):
        loop.say(f"  confirmed in {pend['rounds_why']}")
    if prep.branch:
        def commit_patch(exp_id: str) -> None:  # the runner reserved the version: commit with its id
            msg = (f"loop {spec.name} {key}: {p.statement[:60]}\n\n{p.change.describe()}\n"
                   f"hypothesis: {pend['hypothesis_page']}\n\nexp: {exp_id}")
            with loop._git:
                pend.update(commit=loop.workspace.commit(key, msg), exp_id=exp_id)
            loop.save()
        spec_run.on_reserved = commit_patch
    before = (record_of(loop, n) or {}).get("exp_id")
    try:
        out = run_experiment(loop.project, spec_run, loop.writer)
    except ToolsError as e:  # a backend or judging failure: the runner filed a crash saying so; learn it
        rec = record_of(loop, n)
        if rec is None or rec.get("status") != "filed" or rec.get("exp_id") == before:
            raise
        loop.say(f"  the run failed: {e}")
        # a kill between the page and its ledger row left the row out: the lane's ledger gets it before the loop
        # reads the run as filed
        filing.Lane(loop.project, loop.spec.model, loop.spec.lane).repair_ledger(loop.writer)
        pend.update(phase="filed", exp_id=rec["exp_id"], record=rec)
        loop.save()
        return
    if out.stopped_by:  # Ctrl-C or SIGTERM: the run is filed as a crash; resume runs this proposal again
        runs.count_interrupted(loop.state, out.record)
        loop._stopped(f"interrupted by {out.stopped_by}: `tools loop resume` runs the cut-off experiment again")
        raise LoopInterrupted(out.stopped_by)
    pend.update(phase="filed", exp_id=out.exp_id, record=dict(out.record, page=out.page))
    loop.save()


def run_batch(loop, batch: list[dict]) -> None:
    """Several iterations at once, one thread each. Ctrl-C or SIGTERM stops them all (each run is filed as a
    crash and resume runs it again) before the driver lets go of the loop."""
    errors: list[BaseException] = []

    def one(pend: dict) -> None:
        try:
            run(loop, pend)
        except BaseException as e:  # noqa: BLE001 - re-raised below, after the others finished
            errors.append(e)

    threads = [threading.Thread(target=one, args=(pend,), name=f"loop-{pend['iteration']}") for pend in batch]
    try:
        with process.stop_on_signals():
            for t in threads:
                t.start()
            for t in threads:
                t.join()
    except (KeyboardInterrupt, process.Stop) as e:
        process.stop_all_runs(e.how if isinstance(e, process.Stop) else "Ctrl-C")
        for t in threads:
            t.join()
    finally:
        process.STOP_ALL.clear()
    if errors:
        raise next((e for e in errors if isinstance(e, LoopInterrupted)), errors[0])


def recover(loop, pend: dict) -> None:
    """Resume: carry one iteration in flight to phase ``filed`` from the phase it reached."""
    if pend["phase"] == "proposed":
        run(loop, pend)
        return
    if pend["phase"] == "running":
        rec = record_of(loop, pend["iteration"])
        if rec is None or rec.get("status") != "filed" or runs.interrupted(rec):
            abandoned.sweep(loop.writer, loop.project)  # files the cut-off run as a crash, if any
            # a stop the loop was asked for (SIGTERM, Ctrl-C: the run filed it so) says nothing of the run, and is
            # never counted against it; a run whose runner vanished (kill -9, the OOM killer) may be the cause
            asked = rec is not None and any(str(r).startswith("stopped by") for r in rec.get("reasons") or [])
            pend["interrupted"] = pend.get("interrupted", 0) + (0 if asked else 1)
            if pend["interrupted"] <= MAX_INTERRUPTED_RETRIES:
                loop.say(f"iteration {pend['iteration']}: the run was cut off; running it again")
                pend["phase"] = "proposed"
                loop.save()
                run(loop, pend)
                return
            rec = record_of(loop, pend["iteration"])
            if rec is None:
                raise ToolsError(f"loop {loop.spec.name}: iteration {pend['iteration']} was cut off "
                                 f"{pend['interrupted']} times and left no record")
        # a kill between the page and its ledger row left the row out: the lane's ledger gets it before the loop
        # reads the run as filed
        filing.Lane(loop.project, loop.spec.model, loop.spec.lane).repair_ledger(loop.writer)
        pend.update(phase="filed", exp_id=rec["exp_id"], record=rec)
        loop.save()


def record_of(loop, n: int) -> dict | None:
    """The latest experiment of iteration ``n`` of this run of the loop (a ``--fresh`` start is another run)."""
    spec = loop.spec
    mine = [r for r in records.lane_records(loop.project.wiki, spec.model, spec.lane)
            if r.get("loop") == spec.name and r.get("iteration") == n
            and r.get("loop_started", loop.state.started) == loop.state.started]
    return mine[-1] if mine else None
