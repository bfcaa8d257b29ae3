"""Run by test_template.py inside a private network and PID namespace: a real one-node Slurm (munged,
slurmctld, slurmd from Debian's packages) and the template runner's defaults (sbatch, squeue, scancel) against it.

Slurm's daemons bind all interfaces and want a non-loopback address (getaddrinfo with AI_ADDRCONFIG), so the
namespace's loopback also carries 10.254.0.1; nothing outside the namespace can reach them. Writes what
happened as JSON to argv[1]; argv[2] is a work folder, argv[3] a short folder for Slurm's and munge's files.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _runner_helpers import fake_arm, pair  # noqa: E402

from tools.experiments.arms import result_of  # noqa: E402
from tools.runners.template import TemplateRunner  # noqa: E402

CONF = """ClusterName=arw
SlurmctldHost={host}(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={d}/munge/munge.socket
CredType=cred/munge
StateSaveLocation={d}/state
SlurmdSpoolDir={d}/spool
SlurmctldPidFile={d}/slurmctld.pid
SlurmdPidFile={d}/slurmd.pid
SlurmctldLogFile={d}/slurmctld.log
SlurmdLogFile={d}/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SchedulerType=sched/builtin
SelectType=select/linear
JobAcctGatherType=jobacct_gather/none
ReturnToService=2
MpiDefault=none
NodeName={host} NodeAddr=127.0.0.1 CPUs=2 RealMemory=1000 State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
"""


def start_slurm(d: Path) -> None:
    for sub in ("state", "spool", "munge"):
        (d / sub).mkdir(parents=True, exist_ok=True)
    (d / "munge").chmod(0o700)
    key = d / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o400)
    subprocess.run(["munged", "--force", f"--key-file={key}", f"--socket={d}/munge/munge.socket",
                    f"--pid-file={d}/munged.pid", f"--log-file={d}/munged.log", f"--seed-file={d}/munge.seed"],
                   check=True)
    (d / "slurm.conf").write_text(CONF.format(host=platform.node(), d=d))
    os.environ["SLURM_CONF"] = str(d / "slurm.conf")
    subprocess.run(["slurmctld", "-i"], check=True)
    subprocess.run(["slurmd"], check=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        r = subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True, text=True, check=False)
        if "idle" in r.stdout:
            return
        time.sleep(0.3)
    raise SystemExit("Slurm did not come up within 60 s")


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().split(")")[-1].split()[0] != "Z"


def main(result_path: str, work: str, short: str) -> None:
    out: dict = {}
    t0 = time.monotonic()
    start_slurm(Path(short))
    out["slurm_up_s"] = round(time.monotonic() - t0, 1)
    raw = Path(work) / "raw" / "exp-slurm"
    t1 = time.monotonic()
    procs = TemplateRunner(poll_s=0.5).run_round(pair(raw))
    out["round_s"] = round(time.monotonic() - t1, 1)
    out["round"] = [{"rc": p.rc, "step_ms": (result_of(p) or {}).get("config", {}).get("step_ms"), "tail": p.tail[-400:]}
                    for p in procs]
    out["notes"] = [json.loads(p.read_text()) for p in (raw / "remote").glob("ar-*.json")]
    hung_raw = Path(work) / "raw" / "exp-slurm-hang"
    (hung,) = TemplateRunner(poll_s=0.5, hang_s=2).run_round([fake_arm(hung_raw, "run-1", "--hang", "--spawn-child")])
    pids = [int(line.split()[-1]) for line in hung.log.read_text().splitlines() if " pid " in line]
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and any(alive(p) for p in pids):
        time.sleep(0.2)
    out["hung"] = {"hung_s": hung.hung_s, "tail": hung.tail[-400:], "pids": pids,
                   "alive_after": [p for p in pids if alive(p)]}
    out["total_s"] = round(time.monotonic() - t0, 1)
    Path(result_path).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main(*sys.argv[1:4])
