"""Rounds as xpk workloads on GKE TPU clusters (a JobSet queued by Kueue).

``xpk workload create`` submits the round (xpk runs as an external command from its own environment); the
JobSet is then polled with ``kubectl get jobset`` and its pods, the log read from host 0 of slice 0
(``kubectl logs -l jobset.sigs.k8s.io/jobset-name=<name>,jobset.sigs.k8s.io/job-index=0,...``), and a
cancel is ``kubectl delete jobset``. xpk puts ``--command`` inside a YAML block, so the round script travels
base64-encoded and is unpacked in the container. Artefacts (profile, HLO dump): each arm writes to a staging
folder in the container, copied after the arm to ``<bucket>/<workload>/<arm>/<folder>`` (``upload``; empty:
the arm's variables point at the bucket directly), then fetched with ``gsutil -m cp -r``.
"""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path

from ..errors import ToolsError
from . import Arm, hidden_env
from .calls import TIMED_OUT, SubmitError, call, strings
from .remote import Artefact, JobState, RemoteRunner, last_lines

NAME = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
MAX_NAME = 39
FATAL_WAITING = ("ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull",
                 "CreateContainerConfigError", "CreateContainerError")
LOG_SELECTOR = ("jobset.sigs.k8s.io/jobset-name={name},jobset.sigs.k8s.io/job-index=0,"
                "batch.kubernetes.io/job-completion-index=0")  # host 0 of slice 0 (Kubernetes >= 1.28)


def workload_name(prefix: str, folder_name: str, token: str) -> str:
    """``<prefix>-<end of the experiment folder's name>-<6 hex>``: under 40 characters, a DNS label."""
    base = re.sub(r"[^a-z0-9]+", "-", folder_name.lower()).strip("-")
    room = MAX_NAME - len(prefix) - len(token[:6]) - 2
    tail = base[-room:].strip("-") if room > 1 else ""
    return "-".join(x for x in (prefix, tail, token[:6]) if x)


def jobset_state(obj: dict) -> JobState:
    """Completed / Failed / suspended (waiting for Kueue) from a JobSet's JSON; 'running' otherwise."""
    status = obj.get("status") or {}
    true = {c.get("type"): c for c in status.get("conditions") or [] if str(c.get("status")) == "True"}
    terminal = status.get("terminalState") or ""
    for kind, phase in (("Completed", "succeeded"), ("Failed", "failed")):
        if kind in true or terminal == kind:
            c = true.get(kind) or {}
            return JobState(phase, ": ".join(x for x in (c.get("reason"), c.get("message")) if x) or kind)
    if (obj.get("spec") or {}).get("suspend") or "Suspended" in true:
        return JobState("pending", "suspended: waiting for Kueue to admit the workload")
    return JobState("running", "")


def pods_state(obj: dict) -> JobState:
    """Running / failed (a pod failed, or cannot pull its image) / pending, with the reason, from the pods' JSON."""
    running, waiting = False, []
    for pod in obj.get("items") or []:
        name = (pod.get("metadata") or {}).get("name", "?")
        st = pod.get("status") or {}
        ended = []
        for cs in (st.get("initContainerStatuses") or []) + (st.get("containerStatuses") or []):
            state = cs.get("state") or {}
            w, t = state.get("waiting") or {}, state.get("terminated") or {}
            if w.get("reason") in FATAL_WAITING:
                return JobState("failed", f"pod {name}: {w['reason']}: {w.get('message', '')}".strip())
            if w.get("reason"):
                waiting.append(f"pod {name}: {w['reason']}")
            if t and t.get("exitCode", 0) != 0:
                ended.append(f"container {cs.get('name')} {t.get('reason', 'terminated')} exit {t.get('exitCode')}")
        phase = st.get("phase")
        if phase == "Failed":
            return JobState("failed", f"pod {name} failed: {'; '.join(ended) or st.get('reason') or st.get('message')}")
        if phase == "Running":
            running = True
        if phase == "Pending":
            waiting += [f"pod {name}: {c.get('reason')}: {c.get('message', '')}" for c in st.get("conditions") or []
                        if c.get("type") == "PodScheduled" and str(c.get("status")) == "False"]
    if running:
        return JobState("running", "")
    if obj.get("items"):
        return JobState("pending", "; ".join(waiting) or "pods not running yet")
    return JobState("pending", "no pods yet")


class XpkRunner(RemoteRunner):
    name = "xpk"

    def __init__(self, cluster: str = "", project: str = "", zone: str = "", tpu_type: str = "", num_slices: int = 1,
                 docker_image: str = "", bucket: str = "", xpk: str = "xpk", workload_prefix: str = "ar",
                 kubectl: str = "kubectl", gsutil: str = "gsutil", namespace: str = "", kube_context: str = "",
                 device_type: str = "", docker_name: str = "jax-tpu", xpk_args: list | tuple = (),
                 upload: str = "gsutil -m cp -r {src} {dst}", stage_dir: str = "/tmp/autoresearch",
                 log_selector: str = LOG_SELECTOR, dry_run: bool = False, create_timeout_s: float = 900.0,
                 poll_s: float = 15.0, **common):
        super().__init__(poll_s=poll_s, **common)
        missing = [k for k, v in (("cluster", cluster), ("docker_image", docker_image),
                                  ("tpu_type or device_type", tpu_type or device_type)) if not v]
        if missing:
            raise ToolsError(f"runner xpk needs {', '.join(missing)} (see docs/runners.md)")
        if not NAME.fullmatch(workload_prefix) or len(workload_prefix) > 20:
            raise ToolsError(f"runner xpk: workload_prefix {workload_prefix!r} must match [a-z]([-a-z0-9]*[a-z0-9])? "
                             "and be at most 20 characters")
        self.cluster, self.project, self.zone, self.workload_prefix = cluster, project, zone, workload_prefix
        self.tpu_type, self.device_type, self.num_slices = tpu_type, device_type, int(num_slices)
        self.docker_image, self.docker_name = docker_image, docker_name
        b = str(bucket or "").rstrip("/")
        self.bucket = b if not b or b.startswith("gs://") else f"gs://{b}"
        self.xpk, self.kubectl_cmd, self.gsutil = xpk, kubectl, gsutil
        self.namespace, self.kube_context = namespace, kube_context
        self.xpk_args = strings(self.name, "xpk_args", xpk_args)
        self.upload, self.stage_dir, self.log_selector = upload, stage_dir.rstrip("/"), log_selector
        self.dry_run, self.create_timeout_s = bool(dry_run), float(create_timeout_s)
        try:  # a bad template is an error now, not a round that fails after its timed arms
            upload.format(src="probe", dst="gs://probe/")
        except (KeyError, IndexError, ValueError) as e:
            raise ToolsError(f"runner xpk: `upload` template {upload!r}: bad placeholder {e} (it takes {{src}} and "
                             "{dst}; write a literal brace as {{ or }}, a shell variable as ${{HOSTNAME}})") from None

    def job_name(self, arms: list[Arm], token: str) -> str:
        name = workload_name(self.workload_prefix, arms[0].log.parent.name, token)
        assert NAME.fullmatch(name) and len(name) <= MAX_NAME, name
        return name

    def artefact(self, name: str, index: int, arm: Arm, var: str, local: Path) -> Artefact:
        if not self.bucket:
            raise ToolsError(f"runner xpk: arm {arm.name} has artefacts ({var}) but no `bucket` is set")
        remote = f"{self.bucket}/{name}/{arm.name}/{local.name}"
        if not self.upload:
            return Artefact(var, local, remote, remote=remote)
        staged = f"{self.stage_dir}/{name}/{index}-{arm.name}/{local.name}"
        return Artefact(var, local, staged, upload_to=f"{self.bucket}/{name}/{arm.name}/", remote=remote)

    def fetch(self, art: Artefact) -> str:
        art.local.parent.mkdir(parents=True, exist_ok=True)
        r = call([self.gsutil, "-m", "cp", "-r", art.remote, str(art.local.parent)], self.create_timeout_s)
        if r.returncode != 0:
            return f"[tools runner] could not fetch {art.remote}: {last_lines(r.stderr or r.stdout, 3)}"
        return f"[tools runner] fetched {art.remote} to {art.local}"

    def _env_file(self, name: str, folder: Path, env: dict[str, str], dry: bool = False) -> list[str]:
        """``--env-file`` naming the job's secrets (``hidden_env``): xpk takes their values from its own environment
        (our call's), so the manifest has them and no file of ours does."""
        if not env:
            return []
        if any(a == flag or a.startswith(flag + "=") for a in self.xpk_args for flag in ("--env", "--env-file")):
            raise ToolsError(f"runner xpk: the job's secrets ({', '.join(sorted(env))}) go in an --env-file of their "
                             "names; xpk takes one --env or --env-file: drop it from xpk_args and set the variable "
                             "with --env or forward_env")
        path = folder / f"{name}.env"
        path.write_text(hidden_env.env_file(env, values=dry), encoding="utf-8")
        return [f"--env-file={path}"]

    def create_command(self, name: str, script: str) -> list[str]:
        packed = base64.b64encode(script.encode()).decode()
        path = f'"${{TMPDIR:-/tmp}}/{name}.sh"'
        unpack = f"printf %s {packed} | base64 -d > {path} && exec sh {path}"
        device = ["--tpu-type", self.tpu_type] if self.tpu_type else ["--device-type", self.device_type]
        cmd = [self.xpk, "workload", "create", "--cluster", self.cluster, "--workload", name,
               "--docker-image", self.docker_image, *device, "--num-slices", str(self.num_slices),
               "--command", unpack]
        for flag, value in (("--project", self.project), ("--zone", self.zone), ("--namespace", self.namespace)):
            cmd += [flag, value] if value else []
        if self.docker_name != "jax-tpu":
            cmd += ["--docker-name", self.docker_name]
        return cmd + self.xpk_args

    def dry_submit(self, script: str, name: str, arms: list[Arm], folder: Path, env: dict[str, str]) -> str:
        manifest = folder / f"{name}.yaml"
        cmd = self.create_command(name, script) + self._env_file(name, folder, env, dry=True) + [
            "--dry-run", "--skip-validation", f"--output-manifest-file={manifest}"]
        r = call(cmd, self.create_timeout_s)
        (folder / f"{name}.dry-run.txt").write_text(r.stdout + r.stderr, encoding="utf-8")
        if r.returncode != 0 or not manifest.is_file():
            raise SubmitError(f"xpk --dry-run exited {r.returncode}: {last_lines(r.stdout + r.stderr, 15)}")
        return f"dry run: xpk wrote the manifest to {manifest}; nothing was submitted"

    def submit(self, script: str, name: str, arms: list[Arm], folder: Path, env: dict[str, str]) -> str:
        r = call(self.create_command(name, script) + self._env_file(name, folder, env), self.create_timeout_s, env=env)
        (folder / f"{name}.create.txt").write_text(r.stdout + r.stderr, encoding="utf-8")
        if r.returncode != 0:
            raise SubmitError(f"`xpk workload create` exited {r.returncode}: {last_lines(r.stdout + r.stderr, 15)}",
                              maybe_queued=r.returncode == TIMED_OUT)
        return name

    def _kubectl(self, *args: str) -> list[str]:
        cmd = [self.kubectl_cmd]
        cmd += ["--context", self.kube_context] if self.kube_context else []
        cmd += ["-n", self.namespace] if self.namespace else []
        return cmd + list(args)

    def poll(self, job: str) -> JobState:
        r = call(self._kubectl("get", "jobset", job, "-o", "json"), 60)
        if r.returncode != 0:
            said = (r.stderr or r.stdout).strip()
            gone = "notfound" in said.lower().replace(" ", "")
            return JobState("gone" if gone else "unknown", said[-300:])
        try:
            state = jobset_state(json.loads(r.stdout))
        except ValueError:
            return JobState("unknown", f"kubectl printed no JSON: {r.stdout[:200]!r}")
        if state.phase not in ("running", "failed"):
            return state
        p = call(self._kubectl("get", "pods", "-l", f"jobset.sigs.k8s.io/jobset-name={job}", "-o", "json"), 60)
        try:
            pods = pods_state(json.loads(p.stdout)) if p.returncode == 0 else None
        except ValueError:
            pods = None
        if state.phase == "failed":  # the pods say why (OOMKilled, an image that cannot be pulled)
            return JobState("failed", "; ".join([state.detail] + ([pods.detail] if pods and pods.detail else [])))
        return pods or state

    def logs(self, job: str) -> str | None:
        cmd = self._kubectl("logs", "-l", self.log_selector.format(name=job), "-c", self.docker_name, "--tail=-1")
        r = call(cmd, 120)
        if r.returncode != 0:  # no pod yet, or not allowed (RBAC: pods/log): said, then waited on
            raise ToolsError(f"`{' '.join(cmd[:2])} logs` exited {r.returncode}: {(r.stderr or r.stdout).strip()[-300:]}")
        return r.stdout

    def cancel(self, job: str) -> str:
        r = call(self._kubectl("delete", "jobset", job, "--ignore-not-found", "--wait=false"), 120)
        return f"kubectl delete jobset {job}: exit {r.returncode} {(r.stdout + r.stderr).strip()[-200:]}".strip()

    def describe(self, job: str) -> dict:
        return {"cluster": self.cluster, "project": self.project, "zone": self.zone,
                "tpu_type": self.tpu_type or self.device_type, "num_slices": self.num_slices,
                "docker_image": self.docker_image, "bucket": self.bucket}
