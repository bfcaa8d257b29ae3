"""Running one training command: its own process group, its log streamed to disk, a timeout, and a clean
stop (the whole group killed) on timeout, Ctrl-C or SIGTERM. Nothing here knows about pages."""

from __future__ import annotations

import contextlib
import functools
import os
import re
import selectors
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import Stop  # the runners import it from here too
from . import leftovers
from .leftovers import RUN_TOKEN


TAIL_LINES = 40
TAIL_LINE_CHARS = 400     # a longer log line is cut on the page (a 50 MB line must not become a 50 MB page)
TAIL_BYTES = 8_000        # the whole tail, at most
TAIL_SCAN_BYTES = 256_000  # the end of a log read for its tail (and searched for an out-of-memory message)
KILL_GRACE_S = 3.0
CLOCK_ENTRIES = 100_000   # chunks timed per run, at most (a chatty log keeps its first ones: the steps come early)
PR_SET_PDEATHSIG = 1  # linux/prctl.h




@dataclass
class Proc:
    rc: int | None
    timed_out: bool
    wall_s: float
    log: Path             # everything the command printed; ``experiments.arms`` reads its JSON result line
    tail: str
    stopped_by: str | None = None  # "Ctrl-C" or "SIGTERM" when the runner was told to stop
    hung_s: float | None = None    # killed after this many seconds without output (a stack was taken first)
    clock: list[tuple[float, int, float]] = field(default_factory=list)  # the runner's own clock per chunk of
    # output: (seconds since the start when it was read, bytes of the log by then, seconds when that read began: what
    # the next chunk holds was printed after it); ``experiments.clocks`` times step lines by it
    not_run: str | None = None     # a remote job that never ran the command (not started, not submitted): why
    stack: str = ""                # how a hung command's Python stack was taken (py-spy, faulthandler); "" none
    last_output_s: float | None = None  # seconds from the start to its last output (0: none); None: not watched
    lost: str | None = None        # a remote job lost mid-arm (failed, cancelled, vanished): the runner's reason


def _in_main_thread() -> bool:
    import threading
    return threading.current_thread() is threading.main_thread()


@contextlib.contextmanager
def stop_on_signals() -> Iterator[None]:
    """Inside the block SIGTERM raises ``Stop("SIGTERM")`` (Ctrl-C raises KeyboardInterrupt as usual).

    The stop is also noted for every run (``STOP_ALL``): Python runs a handler wherever the main thread is, and
    where that is a fork hook (``Popen`` with ``preexec_fn`` runs logging's), the raise is printed and dropped. A
    run's output pump then stops on the note instead, and the signal is never lost."""
    if not _in_main_thread():
        yield
        return

    def _raise(signum, frame):
        how = signal.Signals(signum).name
        stop_all_runs(how)
        raise Stop(how)

    prev = signal.signal(signal.SIGTERM, _raise)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, prev)
        STOP_ALL.clear()


@contextlib.contextmanager
def deferred_signals() -> Iterator[None]:
    """SIGINT and SIGTERM wait until the block is done (a filing is never cut in half), then act as before."""
    if not _in_main_thread():
        yield
        return
    pending: list[int] = []
    sigs = (signal.SIGINT, signal.SIGTERM)
    prev = {s: signal.signal(s, lambda signum, frame: pending.append(signum)) for s in sigs}
    try:
        yield
    finally:
        for s in sigs:
            signal.signal(s, prev[s])
        for s in dict.fromkeys(pending):
            signal.raise_signal(s)


def env_with(extra: dict[str, str]) -> dict[str, str]:
    env = dict(os.environ)
    env.update(extra)
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


@functools.cache
def _prctl():
    try:
        import ctypes
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


def _dies_with_runner():
    """Linux: a hook that makes the command get SIGKILL when the runner dies without cleaning up (SIGKILL,
    the out-of-memory killer), so a vanished runner leaves no training job behind. None elsewhere."""
    prctl = _prctl() if sys.platform.startswith("linux") else None
    if prctl is None:
        return None
    parent = os.getpid()

    def hook() -> None:  # runs in the child between fork and exec
        prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL))
        leftovers.make_subreaper(prctl)  # a double fork stays in its tree (leftovers.Tree)
        if os.getppid() != parent:  # the runner died before the hook ran
            os._exit(137)
    return hook


PYTHONS = re.compile(r"python(\d+(\.\d+)?)?")


def start_problem(cmd: list[str], cwd: Path | None, env: dict | None = None) -> str | None:
    """Why ``cmd`` cannot start in ``cwd`` (nothing is run to find out), or None. Checks the working folder, the
    program (a path, or a name on the command's PATH) and, for a Python interpreter, the script it is given."""
    if not cmd:
        return "no command to run"
    if cwd is not None and not Path(cwd).is_dir():
        return f"the working folder {cwd} does not exist"
    exe = cmd[0]
    path = (env or os.environ).get("PATH", os.environ.get("PATH", ""))
    if os.sep in exe:
        full = exe if os.path.isabs(exe) else os.path.join(cwd or os.getcwd(), exe)
        if not (os.path.isfile(full) and os.access(full, os.X_OK)):
            return f"{exe!r} is not an executable file" + (f" (in {cwd})" if cwd and not os.path.isabs(exe) else "")
    elif shutil.which(exe, path=path) is None:
        return f"no program {exe!r} on PATH"
    if PYTHONS.fullmatch(os.path.basename(exe)):
        script = _python_script(cmd[1:])
        if script and not Path(cwd or ".", script).is_file():
            return f"the script {script!r} is not in the working folder {cwd or os.getcwd()}"
    return None


def _python_script(args: list[str]) -> str | None:
    """The script a Python command line runs (None for ``-m``, ``-c``, ``-`` or no script)."""
    it = iter(args)
    for a in it:
        if a in ("-X", "-W", "--check-hash-based-pycs"):
            next(it, None)  # options that take the next argument
        elif a == "-" or (a.startswith("-") and not a.startswith("--") and ("m" in a[1:] or "c" in a[1:])):
            return None
        elif not a.startswith("-"):
            return a
    return None


def run_command(cmd: list[str], log: Path, env: dict, timeout: float, cwd: Path | None, echo: bool,
                hang_s: float | None = None) -> Proc:
    """Run ``cmd`` in a new session, streaming stdout+stderr into ``log`` (and to our stdout with ``echo``).

    Timeout, Ctrl-C (KeyboardInterrupt) and ``Stop`` (SIGTERM under ``stop_on_signals``) kill the command's
    whole process group and return what was logged; the interruption is reported in ``stopped_by``. With
    ``hang_s``, a command silent that long is hung: its Python stack goes into the log (``take_stack``), then the
    group is killed (``hung_s``)."""
    log.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    timed_out = False
    stopped_by = None
    token = f"{os.getpid()}-{time.time_ns()}-{threading.get_ident()}"
    env = dict(env, **{RUN_TOKEN: token})  # inherited by every process the command starts, whatever its session
    # a SIGABRT then prints every thread's stack (take_stack), and a segmentation fault where Python stood
    env.setdefault("PYTHONFAULTHANDLER", "1")
    hung, stack, last = None, "", [0.0]
    clock: list[tuple[float, int]] = []
    with open(log, "wb") as f:
        try:
            p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, cwd=cwd,
                                 start_new_session=True, preexec_fn=_dies_with_runner())  # noqa: PLW1509 (prctl only)
        except OSError as e:
            why = start_problem(cmd, cwd, env) or str(e)
            f.write(f"could not start {cmd[0]!r}: {why}\n".encode())
            return Proc(127, False, 0.0, log, f"could not start {cmd[0]!r}: {why}")
        tree = leftovers.Tree(p.pid)
        try:
            state = _pump(p, f, t0 + timeout, echo, hang_s, clock, t0, tree, last)
            timed_out = state == "timeout"
            if state == "hang":
                hung = hang_s
                f.write(f"\n[tools exp run] no output for {hang_s:g} s: the stack of the hung process\n".encode())
                f.flush()
                stack = take_stack(p, f)
        except KeyboardInterrupt:
            stopped_by = "Ctrl-C"
        except Stop as e:
            stopped_by = e.how
        if timed_out or stopped_by or hung:
            kill_group(p)
        # what it started in a session of its own (setsid, a daemon) ends with it, before the rest of the output is
        # read: such a process holds the pipe open, and the read would wait for it
        left = leftovers.kill(tree.left(token))
        with contextlib.suppress(ValueError, OSError):
            f.write(p.stdout.read() or b"")
        p.stdout.close()
        rc = p.wait()
        if timed_out:
            f.write(f"\n[tools exp run] killed after the {timeout:g} s timeout\n".encode())
        if stopped_by:
            f.write(f"\n[tools exp run] stopped by {stopped_by}: the command's process group was killed\n".encode())
        if left:
            f.write(f"\n[tools exp run] killed {left} process(es) the command left running in other sessions\n"
                    .encode())
    wall = time.perf_counter() - t0
    return Proc(rc, timed_out, wall, log, cap_tail(log_end(log)), stopped_by, hung, clock=clock, stack=stack,
                last_output_s=last[0])


def log_end(log: Path, size: int = TAIL_SCAN_BYTES) -> str:
    """The last ``size`` bytes of a log as text ("" when it cannot be read)."""
    try:
        with open(log, "rb") as f:
            f.seek(0, 2)
            f.seek(max(0, f.tell() - size))
            return f.read().decode("utf-8", errors="replace")
    except OSError:
        return ""


def cap_tail(text: str, lines: int = TAIL_LINES) -> str:
    """The last ``lines`` lines of a log, each cut to ``TAIL_LINE_CHARS`` and all of it to ``TAIL_BYTES``."""
    out: list[str] = []
    size = 0
    for line in reversed(text[-(lines + 1) * (TAIL_LINE_CHARS + 64) * 4:].splitlines()[-lines:]):
        if len(line) > TAIL_LINE_CHARS:
            line = f"{line[:TAIL_LINE_CHARS]} [... line cut at {TAIL_LINE_CHARS} characters]"
        size += len(line.encode()) + 1
        if size > TAIL_BYTES:
            out.append("[... earlier lines cut]")
            break
        out.append(line)
    return "\n".join(reversed(out))


# Worker threads get no signals: a driver that runs experiments in threads sets this to stop them all (each run then
# stops as on Ctrl-C: its process group killed, the run filed as a crash).
STOP_ALL = threading.Event()
STOP_ALL.how = "Ctrl-C"  # type: ignore[attr-defined]


def stop_all_runs(how: str) -> None:
    STOP_ALL.how = how  # type: ignore[attr-defined]
    STOP_ALL.set()


def _pump(p: subprocess.Popen, f, deadline: float, echo: bool, hang_s: float | None = None,
          clock: list | None = None, t0: float = 0.0, tree: leftovers.Tree | None = None,
          last: list | None = None) -> str | None:
    """Copy the child's output until it exits (None), the deadline passes ("timeout") or, with ``hang_s``, it has
    printed nothing for that long ("hang"). ``clock`` gets (seconds since ``t0``, log bytes) as each chunk arrives
    (its first ``CLOCK_ENTRIES``); ``last[0]``, the seconds since ``t0`` of the latest one; ``tree`` notes the
    child's processes as it goes."""
    os.set_blocking(p.stdout.fileno(), False)
    heard = time.perf_counter()
    with selectors.DefaultSelector() as sel:
        sel.register(p.stdout, selectors.EVENT_READ)
        while True:
            now = time.perf_counter()
            left = deadline - now
            if left <= 0:
                return "timeout"
            if hang_s and now - heard > hang_s:
                return "hang"
            for _ in sel.select(timeout=min(left, leftovers.WATCH_EVERY_S)):
                asked = time.perf_counter()
                chunk = p.stdout.read()
                if chunk:
                    heard = time.perf_counter()
                    if last is not None:
                        last[0] = heard - t0
                _copy(chunk, f, echo)
                if chunk and clock is not None and len(clock) < CLOCK_ENTRIES:
                    clock.append((round(heard - t0, 6), f.tell(), round(asked - t0, 6)))
            if STOP_ALL.is_set():
                raise Stop(STOP_ALL.how)  # type: ignore[attr-defined]
            if tree is not None:
                tree.watch()
            if p.poll() is not None:
                asked = time.perf_counter()
                chunk = p.stdout.read()
                _copy(chunk, f, echo)
                if chunk and clock is not None and len(clock) < CLOCK_ENTRIES:
                    clock.append((round(time.perf_counter() - t0, 6), f.tell(), round(asked - t0, 6)))
                return None


STACK_WAIT_S = 5.0
MAX_DUMPS = 4  # Python processes of a hung command's tree dumped by py-spy, the nearest its leader first
_SPY_FRAME = re.compile(rb"^\s+\S.*\(.+:\d+\)\s*$", re.M)  # py-spy's "    step (/w/train.py:200)"


def take_stack(p: subprocess.Popen, f, wait_s: float = STACK_WAIT_S) -> str:
    """The Python stack of a hung command, written into its log: ``py-spy dump`` of every Python process in its
    tree when py-spy is installed (a launcher, ``bash launch.sh`` starting ``python train.py``, is no Python process
    itself), else SIGABRT to its process group, which ``faulthandler`` (PYTHONFAULTHANDLER, set for every local
    run) answers with every thread's stack before each process dies. Returns how it was taken, "" when no stack
    was (nothing in the tree is Python, or nothing answered)."""
    spy = shutil.which("py-spy")
    pythons = _python_tree(p.pid)
    if spy and pythons:
        took = False
        for pid in pythons[:MAX_DUMPS]:  # data-loader workers by the dozen: the training script comes first
            try:
                out = subprocess.run([spy, "dump", "--full-filenames", "--pid", str(pid)], capture_output=True,
                                     timeout=wait_s * 3)
            except (OSError, subprocess.SubprocessError):
                continue
            f.write(out.stdout + out.stderr)
            f.flush()
            # a dump caught between Python frames (a thread in native code) names none: faulthandler, below, does
            took = took or out.returncode == 0 and bool(_SPY_FRAME.search(out.stdout))
        if took:
            return "py-spy"
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(p.pid, signal.SIGABRT)  # its own session: the launcher and every Python process it started
    # until every process holding the log's pipe has closed it: a launcher dies of SIGABRT at once, the Python
    # processes under it are still writing their dumps (waiting for the leader alone lost them)
    end = time.monotonic() + wait_s
    while time.monotonic() < end:
        try:
            chunk = p.stdout.read()
        except (BlockingIOError, ValueError, OSError):
            chunk = None
        if chunk == b"":
            break
        _copy(chunk, f, False)
        if chunk is None and p.poll() is not None and not _group_alive(p.pid):
            # nothing of the group left to write a dump: what holds the pipe now (a helper in a session of its own,
            # killed later with the leftovers) has no stack to give; one last read
            with contextlib.suppress(BlockingIOError, ValueError, OSError):
                _copy(p.stdout.read(), f, False)
            break
        time.sleep(0.05)
    return "faulthandler" if pythons else ""


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _python_tree(leader: int) -> list[int]:
    """The Python processes among ``leader`` and everything under it, nearest it first (the training script a
    launcher started, before the workers that script started)."""
    tree = leftovers.Tree(leader)
    tree.watch()
    out = []
    for pid in [leader, *tree.seen]:
        with contextlib.suppress(OSError):
            exe = os.path.basename(os.readlink(f"/proc/{pid}/exe"))
            if exe.startswith(("python", "pypy")):
                out.append(pid)
    return out


def _copy(chunk: bytes | None, f, echo: bool) -> None:
    if chunk:
        f.write(chunk)
        f.flush()  # the log on disk is current: a runner killed outright still leaves it
        if echo:
            sys.stdout.buffer.write(chunk)
            sys.stdout.flush()


def kill_group(p: subprocess.Popen) -> None:
    """SIGTERM the command's process group, SIGKILL it after a grace period, and SIGKILL any member
    left behind once the leader has gone (a data loader or compiler the script started)."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(p.pid, sig)
        except ProcessLookupError:
            return
        try:
            p.wait(timeout=KILL_GRACE_S)
            break
        except subprocess.TimeoutExpired:
            continue
    with contextlib.suppress(ProcessLookupError):
        os.killpg(p.pid, signal.SIGKILL)
