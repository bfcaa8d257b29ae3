"""Stub executables for the runner tests: one script playing sbatch/squeue/scancel, xpk/kubectl and gsutil.

Installed on PATH by ``conftest.stub_bin`` as ``<name>`` wrappers that run ``fakecluster.py <name> ARGS``.
A submitted job really runs, here, as a background process (its own session) writing its log under
``$FAKE_STATE``; every call is appended to ``$FAKE_STATE/calls.txt``. Knobs (environment variables):
FAKE_SUBMIT_FAIL (the submit command fails), FAKE_PENDING (jobs never start), FAKE_CRASH_ON (a regex: when the
job log matches it the job is killed as if its node died; kubectl then shows the pod OOMKilled), FAKE_SUSPEND_ON (a
regex: the job is stopped and squeue says SUSPENDED for FAKE_SUSPEND_S seconds, then it runs on: preempted and
requeued), FAKE_SUBMIT_SLOW (seconds sbatch takes to answer after queueing the job).
``gs://bucket/path`` is the folder ``$FAKE_STATE/gcs/bucket/path``.
"""

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

STATE = Path(os.environ["FAKE_STATE"])


def launch(job: str, argv: list[str]) -> None:
    """Run the job in the background: its log in <job>.log, its exit code in <job>.rc, its pid in <job>.pid."""
    if os.environ.get("FAKE_PENDING"):
        (STATE / f"{job}.pending").write_text("")
        return
    log, rc = STATE / f"{job}.log", STATE / f"{job}.rc"
    wrapper = '"$@" > "$LOG" 2>&1; echo $? > "$RC"'
    env = dict(os.environ, LOG=str(log), RC=str(rc), TMPDIR=str(STATE))  # the "container's" /tmp
    p = subprocess.Popen(["sh", "-c", wrapper, "job", *argv], env=env, start_new_session=True,
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    (STATE / f"{job}.pid").write_text(str(p.pid))


def state(job: str) -> str:
    """pending | running | ok | failed | crashed | missing"""
    if (STATE / f"{job}.pending").exists():
        return "pending"
    pid_file = STATE / f"{job}.pid"
    if not pid_file.exists():
        return "missing"
    pid = int(pid_file.read_text())
    crash = os.environ.get("FAKE_CRASH_ON")
    log = STATE / f"{job}.log"
    suspend, suspended = os.environ.get("FAKE_SUSPEND_ON"), STATE / f"{job}.suspended"
    if suspend and not suspended.exists() and log.exists() and re.search(suspend, log.read_text(errors="replace")):
        kill(job, signal.SIGSTOP)  # preempted: back in the queue for FAKE_SUSPEND_S, then it runs on
        suspended.write_text(str(time.time()))
    if suspended.exists() and not (STATE / f"{job}.resumed").exists():
        if time.time() - float(suspended.read_text()) < float(os.environ.get("FAKE_SUSPEND_S", "2")):
            return "suspended"
        kill(job, signal.SIGCONT)
        (STATE / f"{job}.resumed").write_text("")
    if crash and log.exists() and re.search(crash, log.read_text(errors="replace")) and alive(pid):
        kill(job, signal.SIGKILL)
        (STATE / f"{job}.crashed").write_text("")
    if (STATE / f"{job}.crashed").exists():
        return "crashed"
    if alive(pid):
        return "running"
    rc = STATE / f"{job}.rc"
    return "ok" if rc.exists() and rc.read_text().strip() == "0" else "failed"


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is not alive
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def kill(job: str, sig: int) -> None:
    pid_file = STATE / f"{job}.pid"
    if pid_file.exists():
        try:
            os.killpg(int(pid_file.read_text()), sig)
        except ProcessLookupError:
            pass


def cat(job: str) -> None:
    log = STATE / f"{job}.log"
    sys.stdout.write(log.read_text(errors="replace") if log.exists() else "")


# -- Slurm ------------------------------------------------------------------------------------------------------
def sbatch(args: list[str]) -> int:
    if os.environ.get("FAKE_SUBMIT_FAIL"):
        print("sbatch: error: Batch job submission failed: Invalid partition name specified", file=sys.stderr)
        return 1
    script = Path(args[-1])
    text = script.read_text()
    out = re.search(r"^#SBATCH --output=(\S+)", text, re.M)
    name = re.search(r"^#SBATCH --job-name=(\S+)", text, re.M)
    n = len(list(STATE.glob("*.pid"))) + len(list(STATE.glob("*.pending"))) + 1000
    job = str(n)
    if name:
        (STATE / f"{job}.name").write_text(name.group(1))
    launch(job, ["sh", str(script)])
    if out:  # Slurm writes the job's output to --output; here it is linked to the job log
        path = out.group(1).strip("\"'")
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).unlink(missing_ok=True)
        (STATE / f"{job}.log").touch()
        os.symlink(STATE / f"{job}.log", path)
    time.sleep(float(os.environ.get("FAKE_SUBMIT_SLOW", "0")))  # queued, and the answer is late
    print(f"{job};fake" if "--parsable" in args else f"Submitted batch job {job}")
    return 0


def squeue(args: list[str]) -> int:
    job = args[args.index("-j") + 1]
    s = state(job)
    words = {"pending": "PENDING", "running": "RUNNING", "suspended": "SUSPENDED"}
    print(words.get(s, ""), end="\n" if s in words else "")
    return 0


def scancel(args: list[str]) -> int:
    if args[0] == "--name":
        for f in STATE.glob("*.name"):
            if f.read_text() == args[1]:
                kill(f.stem, signal.SIGCONT)
                kill(f.stem, signal.SIGTERM)
        return 0
    kill(args[0], signal.SIGCONT)  # a suspended job is stopped: it must run to take the signal
    kill(args[0], signal.SIGTERM)
    return 0


# -- xpk and kubectl ----------------------------------------------------------------------------------------------
def xpk(args: list[str]) -> int:
    print("[XPK] Starting xpk v1.16.0")
    if os.environ.get("FAKE_SUBMIT_FAIL"):
        print("[XPK] Task: `Find cluster region or zone` terminated with code `1`")
        print("[XPK] ERROR: Could not find cluster c1 in project p1")
        print("[XPK] Exiting XPK cleanly")
        return 1
    name = args[args.index("--workload") + 1]
    env_file = next((a.split("=", 1)[1] for a in args if a.startswith("--env-file=")), "")
    for line in Path(env_file).read_text().splitlines() if env_file else []:  # as xpk reads it: a bare name takes
        if "=" not in line and line.strip() not in os.environ:            # its value from xpk's environment
            print(f"AssertionError: Variable {line.strip()} is not set in the current environment")
            return 1
    manifest = next((a.split("=", 1)[1] for a in args if a.startswith("--output-manifest-file=")), "")
    if "--dry-run" in args and manifest:
        Path(manifest).write_text(f"kind: JobSet\nmetadata: {{name: {name}}}\n")
        return 0
    launch(name, ["bash", "-c", args[args.index("--command") + 1]])
    print(f"[XPK] Follow your workload here: https://console.cloud.google.com/kubernetes/service/{name}")
    return 0


def kubectl(args: list[str]) -> int:
    if args[:2] == ["get", "jobset"]:
        name = args[2]
        s = state(name)
        if s == "missing":
            print(f'Error from server (NotFound): jobsets.jobset.x-k8s.io "{name}" not found', file=sys.stderr)
            return 1
        conds = {"ok": [{"type": "Completed", "status": "True", "reason": "AllJobsCompleted",
                         "message": "jobset completed successfully"}],
                 "failed": [{"type": "Failed", "status": "True", "reason": "FailedJobs", "message": "jobset failed"}],
                 "crashed": [{"type": "Failed", "status": "True", "reason": "PodFailurePolicy",
                              "message": "Pod failed with exit code 137"}],
                 "pending": [{"type": "Suspended", "status": "True", "reason": "WaitingForKueue"}]}.get(s, [])
        print(json.dumps({"metadata": {"name": name}, "spec": {"suspend": s == "pending"},
                          "status": {"conditions": conds}}))
        return 0
    if args[:2] == ["get", "pods"]:
        name = args[args.index("-l") + 1].split("=", 1)[1].split(",")[0]
        s = state(name)
        pod = {"metadata": {"name": f"{name}-slice-job-0-0-abcde"}, "status": {
            "phase": {"pending": "Pending", "running": "Running", "ok": "Succeeded"}.get(s, "Failed")}}
        if s == "crashed":
            pod["status"]["containerStatuses"] = [{"name": "jax-tpu", "state": {"terminated": {
                "reason": "OOMKilled", "exitCode": 137}}}]
        print(json.dumps({"items": [] if s == "missing" else [pod]}))
        return 0
    if args[0] == "logs":
        cat(args[args.index("-l") + 1].split("=", 1)[1].split(",")[0])
        return 0
    if args[:2] == ["delete", "jobset"]:
        kill(args[2], signal.SIGTERM)
        print(f'jobset.jobset.x-k8s.io "{args[2]}" deleted')
        return 0
    print(f"fake kubectl: unsupported {args}", file=sys.stderr)
    return 2


def gs(url: str) -> Path:
    return STATE / "gcs" / url[len("gs://"):] if url.startswith("gs://") else Path(url)


def gsutil(args: list[str]) -> int:
    args = [a for a in args if a != "-m"]
    assert args[:2] == ["cp", "-r"], args
    src, dst = gs(args[2]), gs(args[3])
    if not src.exists():
        print(f"CommandException: No URLs matched: {args[2]}", file=sys.stderr)
        return 1
    target = dst / src.name
    if src.is_dir():
        shutil.copytree(src, target, dirs_exist_ok=True)
    else:
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, target)
    print(f"Copying {args[2]} to {args[3]}", file=sys.stderr)
    return 0


def main() -> int:
    tool, args = sys.argv[1], sys.argv[2:]
    STATE.mkdir(parents=True, exist_ok=True)
    with open(STATE / "calls.txt", "a") as f:
        f.write(shlex.join([tool, *args]) + "\n")
    tools = {"sbatch": sbatch, "squeue": squeue, "scancel": scancel, "xpk": xpk, "kubectl": kubectl,
             "gsutil": gsutil}
    return tools[tool](args)


if __name__ == "__main__":
    sys.exit(main())
