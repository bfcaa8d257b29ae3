"""The xpk runner: the real xpk's --dry-run manifest, and the job's life against stub xpk/kubectl/gsutil on PATH."""

from __future__ import annotations

import base64
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from _runner_helpers import calls, fake_arm, pair

import tools.runners
from tools.errors import ToolsError
from tools.experiments.metrics import parse_result
from tools.experiments.arms import result_of
from tools.runners import Arm
from tools.runners.roundscript import split
from tools.runners.xpk import NAME, XpkRunner, jobset_state, pods_state, workload_name

XPK_VENV = Path.home() / ".cache" / "autoresearch-wiki" / "xpk-venv"
XPK_PIN = "xpk==1.16.*"
OPTS = {"cluster": "c1", "project": "p1", "zone": "us-central2-b", "tpu_type": "v5litepod-8",
        "docker_image": "us-docker.pkg.dev/p1/img/train:1", "bucket": "gs://bkt/runs"}


@pytest.fixture(scope="session")
def real_xpk() -> Path:
    """xpk in its own venv (it pins exact versions of its dependencies), made once per machine and reused; made
    with uv when it is installed (seconds: pip takes about a minute for xpk's 380 MB of dependencies)."""
    exe, done = XPK_VENV / "bin" / "xpk", XPK_VENV / ".installed"
    if not done.exists():  # a venv without the mark is half made (an interrupted run): made again
        shutil.rmtree(XPK_VENV, ignore_errors=True)
        XPK_VENV.parent.mkdir(parents=True, exist_ok=True)
        uv = shutil.which("uv")
        steps = ([[uv, "venv", "-q", "--python", sys.executable, str(XPK_VENV)],
                  [uv, "pip", "install", "-q", "--python", str(XPK_VENV / "bin" / "python"), XPK_PIN]] if uv else
                 [[sys.executable, "-m", "venv", str(XPK_VENV)], [str(XPK_VENV / "bin" / "pip"), "install", "-q", XPK_PIN]])
        for step in steps:
            r = subprocess.run(step, capture_output=True, check=False, text=True, timeout=900)
            if r.returncode != 0:
                break
        if r.returncode != 0 or not exe.exists():
            pytest.skip(f"could not install {XPK_PIN} into {XPK_VENV}: {(r.stderr or r.stdout)[-500:]}")
        done.write_text(XPK_PIN + "\n")
    return exe


def profile_arm(raw: Path) -> Arm:
    """An arm that writes a trace where its profile variable says and an HLO file where XLA_FLAGS says."""
    code = ("import os, pathlib, re, runpy, sys; p = pathlib.Path(os.environ['AUTORESEARCH_PROFILE_DIR']); "
            "p.mkdir(parents=True); (p / 'host.xplane.pb').write_text('trace'); "
            "d = pathlib.Path(re.search(r'--xla_dump_to=(\\S+)', os.environ['XLA_FLAGS']).group(1)); "
            "d.mkdir(parents=True); "
            "(d / 'module_0001.jit_train_step.after_optimizations.txt').write_text('HloModule'); "
            "print('profile at', p, 'dump at', d); sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0])")
    base = fake_arm(raw, "profile-run")
    return Arm("profile-run", [sys.executable, "-c", code, *base.command[1:]], raw / "profile-run.log",
               env={"XLA_FLAGS": f"--xla_cpu_x=1 --xla_dump_to={raw / 'hlo'} --xla_dump_hlo_as_text"},
               artefacts={"AUTORESEARCH_PROFILE_DIR": raw / "trace", "AUTORESEARCH_HLO_DIR": raw / "hlo"})


@pytest.mark.slow
def test_dry_run_writes_the_real_xpk_manifest_and_its_command_runs_the_round(real_xpk, fake_state, tmp_path):
    raw = tmp_path / "raw" / "2026-12-01-llama-tpu-v5e-v012-remat-dots-saveable"
    arms = [*pair(raw), profile_arm(raw)]
    stage = tmp_path / "container-tmp"
    runner = tools.runners.get("xpk", dict(OPTS, xpk=str(real_xpk), dry_run=True, stage_dir=str(stage)))
    procs = runner.run_round(arms)
    assert [p.rc for p in procs] == [None] * 3 and all("dry run: xpk wrote the manifest" in p.tail for p in procs)
    (manifest,) = (raw / "remote").glob("*.yaml")
    name = manifest.stem
    assert NAME.fullmatch(name) and len(name) < 40 and name.startswith("ar-") and "saveable" in name
    docs = [d for d in yaml.safe_load_all(manifest.read_text()) if d]
    (jobset,) = [d for d in docs if d.get("kind") == "JobSet"]
    assert jobset["metadata"]["name"] == name
    pod = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    assert pod["nodeSelector"]["cloud.google.com/gke-tpu-accelerator"] == "tpu-v5-lite-podslice"
    (container,) = pod["containers"]
    assert container["image"] == OPTS["docker_image"] and container["name"] == "jax-tpu"
    packed = re.search(r"printf %s ([A-Za-z0-9+/=]+) \| base64 -d", container["command"][-1]).group(1)
    script = base64.b64decode(packed).decode()
    assert script.startswith("#!/bin/sh") and script.count("_ar_mark begin") == 3
    assert f"--xla_dump_to={stage}/{name}/2-profile-run/hlo" in script  # local paths -> the worker's
    assert f"export AUTORESEARCH_PROFILE_DIR={stage}/{name}/2-profile-run/trace" in script
    assert f"gsutil -m cp -r {stage}/{name}/2-profile-run/trace gs://bkt/runs/{name}/profile-run/" in script
    said = (raw / "remote" / f"{name}.dry-run.txt").read_text()
    assert "not running since it is a dry run" in said  # xpk ran nothing
    # the container's command, as xpk wrote it, runs the round here (gsutil is the stub)
    run = subprocess.run(container["command"], capture_output=True, check=False, text=True, timeout=120,
                         env=dict(os.environ, TMPDIR=str(tmp_path)))
    token = re.search(r"^_ar_tok=(\w+)$", script, re.M).group(1)
    out = split(run.stdout, token, 3)
    assert run.returncode == 0 and out.done, run.stdout + run.stderr
    assert [a.rc for a in out.arms] == [0, 0, 0] and all(parse_result(a.text) for a in out.arms)
    assert (fake_state / "gcs" / "bkt" / "runs" / name / "profile-run" / "trace" / "host.xplane.pb").exists()


def test_without_upload_the_arm_writes_to_the_bucket_directly(tmp_path):
    raw = tmp_path / "raw"
    plans, arts = XpkRunner(**dict(OPTS, upload="")).plan([profile_arm(raw)], "ar-x-abc123")
    assert plans[0].env["AUTORESEARCH_PROFILE_DIR"] == "gs://bkt/runs/ar-x-abc123/profile-run/trace"
    assert "--xla_dump_to=gs://bkt/runs/ar-x-abc123/profile-run/hlo" in plans[0].env["XLA_FLAGS"]
    assert not plans[0].uploads and arts[0][0].remote == "gs://bkt/runs/ar-x-abc123/profile-run/trace"


def stub_runner(tmp_path: Path, **kw) -> XpkRunner:
    return XpkRunner(**dict(OPTS, stage_dir=str(tmp_path / "container-tmp"), poll_s=0.1, **kw))


def test_a_completed_workload_brings_back_results_profile_and_dump(fake_state, tmp_path):
    raw = tmp_path / "raw" / "exp-v002"
    base, prof = stub_runner(tmp_path).run_round([fake_arm(raw, "baseline-1"), profile_arm(raw)])
    assert (base.rc, prof.rc) == (0, 0) and result_of(base) and result_of(prof)
    assert (raw / "trace" / "host.xplane.pb").read_text() == "trace"
    assert (raw / "hlo" / "module_0001.jit_train_step.after_optimizations.txt").read_text() == "HloModule"
    log = (raw / "profile-run.log").read_text()
    assert "[tools runner] fetched gs://bkt/runs/" in log
    (name,) = {Path(p).stem for p in (raw / "remote").glob("*.sh")}
    seen = calls(fake_state)
    assert sum(c.startswith("xpk workload create --cluster c1 --workload " + name) for c in seen) == 1
    assert f"kubectl get jobset {name} -o json" in seen
    assert (f"kubectl logs -l jobset.sigs.k8s.io/jobset-name={name},jobset.sigs.k8s.io/job-index=0,"
            f"batch.kubernetes.io/job-completion-index=0 -c jax-tpu --tail=-1") in seen
    assert f"gsutil -m cp -r gs://bkt/runs/{name}/profile-run/trace {raw}" in seen
    assert not any(c.startswith("kubectl delete") for c in seen)


def test_a_pod_killed_mid_round_is_a_crash_naming_the_pod(fake_state, tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_CRASH_ON", r"@@AR end \w+ 0 ")
    raw = tmp_path / "raw"
    slow = Arm("run-1", ["sh", "-c", f"sleep 5; {sys.executable} -c 'print(1)'"], raw / "run-1.log")
    first, second = stub_runner(tmp_path).run_round([fake_arm(raw, "baseline-1"), slow])
    assert first.rc == 0 and result_of(first) is not None
    assert second.rc is None and "OOMKilled exit 137" in second.tail and "before the round finished" in second.tail
    from tools.experiments import crash_facts
    from tools.experiments.arms import crash_reason

    assert crash_facts.analyze(second.tail, crash_reason(second, 60), None).kind == "oom"  # over its memory


def test_a_hung_workload_is_deleted(fake_state, tmp_path):
    raw = tmp_path / "raw"
    (hung,) = stub_runner(tmp_path, hang_s=1).run_round([fake_arm(raw, "run-1", "--hang")])
    assert hung.hung_s == 1 and "made no log progress for 1 s: cancelled (kubectl delete jobset" in hung.tail
    assert any(c.startswith("kubectl delete jobset ar-") for c in calls(fake_state))


def test_a_workload_kueue_never_admits_is_deleted_after_pending_s(fake_state, tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_PENDING", "1")
    procs = stub_runner(tmp_path, pending_s=0.5).run_round(pair(tmp_path / "raw"))
    assert "did not start within 0.5 s (suspended: waiting for Kueue" in procs[0].tail
    assert any(c.startswith("kubectl delete jobset") for c in calls(fake_state))


def test_a_failed_xpk_create_is_a_submission_failure(fake_state, tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_SUBMIT_FAIL", "1")
    procs = stub_runner(tmp_path).run_round(pair(tmp_path / "raw"))
    assert [p.rc for p in procs] == [None, None]
    assert "`xpk workload create` exited 1" in procs[0].tail and "Could not find cluster c1" in procs[0].tail
    assert not any(c.startswith("kubectl") for c in calls(fake_state))


def test_a_missing_xpk_is_a_submission_failure_naming_it(tmp_path):
    (p,) = XpkRunner(**dict(OPTS, xpk=str(tmp_path / "no-xpk"))).run_round([fake_arm(tmp_path / "raw", "run-1")])
    assert p.rc is None and "no-xpk' not found" in p.tail


def test_workload_names_fit_kubernetes_and_xpk():
    for folder in ("x", "2026-12-01-llama-tpu-v5e-v012-remat-dots-saveable-with-a-very-long-slug", "___", "V3"):
        name = workload_name("ar", folder, "0a1b2c3d4e5f")
        assert NAME.fullmatch(name) and len(name) < 40, name
    assert workload_name("ar", "___", "0a1b2c") == "ar-0a1b2c"


def test_options_are_checked():
    with pytest.raises(ToolsError, match="needs cluster, docker_image, tpu_type or device_type"):
        tools.runners.get("xpk", {})
    with pytest.raises(ToolsError, match="workload_prefix"):
        XpkRunner(**dict(OPTS, workload_prefix="Bad_Prefix"))
    with pytest.raises(ToolsError, match="no `bucket`"):
        XpkRunner(**dict(OPTS, bucket="")).plan([profile_arm(Path("raw"))], "ar-x")
    # checked when made, not after the timed arms of the profiled round (a bare KeyError then)
    with pytest.raises(ToolsError, match="`upload` template .*bad placeholder 'HOSTNAME'"):
        XpkRunner(**dict(OPTS, upload="gsutil -m cp -r {src} {dst} && echo ${HOSTNAME}"))
    with pytest.raises(ToolsError, match="`xpk_args` must be a list of strings"):
        XpkRunner(**dict(OPTS, xpk_args="--spot"))


def test_a_rotated_job_log_keeps_what_was_read_and_joins_the_rest():
    """Once kubelet rotated the container log, `kubectl logs` gave only its tail: the text read so far was
    replaced by it, the variant's output landed in the baseline's log, and the job log lost its start."""
    from tools.runners.remote import joined

    full = "".join(f"line {i}\n" for i in range(1000))
    read = full[:6000]
    assert joined(read, full) == full                      # the usual case: the log grew
    assert joined(read, full[4000:]) == full               # rotated: the new file starts inside what was read
    assert joined(read, full[:5000]) == read               # a shorter read of the same log: nothing lost
    later = joined(read, full[7000:])                      # rotated past what was read: the gap is said
    assert later.startswith(read) and later.endswith(full[7000:]) and "log was rotated" in later


def test_jobset_and_pod_states():
    assert jobset_state({"status": {"conditions": [{"type": "Completed", "status": "True"}]}}).phase == "succeeded"
    failed = jobset_state({"status": {"terminalState": "Failed", "conditions": [
        {"type": "Failed", "status": "True", "reason": "FailedJobs", "message": "jobset failed"}]}})
    assert (failed.phase, failed.detail) == ("failed", "FailedJobs: jobset failed")
    assert jobset_state({"spec": {"suspend": True}}).phase == "pending"
    assert jobset_state({"status": {"conditions": [{"type": "Completed", "status": "False"}]}}).phase == "running"
    pull = pods_state({"items": [{"metadata": {"name": "p0"}, "status": {"phase": "Pending", "containerStatuses": [
        {"name": "jax-tpu", "state": {"waiting": {"reason": "ImagePullBackOff", "message": "no such image"}}}]}}]})
    assert (pull.phase, pull.detail) == ("failed", "pod p0: ImagePullBackOff: no such image")
    unsched = pods_state({"items": [{"metadata": {"name": "p0"}, "status": {"phase": "Pending", "conditions": [
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "0/3 nodes"}]}}]})
    assert unsched.phase == "pending" and "Unschedulable: 0/3 nodes" in unsched.detail
    assert pods_state({"items": []}).detail == "no pods yet"


def test_exp_run_with_a_dry_run_runner_files_nothing(fake_state, tmp_path):
    """A dry run (write the manifest, submit nothing) filed a crash experiment, a ledger row and a version each time."""
    from tools import scaffold
    from tools.experiments.runner import DryRun, RunSpec, run_experiment
    from tools.project import Project

    root = tmp_path / "kb"
    scaffold.init(root, site_name="dry")
    spec = RunSpec(command=fake_arm(tmp_path, "x").command, model="m", lane="l", variant="s/tpu", baseline=True,
                   runner="xpk", runner_options=dict(OPTS, dry_run=True))
    before = sorted(p.relative_to(root) for p in (root / "raw").rglob("*"))
    with pytest.raises(DryRun, match="dry run: xpk wrote the manifest to .*tools-cache/dry-runs/.*yaml"):
        run_experiment(Project(root), spec)
    assert not list((root / "wiki").glob("experiments/**/*.md"))  # no page, no ledger, no version used
    assert sorted(p.relative_to(root) for p in (root / "raw").rglob("*")) == before
    assert not any(c.startswith("kubectl") for c in calls(fake_state))  # nothing was watched: nothing ran


def test_a_rotated_log_read_again_and_again_is_joined_once():
    """After a rotation whose first read was short, each later read (the new file grown) appended the whole new file
    again, with another "rotated" line; and a long repetitive log made each join copy it over and over."""
    from tools.runners.remote import RemoteRunner, _Watch

    full = "".join(f"step {i}\n" for i in range(60))
    reads = iter([full[:300], full[400:409], full[400:420], full[400:]])  # rotated after 400 characters

    class Stub(RemoteRunner):
        def logs(self, job):
            return next(reads)

    r, w = Stub(), _Watch(0.0, "x")
    for _ in range(4):
        w.text = r._logs_quietly("job", w)
    assert w.text.count("log was rotated") == 1 and w.text.endswith(full[400:])
    assert w.text.count("step 59\n") == 1 and w.text.startswith(full[:300])
