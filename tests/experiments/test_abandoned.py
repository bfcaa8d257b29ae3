"""Nothing is lost: a runner killed outright is noticed and filed as a crash by the next run or list; a runner
that is alive is never touched; SIGTERM stops the command's whole process group and files a crash."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest
from _exp_helpers import PY, fake
from click.testing import CliRunner

from tools import pages
from tools.cli import cli
from tools.experiments import abandoned, ledger, records


def start(project, *args, command):
    env = dict(os.environ, AUTORESEARCH_ROOT=str(project.root))
    return subprocess.Popen([PY, "-m", "tools", "exp", "run", "--model", "m", "--lane", "l", "--variant", "s/tpu",
                             "-q", *args, "--", *command], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            # a suite started in the background (`pytest &`) ignores SIGINT, and children inherit
                            # that: restore the default so the Ctrl-C test sends a signal the runner can see
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def lane(project):
    return records.lane_records(project.wiki, "m", "l")


def rows(project):
    return ledger.read((project.wiki / "experiments/m/l/RESULTS.tsv").read_text())


def wait_for_log(project, pattern: str, runner: subprocess.Popen, timeout: float = 30) -> re.Match:
    """Wait until the running experiment's log shows ``pattern`` (the command has really started)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        assert runner.poll() is None, runner.stdout.read().decode()
        for log in (project.root / "raw" / "profiles").glob("*/run.log"):
            m = re.search(pattern, log.read_text())
            if m:
                return m
        time.sleep(0.05)
    raise AssertionError(f"no {pattern!r} in the log after {timeout} s")


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat").read_text() if Path(f"/proc/{pid}/stat").exists() else ""
    return " Z " not in stat  # a zombie waiting for its parent is gone too


def gone(pid: int, timeout: float = 10) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if not alive(pid):
            return True
        time.sleep(0.05)
    return False


def run_cli(project, *argv):
    res = CliRunner().invoke(cli, ["--root", str(project.root), *argv])
    assert res.exit_code == 0, res.output + repr(res.exception)
    return res.output


def test_sigkilled_runner_is_filed_as_crash_by_the_next_run(project):
    runner = start(project, "-m", "doomed", command=fake("--hang"))
    child = int(wait_for_log(project, r"starting, pid (\d+)", runner).group(1))
    (r,) = lane(project)
    assert r["status"] == "in_progress" and r["runner"]["pid"] == runner.pid
    assert r["runner"]["host"] == socket.gethostname()
    runner.send_signal(signal.SIGKILL)
    runner.wait(timeout=10)
    assert gone(child), "the command outlived its runner"
    assert lane(project)[0]["status"] == "in_progress"  # nothing noticed yet

    run_cli(project, "exp", "run", "--model", "m", "--lane", "l", "--variant", "s/tpu", "-q", "-m", "next",
            "--", *fake())
    doomed, nxt = lane(project)
    assert (doomed["version"], nxt["version"]) == (1, 2)
    assert doomed["status"] == "filed" and doomed["verdict"] == "crash" and doomed["ledger_status"] == "crash"
    assert f"runner process {runner.pid} disappeared" in doomed["reasons"][0]
    meta, body = pages.split((project.wiki / doomed["page"]).read_text())
    assert "fake training: starting" in body  # the log tail
    assert [p for p in pages.validate(doomed["page"], meta, body) if p.severity == "error"] == []
    assert [(x["exp_id"], x["status"]) for x in rows(project)] == [(doomed["exp_id"], "crash"),
                                                                    (nxt["exp_id"], "keep")]
    assert nxt["role"] == "baseline"  # a crash is never the baseline
    assert "exp abandoned | m/l" in (project.wiki / "log.md").read_text()
    assert "| 1 |" in (project.wiki / "models/m-l.md").read_text().split("crashes |")[1].split("\n")[2]


def test_live_runner_is_untouched_then_sigterm_files_a_crash(project):
    slow = start(project, "-m", "slow", command=fake("--hang", "--spawn-child"))
    helper = int(wait_for_log(project, r"helper pid (\d+)", slow).group(1))
    # a concurrent run and a list while the slow one is alive: its page stays in_progress
    run_cli(project, "exp", "run", "--model", "m", "--lane", "l", "--variant", "s/tpu", "-q", "-m", "quick",
            "--", *fake())
    assert "in_progress" in run_cli(project, "exp", "list")
    assert [r["status"] for r in lane(project)] == ["in_progress", "filed"]

    slow.send_signal(signal.SIGTERM)
    out = slow.communicate(timeout=30)[0].decode()
    assert slow.returncode == 143, out
    assert gone(helper), "a member of the command's process group survived SIGTERM"
    r = lane(project)[0]
    assert r["status"] == "filed" and r["verdict"] == "crash", out
    body = (project.wiki / r["page"]).read_text()
    assert "stopped by SIGTERM" in body and "process group was killed" in body
    assert sorted(x["exp_id"] for x in rows(project)) == sorted(x["exp_id"] for x in lane(project))


def test_list_files_abandoned_runs(project):
    runner = start(project, "-m", "doomed", command=fake("--hang"))
    wait_for_log(project, r"starting", runner)
    runner.send_signal(signal.SIGKILL)
    runner.wait(timeout=10)
    out = CliRunner().invoke(cli, ["--root", str(project.root), "exp", "list"]).output
    assert "as crash" in out and "filed" in out
    (r,) = lane(project)
    assert r["verdict"] == "crash" and len(rows(project)) == 1
    run_cli(project, "exp", "list")  # a second sweep files nothing twice
    assert len(rows(project)) == 1


def dead_pid() -> int:
    p = subprocess.Popen([PY, "-c", "pass"])
    p.wait()
    return p.pid


@pytest.mark.parametrize("runner, mtime_age, abandoned_", [
    ({"pid": os.getpid(), "host": socket.gethostname(), "deadline_unix": 1}, 0, False),  # alive: never, even late
    ("dead", 0, True),
    ({"pid": os.getpid(), "host": socket.gethostname(), "start_ticks": 1}, 0, True),  # pid reused by another process
    ({"pid": 1, "host": "elsewhere", "deadline_in": 3600}, 0, False),  # other host, in time
    ({"pid": 1, "host": "elsewhere", "deadline_in": -60}, 0, True),  # other host, past deadline
    (None, 3600, False),  # written before runners were recorded: a day's grace
    (None, 2 * abandoned.LEGACY_DEADLINE_S, True),
])
def test_why_abandoned(runner, mtime_age, abandoned_):
    if runner == "dead":
        runner = {"pid": dead_pid(), "host": socket.gethostname()}
    if runner and "deadline_in" in runner:  # relative to when the test runs, not to when it was collected
        runner = {k: v for k, v in runner.items() if k != "deadline_in"} | {
            "deadline_unix": int(time.time()) + runner["deadline_in"]}
    meta = {"status": "in_progress", **({"runner": runner} if runner else {})}
    note = abandoned.why_abandoned(meta, time.time() - mtime_age)
    assert (note is not None) == abandoned_, note


def test_stamp_describes_this_process():
    s = abandoned.stamp(100)
    assert s["pid"] == os.getpid() and s["deadline_unix"] - s["started_unix"] == 100 + abandoned.GRACE_S
    assert abandoned.why_abandoned({"runner": s}, time.time()) is None


def test_ctrl_c_files_a_crash_and_exits_130(project):
    runner = start(project, "-m", "interrupted", command=fake("--hang"))
    child = int(wait_for_log(project, r"starting, pid (\d+)", runner).group(1))
    runner.send_signal(signal.SIGINT)
    out = runner.communicate(timeout=30)[0].decode()
    assert runner.returncode == 130, out
    assert gone(child)
    (r,) = lane(project)
    assert r["verdict"] == "crash" and "stopped by Ctrl-C" in (project.wiki / r["page"]).read_text()
    assert [x["status"] for x in rows(project)] == ["crash"]
