"""A loop's state on disk: ``loops/<name>/state.json``, rewritten atomically after every step, so that a kill at
any moment leaves the last completed step, and ``resume`` is reading it back.

``LoopState`` names every key the file holds. ``pending`` lists the iterations in flight and how far each got
(``proposed`` → ``running`` → ``filed``); each later phase is idempotent given what the earlier one wrote.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import fcntl
import json
import os
import re
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

from .. import safeio
from ..errors import InputError, ToolsError
from ..project import Project
from ..writer import atomic_write, open_lock_file


class LoopBusy(ToolsError):
    """Another process drives this loop."""


def now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


@dataclass(frozen=True)
class LoopPaths:
    """Where a loop's files live: ``loops/<name>.yml`` and ``loops/<name>/``, never outside ``loops/`` (a link
    planted at ``loops/<name>`` or at ``loops`` that leads out is refused before anything is read or written)."""

    project: Project
    name: str

    def __post_init__(self) -> None:
        top = self.project.root / "loops"
        real_top, root = os.path.realpath(top), os.path.realpath(self.project.root)
        if not _under(real_top, root, itself=True):
            raise InputError(top, "links outside the knowledge base; not followed")
        for p in (self.folder, self.spec):
            if not _under(os.path.realpath(p), real_top):
                raise InputError(p, "links outside the knowledge base's loops/; not followed")

    @property
    def folder(self) -> Path:
        return self.project.root / "loops" / self.name

    @property
    def spec(self) -> Path:
        return self.project.root / "loops" / f"{self.name}.yml"

    @property
    def state(self) -> Path:
        return self.folder / "state.json"

    @property
    def lock(self) -> Path:
        return self.folder / ".driver.lock"

    @property
    def stop_request(self) -> Path:
        return self.folder / "STOP"

    def iteration_dir(self, n: int) -> Path:
        """Artefacts of one iteration: the proposer's prompt and response, the priors it read."""
        return self.folder / "iterations" / f"{n:03d}"


def _under(real: str, top: str, itself: bool = False) -> bool:
    return (itself and real == top) or real.startswith(top.rstrip(os.sep) + os.sep)


def _usage() -> dict[str, float]:
    # interrupted_s: device time of runs cut off by a stop (run again on resume): spent, said, not a budget's
    return {"runs": 0, "wall_s": 0.0, "llm_tokens": 0, "cost_usd": 0.0, "device_s": 0.0, "interrupted_s": 0.0}


@dataclass
class LoopState:
    """``state.json``, key by key. ``trunk``, the frontier rows, history entries and pending iterations are plain
    records (their keys are written by ``learn``, ``runs`` and the engine)."""

    name: str
    model: str
    lane: str
    variant: str
    status: str = "running"                # running | stopped
    stop_reason: str | None = None
    started: str = ""                      # this run of the loop (a ``--fresh`` start is another)
    updated: str = ""
    iteration: int = 0                     # the last iteration learnt from
    trunk: dict | None = None              # the configuration every change is compared with
    start_commit: str | None = None        # the model code's commit at the baseline
    calibration: dict | None = None        # the A/A run: exp_id, pair_sd_pct, band_pct
    reference: dict | None = None          # the reference run (exp_id, page, tokens_per_s), its gap pages and the
    #                                        latest interleaved check of the trunk against it (``check``)
    frontier: list[dict] = field(default_factory=list)         # every trunk move, the baseline first
    history: list[dict] = field(default_factory=list)          # every run, kept or not
    retrospectives: list[dict] = field(default_factory=list)
    screens: list[dict] = field(default_factory=list)          # screen waves: trunk, arms and what each measured
    usage: dict[str, float] = field(default_factory=_usage)    # runs, wall_s, llm_tokens, cost_usd, device_s
    pending: list[dict] | None = None      # the iterations in flight
    proposer_failures: int = 0             # in a row
    proposer_waits: int = 0                # in a row: the endpoint could not answer (waited out)
    # a stop decided during an iteration, taken by the next stop gate
    plateau_stop: str | None = None
    budget_hit: str | None = None
    error_stop: str | None = None
    last_stop: dict | None = None          # the stop filed last (reason, iteration, runs): a resume files it once
    spec_source: str | None = None         # the loop file it was started from, when not loops/<name>.yml
    earlier: list[dict] = field(default_factory=list)  # the runs a `--fresh` start replaced: their pages stay linked

    def as_earlier(self) -> list[dict]:
        """This run, and the ones before it, as a fresh start's ``earlier``: when it ran, where it stopped, its
        best and the pages it filed (retrospectives, one observation per run), which stay in the wiki."""
        rows = lambda xs: [x for x in xs or [] if isinstance(x, dict)]  # noqa: E731 - a hand-edited state's odd rows
        moved = rows(self.frontier)[1:]  # a move beyond the baseline: nothing kept, no best to name
        return [*rows(self.earlier), {
            "started": self.started, "stop_reason": self.stop_reason, "model": self.model, "lane": self.lane,
            "experiments": len(rows(self.history)), "best": moved[-1].get("exp_id") if moved else None,
            "gain_pct": moved[-1].get("gain_pct") if moved else None,
            "retrospectives": [str(r["page"]) for r in rows(self.retrospectives) if r.get("page")],
            "observations": [str(h["exp_id"]) for h in rows(self.history) if h.get("exp_id")]}]

    @classmethod
    def new(cls, spec) -> LoopState:
        return cls(spec.name, spec.model, spec.lane, spec.variant, started=now(), updated=now())

    @classmethod
    def from_dict(cls, d: dict) -> LoopState:
        names = {f.name for f in fields(cls)}
        known = {k: v for k, v in d.items() if k in names}
        for k in ("name", "model", "lane", "variant"):
            known.setdefault(k, "")
        state = cls(**known)
        state.usage = {**_usage(), **(state.usage or {})}
        if isinstance(state.pending, dict):  # one iteration, as states before parallel loops held it
            state.pending = [state.pending]
        return state

    def to_dict(self) -> dict:
        return asdict(self)

    def pendings(self) -> list[dict]:
        return self.pending or []


def load(paths: LoopPaths) -> dict | None:
    try:
        text = safeio.read_text(paths.state, 256 * 1024 * 1024, within=paths.project.root / "loops")
    except FileNotFoundError:
        return None
    except safeio.Refused as e:
        raise InputError(paths.state, f"not read: {e}") from None
    try:
        state = json.loads(text)
    except ValueError as e:
        raise InputError(paths.state, f"not valid JSON ({e}); the loop's state cannot be read") from None
    if not isinstance(state, dict) or "history" not in state:
        raise InputError(paths.state, "not a loop state (no `history`)")
    for f in fields(LoopState):
        if f.name in ("name", "model", "lane", "variant") and not isinstance(state.get(f.name), str):
            raise InputError(paths.state, f"not a loop state: `{f.name}` is {state.get(f.name)!r}, not a name")
        kinds = _KINDS.get(f.name, ())
        if kinds and state.get(f.name) is not None and not isinstance(state[f.name], kinds):
            raise InputError(paths.state, f"not a loop state: `{f.name}` is a {type(state[f.name]).__name__}, "
                                          f"not a {' or '.join(k.__name__ for k in kinds)}")
    return state


_KINDS = {"trunk": (dict,), "calibration": (dict,), "reference": (dict,), "frontier": (list,), "history": (list,),
          "retrospectives": (list,), "screens": (list,), "usage": (dict,), "pending": (list, dict), "iteration": (int,),
          "proposer_failures": (int,), "proposer_waits": (int,), "status": (str,), "last_stop": (dict,),
          "spec_source": (str,), "earlier": (list,)}


def read(paths: LoopPaths) -> LoopState | None:
    d = load(paths)
    return None if d is None else LoopState.from_dict(d)


def save(paths: LoopPaths, state: LoopState) -> None:
    state.updated = now()
    atomic_write(paths.state, json.dumps(state.to_dict(), indent=1, sort_keys=True, default=str) + "\n")


def start_over(paths: LoopPaths) -> None:
    """``--fresh``: the old run's state and any stop asked of it go; its iteration folders (prompts, responses,
    errors) go to one side, so that iteration 1 of the new run holds only what the new run wrote."""
    paths.state.unlink(missing_ok=True)
    paths.stop_request.unlink(missing_ok=True)
    old = paths.folder / "iterations"
    if old.is_dir():
        stamp = _dt.datetime.now().strftime("%Y%m%dT%H%M%S")
        aside, n = paths.folder / f"iterations-before-{stamp}", 1
        while aside.exists():  # two fresh starts within a second
            n += 1
            aside = paths.folder / f"iterations-before-{stamp}~{n}"
        old.rename(aside)


@contextlib.contextmanager
def driving(paths: LoopPaths) -> Iterator[None]:
    """Only one process drives a loop at a time (a kill -9 releases the lock with the process)."""
    paths.folder.mkdir(parents=True, exist_ok=True)
    with open_lock_file(paths.lock) as f:
        try:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.seek(0)
            who = f.read().strip()
            raise LoopBusy(f"loop {paths.name} is already running ({who or 'another process'}); "
                           f"`tools loop stop {paths.name}` asks it to stop") from None
        f.seek(0)
        f.truncate()
        f.write(f"pid {os.getpid()} since {now()}\n")
        f.flush()
        try:
            yield
        finally:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)


def driver_pid(paths: LoopPaths) -> int | None:
    """The pid of the process driving the loop now (its lock file says it), None when none is."""
    if not driver_alive(paths):
        return None
    try:
        m = re.match(r"pid (\d+)", paths.lock.read_text(encoding="utf-8", errors="replace"))
    except OSError:
        return None
    return int(m.group(1)) if m else None


def driver_alive(paths: LoopPaths) -> bool:
    if not paths.lock.exists():
        return False
    with open_lock_file(paths.lock) as f:
        try:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(f.fileno(), fcntl.LOCK_UN)
        return False


def request_stop(project: Project, name: str) -> bool:
    """Ask a running loop to stop after its current iteration; True when a driver is running."""
    paths = LoopPaths(project, name)
    if load(paths) is None:
        raise InputError(paths.state, "no such loop state")
    atomic_write(paths.stop_request, now() + "\n")
    return driver_alive(paths)
