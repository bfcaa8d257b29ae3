"""Operations on loops: status and the latest retrospective (read); stop (writes a stop request); start and
resume (``runs``: offered over MCP only with ``--allow-run``).

A loop runs for minutes to days, longer than any tool call should, so start and resume launch ``tools loop
start|resume NAME`` as a detached process (its own session: it outlives the MCP server) writing to
``loops/NAME/driver.log``, wait until its driver holds the loop's lock (or the command has failed, with the log's
last lines as the error), and return. The agent then follows it with ``loop_status``.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from .. import safeio
from ..project import Project
from .ops_runs import _name
from .registry import AgentError, call, op

DRIVER_WAIT_S = 20.0   # how long start/resume wait for the driver to take the loop's lock


class LoopIn(BaseModel):
    name: str = Field(description="the loop's name: loops/<name>.yml")


class LoopOut(BaseModel):
    name: str
    driver_running: bool
    status: str = Field(description="running | stopped")
    stop_reason: str | None
    iteration: int
    usage: dict[str, int | float] = Field(description="runs, wall_s, llm_tokens, cost_usd, device_s (counts whole)")
    trunk: dict[str, Any] = Field(description="the configuration every change is compared with")
    frontier: list[dict[str, Any]] | None
    pending: list[str] = Field(description="the phase of each iteration in flight")
    categories: dict[str, Any] = Field(description="per category: tried, supported, refuted, best gain, closed")
    history: list[dict[str, Any]] = Field(description="the last `history` iterations, oldest first")
    history_total: int = Field(0, description="iterations in the whole history")
    retrospectives: list[str]
    device_time: dict[str, Any] = Field(description="device-seconds in all, per experiment, per verdict, per kept "
                                                    "gain and per frontier move (docs/loop.md)")
    combinations: list[dict[str, Any]] = Field([], description="near-misses tried together: each part's gain alone, "
                                                               "their chained sum, the measured gain, the interaction")
    screens: list[dict[str, Any]] = Field([], description="screen waves: per trunk, each flag move measured in one "
                                                          "process against it, and whether it was ruled out or left "
                                                          "to confirm (docs/loop.md)")
    state: dict[str, Any] | None = Field(None, description="the whole state file (loops/<name>/state.json), when "
                                                        "asked for (`state: true`): it grows with every iteration")


class LoopStatusIn(LoopIn):
    history: int = Field(50, ge=0, le=1_000_000, description="the last this many iterations of the history (0: all)")
    state: bool = Field(False, description="also the whole state file (megabytes for a long loop)")


def _paths(project: Project, name: str):
    from ..loop.state import LoopPaths

    return LoopPaths(project, _name(name, "loop"))


def _state(paths) -> dict:
    from ..loop.state import load

    state = load(paths)
    if state is None:
        raise AgentError(f"loop {paths.name!r} has not started (no loops/{paths.name}/state.json)")
    return state


@op("loop.status", LoopStatusIn, LoopOut)
def loop_status(project: Project, a: LoopStatusIn) -> dict:
    """A loop's state (trunk, frontier, the last iterations with verdicts, usage, stop reason) and whether its
    driver runs; the whole state file only when asked for."""
    from ..loop.state import driver_alive

    from ..loop.status import summary

    paths = _paths(project, a.name)
    state = _state(paths)
    out = summary(state)
    history = out["history"]
    return {**out, "history": history[-a.history:] if a.history else history, "history_total": len(history),
            "name": a.name, "driver_running": driver_alive(paths), "state": state if a.state else None}


class RetroOut(BaseModel):
    name: str
    page: str | None = Field(description="wiki-relative path of the latest retrospective; null before the first")
    retrospectives: list[str]
    meta: dict[str, Any] = {}
    body: str = ""
    total_chars: int = Field(0, description="characters of the page's body")
    next_offset: int | None = Field(None, description="where wiki_read (path=page, offset=...) goes on; null when "
                                                      "the body is whole")


@op("loop.retrospective", LoopIn, RetroOut)
def loop_retrospective(project: Project, a: LoopIn) -> dict:
    """The loop's latest retrospective page (frontier-stuck count, coverage, top untried ideas), and the list."""
    state = _state(_paths(project, a.name))
    pages = [r["page"] for r in state.get("retrospectives") or []]
    if not pages:
        return {"name": a.name, "page": None, "retrospectives": []}
    page = call(project, "wiki.read", {"path": pages[-1]})
    return {"name": a.name, "page": pages[-1], "retrospectives": pages, "meta": page["meta"], "body": page["body"],
            "total_chars": page["total_chars"], "next_offset": page["next_offset"]}


class StopOut(BaseModel):
    name: str
    driver_running: bool = Field(description="false: no driver runs; the request applies at the next start/resume")


@op("loop.stop", LoopIn, StopOut, writes=True, destructive=True)
def loop_stop(project: Project, a: LoopIn) -> dict:
    """Ask the loop to stop after the iteration in flight (a retrospective is written first)."""
    from ..loop.state import request_stop

    paths = _paths(project, a.name)
    _state(paths)
    return {"name": a.name, "driver_running": request_stop(project, paths.name)}


class StartIn(LoopIn):
    iterations: int | None = Field(None, ge=0, description="pause after this many iterations (resume continues)")
    fresh: bool = Field(False, description="discard the loop's state and start over (pages and runs stay)")


class ResumeIn(LoopIn):
    iterations: int | None = Field(None, ge=0, description="pause after this many more iterations")


class LaunchOut(BaseModel):
    name: str
    pid: int
    command: list[str]
    log: str = Field(description="the driver's output, relative to the knowledge base")


def _inside(project: Project, folder: Path) -> Path:
    """A folder an agent's call writes into (a patch series, which also removes the tools' older series there):
    refused where a link on its path leads out of the knowledge base."""
    if not Path(os.path.realpath(folder)).is_relative_to(os.path.realpath(project.root)):
        raise AgentError(f"{folder.relative_to(project.root)}: links outside the knowledge base; not written")
    return folder


_LAUNCHING: dict[str, threading.Lock] = {}  # one launch of a loop at a time in this server (calls run in threads)


def _launch(project: Project, paths, verb: str, extra: list[str]) -> dict:
    with _LAUNCHING.setdefault(str(paths.folder), threading.Lock()):
        return _launch_one(project, paths, verb, extra)


def _launch_one(project: Project, paths, verb: str, extra: list[str]) -> dict:
    """Start the driver; return once IT holds the loop's lock and has written the loop's state (a status or a stop
    asked right after then finds it), or say why it ended."""
    from ..loop.state import driver_alive, driver_pid

    if driver_alive(paths):
        raise AgentError(f"loop {paths.name!r} is already running (follow it with loop_status)")
    paths.folder.mkdir(parents=True, exist_ok=True)
    log = paths.folder / "driver.log"
    # -P: the knowledge base's own folder is not searched first (a `tools/` package there would run instead)
    cmd = [sys.executable, "-P", "-m", "tools", "--root", str(project.root), "loop", verb, paths.name, "-q", *extra]
    try:  # appended to, never followed: a link or a FIFO planted at driver.log is refused
        fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK, 0o644)
    except OSError as e:
        raise AgentError(f"{log.relative_to(project.root)}: not written ({e.strerror})") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise AgentError(f"{log.relative_to(project.root)}: not a regular file; not written")
    with os.fdopen(fd, "ab") as out:
        out.write(f"\n== {time.strftime('%Y-%m-%dT%H:%M:%S')} {' '.join(cmd[3:])}\n".encode())
        out.flush()
        proc = subprocess.Popen(cmd, cwd=project.root, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True, env=dict(os.environ))
    end = time.monotonic() + DRIVER_WAIT_S
    while time.monotonic() < end:
        if driver_pid(paths) == proc.pid and paths.state.is_file():
            break
        if proc.poll() is not None:
            tail = safeio.read_bytes(log, 64 << 20).decode("utf-8", "replace").strip().splitlines()[-6:]
            if proc.returncode or not paths.state.is_file():
                raise AgentError(f"`tools loop {verb} {paths.name}` failed (exit {proc.returncode}"
                                 + ("" if proc.returncode else ", no loop state written") + "): " + " | ".join(tail))
            break  # it finished already (e.g. iterations=0 or a budget already spent)
        time.sleep(0.05)
    threading.Thread(target=proc.wait, daemon=True).start()  # reaped when it ends: no zombie for the server's life
    return {"name": paths.name, "pid": proc.pid, "command": cmd[3:], "log": str(log.relative_to(project.root))}


@op("loop.start", StartIn, LaunchOut, runs=True, destructive=True)  # fresh=true discards the state
def loop_start(project: Project, a: StartIn) -> dict:
    """Start the loop of loops/<name>.yml in the background; follow it with loop_status."""
    paths = _paths(project, a.name)
    if not paths.spec.is_file():
        raise AgentError(f"no loop file loops/{a.name}.yml")
    extra = (["--fresh"] if a.fresh else []) + ([f"--iterations={a.iterations}"] if a.iterations is not None else [])
    return _launch(project, paths, "start", extra)


@op("loop.resume", ResumeIn, LaunchOut, runs=True)
def loop_resume(project: Project, a: ResumeIn) -> dict:
    """Resume the loop from its state on disk (after a stop, a pause or a kill -9), in the background."""
    paths = _paths(project, a.name)
    _state(paths)
    return _launch(project, paths, "resume", [f"--iterations={a.iterations}"] if a.iterations is not None else [])


class FinalizeIn(BaseModel):
    name: str = Field(description="the loop's name: loops/<name>.yml")
    verify: bool = Field(True, description="measure each branch alone against the baseline's commit (runs the "
                                           "model: minutes)")
    patches: bool = Field(False, description="also write a format-patch series to loops/<name>/patches/")
    pr: bool = Field(False, description="push each branch and open draft pull requests with `gh`")
    remote: str = "origin"
    base: str = "main"


class FinalizeOut(BaseModel):
    loop: str
    kept: int
    branches: list[dict[str, Any]] = Field(description="branch, commit, exp_id, kind, stacked_on, note, verified")
    settings: list[dict[str, Any]] = Field(description="kept knob changes with no config_file to edit")
    combined: str | None = None
    not_holding: list[str] = Field([], description="branches whose gain does not hold alone")
    patches: list[str] = []
    prs: list[dict[str, Any]] = []


@op("loop.finalize", FinalizeIn, FinalizeOut, runs=True, destructive=True, open_world=True)
def finalize(project: Project, a: FinalizeIn) -> dict:
    """A loop's kept changes as reviewable branches perf/<name>/<n>-<change> and perf/<name>/all with PERF.md,
    each commit carrying its evidence; with verify, each branch measured alone (docs/finalize.md)."""
    from ..loop import state as st
    from ..loop.finalize import finalize as run

    name = _name(a.name, "name")
    if st.driver_alive(st.LoopPaths(project, name)):
        raise AgentError(f"loop {name} is running: stop it first")
    patches = _inside(project, project.root / "loops" / name / "patches") if a.patches else None
    out = run(project, name, patches, a.pr, a.remote, a.base, a.verify)
    return {k: v for k, v in out.items() if k != "perf_md"}


class ExportIn(BaseModel):
    exp_ids: list[str] = Field(description="runs made by hand (`tools exp run`), each measured against a baseline; "
                                           "in the order their branches are made (MODEL/LANE/EXP_ID where two "
                                           "lanes hold the same id)")
    name: str = Field(description="names the branches perf/<name>/<n>-<change> and exports/<name>/PERF.md")
    repo: str | None = Field(None, description="the model code's git repository, a folder of the knowledge base "
                                               "(default: the top of the first run's folder)")
    config_file: str | None = Field(None, description="launch script or YAML in the repository where changed "
                                                      "--flags are written")
    patches: bool = Field(False, description="also write a format-patch series to exports/<name>/patches/")
    pr: bool = Field(False, description="push each supported branch and open draft pull requests with `gh`")
    remote: str = "origin"
    base: str = "main"


class ExportOut(BaseModel):
    name: str
    repository: str
    start: str = Field(description="the first baseline's commit: where the branches start")
    branches: list[dict[str, Any]] = Field(description="branch, commit, exp_id, baseline, verdict, gain_pct, "
                                                       "stacked_on, note")
    settings: list[dict[str, Any]] = Field(description="changed flags with no config_file, and environments")
    not_supported: list[str] = Field(description="branches whose run was not supported: never offered as PRs")
    nothing: list[dict[str, Any]] = Field(default_factory=list, description="runs that left no code, flag or "
                                          "environment change to export (n, exp_id, why)")
    combined: str
    perf_md: str
    patches: list[str] = []
    prs: list[dict[str, Any]] = []


@op("exp.export", ExportIn, ExportOut, runs=True, destructive=True, open_world=True)
def export(project: Project, a: ExportIn) -> dict:
    """Runs made by hand as reviewable branches perf/<name>/<n>-<change> (each from its baseline's commit: the
    code, the changed flags written into config_file) and perf/<name>/all with PERF.md; commit messages carry each
    run's evidence (docs/finalize.md). ``runs``: it makes branches in, and with pr pushes from, a repository."""
    from ..experiments.export import export as run

    name = _name(a.name, "name")
    repo = project.root / a.repo if a.repo is not None else None
    patches = _inside(project, project.root / "exports" / name / "patches") if a.patches else None
    out = run(project, a.exp_ids, name, repo, a.config_file, patches, a.pr, a.remote, a.base, confine=project.root)
    return out
