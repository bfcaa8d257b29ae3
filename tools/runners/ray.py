"""Rounds as Ray jobs, through the Ray Jobs API (``JobSubmissionClient`` on the dashboard's HTTP address).

The round script is the job's entrypoint. With ``pin_node`` (the default) every round of one experiment runs on
the same node: the first round picks an alive node that has the entrypoint resources and the fewest of our
jobs in flight, writes it to ``<experiment folder>/remote/ray-node.json``, and every round (this one too)
carries ``entrypoint_resources={"node:<ip>": node_share}``. A later round whose node is gone fails to submit
rather than run elsewhere: measurements from two machines are never compared. Experiments keep no shared state
(each has its own folder and job ids), so several can run at once from threads or processes.
"""

from __future__ import annotations

import json
import re
import threading
from collections import Counter
from pathlib import Path

from ..errors import ToolsError
from . import Arm
from .calls import SubmitError
from .remote import JobState, RemoteRunner

PIN_FILE = "ray-node.json"
PHASE = {"PENDING": "pending", "RUNNING": "running", "SUCCEEDED": "succeeded", "FAILED": "failed",
         "STOPPED": "failed"}
_CHOOSING = threading.Lock()  # one experiment of this process picks its node and submits at a time


class RayRunner(RemoteRunner):
    name = "ray"

    def __init__(self, address: str = "http://127.0.0.1:8265", working_dir: str | None = None,
                 pin_node: bool = True, entrypoint_num_cpus: float | None = None,
                 entrypoint_num_gpus: float | None = None, entrypoint_resources: dict | None = None,
                 runtime_env: dict | None = None, node_share: float = 0.001, job_prefix: str = "ar",
                 poll_s: float = 2.0, **common):
        super().__init__(poll_s=poll_s, **common)
        self.address, self.pin_node, self.job_prefix = address, bool(pin_node), job_prefix
        self.node_share = float(node_share)
        self.working_dir = Path(working_dir).resolve() if working_dir else None
        self.num_cpus, self.num_gpus = entrypoint_num_cpus, entrypoint_num_gpus
        self.resources = {str(k): float(v) for k, v in (entrypoint_resources or {}).items()}
        self.runtime_env = dict(runtime_env or {})
        self._client = None
        self._resources_of: dict[str, dict] = {}  # job id -> the entrypoint resources it was submitted with

    def client(self):
        if self._client is None:
            try:
                from ray.job_submission import JobSubmissionClient
            except ImportError:
                raise ToolsError("runner ray needs Ray: pip install 'autoresearch-wiki[ray]'") from None
            try:
                self._client = JobSubmissionClient(self.address)
            except (ConnectionError, RuntimeError, ValueError) as e:
                raise SubmitError(f"no Ray dashboard answers at {self.address}: {e}") from None
        return self._client

    def job_name(self, arms: list[Arm], token: str) -> str:
        base = re.sub(r"[^a-z0-9]+", "-", arms[0].log.parent.name.lower()).strip("-")[-48:]
        return "-".join(x for x in (self.job_prefix, base, token) if x)

    def worker_cwd(self, arm: Arm) -> str | None:
        if not arm.cwd:
            return None
        cwd = Path(arm.cwd).resolve()
        if self.working_dir and cwd.is_relative_to(self.working_dir):  # the job starts in the unpacked copy
            rel = cwd.relative_to(self.working_dir).as_posix()
            return None if rel == "." else rel
        return str(cwd)

    # -- the node an experiment is pinned to ----------------------------------------------------------------
    def _alive_nodes(self) -> list:
        from ray.util.state import list_nodes
        return list(list_nodes(address=self.address, filters=[("state", "=", "ALIVE")],
                               raise_on_missing_output=False))

    def _need(self) -> dict[str, float]:
        need = dict(self.resources)
        need.update({k: float(v) for k, v in (("CPU", self.num_cpus), ("GPU", self.num_gpus)) if v})
        return need

    def _choose(self, nodes: list) -> dict:
        need = self._need()
        fit = [n for n in nodes if all((n.resources_total or {}).get(k, 0.0) >= v for k, v in need.items())]
        if not fit:
            raise SubmitError(f"no alive Ray node at {self.address} has {need or 'any resources'}")
        load: Counter = Counter()
        for j in self.client().list_jobs():
            if str(j.status) in ("PENDING", "RUNNING"):
                load[(j.metadata or {}).get("autoresearch_node_id") or j.driver_node_id] += 1
        best = min(fit, key=lambda n: (load[n.node_id], n.node_ip, n.node_id))
        return {"node_ip": best.node_ip, "node_id": best.node_id, "address": self.address,
                "load_when_chosen": load[best.node_id]}

    def _pin(self, folder: Path) -> tuple[dict, bool]:
        nodes = self._alive_nodes()
        path = folder / PIN_FILE
        if not path.is_file():
            return self._choose(nodes), True
        try:
            pin = json.loads(path.read_text(encoding="utf-8"))
        except ValueError as e:
            raise ToolsError(f"{path}: not valid JSON ({e}); delete it to pick a node again") from None
        if not any(n.node_ip == pin.get("node_ip") for n in nodes):
            raise SubmitError(f"this experiment's rounds run on node {pin.get('node_ip')} (chosen at its first "
                              f"round, {path}) and that node is not alive now; rounds are never moved to another "
                              "machine: rerun the experiment")
        return pin, False

    # -- the job ---------------------------------------------------------------------------------------------
    def submit(self, script: str, name: str, arms: list[Arm], folder: Path, env: dict[str, str]) -> str:
        client = self.client()
        runtime = dict(self.runtime_env)
        if self.working_dir:
            runtime["working_dir"] = str(self.working_dir)
        if env:  # the job's secrets: Ray echoes the entrypoint into the job log, never the runtime environment
            runtime["env_vars"] = {**(runtime.get("env_vars") or {}), **env}
        kw = {"entrypoint": script, "submission_id": name, "runtime_env": runtime or None,
              "entrypoint_num_cpus": self.num_cpus, "entrypoint_num_gpus": self.num_gpus,
              "metadata": {"autoresearch_experiment": arms[0].log.parent.name,
                           "autoresearch_arms": ",".join(a.name for a in arms)}}
        res = dict(self.resources)
        try:
            if not self.pin_node:
                job = client.submit_job(entrypoint_resources=res or None, **kw)
                self._resources_of[job] = res
                return job
            with _CHOOSING:
                pin, new = self._pin(folder)
                res[f"node:{pin['node_ip']}"] = self.node_share
                kw["metadata"]["autoresearch_node_id"] = pin["node_id"]
                job = client.submit_job(entrypoint_resources=res, **kw)
                self._resources_of[job] = res
                if new:
                    (folder / PIN_FILE).write_text(json.dumps(pin, indent=1, sort_keys=True) + "\n", encoding="utf-8")
                return job
        except (ConnectionError, RuntimeError, ValueError) as e:  # the SDK's HTTP errors are RuntimeErrors
            raise SubmitError(f"Ray at {self.address} refused the job: {str(e)[-800:]}") from None

    def poll(self, job: str) -> JobState:
        status = str(self.client().get_job_status(job))
        phase = PHASE.get(status, "unknown")
        detail = status
        if phase in ("pending", "failed"):
            detail = f"{status}: {self.client().get_job_info(job).message or ''}".strip()
        return JobState(phase, detail)

    def logs(self, job: str) -> str | None:
        return self.client().get_job_logs(job)

    def cancel(self, job: str) -> str:
        stopped = self.client().stop_job(job)
        return f"ray job stop {job}: {'stop sent' if stopped else 'it was not running'}"

    def describe(self, job: str) -> dict:
        info = self.client().get_job_info(job)
        return {"address": self.address, "status": str(info.status), "driver_node_id": info.driver_node_id,
                "entrypoint_resources": self._resources_of.get(job), "message": info.message,
                "start_unix": (info.start_time or 0) / 1e3 or None, "end_unix": (info.end_time or 0) / 1e3 or None}
