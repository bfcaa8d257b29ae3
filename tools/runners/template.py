"""A runner made of command templates: submit the round script, poll the job's state, read its log, cancel it.

The defaults drive Slurm on a shared filesystem (``sbatch --parsable``, ``squeue``, the ``--output`` file,
``scancel``, ``scancel --name`` for a job whose id never came back). Placeholders: ``{script}`` the script's path (leave it out of ``submit`` to pass the script on
stdin, e.g. ``ssh login sbatch --parsable``), ``{log}`` the job's log path, ``{name}`` the job name, ``{dir}``
the round's folder, ``{job}`` the id ``submit`` printed, ``{minutes}`` the round's time limit in minutes.
"""

from __future__ import annotations

import math
import re
import shlex
from pathlib import Path

from ..errors import ToolsError
from . import Arm
from .calls import TIMED_OUT, SubmitError, call, mapping, strings
from .remote import JobState, RemoteRunner

SLURM_STATES = {
    **dict.fromkeys(("PENDING", "CONFIGURING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "RESV_DEL_HOLD",
                     "SUSPENDED"), "pending"),
    **dict.fromkeys(("RUNNING", "COMPLETING", "STAGE_OUT", "SIGNALING", "RESIZING"), "running"),
    **dict.fromkeys(("COMPLETED", "SUCCEEDED", "DONE"), "succeeded"),
    **dict.fromkeys(("FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED", "BOOT_FAIL",
                     "DEADLINE", "SPECIAL_EXIT", "REVOKED"), "failed"),
    "GONE": "gone",
}
GONE_HINTS = ("invalid job id", "unknown job")


class TemplateRunner(RemoteRunner):
    name = "template"

    def __init__(self, submit: str = "sbatch --parsable {script}", poll: str = "squeue -h -t all -j {job} -o %T",
                 logs: str = "cat {log}", cancel: str = "scancel {job}", cancel_name: str = "scancel --name {name}",
                 header: list | tuple = ("#SBATCH --job-name={name}", '#SBATCH --output="{log}"'),
                 states: dict | None = None, job_id: str = r"^\s*([^;\s]+)", prefix: str = "ar",
                 poll_s: float = 5.0, call_timeout_s: float = 60.0, **common):
        super().__init__(poll_s=poll_s, **common)
        self.templates = {"submit": submit, "poll": poll, "logs": logs, "cancel": cancel, "cancel_name": cancel_name}
        self.header_lines = strings(self.name, "header", header)
        given = mapping(self.name, "states", states)
        self.states = {**SLURM_STATES, **{str(k).upper(): str(v) for k, v in given.items()}}
        bad = sorted(v for v in self.states.values() if v not in ("pending", "running", "succeeded", "failed", "gone"))
        if bad:
            raise ToolsError(f"runner template: states map to pending|running|succeeded|failed|gone, not {bad}")
        self.job_re = re.compile(job_id, re.M)
        self.prefix, self.call_timeout_s = prefix, float(call_timeout_s)
        self._jobs: dict[str, dict] = {}  # job id -> its placeholders
        probe = dict(self._values("probe", Path("."), []), job="1")
        for which in self.templates:  # a bad template is an error now, not a failed round later
            self._command(which, probe)
        for h in self.header_lines:
            self._format(h, probe, "header")

    def job_name(self, arms: list[Arm], token: str) -> str:
        return f"{self.prefix}-{token}"

    def _values(self, name: str, folder: Path, arms: list[Arm]) -> dict:
        minutes = math.ceil((sum(a.timeout for a in arms) + self.grace_s) / 60)
        return {"script": str(folder / f"{name}.sh"), "log": str(folder / f"{name}.out"), "name": name,
                "dir": str(folder), "minutes": str(minutes), "job": ""}

    @staticmethod
    def _format(part: str, values: dict, which: str, template: str = "") -> str:
        try:
            return part.format(**values)
        except (KeyError, IndexError, ValueError) as e:
            raise ToolsError(f"runner template: `{which}` template {template or part!r}: bad placeholder {e} "
                             "(use {script} {log} {name} {dir} {job} {minutes})") from None

    def _command(self, which: str, values: dict) -> list[str]:
        t = self.templates[which]
        return [self._format(part, values, which, t) for part in shlex.split(t)]

    def header(self, name: str, folder: Path, arms: list[Arm]) -> list[str]:
        values = self._values(name, folder, arms)
        return [self._format(h, values, "header") for h in self.header_lines]

    def submit(self, script: str, name: str, arms: list[Arm], folder: Path, env: dict[str, str]) -> str:
        values = self._values(name, folder, arms)
        path = Path(values["script"])
        path.write_text(script, encoding="utf-8")
        path.chmod(0o755)
        cmd = self._command("submit", values)
        on_stdin = "{script}" not in self.templates["submit"]
        # the job's secrets in the submit command's environment: sbatch exports it to the job (--export=ALL, its
        # default), a command started in the background inherits it
        r = call(cmd, self.call_timeout_s, stdin=script if on_stdin else None, env=env)
        if r.returncode != 0:
            raise SubmitError(f"`{shlex.join(cmd)}` exited {r.returncode}: {(r.stderr or r.stdout).strip()[-800:]}",
                              maybe_queued=r.returncode == TIMED_OUT)
        lines = [ln for ln in r.stdout.splitlines() if ln.strip()]
        m = self.job_re.search(lines[-1]) if lines else None
        if not m:
            raise SubmitError(f"`{shlex.join(cmd)}` printed no job id matching {self.job_re.pattern!r}: "
                              f"{r.stdout.strip()[-300:]!r}")
        job = m.group(1) if m.groups() else m.group(0)
        self._jobs[job] = dict(values, job=job)
        return job

    def _values_of(self, job: str) -> dict:
        return self._jobs.get(job) or {"job": job, "script": "", "log": "", "name": "", "dir": "", "minutes": ""}

    def poll(self, job: str) -> JobState:
        r = call(self._command("poll", self._values_of(job)), self.call_timeout_s)
        said = (r.stdout + r.stderr).strip()
        if r.returncode != 0:
            if any(h in said.lower() for h in GONE_HINTS):
                return JobState("gone", said[-200:])
            return JobState("unknown", f"poll exited {r.returncode}: {said[-200:]}")
        if not r.stdout.strip():
            return JobState("gone", "the job left the queue")
        word = r.stdout.split()[0].rstrip("+").upper()
        phase = self.states.get(word)
        return JobState(phase, word) if phase else JobState("unknown", f"state {word!r} not in the states map")

    def logs(self, job: str) -> str | None:
        cmd = self._command("logs", self._values_of(job))
        r = call(cmd, self.call_timeout_s)
        if r.returncode != 0:  # not there yet (before the job starts), or not readable: said, then waited on
            raise ToolsError(f"`{shlex.join(cmd)}` exited {r.returncode}: {(r.stderr or r.stdout).strip()[-300:]}")
        return r.stdout

    def cancel(self, job: str) -> str:
        """Cancel by id; by the round's unique name where no id is known (stopped while submitting, a submit that
        timed out after queueing it)."""
        if job not in self._jobs:
            cmd = self._command("cancel_name", {**self._values_of(job), "name": job})
            r = call(cmd, self.call_timeout_s)
            return f"`{shlex.join(cmd)}` exited {r.returncode} {(r.stdout + r.stderr).strip()[-200:]}".strip()
        cmd = self._command("cancel", self._values_of(job))
        r = call(cmd, self.call_timeout_s)
        return f"`{shlex.join(cmd)}` exited {r.returncode} {(r.stdout + r.stderr).strip()[-200:]}".strip()

    def describe(self, job: str) -> dict:
        v = self._values_of(job)
        return {"job_log": v["log"], "script": v["script"]}
