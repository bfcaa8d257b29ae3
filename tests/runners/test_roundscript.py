"""The round script under a real POSIX shell: markers, exit codes, per-arm timeouts, env, cwd, stopping."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from _runner_helpers import FAKE_TRAIN

from tools.runners.roundscript import ArmPlan, render, split

TOKEN = "0123456789ab"


def run_sh(script: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(["sh", "-c", script], capture_output=True, check=False, text=True, timeout=60, env=env)


def test_arms_run_in_order_with_their_exit_codes_env_and_cwd(tmp_path):
    (tmp_path / "work").mkdir()
    tricky = "it's \"$HOME\" `x` ; echo no"
    plans = [ArmPlan("a", [sys.executable, str(FAKE_TRAIN), "--steps", "3"], None, {}, 30),
             ArmPlan("b", ["sh", "-c", 'printf "%s|%s" "$V" "$(pwd)"; exit 4'], str(tmp_path / "work"),
                     {"V": tricky}, 30)]
    r = run_sh(render(plans, TOKEN))
    assert r.returncode == 0, r.stderr
    out = split(r.stdout, TOKEN, 2)
    assert out.done and not out.stopped and out.worker
    a, b = out.arms
    assert (a.rc, b.rc) == (0, 4)
    assert '"step_times_s"' in a.text and "fake training" in a.text
    assert b.text == f"{tricky}|{tmp_path / 'work'}\n"  # output without a final newline still ends cleanly
    assert r.stdout.index("fake training") < r.stdout.index(tricky)


def test_a_log_that_echoes_the_script_holds_no_false_markers():
    script = render([ArmPlan("a", ["echo", "hi"], None, {}, 5)], TOKEN)
    r = run_sh(script)
    echoed = split(f"Running entrypoint for job x: {script}\n{r.stdout}", TOKEN, 1)
    assert echoed.arms[0].text == "hi\n" and echoed.done
    assert not split(script, TOKEN, 1).arms[0].begun


def test_an_arm_past_its_timeout_is_killed_and_the_round_goes_on():
    plans = [ArmPlan("slow", [sys.executable, str(FAKE_TRAIN), "--hang"], None, {}, 1),
             ArmPlan("next", ["echo", "after"], None, {}, 5)]
    out = split(run_sh(render(plans, TOKEN)).stdout, TOKEN, 2)
    assert out.arms[0].rc == 124 and 0.9 <= out.arms[0].seconds < 30
    assert out.arms[1].rc == 0 and out.arms[1].text == "after\n" and out.done


def test_without_timeout_the_shell_watchdog_stops_the_arm(tmp_path):
    bin_dir = tmp_path / "bin"  # a PATH with what the script needs, and no `timeout`
    bin_dir.mkdir()
    for tool in ("sh", "date", "uname", "sleep"):
        os.symlink(shutil.which(tool), bin_dir / tool)
    plans = [ArmPlan("slow", [sys.executable, str(FAKE_TRAIN), "--hang"], None, {}, 1)]
    r = run_sh(render(plans, TOKEN), env={"PATH": str(bin_dir)})
    out = split(r.stdout, TOKEN, 1)
    assert out.done, r.stdout + r.stderr
    assert out.arms[0].rc == 128 + signal.SIGTERM and out.arms[0].seconds >= 1


def test_sigterm_to_the_script_stops_the_arm_and_its_processes(tmp_path):
    script = render([ArmPlan("hang", [sys.executable, str(FAKE_TRAIN), "--hang", "--spawn-child"], None, {}, 300),
                     ArmPlan("never", ["echo", "no"], None, {}, 5)], TOKEN)
    log = tmp_path / "job.log"
    with open(log, "w") as f:
        p = subprocess.Popen(["sh", "-c", script], stdout=f, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + 30
    while "helper pid" not in log.read_text() and time.monotonic() < deadline:
        time.sleep(0.05)
    text = log.read_text()
    pids = [int(line.split()[-1]) for line in text.splitlines() if "pid" in line and "AR" not in line]
    assert len(pids) == 2, text
    p.send_signal(signal.SIGTERM)  # the script only, as Kubernetes or a scheduler would
    assert p.wait(timeout=30) == 143
    out = split(log.read_text(), TOKEN, 2)
    assert out.stopped and not out.done and out.arms[0].begun and not out.arms[0].ended
    assert not out.arms[1].begun
    deadline = time.monotonic() + 15
    while any(_alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(_alive(pid) for pid in pids), "the arm's processes outlived the stopped round"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return not stat.exists() or stat.read_text().split(")")[-1].split()[0] != "Z"
