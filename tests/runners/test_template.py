"""The template runner (Slurm defaults) against stub sbatch/squeue/scancel on PATH that really run the job."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from _runner_helpers import calls, fake_arm, in_private_namespace, pair

import tools.runners
from tools.errors import ToolsError
from tools.experiments import crash_facts
from tools.experiments.arms import crash_reason, result_of
from tools.runners import Arm
from tools.runners.template import TemplateRunner

FAST = {"poll_s": 0.1}


def test_a_round_runs_as_one_job_and_each_arm_gets_its_log_and_result(fake_state, tmp_path):
    raw = tmp_path / "raw" / "exp-v001"
    procs = tools.runners.get("template", FAST).run_round(pair(raw))
    assert [p.rc for p in procs] == [0, 0]
    assert [result_of(p)["config"]["step_ms"] for p in procs] == [20.0, 10.0]  # baseline first, then the variant
    assert [p.log.name for p in procs] == ["baseline-1.log", "run-1.log"]
    assert not any(p.timed_out or p.stopped_by for p in procs)
    assert "step_ms\": 20.0" in (raw / "baseline-1.log").read_text()
    assert "step_ms\": 10.0" not in (raw / "baseline-1.log").read_text()
    subs = [c for c in calls(fake_state) if c.startswith("sbatch")]
    assert len(subs) == 1 and subs[0].startswith("sbatch --parsable ")  # ONE job for the round
    script = Path(subs[0].split()[-1]).read_text()
    assert "#SBATCH --output=" in script and "#SBATCH --job-name=ar-" in script
    notes = [json.loads(p.read_text()) for p in (raw / "remote").glob("*.json")]
    assert [(n["state"], n["job"], n["arms"]) for n in notes] == [("completed", "1000", ["baseline-1", "run-1"])]


def test_an_arm_past_its_timeout_is_reported_and_the_next_arm_still_runs(fake_state, tmp_path):
    raw = tmp_path / "raw"
    arms = [fake_arm(raw, "baseline-1", "--hang", timeout=1), fake_arm(raw, "run-1")]
    slow, ok = TemplateRunner(**FAST).run_round(arms)
    assert slow.timed_out and slow.rc == 124 and result_of(slow) is None
    assert "killed after the 1 s timeout" in slow.tail
    assert ok.rc == 0 and result_of(ok) is not None


def test_a_job_that_dies_mid_round_is_a_crash_with_a_reason(fake_state, tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_CRASH_ON", r"@@AR end \w+ 0 ")  # the node dies once the first arm has ended
    raw = tmp_path / "raw"
    slow = Arm("run-1", ["sh", "-c", f"sleep 5; exec {shlex.join(fake_arm(raw, 'x').command)}"], raw / "run-1.log")
    first, second = TemplateRunner(**FAST).run_round([fake_arm(raw, "baseline-1"), slow])
    assert first.rc == 0 and result_of(first) is not None  # what finished before the crash is kept
    assert second.rc is None and result_of(second) is None
    assert "before the round finished" in second.tail and "template job 1000 ended (gone" in second.tail
    reason = crash_reason(second, 60)  # the runner's reason, not "no exit code": the cluster lost it
    assert reason.startswith("lost by the runner: template job 1000 ended (gone"), reason
    assert crash_facts.analyze(second.tail, reason, None).kind == "lost"


def test_a_refused_submission_gives_every_arm_the_reason(fake_state, tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_SUBMIT_FAIL", "1")
    procs = TemplateRunner(**FAST).run_round(pair(tmp_path / "raw"))
    assert [p.rc for p in procs] == [None, None]
    assert "Invalid partition name" in procs[0].tail and "never ran" in procs[1].tail
    assert "not submitted" in (tmp_path / "raw" / "run-1.log").read_text()


def test_no_log_progress_cancels_the_job(fake_state, tmp_path):
    """A hung job was filed "timed out after 1800 s" (the arm's timeout), with a timeout's advice; and a loop
    file's `hang_s` (the arm's) was ignored for the runner's own."""
    raw = tmp_path / "raw"
    (hung,) = TemplateRunner(hang_s=600, **FAST).run_round([fake_arm(raw, "run-1", "--hang", hang_s=1)])
    assert hung.hung_s == 1 and not hung.timed_out and hung.rc is None
    assert crash_reason(hung, 60).startswith("hung: no output for 1 s")
    assert "made no log progress for 1 s: cancelled" in hung.tail
    assert "scancel 1000" in calls(fake_state)
    _assert_gone(_pids(raw / "run-1.log"))


def test_a_job_that_never_starts_is_cancelled_after_pending_s(fake_state, tmp_path, monkeypatch):
    """A job the queue never started was filed as the configuration's timeout."""
    monkeypatch.setenv("FAKE_PENDING", "1")
    procs = TemplateRunner(pending_s=0.5, **FAST).run_round(pair(tmp_path / "raw"))
    assert not procs[0].timed_out and "did not start within 0.5 s (PENDING)" in procs[0].tail
    reason = crash_reason(procs[0], 60)
    assert reason.startswith("not run: ") and "did not start" in reason
    assert crash_facts.kind_of(reason, "", "", "") == "not_run"
    assert "never ran" in procs[1].tail and "scancel 1000" in calls(fake_state)


def test_a_log_that_is_not_utf8_is_read_not_lost(fake_state, tmp_path):
    """One byte that is not UTF-8 in a job's output made the round a crash, its output gone: `cat` of the log
    (the default `logs` template) could not be decoded."""
    raw = tmp_path / "raw"
    arm = fake_arm(raw, "run-1")
    arm.command = ["sh", "-c", 'printf "caf\\351\\n"; exec "$0" "$@"', *arm.command]
    (p,) = TemplateRunner(**FAST).run_round([arm])
    assert p.rc == 0 and result_of(p) is not None, p.tail
    assert "caf\ufffd" in (raw / "run-1.log").read_text()


def test_what_an_arm_leaves_running_is_stopped_before_the_next_arm(fake_state, tmp_path):
    """A baseline arm's `helper &` went on running through the variant's timed arm, and printed into its log."""
    raw = tmp_path / "raw"
    base = fake_arm(raw, "baseline-1")
    pid_file = tmp_path / "helper.pid"
    base.command = ["sh", "-c", f'(while :; do echo leftover-helper; sleep 0.1; done) & echo $! > {pid_file}; '
                                'exec "$0" "$@"', *base.command]
    first, second = TemplateRunner(**FAST).run_round([base, fake_arm(raw, "run-1", "--step-ms", "300")])
    assert first.rc == 0 and second.rc == 0 and result_of(second) is not None
    assert "leftover-helper" not in (raw / "run-1.log").read_text()
    assert "stopped the processes the arm left running" in (raw / "baseline-1.log").read_text()
    _assert_gone([int(pid_file.read_text())])


DRIVER = """
import json, sys
sys.path.insert(0, {helpers!r})
from pathlib import Path
from _runner_helpers import fake_arm
from tools.runners.template import TemplateRunner
raw = Path({raw!r})
procs = TemplateRunner(poll_s=0.1).run_round([fake_arm(raw, "run-1", "--hang"), fake_arm(raw, "run-2")])
print(json.dumps([[p.rc, p.stopped_by, p.tail] for p in procs]))
"""


def test_sigterm_to_the_runner_cancels_the_remote_job(fake_state, tmp_path):
    raw = tmp_path / "raw"
    code = DRIVER.format(helpers=str(Path(__file__).parent), raw=str(raw))
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                         cwd=Path(__file__).parents[2])
    log = raw / "run-1.log"
    deadline = time.monotonic() + 30
    while not (log.exists() and "fake training" in log.read_text()) and time.monotonic() < deadline:
        time.sleep(0.05)
    p.send_signal(signal.SIGTERM)
    out, _ = p.communicate(timeout=60)
    assert p.returncode == 0, out
    procs = json.loads(out)
    assert len(procs) == 1  # like the local runner: nothing after the stopped arm
    rc, stopped_by, tail = procs[0]
    assert stopped_by == "SIGTERM" and rc is None and "cancelled" in tail
    assert "scancel 1000" in calls(fake_state)
    _assert_gone(_pids(log))


def test_bad_options_are_clear_errors(fake_state, tmp_path):
    with pytest.raises(ToolsError, match="unknown option.*polls.*options: .*poll_s"):
        tools.runners.get("template", {"polls": 1})
    with pytest.raises(ToolsError, match="`submit` template 'sbatch {nope}': bad placeholder 'nope'"):
        TemplateRunner(submit="sbatch {nope}")
    # a string where a list goes was taken one character at a time ("#", "S", "B", ... ran as commands)
    with pytest.raises(ToolsError, match="`header` must be a list of strings"):
        tools.runners.get("template", {"header": "#SBATCH --partition=tpu"})
    with pytest.raises(ToolsError, match="`header` is empty .a value starting with `#` is a YAML comment"):
        tools.runners.get("template", {"header": None})  # --runner-option 'header=#SBATCH -p x', as YAML reads it
    with pytest.raises(ToolsError, match="`forward_env` must be a list of strings"):
        tools.runners.get("template", {"forward_env": "XLA_FLAGS"})
    with pytest.raises(ToolsError, match="`hang_s` is a number of seconds above 0, not '5m'"):
        tools.runners.get("template", {"hang_s": "5m"})
    # a negative poll crashed the watch with a traceback after the job was submitted, and left the job running
    for key, value in (("poll_s", -1), ("hang_s", -5), ("pending_s", 0), ("grace_s", -100000), ("poll_s", "nan")):
        with pytest.raises(ToolsError, match=f"`{key}` is a number of seconds"):
            tools.runners.get("template", {key: value})
    assert tools.runners.get("template", {"grace_s": 0}).grace_s == 0
    with pytest.raises(ToolsError, match="`env` must be a mapping"):
        tools.runners.get("template", {"env": ["A=1"]})


SLURM = ("munged", "slurmctld", "slurmd", "sbatch", "squeue", "scancel", "sinfo")


@pytest.mark.slow
def test_real_one_node_slurm_runs_the_round_and_scancel_stops_a_hung_one(tmp_path):
    missing = [t for t in SLURM if not shutil.which(t) and not Path("/usr/sbin", t).exists()]
    if missing:
        pytest.skip(f"Slurm is not installed ({', '.join(missing)} missing): "
                    "apt-get install slurmctld slurmd slurm-client munge")
    out = tmp_path / "result.json"
    short = tempfile.mkdtemp(prefix="arw-slurm-", dir="/tmp")  # munge's socket path must stay short
    cmd = in_private_namespace([sys.executable, str(Path(__file__).parent / "slurm_driver.py"), str(out),
                                str(tmp_path), short], setup="ip link set lo up && ip addr add 10.254.0.1/32 dev lo")
    env = dict(os.environ, PATH=f"{os.environ['PATH']}:/usr/sbin")
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=240, env=env, check=False,
                           cwd=Path(__file__).parents[2])
    finally:
        shutil.rmtree(short, ignore_errors=True)
    assert out.exists(), f"the Slurm driver wrote nothing (exit {r.returncode}):\n{r.stdout[-2000:]}{r.stderr[-3000:]}"
    res = json.loads(out.read_text())
    print(json.dumps({k: v for k, v in res.items() if k.endswith("_s")}))
    assert [(p["rc"], p["step_ms"]) for p in res["round"]] == [(0, 20.0), (0, 10.0)], res["round"]
    (note,) = res["notes"]
    assert note["state"] == "completed" and note["job"].isdigit()
    assert res["hung"]["hung_s"] == 2 and "made no log progress for 2 s" in res["hung"]["tail"]
    assert len(res["hung"]["pids"]) == 2 and res["hung"]["alive_after"] == []


def _pids(log: Path) -> list[int]:
    return [int(line.split()[-1]) for line in log.read_text().splitlines() if line.startswith("fake training")]


def _assert_gone(pids: list[int]) -> None:
    assert pids
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and any(_alive(p) for p in pids):
        time.sleep(0.1)
    assert not any(_alive(p) for p in pids), "the cancelled job's training process is still running"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().split(")")[-1].split()[0] != "Z"


@pytest.mark.slow
def test_a_remote_run_against_a_local_baseline_is_judged_not_invalid(fake_state, tmp_path):
    """A baseline run locally passes the clock check; the same script through a remote runner gave no clock (the
    runner reads the log after the run), which was filed as `evidence-lost` ("the command printed no step lines",
    though the log held them): a real 2x speed-up came back `invalid`."""
    from tools.experiments.runner import RunSpec, run_experiment
    from tools.project import Project

    (tmp_path / "kb" / "wiki").mkdir(parents=True)
    project = Project(tmp_path / "kb")
    # a step line as each step ends, flushed; then the result. 24 steps: a read late on a loaded machine (the suite
    # beside it) is shared among enough steps not to look like a timer that sees less of each
    honest = tmp_path / "honest.py"
    honest.write_text("import json, sys, time\nms = float(sys.argv[1])\ntimes, losses = [], []\n"
                      "scale = float(sys.argv[2]) if len(sys.argv) > 2 else 1.0  # a timer that lies, below\n"
                      "for i in range(24):\n    t = time.perf_counter()\n    time.sleep(ms / 1000)\n"
                      "    times.append(scale * (time.perf_counter() - t))\n    losses.append(5.0 - 0.1 * i)\n"
                      "    print(json.dumps({'step': i, 'loss': losses[-1]}), flush=True)\n"
                      "print(json.dumps({'step_times_s': times, 'tokens_per_step': 512, 'losses': losses}))\n")
    cmd = [sys.executable, str(honest)]
    base = run_experiment(project, RunSpec("m", "l", "s/cpu", [*cmd, "40"], baseline=True,
                                           repeats=2, cwd=tmp_path))
    assert base.record["integrity"]["checks"]["clock"] == "ok", base.record["integrity"]
    var = run_experiment(project, RunSpec("m", "l", "s/cpu", [*cmd, "20"], repeats=2, cwd=tmp_path,
                                          runner="template", runner_options=FAST))
    rec = var.record
    assert rec["verdict"] != "invalid", rec.get("reasons")
    # each line the job printed came back with the worker's time on it: its step lines are timed as a local run's
    assert rec["integrity"]["checks"]["clock"] == "ok" and not rec["integrity"].get("findings"), rec["integrity"]
    assert rec["gain_pct"] > 50
    # a red team's: the timed arms' timer at 0.35x (the profiled arm honest) on a template runner whose "cluster"
    # was this machine: `supported` at +207 %, "the runner keeps no clock"
    lie = run_experiment(project, RunSpec("m", "l", "s/cpu", [*cmd, "40", "0.35"], repeats=2, cwd=tmp_path,
                                          runner="template", runner_options=FAST)).record
    assert lie["verdict"] == "invalid" and any("clock" in r for r in lie["reasons"]), lie["reasons"]


def test_a_job_preempted_back_into_the_queue_is_waited_for_not_called_hung(fake_state, tmp_path, monkeypatch):
    """A job suspended or requeued mid-round (squeue: SUSPENDED, PENDING) was filed `hung: no output for 1 s`, kind
    `hang`, its configuration blamed for the cluster's preemption."""
    monkeypatch.setenv("FAKE_SUSPEND_ON", r"@@AR begin")
    monkeypatch.setenv("FAKE_SUSPEND_S", "5")
    raw = tmp_path / "raw"  # hang_s 2: the resumed fake's next line comes within it even on a loaded machine
    (p,) = TemplateRunner(hang_s=600, **FAST).run_round([fake_arm(raw, "run-1", hang_s=2)])
    assert p.rc == 0 and p.hung_s is None and result_of(p) is not None, p.tail
    assert [json.loads(n.read_text())["state"] for n in (raw / "remote").glob("*.json")] == ["completed"]


def test_a_submit_that_times_out_after_queueing_the_job_cancels_it_by_name(fake_state, tmp_path, monkeypatch):
    """sbatch queued the job and answered after `call_timeout_s`: filed "not submitted", the job ran on, unseen,
    on the node the next rounds measure on."""
    monkeypatch.setenv("FAKE_SUBMIT_SLOW", "5")
    raw = tmp_path / "raw"  # 2 s: the stub sbatch has queued the job (its .name and .pid written) by then, loaded
    (p,) = TemplateRunner(call_timeout_s=2, **FAST).run_round([fake_arm(raw, "run-1", "--steps", "400")])
    assert p.rc is None and "not submitted" in p.tail and "cancelled by name" in p.tail, p.tail
    name = next(c for c in calls(fake_state) if c.startswith("scancel --name ar-"))
    job = next(f.stem for f in Path(fake_state).glob("*.name") if f.read_text() == name.split()[-1])
    time.sleep(0.5)
    _assert_gone([int((Path(fake_state) / f"{job}.pid").read_text())])


def test_a_job_log_the_runner_cannot_read_is_said_not_taken_for_silence(fake_state, tmp_path):
    """`kubectl logs` forbidden (RBAC), a log path the login node cannot see: a running, printing job was filed
    `hung: no output`, kind `hang`, the command's own error nowhere."""
    raw = tmp_path / "raw"
    runner = TemplateRunner(logs="sh -c 'echo Error from server: Forbidden: pods/log >&2; exit 1'", hang_s=1, **FAST)
    (p,) = runner.run_round([fake_arm(raw, "run-1", "--hang")])
    assert p.hung_s is None and "its log could not be read for 1 s" in p.tail and "Forbidden" in p.tail, p.tail
    reason = crash_reason(p, 60)
    assert reason.startswith("not run: ") and crash_facts.kind_of(reason, "", "", "") == "not_run", reason


def test_tools_exp_run_sends_its_rounds_through_a_runner_named_on_the_command_line(fake_state, tmp_path):
    """`tools exp run` had no `--runner`: a remote runner was reached from a loop file or a library call only."""
    from click.testing import CliRunner

    from tools.cli import cli
    from tools.experiments import records

    kb = tmp_path / "kb"
    (kb / "wiki").mkdir(parents=True)
    fake = fake_arm(tmp_path / "x", "x").command
    base = ["--root", str(kb), "exp", "run", "--model", "m", "--lane", "l", "--variant", "s/cpu", "-q",
            "--trust-step-times", "--runner", "template", "--runner-option", "poll_s=0.1",
            "--runner-option", "header=['#SBATCH --job-name={name}', '#SBATCH --output={log}']"]
    for extra in (["--baseline", "--", *fake, "--step-ms", "20"], ["--repeats", "2", "--", *fake, "--step-ms", "10"]):
        r = CliRunner().invoke(cli, [*base, *extra])
        assert r.exit_code == 0, r.output + repr(r.exception)
    recs = records.lane_records(kb / "wiki", "m", "l")
    assert [r.get("runs_on") for r in recs] == ["template", "template"] and recs[1]["verdict"] == "supported", recs
    assert len([c for c in calls(fake_state) if c.startswith("sbatch")]) == 3  # one job a round: 1 + 2
    bad = CliRunner().invoke(cli, [*base, "--runner-option", "poll_s", "--", *fake])
    assert bad.exit_code != 0 and "not KEY=VALUE" in bad.output
    # the CI gate too: it always ran here, whatever ran the baseline
    opts = base[base.index("--runner"):]
    r = CliRunner().invoke(cli, ["--root", str(kb), "exp", "baseline", "tag", "main", recs[0]["exp_id"], "--model",
                                 "m", "--lane", "l"])
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(cli, ["--root", str(kb), "exp", "gate", "--baseline", "main", "-q", "--repeats", "2",
                                 *opts, "--", *fake, "--step-ms", "20"])
    assert r.exit_code == 0, r.output + repr(r.exception)
    assert records.lane_records(kb / "wiki", "m", "l")[-1].get("runs_on") == "template"
