"""Run by test_ray.py inside a private network and PID namespace (``unshare -n -p -f --mount-proc``).

Starts a real two-node Ray cluster on loopback (head 127.0.0.1, worker 127.0.0.2), runs two experiments at
once (two threads, two rounds each, a fresh RayRunner per round), then a round that hangs, and writes what
happened as JSON to argv[1] (argv[2]: a work folder, argv[3]: Ray's temp folder). Everything it
started dies with the namespace when it exits.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _runner_helpers import FAKE_TRAIN, fake_arm, pair  # noqa: E402

from tools.experiments.arms import result_of  # noqa: E402
from tools.runners import Arm  # noqa: E402
from tools.runners.ray import PIN_FILE, RayRunner  # noqa: E402

ADDRESS = "http://127.0.0.1:8265"
SECRET = "hf_xyz987secretvalue1"
RAY = str(Path(sys.executable).with_name("ray"))
if not os.path.exists(RAY):
    RAY = shutil.which("ray") or "ray"


def start_cluster(tmp: str) -> list[subprocess.Popen]:
    common = ["--block", "--disable-usage-stats"]
    head = subprocess.Popen([RAY, "start", "--head", "--node-ip-address=127.0.0.1", "--dashboard-host=127.0.0.1",
                             "--num-cpus=2", f"--temp-dir={tmp}", *common],
                            stdout=open(f"{tmp}/head.out", "w"), stderr=subprocess.STDOUT, start_new_session=True)
    procs = [head]
    from ray.job_submission import JobSubmissionClient
    wait_for(lambda: JobSubmissionClient(ADDRESS).list_jobs() is not None, "the Ray head")
    procs.append(subprocess.Popen([RAY, "start", "--address=127.0.0.1:6379", "--node-ip-address=127.0.0.2",
                                   "--num-cpus=1", "--dashboard-agent-listen-port=52466", *common],
                                  stdout=open(f"{tmp}/worker.out", "w"), stderr=subprocess.STDOUT,
                                  start_new_session=True))
    from ray.util.state import list_nodes
    wait_for(lambda: len(list_nodes(address=ADDRESS, filters=[("state", "=", "ALIVE")])) == 2, "the Ray worker")
    return procs


def wait_for(ready, what: str, limit: float = 120.0) -> None:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        try:
            if ready():
                return
        except Exception:  # noqa: BLE001 -- not up yet
            pass
        time.sleep(0.5)
    raise SystemExit(f"{what} did not come up within {limit:g} s")


def procs_json(procs) -> list[dict]:
    return [{"name": p.log.stem, "rc": p.rc, "timed_out": p.timed_out, "hung_s": p.hung_s, "stopped_by": p.stopped_by,
             "step_ms": (result_of(p) or {}).get("config", {}).get("step_ms"), "tail": p.tail[-600:]} for p in procs]


def experiment(raw: Path, runner_options: dict, arms_for, out: dict) -> None:
    rounds = []
    for r in (1, 2):
        procs = RayRunner(**runner_options).run_round(arms_for(raw, r))  # a fresh runner each round
        rounds.append(procs_json(procs))
    notes = [json.loads(p.read_text()) for p in sorted((raw / "remote").glob("ar-*.json"))]
    out[raw.name] = {"rounds": rounds, "pin": json.loads((raw / "remote" / PIN_FILE).read_text()),
                     "notes": notes}


def one_lane(root: Path) -> dict:
    """A baseline, then two variants filed at once into the same lane by real ``run_experiment`` calls."""
    from tools.experiments import ledger
    from tools.experiments.runner import RunSpec, run_experiment
    from tools.project import Project

    (root / "wiki").mkdir(parents=True)
    project = Project(root)

    def spec(step_ms: str, **kw) -> RunSpec:
        command = fake_arm(root, "x", "--step-ms", step_ms).command
        return RunSpec(model="m", lane="ray", variant="s/cpu", command=command, description=f"step {step_ms} ms",
                       runner="ray", runner_options={"poll_s": 0.3}, trust_step_times=True, **kw)  # made up

    outcomes = {"20": run_experiment(project, spec("20", baseline=True))}

    def variant(step_ms: str) -> None:
        outcomes[step_ms] = run_experiment(project, spec(step_ms, repeats=2))

    threads = [threading.Thread(target=variant, args=(ms,)) for ms in ("10", "15")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    rows = ledger.read((project.wiki / "experiments/m/ray/RESULTS.tsv").read_text())
    out = {"ledger": [{"exp_id": r["exp_id"], "status": r["status"]} for r in rows]}
    for ms, o in outcomes.items():
        remote = o.raw_dir / "remote"
        out[ms] = {"exp_id": o.exp_id, "verdict": o.verdict, "status": o.status,
                   "logs": sorted(p.name for p in o.raw_dir.glob("*.log")),
                   "pin": json.loads((remote / PIN_FILE).read_text()),
                   "notes": [json.loads(p.read_text()) for p in sorted(remote.glob("ar-*.json"))]}
    return out


def one_loop(root: Path) -> dict:
    """`tools loop` with `runner: ray` and `parallel: 2`: two experiments of one loop in flight at once."""
    sys.path.insert(0, str(Path(__file__).parents[1] / "loop"))
    from loop_helpers import make_kb

    from tools.loop.engine import start
    from tools.project import Project

    make_kb(root, runner={"name": "ray", "poll_s": 0.3}, parallel=2, budget={"runs": 2}, repeats={"min": 2, "max": 2})
    state = start(Project(root), "fake-loop")
    out = {"stop_reason": state["stop_reason"], "history": [], "pending": state["pending"]}
    for h in state["history"]:
        raw = next((root / "raw" / "profiles").glob(f"*-{h['iteration']:03d}-*"))
        notes = [json.loads(p.read_text()) for p in sorted((raw / "remote").glob("ar-*.json"))]
        out["history"].append({"iteration": h["iteration"], "verdict": h["verdict"], "exp_id": h["exp_id"],
                               "pin": json.loads((raw / "remote" / PIN_FILE).read_text()),
                               "nodes": sorted({n["driver_node_id"] for n in notes}),
                               "span": [min(n["start_unix"] for n in notes), max(n["end_unix"] for n in notes)]})
    return out


def main(result_path: str, work: str, tmp: str) -> None:
    work_dir = Path(work)
    cluster: list[subprocess.Popen] = []
    out: dict = {}
    t0 = time.monotonic()
    try:
        cluster = start_cluster(tmp)
        out["cluster_up_s"] = round(time.monotonic() - t0, 1)
        from ray.util.state import list_nodes
        out["nodes"] = {n.node_id: n.node_ip for n in list_nodes(address=ADDRESS)}
        code = work_dir / "code"  # experiment A ships its code as the job's working_dir
        code.mkdir(parents=True)
        shutil.copy(FAKE_TRAIN, code / "fake_train.py")

        def shipped(raw: Path, r: int) -> list[Arm]:
            return [Arm(a.name, [sys.executable, "fake_train.py", *a.command[2:]], a.log, cwd=code)
                    for a in pair(raw, r)]

        t1 = time.monotonic()
        threads = [threading.Thread(target=experiment, args=(work_dir / "raw" / "exp-a", {
                       "poll_s": 0.3, "working_dir": str(code)}, shipped, out)),
                   threading.Thread(target=experiment, args=(work_dir / "raw" / "exp-b", {"poll_s": 0.3},
                                                             pair, out))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        out["two_experiments_s"] = round(time.monotonic() - t1, 1)

        t3 = time.monotonic()
        out["lane"] = one_lane(work_dir / "kb")
        out["lane_s"] = round(time.monotonic() - t3, 1)

        t4 = time.monotonic()
        out["loop"] = one_loop(work_dir / "kb-loop")
        out["loop_s"] = round(time.monotonic() - t4, 1)

        t2 = time.monotonic()
        raw = work_dir / "raw" / "exp-hang"
        (hung,) = RayRunner(poll_s=0.3, hang_s=3).run_round([fake_arm(raw, "run-1", "--hang", "--spawn-child")])
        pids = [int(line.split()[-1]) for line in hung.log.read_text().splitlines() if " pid " in line]
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and any(alive(p) for p in pids):
            time.sleep(0.2)
        out["hung"] = {**procs_json([hung])[0], "pids": pids, "alive_after": [p for p in pids if alive(p)],
                       "seconds": round(time.monotonic() - t2, 1)}

        raw = work_dir / "raw" / "exp-secret"  # a secret reaches its arm through the job's runtime environment
        see = ("import hashlib, os; print('SEEN', hashlib.sha256(os.environ.get('HF_TOKEN', '').encode()).hexdigest(),"
               " sorted(k for k in os.environ if k[:5] == '_AR_S'))")
        (kept,) = RayRunner(poll_s=0.3).run_round([Arm("run-1", [sys.executable, "-c", see], raw / "run-1.log",
                                                       env={"HF_TOKEN": SECRET}, timeout=120)])
        out["secret"] = {"rc": kept.rc, "seen": [ln for ln in kept.log.read_text().splitlines() if "SEEN" in ln],
                         "files_holding_it": [str(f) for f in raw.rglob("*")
                                              if f.is_file() and SECRET.encode() in f.read_bytes()]}
    finally:  # no graceful shutdown: whatever is left dies with the namespace when this process exits
        for p in reversed(cluster):
            with_suppressed(os.killpg, p.pid, signal.SIGKILL)
        out["total_s"] = round(time.monotonic() - t0, 1)
        Path(result_path).write_text(json.dumps(out, indent=1))


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().split(")")[-1].split()[0] != "Z"


def with_suppressed(fn, *args) -> None:
    try:
        fn(*args)
    except (ProcessLookupError, PermissionError):
        pass


if __name__ == "__main__":
    main(*sys.argv[1:4])  # result file, work folder, Ray's temp folder (short: Ray's socket paths must be)
