"""A round as ONE remote job: submit its script, poll, read the log, fetch artefacts, cancel when needed.

A backend (xpk, ray, template) implements ``submit``, ``poll``, ``logs`` and ``cancel``, and may say where an
arm's artefact folders live on the worker (``artefact``) and how they come back (``fetch``). This class does
the rest: it writes the round script (``roundscript``), watches the job until it ends, hangs (no log progress
for ``hang_s``, past its deadline, or not started within ``pending_s``: cancelled) or is stopped (Ctrl-C,
SIGTERM: cancelled), then splits the job log into each arm's log and returns one ``Proc`` per arm.
Every file of the round's job goes to ``<the first arm's folder>/remote/``: the script, the whole job log and
a JSON note of the job (id, backend, worker, outcome).
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import ToolsError
from .process import TAIL_LINES, Proc, Stop, stop_on_signals
from . import Arm, hidden_env, roundscript
from .calls import mapping, seconds, strings

PHASES = ("pending", "running", "succeeded", "failed", "gone", "unknown")


@dataclass
class JobState:
    phase: str        # one of PHASES; "gone": the job is no longer known (finished and cleaned up, or deleted)
    detail: str = ""  # why, in words (a pod's waiting reason, a scheduler state)


@dataclass
class Artefact:
    var: str
    local: Path
    worker: str               # what the arm's variable says on the worker
    upload_to: str = ""       # the script copies ``worker`` here after the arm (empty: the arm writes in place)
    remote: str = ""          # where ``fetch`` finds it afterwards (empty: already local, nothing to fetch)


@dataclass
class Outcome:
    kind: str         # completed | crashed | hung | timeout | not_started | stopped | submit_failed | dry_run
    reason: str = ""
    stopped_by: str | None = None


def last_lines(text: str, n: int = TAIL_LINES) -> str:
    return "\n".join(text.splitlines()[-n:])


class RemoteRunner:
    """Base class of remote backends; the options here are common to all of them."""

    name = "remote"
    dry_run = False  # True: ``dry_submit`` shows what would be submitted, nothing runs
    upload = ""  # command template run on the worker for ``Artefact.upload_to`` ({src}, {dst})

    def __init__(self, poll_s: float = 10.0, hang_s: float = 1800.0, pending_s: float = 3600.0,
                 grace_s: float = 600.0, env: dict | None = None, forward_env: list | tuple = (),
                 max_poll_errors: int = 6, hide_secrets: bool = True, **unknown):
        if unknown:
            import inspect
            known = sorted({k for c in type(self).__mro__ if "__init__" in vars(c)
                            for k in inspect.signature(c.__init__).parameters} - {"self", "common", "unknown"})
            raise ToolsError(f"runner {self.name}: unknown option(s) {', '.join(sorted(unknown))} "
                             f"(options: {', '.join(known)})")
        self.poll_s, self.hang_s, self.pending_s, self.grace_s = seconds(
            self.name, poll_s=poll_s, hang_s=hang_s, pending_s=pending_s, grace_s=grace_s)
        self.env = {str(k): str(v) for k, v in mapping(self.name, "env", env).items()}
        self.forward_env = strings(self.name, "forward_env", forward_env)
        self.max_poll_errors = int(max_poll_errors)
        if not isinstance(hide_secrets, bool):
            raise ToolsError(f"runner {self.name}: `hide_secrets` is true or false, not {hide_secrets!r}")
        self.hide_secrets = hide_secrets  # false: secrets written into the round's script (a submit over ssh)

    # -- what a backend implements -------------------------------------------------------------------------
    def job_name(self, arms: list[Arm], token: str) -> str:
        return f"ar-{token}"

    def submit(self, script: str, name: str, arms: list[Arm], folder: Path, env: dict[str, str]) -> str:
        """Start the job, its environment holding ``env`` (``hidden_env``); return its id. Raise ``SubmitError``
        with the reason when it cannot."""
        raise NotImplementedError

    def dry_submit(self, script: str, name: str, arms: list[Arm], folder: Path, env: dict[str, str]) -> str:
        """Write what would be submitted under ``folder`` (``env``'s values never); return a sentence saying where."""
        raise ToolsError(f"runner {self.name} has no dry run")

    def poll(self, job: str) -> JobState:
        raise NotImplementedError

    def logs(self, job: str) -> str | None:
        """The whole job log so far (None: not readable now)."""
        raise NotImplementedError

    def cancel(self, job: str) -> str:
        """Stop the job; return what the backend said."""
        raise NotImplementedError

    def artefact(self, name: str, index: int, arm: Arm, var: str, local: Path) -> Artefact:
        return Artefact(var, local, str(local))  # the worker shares our filesystem

    def fetch(self, art: Artefact) -> str:
        """Bring ``art.remote`` to ``art.local``; return a note for the arm's log ('' when all went well)."""
        return ""

    def worker_cwd(self, arm: Arm) -> str | None:
        return str(arm.cwd) if arm.cwd else None

    def header(self, name: str, folder: Path, arms: list[Arm]) -> list[str]:
        return []

    def describe(self, job: str) -> dict:
        """Extra facts for the round's JSON note (the node a job ran on)."""
        return {}

    # -- the round -----------------------------------------------------------------------------------------
    def plan(self, arms: list[Arm], name: str) -> tuple[list[roundscript.ArmPlan], list[list[Artefact]]]:
        """Each arm as the worker sees it, and where its artefacts go."""
        plans, arts = [], []
        for i, arm in enumerate(arms):
            a = [self.artefact(name, i, arm, var, Path(local)) for var, local in arm.artefacts.items()]
            env = {k: os.environ[k] for k in self.forward_env if k in os.environ}
            env.update(self.env)
            for k, value in arm.env.items():  # a flag naming a local artefact folder names the worker's instead
                for x in a:
                    value = str(value).replace(str(x.local), x.worker)  # noqa: PLW2901
                env[k] = str(value)
            env.update({x.var: x.worker for x in a})
            env.setdefault("PYTHONUNBUFFERED", "1")
            uploads = [(x.worker, x.upload_to) for x in a if x.upload_to]
            plans.append(roundscript.ArmPlan(arm.name, list(arm.command), self.worker_cwd(arm), env,
                                             arm.timeout, uploads))
            arts.append(a)
        return plans, arts

    def run_round(self, arms: list[Arm], echo: bool = False) -> list[Proc]:
        """Run the arms in order as one job on one worker (see the module docstring)."""
        if not arms:
            return []
        token = secrets.token_hex(6)
        name = self.job_name(arms, token)
        folder = arms[0].log.parent / "remote"
        plans, arts = self.plan(arms, name)
        job_env = hidden_env.hide_secrets(plans) if self.hide_secrets else {}  # the job's environment carries them
        script = roundscript.render(plans, token, self.header(name, folder, arms), self.upload)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{name}.sh").write_text(script, encoding="utf-8")
        w = _Watch(time.monotonic(), name=name)
        job = ""
        with stop_on_signals():
            try:
                if self.dry_run:
                    return self._finish(arms, arts, token, name, job, w, Outcome("dry_run", self.dry_submit(
                        script, name, arms, folder, job_env)), folder)
                try:
                    job = self.submit(script, name, arms, folder, job_env)
                except ToolsError as e:  # SubmitError, or the submit command is missing
                    # a submit that timed out may have queued the job all the same: cancelled by its unique name
                    said = self._cancel_quietly(name) if getattr(e, "maybe_queued", False) else ""
                    outcome = Outcome("submit_failed", f"the {self.name} job was not submitted: {e}"
                                      + (f"; cancelled by name in case it was queued ({said})" if said else ""))
                else:
                    self._note(folder, name, job, "submitted")
                    outcome = self._watch(job, arms, token, echo, w, folder)
            except (KeyboardInterrupt, Stop) as e:
                how = e.how if isinstance(e, Stop) else "Ctrl-C"
                said = self._cancel_quietly(job or name)
                w.text = self._logs_quietly(job, w) if job else w.text
                outcome = Outcome("stopped", f"stopped by {how}: {self.name} job {job or name} cancelled ({said})", how)
            except BaseException:  # the runner itself failed: the job must not hold the machines until its deadline
                if not self.dry_run:
                    self._cancel_quietly(job or name)
                raise
        return self._finish(arms, arts, token, name, job, w, outcome, folder)

    def _watch(self, job: str, arms: list[Arm], token: str, echo: bool, w: _Watch, folder: Path) -> Outcome:
        deadline_s = sum(a.timeout for a in arms) + self.grace_s
        hang_s = min([self.hang_s] + [float(a.hang_s) for a in arms if a.hang_s])  # a loop file's hang_s counts
        started = requeued = None
        errors = 0
        while True:
            st = self._poll_quietly(job)
            self._read(job, w, echo, arms, token, folder)
            now = time.monotonic()
            if started is not None and st.phase == "pending":  # preempted, requeued, suspended: no hang, no deadline
                if requeued is None:
                    requeued = now
                    self._note(folder, w.name, job, f"back in the queue ({st.detail or st.phase})")
                w.changed = started = now
                if now - requeued > self.pending_s:
                    return self._hang(job, w, "not_started", f"{self.name} job {job} went back to the queue "
                                      f"({st.detail or st.phase}) and did not run again within {self.pending_s:g} s")
                time.sleep(self.poll_s)
                continue
            if requeued is not None and st.phase == "running":
                requeued, started, w.changed = None, now, now  # running again: its clocks start over
            errors = errors + 1 if st.phase == "unknown" else 0
            if errors >= self.max_poll_errors:
                self._cancel_quietly(job)
                return Outcome("crashed", f"lost track of {self.name} job {job}: {st.detail}")
            if st.phase in ("succeeded", "failed", "gone"):
                self._read(job, w, echo, arms, token, folder)  # what was written after the last poll
                done = roundscript.split(w.text, token, len(arms)).done
                if done:
                    return Outcome("completed")
                unread = f"; its log could not be read ({w.log_error})" if w.log_error else ""
                return Outcome("crashed", f"{self.name} job {job} ended ({st.phase}: {st.detail or 'no detail'}) "
                                          f"before the round finished{unread}")
            if started is None and (st.phase == "running" or w.text):
                started, w.changed = now, now
            if started is None and now - w.t0 > self.pending_s:
                return self._hang(job, w, "not_started", f"{self.name} job {job} did not start within "
                                                         f"{self.pending_s:g} s ({st.detail or st.phase})")
            if started is not None and now - w.changed > hang_s and w.log_error and not w.raw:
                return self._hang(job, w, "crashed", f"{self.name} job {job}: its log could not be read for "
                                                     f"{hang_s:g} s ({w.log_error})")  # no fault of its arms
            if started is not None and now - w.changed > hang_s:
                w.hung_s = hang_s
                unread = f" (its log could not be read: {w.log_error})" if w.log_error else ""
                return self._hang(job, w, "hung", f"{self.name} job {job} made no log progress for {hang_s:g} s"
                                                  + unread)
            if started is not None and now - started > deadline_s:
                return self._hang(job, w, "timeout", f"{self.name} job {job} still running {deadline_s:g} s after "
                                                     "it started (the arms' timeouts plus grace_s)")
            time.sleep(self.poll_s)

    def _hang(self, job: str, w: _Watch, kind: str, reason: str) -> Outcome:
        said = self._cancel_quietly(job)
        w.text = self._logs_quietly(job, w)
        return Outcome(kind, f"{reason}: cancelled ({said})")

    def _read(self, job: str, w: _Watch, echo: bool, arms: list[Arm], token: str, folder: Path) -> None:
        text = self._logs_quietly(job, w)
        if text == w.text:
            return
        if echo:
            sys.stdout.write(text[len(w.text):] if text.startswith(w.text) else text)
            sys.stdout.flush()
        w.text, w.changed = text, time.monotonic()
        parts = roundscript.split(text, token, len(arms))
        for i, a in enumerate(parts.arms):  # the arm logs on disk stay current while the job runs: the ones that
            if a.begun:                     # grew are written (one, mostly), not every arm's and the job's each poll
                w.begun.setdefault(i, w.changed)
                size = len(a.text) + len(a.after)
                if w.written.get(i) != size:
                    _write(arms[i].log, a.text + a.after)
                    w.written[i] = size

    def _finish(self, arms: list[Arm], arts: list[list[Artefact]], token: str, name: str, job: str, w: _Watch,
                outcome: Outcome, folder: Path) -> list[Proc]:
        parts = roundscript.split(w.text, token, len(arms))
        if w.text:
            _write(folder / f"{name}.log", w.text)
        where = f"{self.name} job {job or name}"
        current = next((i for i, a in enumerate(parts.arms) if not a.ended), None)  # the arm the job ended in
        procs: list[Proc] = []
        for i, (arm, a) in enumerate(zip(arms, parts.arms, strict=True)):
            notes = [self.fetch(x) for x in arts[i] if x.remote] if a.begun else []
            body = a.text + a.after + "".join(n + "\n" for n in notes if n)
            if i == 0 and not a.begun:
                body = parts.preamble
            if a.ended:
                timed_out = a.rc != 0 and (a.rc == 124 or a.seconds >= max(1.0, arm.timeout))
                trailer = [f"[tools exp run] killed after the {arm.timeout:g} s timeout"] if timed_out else []
                trailer.append(f"[tools runner] {where}, arm {i + 1}/{len(arms)} on {parts.worker or '?'}: "
                               f"exit {a.rc} after {a.seconds:g} s")
                text = _write(arm.log, body + "\n".join(trailer) + "\n")
                procs.append(Proc(a.rc, timed_out, a.seconds, arm.log, last_lines(text), clock=a.clock))
                continue
            if outcome.kind == "stopped" and current is not None and i > current:
                break  # like the local runner: nothing after the arm that was stopped
            here = i == current
            reason = outcome.reason if here or outcome.kind == "dry_run" else f"never ran: {outcome.reason}"
            if outcome.kind == "completed":
                reason = "the job finished without running this arm"
            text = _write(arm.log, body + f"[tools runner] {reason}\n")
            wall = time.monotonic() - w.begun[i] if i in w.begun else 0.0
            # the arm in flight was cut off: by its deadline (timed out), for no log progress (hung); a job that
            # never started, was never submitted or was lost is no fault of the configuration (not_run)
            not_run = outcome.kind in ("not_started", "submit_failed", "dry_run") or (
                outcome.kind == "crashed" and not a.begun)
            procs.append(Proc(None, here and outcome.kind == "timeout", wall, arm.log, last_lines(text),
                              outcome.stopped_by if here else None,
                              hung_s=w.hung_s if here and outcome.kind == "hung" else None,
                              not_run=reason if not_run else None,
                              lost=reason if here and outcome.kind == "crashed" and not not_run else None))
        if outcome.stopped_by and procs and not any(p.stopped_by for p in procs):
            procs[-1].stopped_by = outcome.stopped_by  # stopped after its last arm: the caller must still stop
        self._note(folder, name, job, outcome.kind, reason=outcome.reason, worker=parts.worker,
                   arms=[a.name for a in arms], seconds=round(time.monotonic() - w.t0, 1),
                   **(self._describe_quietly(job) if job else {}))
        return procs

    # -- backend calls that must not break the round ---------------------------------------------------------
    def _poll_quietly(self, job: str) -> JobState:
        try:
            return self.poll(job)
        except Exception as e:  # noqa: BLE001 -- a network or client error: counted, the job is polled again
            return JobState("unknown", f"{type(e).__name__}: {e}")

    def _logs_quietly(self, job: str, w: _Watch) -> str:
        """The job log as read so far, with what the backend gives now joined on (``w.log_error``: why it could
        not be read, the last time it could not)."""
        try:
            text = self.logs(job)
        except Exception as e:  # noqa: BLE001 -- logs not readable now: keep what we have
            w.log_error = str(e) if isinstance(e, ToolsError) else f"{type(e).__name__}: {e}"
            return w.text
        if text is None:
            return w.text
        w.log_error = ""
        if w.raw and text.startswith(w.raw):  # the file as last read, grown (after a rotation too): what is new
            whole = w.text + text[len(w.raw):]
        else:
            whole = joined(w.text, text)
        w.raw = text
        return whole

    def _cancel_quietly(self, job: str) -> str:
        try:
            return self.cancel(job) or "cancel sent"
        except Exception as e:  # noqa: BLE001 -- reported in the arm's log
            return f"cancel failed: {type(e).__name__}: {e}"

    def _describe_quietly(self, job: str) -> dict:
        try:
            return self.describe(job)
        except Exception as e:  # noqa: BLE001
            return {"describe_error": f"{type(e).__name__}: {e}"}

    def _note(self, folder: Path, name: str, job: str, state: str, **extra) -> None:
        note = {"runner": self.name, "name": name, "job": job, "state": state, "time": time.time(), **extra}
        _write(folder / f"{name}.json", json.dumps(note, indent=1, sort_keys=True, default=str) + "\n")


def joined(previous: str, text: str) -> str:
    """``previous`` (the log as read so far) with ``text`` (the log as the backend gives it now) joined on. Once
    kubelet rotates a container's log (10 MiB), ``kubectl logs`` gives only the current file: text already read is
    never dropped; the new text is joined where it overlaps the old, or after a line saying output is missing."""
    if text.startswith(previous):
        return text
    if previous.endswith(text) or not text:  # nothing new (a shorter read of the same log)
        return previous
    probe = text[:200]  # where the new text may start inside the old: checked whole at each candidate
    at = previous.find(probe, max(0, len(previous) - len(text)))  # an earlier start would make text the shorter
    while at != -1:
        if text.startswith(previous[at:]):
            return previous[:at] + text
        at = previous.find(probe, at + 1)
    if probe in previous:  # a read that is all old text
        return previous
    gap = "" if not previous or previous.endswith("\n") else "\n"
    return previous + gap + "[tools runner] the job log was rotated: some of its output is missing here\n" + text


@dataclass
class _Watch:
    t0: float
    name: str
    text: str = ""
    changed: float = 0.0
    begun: dict = field(default_factory=dict)  # arm index -> when its begin marker was first seen
    log_error: str = ""  # why the job log could not be read, the last time it could not
    written: dict = field(default_factory=dict)  # arm index -> characters of its log last written
    raw: str = ""  # the log as the backend gave it last (after a rotation: the new file only)
    hung_s: float | None = None  # the job was cancelled after this long without log progress


def _write(path: Path, text: str) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(OSError):
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(path)
    return text
