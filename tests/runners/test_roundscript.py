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


def _raw(script: str) -> str:
    """The job log as the runner reads it: bytes decoded, a lone "\\r" kept."""
    return subprocess.run(["sh", "-c", script], capture_output=True, check=False, timeout=60).stdout.decode()


ARM_TOKEN = ("import os\n"  # what an arm can learn of the round's token: its own stdout is the stamper's FIFO
             "tok = os.path.basename(os.readlink('/proc/self/fd/1')).split('-')[1]\n")


def test_a_stamp_the_program_prints_after_a_carriage_return_is_no_stamp():
    """A reviewer's: a timer at 0.35x printed each step line as `\\r@@T<token> <time> ...` with times of its own
    choosing; the log was cut at `\\r` too, and the clock check read its made-up times: `ok`."""
    lie = ARM_TOKEN + ("import json, time\nfor i in range(5):\n    time.sleep(0.05)\n"
                       "    print(f'\\r@@T{tok} 1.0 1.0 ' + json.dumps({'step': i, 'loss': 1.0}), flush=True)\n")
    (a,) = split(_raw(render([ArmPlan("a", [sys.executable, "-c", lie], None, {}, 30)], TOKEN)), TOKEN, 1).arms
    assert a.stamped and a.rc == 0 and a.text.count(f"\r@@T{TOKEN} 1.0 1.0 ") == 5, a.text
    assert len(a.clock) >= 2 and all(t >= 0 and asked >= -1 for t, _, asked in a.clock), a.clock


def test_step_lines_written_past_the_stamper_are_not_timed():
    """A reviewer's: an arm that wrote its step lines into the job log itself (its shell's stdout, found through
    /proc) left no stamp, and with no clock at all the check was `unchecked` and the gain trusted. The script says
    the arm was stamped: its clock is there, holding no step line."""
    from tools.experiments import clocks

    past = ("import json, os\npid = os.getpid()\nwhile 'ar-' in os.readlink(f'/proc/{pid}/fd/1'):\n"
            "    pid = int(open(f'/proc/{pid}/stat').read().rsplit(')', 1)[1].split()[1])\n"
            "with open(f'/proc/{pid}/fd/1', 'a') as log:\n    for i in range(5):\n"
            "        log.write(json.dumps({'step': i, 'loss': 1.0}) + '\\n')\n")
    (a,) = split(_raw(render([ArmPlan("a", [sys.executable, "-c", past], None, {}, 30)], TOKEN)), TOKEN, 1).arms
    assert a.stamped and '{"step": 4' in a.text and a.clock == [(0.0, 0, 0.0)], (a.text, a.clock)
    log = Path(os.environ.get("TMPDIR", "/tmp")) / f"past-{os.getpid()}.log"
    log.write_text(a.text)
    try:
        assert clocks.step_lines(log, a.clock) == []
    finally:
        log.unlink()


def test_output_with_no_newline_yet_reaches_the_log_as_it_is_printed():
    """A reviewer's: the stamper held a progress bar's `\\r`-only output until a newline came, and the remote
    runner, seeing no log progress, cancelled the arm as hung."""
    bar = "import sys, time\nsys.stdout.write('50%'); sys.stdout.flush(); time.sleep(3); print(' done')\n"
    p = subprocess.Popen(["sh", "-c", render([ArmPlan("a", [sys.executable, "-c", bar], None, {}, 30)], TOKEN)],
                         stdout=subprocess.PIPE)
    try:
        seen = b""
        while b"50%" not in seen:
            line = p.stdout.readline()
            assert line, seen
            seen += line
        assert b" done" not in seen and b"@@AR end" not in seen, seen  # before the rest of its line
        rest = p.communicate(timeout=60)[0]
    finally:
        p.kill()
    (a,) = split((seen + rest).decode(), TOKEN, 1).arms
    assert a.text == "50% done\n" and a.rc == 0, a.text


def test_a_log_read_through_a_terminal_splits_as_the_same_arms():
    """Read through a tty (a pod with `tty: true`, `ssh -t`), every line of the job log ends in \\r\\n: a step line
    the stamper read in two pieces came back as `{"step": 1, "lo\\rss": ...}`, no JSON, the step lost."""
    halves = ("import json, sys, time\nfor i in range(2):\n    line = json.dumps({'step': i, 'loss': 1.0})\n"
              "    sys.stdout.write(line[:12]); sys.stdout.flush(); time.sleep(0.2)\n"
              "    sys.stdout.write(line[12:] + '\\n'); sys.stdout.flush()\n")
    raw = _raw(render([ArmPlan("a", [sys.executable, "-c", halves], None, {}, 30)], TOKEN))
    (plain,) = split(raw, TOKEN, 1).arms
    (tty,) = split(raw.replace("\n", "\r\n"), TOKEN, 1).arms
    assert plain.text == tty.text == '{"step": 0, "loss": 1.0}\n{"step": 1, "loss": 1.0}\n', (plain.text, tty.text)
    assert tty.clock == plain.clock and len(plain.clock) >= 3


def test_a_character_split_between_two_reads_of_the_stamper_reaches_the_log_whole():
    """A character's bytes written in two pieces (a progress bar flushing mid-character) were read in two pieces
    and stamped apart: the log held two replacement characters where one character was."""
    split_char = ("import os, time\nb = 'caf\\u00e9 \\u2713 \\U0001f600'.encode()\n"
                  "for piece in (b[:4], b[4:7], b[7:10], b[10:13], b[13:]):\n"
                  "    os.write(1, piece); time.sleep(0.2)\nos.write(1, b'\\n')\n")
    script = render([ArmPlan("a", [sys.executable, "-c", split_char], None, {}, 30)], TOKEN)
    raw = subprocess.run(["sh", "-c", script], capture_output=True, check=False, timeout=60).stdout
    (a,) = split(raw.decode("utf-8", "replace"), TOKEN, 1).arms  # as the remote runner reads a job log
    assert a.stamped and a.text == "caf\u00e9 \u2713 \U0001f600\n", a.text
    assert len(a.clock) >= 3, a.clock  # still read as it came
