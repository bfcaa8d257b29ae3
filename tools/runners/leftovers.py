"""What a command leaves running when it ends, found and killed: its processes in other sessions, whatever they did
to their environment.

A training command may start helpers that outlive it (a data server, a profiler, ``setsid env -i daemon &``). Left
running, they take CPU and memory from every later run, which then measures their interference. Three nets:

- the run's token in the environment (``RUN_TOKEN``), inherited through any session change;
- the command's session: a process still in the session its leader opened is the command's;
- the command's process tree, watched while it runs (``Tree``): the leader is made a child subreaper (Linux
  ``PR_SET_CHILD_SUBREAPER``), so a double fork reparents to it and stays in the tree. What the tree held is
  remembered with each process's start time, so a pid reused after the run is never taken for one of them.

Linux ``/proc`` only; elsewhere nothing is found.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time

RUN_TOKEN = "AUTORESEARCH_RUN_TOKEN"
PR_SET_CHILD_SUBREAPER = 36  # linux/prctl.h
WATCH_EVERY_S = 0.25
MAX_WATCH_EVERY_S = 2.0  # however slow /proc is to read, a process living longer than this is seen


def _stat(pid: int | str) -> tuple[int, int, int] | None:
    """(parent pid, session id, start time in clock ticks) of a live process, or None."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read()
    except OSError:
        return None
    rest = raw.rpartition(b")")[2].split()  # the command name in parentheses may hold spaces and ")"
    if len(rest) < 20 or rest[0] == b"Z":  # a zombie has already ended
        return None
    return int(rest[1]), int(rest[3]), int(rest[19])


def _table() -> dict[int, tuple[int, int, int]]:
    out = {}
    with contextlib.suppress(OSError):
        for name in os.listdir("/proc"):
            if name.isdigit():
                st = _stat(name)
                if st is not None:
                    out[int(name)] = st
    return out


class Tree:
    """The processes under one leader, gathered each time ``watch`` is called (at most every ``WATCH_EVERY_S``,
    less often where reading ``/proc`` is slow)."""

    def __init__(self, leader: int):
        self.leader = leader
        self.seen: dict[int, int] = {}  # pid -> start time
        self._last, self._every = 0.0, WATCH_EVERY_S

    def watch(self) -> None:
        now = time.monotonic()
        if now - self._last < self._every:
            return
        self._last = now
        cpu = time.thread_time()
        table = _table()
        # a host of thousands of processes is read less often: the watch takes at most ~2 % of one core. Its CPU
        # time, not its wall time: on a busy host the wall time is mostly waiting for a core, and a read every
        # 0.6 s missed short-lived helpers that left the command's session
        self._every = min(MAX_WATCH_EVERY_S, max(WATCH_EVERY_S, 50 * (time.thread_time() - cpu)))
        kids: dict[int, list[int]] = {}
        for pid, (ppid, _, _) in table.items():
            kids.setdefault(ppid, []).append(pid)
        todo = list(kids.get(self.leader, ()))
        while todo:
            pid = todo.pop()
            if pid not in self.seen:
                self.seen[pid] = table[pid][2]
            todo.extend(kids.get(pid, ()))

    def left(self, token: str) -> list[int]:
        """Live processes that are the command's: in its tree while it ran, in its session, or carrying its token.
        Called right after the leader ended: the kernel keeps a session's id from being reused as a new process's
        while any member of that session lives, so a process in it is the command's."""
        needle = f"{RUN_TOKEN}={token}".encode()
        out = []
        for pid, (_, sid, start) in _table().items():
            if pid in (os.getpid(), self.leader):
                continue
            if self.seen.get(pid) == start or sid == self.leader or _carries(pid, needle):
                out.append(pid)
        return out


def _carries(pid: int, needle: bytes) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return needle in f.read().split(b"\0")
    except OSError:  # gone, or another user's
        return False


def kill(pids: list[int]) -> int:
    """SIGKILL each; returns how many there were."""
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    return len(pids)


def make_subreaper(prctl) -> None:
    """In the command's process, before exec (the setting survives exec): orphans of its descendants become its
    children instead of init's, so they stay in its tree."""
    prctl(PR_SET_CHILD_SUBREAPER, 1)
