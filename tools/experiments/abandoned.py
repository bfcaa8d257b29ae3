"""Runs whose runner vanished (SIGKILL, out-of-memory killer, reboot) are filed as ``crash``, never left
``in_progress`` forever.

The in_progress page records who runs it (``runner``: pid, host, boot id, the process's start time, a deadline).
A page is abandoned when, on the same host, that process is gone (or the machine rebooted since); a page from
another host, or one without a runner record, is abandoned only past its deadline. A runner that is still alive
on this host is never touched, however old its page.
"""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path

from .. import pages
from ..errors import InputError
from ..writer import Writer
from ..runners import process as command
from . import filing, report
from .context import RunContext

LEGACY_DEADLINE_S = 24 * 3600   # pages written before runners were recorded: abandoned a day after their last write
GRACE_S = 600                   # deadline slack beyond the commands' own timeouts (locks, profile summary)


def _boot_id() -> str:
    return filing.read_text(Path("/proc/sys/kernel/random/boot_id")).strip()


def _start_ticks(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (Linux), to tell a reused pid from ours."""
    stat = filing.read_text(Path(f"/proc/{pid}/stat"))
    try:
        return int(stat.rsplit(")", 1)[1].split()[19])
    except (IndexError, ValueError):
        return None


def stamp(budget_s: float, timeout_s: float | None = None) -> dict:
    """The ``runner`` record of this process, for an in_progress page that may take ``budget_s`` seconds
    (``timeout_s``: the per-command timeout, for the page of a run filed by someone else)."""
    now = int(time.time())
    r = {"pid": os.getpid(), "timeout_s": timeout_s, "host": socket.gethostname(), "boot_id": _boot_id() or None,
         "start_ticks": _start_ticks(os.getpid()), "started_unix": now, "deadline_unix": now + int(budget_s + GRACE_S)}
    return {k: v for k, v in r.items() if v is not None}


def _alive(pid: int, start_ticks: int | None) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # someone else's process: it exists
    if start_ticks is None:
        return True
    now_ticks = _start_ticks(pid)
    return now_ticks is None or now_ticks == start_ticks


def why_abandoned(meta: dict, page_mtime: float, now: float | None = None) -> str | None:
    """Why an in_progress page's runner is gone, or None while it may still be running."""
    now = time.time() if now is None else now
    r = meta.get("runner") if isinstance(meta.get("runner"), dict) else {}
    pid, host = r.get("pid"), r.get("host")
    if isinstance(pid, int) and host == socket.gethostname():
        if r.get("boot_id") and _boot_id() and r["boot_id"] != _boot_id():
            return f"runner process {pid} disappeared: {host} rebooted since the run started"
        if _alive(pid, r.get("start_ticks")):
            return None
        return f"runner process {pid} disappeared: killed outright (SIGKILL, the out-of-memory killer)"
    deadline = r.get("deadline_unix") or (page_mtime + LEGACY_DEADLINE_S)
    if now <= deadline:
        return None
    who = f"runner process {pid} on {host}" if pid else "its runner (not recorded)"
    return f"{who} did not file the run by its deadline ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime(deadline))})"


def _log_tail(raw_dir: Path) -> str:
    logs = sorted(raw_dir.glob("*.log"), key=lambda p: p.stat().st_mtime) if raw_dir.is_dir() else []
    if not logs:
        return ""
    with open(logs[-1], "rb") as f:  # the end of the log only: it may be huge
        f.seek(0, 2)
        f.seek(max(0, f.tell() - 4 * command.TAIL_BYTES * 8))
        text = f.read().decode("utf-8", errors="replace")
    return f"({logs[-1].name})\n" + command.cap_tail(text)


def _page_text(p: Path) -> str:
    """A lane page's text; "" for one that is not a file to read (a FIFO, a link out: reading the lane skips it)."""
    try:
        return filing.read_text(p)
    except InputError:
        return ""


def sweep_lane(w: Writer, lane: filing.Lane) -> list[str]:
    """File the lane's abandoned in_progress pages as crashes; returns their exp_ids. Hold the lane lock."""
    filed = []
    for p in sorted(lane.dir.glob("*.md")):
        text = _page_text(p)
        if "in_progress" not in text:  # cheap: most pages are filed
            continue
        try:
            meta, _ = pages.split(text)
        except pages.FrontmatterError:
            continue  # not ours to judge: reading the lane names the file and the problem
        if not meta or meta.get("type") != "experiment" or meta.get("status") != "in_progress":
            continue
        note = why_abandoned(meta, p.stat().st_mtime)
        if note:
            _file_crash(w, lane, dict(meta), note)
            filed.append(str(meta.get("exp_id")))
    return filed


def sweep(w: Writer, project) -> list[str]:
    """Every lane of the wiki: ``sweep_lane`` under each lane's lock, for lanes that hold an in_progress page."""
    filed = []
    for lane_dir in sorted({p.parent for p in (project.wiki / "experiments").glob("*/*/*.md")}):
        if any("in_progress" in _page_text(p) for p in lane_dir.glob("*.md")):
            lane = filing.Lane(project, lane_dir.parent.name, lane_dir.name)
            with lane.locked():
                filed += sweep_lane(w, lane)
    return filed


def _file_crash(w: Writer, lane: filing.Lane, rec: dict, note: str) -> None:
    raw_dir = lane.project.root / str(rec.get("raw_dir") or "")
    tail = _log_tail(raw_dir) if rec.get("raw_dir") else ""
    rec.update({"status": "filed", "verdict": "crash", "ledger_status": "crash", "role": "variant", "metrics": {},
                "reasons": [note, "filed by a later `tools exp run` / `tools exp list`: the runner never came back"]})
    ctx = RunContext(command_line=rec.get("command", ""), crash_reason=note,
                     timeout=(rec.get("runner") or {}).get("timeout_s"),
                     log_tail=tail or "(no log was written before the runner disappeared)")
    filing.file_record(w, lane, rec, ctx)
    w.append_log("exp abandoned", f"{lane.model}/{lane.lane} {rec.get('exp_id')}",
                 [note, f"page {report.experiment_path(lane.model, lane.lane, str(rec.get('exp_id')))}"])
