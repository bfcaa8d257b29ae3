"""A loop's state on disk: ``loops/<name>/state.json``, rewritten atomically after every step, so that a kill at
any moment leaves the last completed step, and ``resume`` is reading it back.

``pending`` holds the iteration in flight and how far it got (``proposed`` → ``prepared`` → ``running`` →
``filed``); each later phase is idempotent given what the earlier one wrote.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import fcntl
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from .. import safeio
from ..errors import InputError, ToolsError
from ..project import Project
from ..writer import atomic_write


class LoopBusy(ToolsError):
    """Another process drives this loop."""


def now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


@dataclass(frozen=True)
class LoopPaths:
    project: Project
    name: str

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


def new_state(spec) -> dict:
    return {"name": spec.name, "model": spec.model, "lane": spec.lane, "variant": spec.variant,
            "status": "running", "stop_reason": None, "started": now(), "updated": now(), "iteration": 0,
            "trunk": None, "frontier": [], "history": [], "retrospectives": [],
            "usage": {"runs": 0, "wall_s": 0.0, "llm_tokens": 0, "cost_usd": 0.0, "device_s": 0.0},
            "pending": None}


def load(paths: LoopPaths) -> dict | None:
    try:
        text = safeio.read_text(paths.state, 256 * 1024 * 1024, within=paths.folder)
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
    return state


def save(paths: LoopPaths, state: dict) -> None:
    state["updated"] = now()
    atomic_write(paths.state, json.dumps(state, indent=1, sort_keys=True, default=str) + "\n")


@contextlib.contextmanager
def driving(paths: LoopPaths) -> Iterator[None]:
    """Only one process drives a loop at a time (a kill -9 releases the lock with the process)."""
    paths.folder.mkdir(parents=True, exist_ok=True)
    with open(paths.lock, "a+") as f:
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


def driver_alive(paths: LoopPaths) -> bool:
    if not paths.lock.exists():
        return False
    with open(paths.lock, "a+") as f:
        try:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(f.fileno(), fcntl.LOCK_UN)
        return False
