"""The loop, one step at a time: priors → proposal (filed as a hypothesis page) → change (knobs, env or a code
patch on its own branch) → run (interleaved against the trunk, profiled) → verdict → keep or discard → learn.

Each phase writes the state before the next begins (tools/loop/state.py), so ``kill -9`` at any moment and then
``resume`` continues with nothing lost and nothing run twice: a run cut off mid-way is filed as a crash by the
runner's abandoned-run sweep and its proposal is run again as a new experiment.

The loop stops only on a budget (runs, wall time, LLM tokens or cost, device-seconds), the target, a double plateau
(two retrospectives with runs between and no frontier move), or a person's ``tools loop stop``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .. import pages
from ..errors import InputError, ToolsError
from ..experiments import filing, records
from ..experiments.runner import run_experiment, slugify
from ..project import Project
from ..writer import Writer, atomic_write
from . import gather, hypotheses, memory, report, runs, state as st
from .priors import Attempt, Priors, run_key
from .proposal import Proposal
from .proposers import get as get_proposer
from .proposers.queue import QueueProposer
from .spec import LoopSpec, load
from .workspace import PatchError, Workspace

RETRO_EVERY = 4            # non-improving iterations between retrospectives ("a few": then switch category)
MAX_REFUSALS = 3           # proposals refused in one iteration before the proposer counts as exhausted
MAX_INTERRUPTED_RETRIES = 2
MAX_PROPOSER_FAILURES = 3
HYPOTHESIS_STATUS = {"supported": "supported", "refuted": "refuted", "invalid": "refuted",
                     "inconclusive": "inconclusive", "crash": "inconclusive"}


class LoopInterrupted(ToolsError):
    """Ctrl-C or SIGTERM stopped a run; the loop's state says how to go on."""

    def __init__(self, how: str):
        self.how = how
        self.exit_code = 143 if how == "SIGTERM" else 130
        super().__init__(f"interrupted by {how}: the run in flight was filed as a crash; `tools loop resume` "
                         "runs it again")


@dataclass
class StopGate:
    """Why the loop must stop now, or None. Budgets and the target never write a retrospective first."""
    reason: str
    kind: str  # budget | target | plateau | request | error


class Loop:
    def __init__(self, project: Project, spec: LoopSpec, say: Callable[[str], None] | None = None,
                 proposer=None):
        self.project, self.spec = project, spec
        self.paths = st.LoopPaths(project, spec.name)
        self.say = say or (lambda msg: None)
        self.writer = Writer(project.wiki)
        self.proposer = proposer or get_proposer(spec.proposer, spec.proposer_options)
        self.people = QueueProposer(people_only=True)
        code = (project.root / spec.code).resolve() if spec.code else None
        self.workspace = Workspace(project.root, code, self.paths.folder, spec.name, spec.cwd)
        self.state: dict = st.load(self.paths) or st.new_state(spec)
        self._mark = time.monotonic()
        import threading

        self._save_lock = threading.RLock()  # parallel iterations save the one state file
        self._git = threading.Lock()
        self._inflight: set[str] = set()

    # ------------------------------------------------------------------ state

    def save(self) -> None:
        with self._save_lock:
            self._save()

    def _save(self) -> None:
        t = time.monotonic()
        self.state["usage"]["wall_s"] = round(self.state["usage"]["wall_s"] + t - self._mark, 3)
        self._mark = t
        st.save(self.paths, self.state)

    def budget_left(self) -> dict[str, float]:
        u = self.state["usage"]
        return {k: round(v - u.get(k, 0), 3) for k, v in self.spec.budget.items()}

    # ------------------------------------------------------------------ the driver

    def run(self, max_iterations: int | None = None, fresh: bool = False) -> dict:
        """Drive the loop until it must stop (or for ``max_iterations`` more iterations: tests, the demo).
        ``fresh``: start over, once this process holds the loop (a running driver keeps its state and work trees)."""
        from ..experiments import command

        try:
            with st.driving(self.paths), command.stop_on_signals():
                if fresh:
                    self.workspace.start_over()
                    self.paths.state.unlink(missing_ok=True)
                    self.state = st.new_state(self.spec)
                return self._drive(max_iterations)
        except command.Stop as e:  # SIGTERM between two runs (a run in flight files its own crash)
            self.state.update(status="stopped", stop_reason=f"interrupted by {e.how}: `tools loop resume` goes on")
            self.save()
            raise LoopInterrupted(e.how) from None

    def _drive(self, max_iterations: int | None) -> dict:
        self.state["status"], self.state["stop_reason"] = "running", None
        self.save()
        self.workspace.ensure()
        if self.pendings():
            self._finish_pending()
        if not self.state.get("trunk"):
            self._baseline()
        if self.spec.calibrate and not self.state.get("calibration"):
            self._calibrate()
        done = 0
        while True:
            gate = self.stop_gate()
            if gate:
                self._stop(gate)
                break
            if max_iterations is not None and done >= max_iterations:
                self.state["status"] = "stopped"
                self.state["stop_reason"] = f"paused after {done} iterations (--iterations); resume continues"
                self.save()
                break
            self.iteration()
            done += 1
        self._write_loop_page()
        return self.state

    def stop_gate(self) -> StopGate | None:
        u, b, trunk = self.state["usage"], self.spec.budget, self.state.get("trunk") or {}
        if self.state.get("plateau_stop"):
            return StopGate(self.state["plateau_stop"], "plateau")
        if self.state.get("error_stop"):
            return StopGate(self.state["error_stop"], "error")
        if self.state.get("budget_hit"):
            return StopGate(self.state["budget_hit"], "budget")
        if self.paths.stop_request.exists():
            return StopGate("stopped by request (`tools loop stop`)", "request")
        for key, what in (("runs", "runs"), ("wall_s", "wall time (s)"), ("llm_tokens", "LLM tokens"),
                          ("cost_usd", "LLM cost (USD)"), ("device_s", "device-seconds")):
            if key in b and u.get(key, 0) >= b[key]:
                return StopGate(f"budget: {what} {u.get(key, 0):g} of {b[key]:g} used", "budget")
        for key, what in (("tokens_per_s", "tokens/s"), ("mfu_percent", "MFU %")):
            if key in self.spec.target and (trunk.get(key) or 0) >= self.spec.target[key]:
                return StopGate(f"target reached: {what} {trunk.get(key):g} ≥ {self.spec.target[key]:g}", "target")
        return None

    def _stop(self, gate: StopGate) -> None:
        # every stop leaves a retrospective (where the loop stands, the best untried ideas) for whoever goes on,
        # unless one was written at this very iteration (a double plateau writes its own)
        last = self.state["retrospectives"][-1]["iteration"] if self.state["retrospectives"] else -1
        if last != self.state["iteration"]:
            self.retrospective(why=f"the loop stops: {gate.reason}", final=True)
        self.state.update(status="stopped", stop_reason=gate.reason)
        self.state.pop("plateau_stop", None)
        self.state.pop("budget_hit", None)
        self.state.pop("error_stop", None)
        self.paths.stop_request.unlink(missing_ok=True)
        self.save()
        self._ledger_stop_row(gate.reason)
        self.writer.append_log("loop stop", f"{self.spec.name}", [
            gate.reason, f"iterations {self.state['iteration']}, runs {self.state['usage']['runs']}, "
                         f"wall {self.state['usage']['wall_s']:.0f} s",
            f"trunk {(self.state.get('trunk') or {}).get('exp_id')}"])
        self.say(f"stopped: {gate.reason}")

    def _ledger_stop_row(self, reason: str) -> None:
        from ..experiments import ledger

        lane = filing.Lane(self.project, self.spec.model, self.spec.lane)
        with lane.locked():
            rows = lane.ledger_rows()
            rows.append({"status": "stop", "date": self.writer.today,
                         "description": f"loop {self.spec.name} stopped: {reason}",
                         "commit": (self.state.get("trunk") or {}).get("commit", "")[:12]})
            self.writer.write_file(lane.ledger_rel, ledger.render(rows))

    # ------------------------------------------------------------------ iteration 0: the baseline

    def _baseline(self) -> None:
        cfg = self.spec.start_config()
        prep = self.workspace.prepare("000")
        self.say(f"baseline: {' '.join(self.spec.command_for(cfg))}")
        run = runs.runspec(self.spec, cfg, {}, prep.cwd, description="loop baseline",
                           slug=f"{self.spec.name}-baseline",
                           hypothesis="The starting configuration: the reference every change is compared with.",
                           extra=self._loop_keys(), baseline=True)
        if self.spec.runner == "local":
            import os

            from ..experiments.command import start_problem

            why = start_problem(run.command, prep.cwd, dict(os.environ, **run.env))
            if why:
                self.state.update(status="stopped", stop_reason=f"error: the baseline cannot start: {why}")
                self.save()
                raise ToolsError(f"loop {self.spec.name}: the baseline cannot start: {why} (command "
                                 f"{' '.join(run.command)!r} in {prep.cwd}); nothing was run or filed")
        out = run_experiment(self.project, run, self.writer)
        rec = dict(out.record, page=out.page)
        if out.verdict in ("crash", "invalid"):
            self.state.update(status="stopped", stop_reason=f"error: the baseline run was filed {out.verdict} "
                                                             f"({'; '.join(out.reasons)}); its page shows the log")
            self.save()
            raise ToolsError(f"loop {self.spec.name}: the baseline run {out.exp_id} was filed {out.verdict}: "
                             f"{'; '.join(out.reasons)} (the log's end is on wiki/{out.page})")
        self.state["trunk"] = runs.trunk_entry(rec, cfg, {}, prep.commit)
        self.state["start_commit"] = prep.commit
        self.state["frontier"].append({"iteration": 0, "exp_id": out.exp_id, "page": out.page,
                                       "tokens_per_s": rec["metrics"]["tokens_per_s"],
                                       "mfu_percent": rec["metrics"].get("mfu_percent"), "gain_pct": 0.0,
                                       "description": "baseline",
                                       "run_key": run_key(cfg, self.spec.env_for(cfg, {}), prep.commit)})
        self.state["usage"]["device_s"] += runs.device_seconds(rec)
        self.save()
        self.writer.append_log("loop start", self.spec.name, [f"baseline {out.exp_id}: tokens/s "
                                                              f"{rec['metrics']['tokens_per_s']}", f"page {out.page}"])

    def _loop_keys(self) -> dict:
        return {"loop": self.spec.name, "iteration": 0, "loop_started": self.state.get("started")}

    def _calibrate(self) -> None:
        """A/A rounds of the trunk against itself: later verdicts of this lane use the noise they measured."""
        cfg, cwd = self.state["trunk"]["config"], self.workspace.prepare("000").cwd
        self.say(f"calibration: {self.spec.calibrate} A/A rounds of the baseline")
        run = runs.runspec(self.spec, cfg, {}, cwd, description="loop calibration (A/A)",
                           slug=f"{self.spec.name}-calibration",
                           hypothesis="The baseline against itself: how much a run of this lane moves by chance.",
                           extra=self._loop_keys(), calibrate=True, compare_to=self.state["trunk"]["exp_id"],
                           compare_cwd=cwd)
        run.command = []  # the runner reruns the compared record's own command, code and environment
        run.repeats = run.min_repeats = run.max_repeats = self.spec.calibrate
        run.profile = False
        out = run_experiment(self.project, run, self.writer)
        cal = out.record.get("calibration") or {}
        self.state["calibration"] = {"exp_id": out.exp_id, **{k: cal.get(k) for k in ("pair_sd_pct", "band_pct")}}
        self.state["usage"]["device_s"] += runs.device_seconds(out.record)
        self.save()
        self.say(f"  → σ {cal.get('pair_sd_pct')} % per round, band ±{cal.get('band_pct')} %  wiki/{out.page}")

    def pendings(self) -> list[dict]:
        """The iterations in flight (a list: ``parallel`` > 1 runs several at once)."""
        p = self.state.get("pending")
        if isinstance(p, dict):  # one iteration, as states before parallel loops held it
            self.state["pending"] = p = [p]
        return p or []

    def iteration(self) -> None:
        """Propose up to ``parallel`` hypotheses, run them at once, learn from each in order."""
        left = self.spec.budget.get("runs", float("inf")) - self.state["usage"]["runs"]
        batch: list[dict] = []
        for _ in range(int(max(1, min(self.spec.parallel, left)))):
            pend = self._next_pending(self.state["iteration"] + 1 + len(batch), batch)
            if pend is None:
                break
            batch.append(pend)
            self.state["pending"] = batch
            self.save()  # the state holds the proposal before its hypothesis page says "testing"
            self._file_hypothesis(Proposal.from_dict(pend["proposal"]), pend["iteration"], "testing", None,
                                  page=pend["hypothesis_page"])
        if not batch:
            return
        if len(batch) == 1:
            self._run_pending(batch[0])
        else:
            self._run_batch(batch)
        for pend in list(batch):
            self._learn(pend)

    def _run_batch(self, batch: list[dict]) -> None:
        """Several iterations at once, one thread each. Ctrl-C or SIGTERM stops them all (each run is filed as a
        crash and resume runs it again) before the driver lets go of the loop."""
        import threading

        from ..experiments import command

        errors: list[BaseException] = []

        def one(pend: dict) -> None:
            try:
                self._run_pending(pend)
            except BaseException as e:  # noqa: BLE001 - re-raised below, after the others finished
                errors.append(e)

        threads = [threading.Thread(target=one, args=(pend,), name=f"loop-{pend['iteration']}") for pend in batch]
        try:
            with command.stop_on_signals():
                for t in threads:
                    t.start()
                for t in threads:
                    t.join()
        except (KeyboardInterrupt, command.Stop) as e:
            command.stop_all_runs(e.how if isinstance(e, command.Stop) else "Ctrl-C")
            for t in threads:
                t.join()
        finally:
            command.STOP_ALL.clear()
        if errors:
            raise next((e for e in errors if isinstance(e, LoopInterrupted)), errors[0])

    def _next_pending(self, n: int, batch: list[dict]) -> dict | None:
        """One proposal, filed as a hypothesis page; None when there is none (the iteration ends)."""
        priors = gather.gather(self.project, self.spec, self.state, self.budget_left())
        for pend in batch:  # proposals already in this batch count as tried
            priors.attempts.append(Attempt("(in flight)", pend["proposal"]["category"], pend["proposal"]["change"],
                                           "", "pending", config=pend["config"], run_key=pend["run_key"],
                                           trunk_exp=pend["trunk_exp"]))
        self._inflight = {pend["run_key"] for pend in batch}
        from .proposers import BudgetExhausted

        try:
            proposal = self.propose(priors, n)
        except BudgetExhausted as e:
            self._charge(getattr(e, "usage", {}))
            self.state["budget_hit"] = f"budget: the next proposal would exceed {e.what} ({e})"
            self.save()
            return None
        except ToolsError as e:  # the proposer failed (an unusable LLM proposal twice, an unreachable endpoint)
            self._charge(getattr(e, "usage", {}) or {})
            fails = self.state["proposer_failures"] = self.state.get("proposer_failures", 0) + 1
            atomic_write(self.paths.iteration_dir(n) / f"proposer-error-{fails}.txt", f"{type(e).__name__}: {e}\n")
            self.writer.append_log("loop proposer error", f"{self.spec.name} {n}", [f"{type(e).__name__}: {e}"])
            self.say(f"proposer error ({fails} in a row): {e}")
            if fails >= MAX_PROPOSER_FAILURES:
                self.state["error_stop"] = f"error: the proposer failed {fails} times in a row; last: {e}"
            self.save()
            return None
        self.state["proposer_failures"] = 0
        if proposal is None:
            if not batch:
                self._exhausted(n)
            return None
        cfg, env = self._config_of(proposal)
        trunk = self.state["trunk"]
        page = proposal.hypothesis_page or hypotheses.hypothesis_path(
            self.spec.model, self.spec.lane, f"{n:03d}-{slugify(proposal.statement)[:40]}")
        return {"phase": "proposed", "iteration": n, "proposal": proposal.to_dict(), "config": cfg, "env": env,
                "run_key": self._run_key(proposal, cfg, env), "trunk_exp": trunk["exp_id"],
                "trunk_commit": trunk.get("commit", ""), "interrupted": 0, "hypothesis_page": page,
                "loop_started": self.state.get("started")}

    def _run_key(self, p: Proposal, cfg: dict, env: dict) -> str:
        return run_key(cfg, self.spec.env_for(cfg, env), self.state["trunk"].get("commit", ""),
                       p.change.fingerprint() if p.change.kind == "patch" else "")

    def propose(self, priors: Priors, n: int) -> Proposal | None:
        """People's hypotheses first, then the loop's proposer; refused proposals are asked for again."""
        folder = self.paths.iteration_dir(n)

        def record(name: str, text: str) -> None:
            atomic_write(folder / name, text)

        atomic_write(folder / "priors.json", json.dumps(runs.priors_dump(priors), indent=1, default=str))
        refusals: list[dict] = []
        sources = [self.people, self.proposer] if self.proposer.name != "queue" else [self.proposer]
        asked_proposer = 0
        while asked_proposer <= MAX_REFUSALS:
            priors.refusals = refusals
            priors.budget_left = self.budget_left()  # what earlier asks of this iteration spent counts
            p = next((p for src in sources if (p := src.propose(priors, record)) is not None), None)
            if p is None:
                return None
            asked_proposer += not p.hypothesis_page  # a queue of pages is finite: only proposer asks are capped
            self._account(p)
            why = self.refuse(p, priors)
            if not why:
                return p
            refusals.append({"change": p.change.describe(), "category": p.category, "why": why,
                             "page": p.hypothesis_page})
            record("refusals.json", json.dumps(refusals, indent=1))
            self.say(f"refused: {p.change.describe()}: {why}")
            if p.hypothesis_page:
                self._close_queued(p.hypothesis_page, why)
        return None

    def _account(self, p: Proposal) -> None:
        self._charge(p.usage)

    def _charge(self, usage: dict) -> None:
        u = self.state["usage"]
        u["llm_tokens"] += int(usage.get("input_tokens", 0) + usage.get("output_tokens", 0))
        u["cost_usd"] = round(u["cost_usd"] + float(usage.get("cost_usd", 0.0)), 6)

    def refuse(self, p: Proposal, priors: Priors) -> str | None:
        """Why this proposal may not run (unknown knob, duplicate, refuted, category streak), else None."""
        knobs = self.spec.knobs
        for k, v in p.change.knobs.items():
            if k not in knobs:
                return f"unknown knob {k!r} (declared: {', '.join(knobs)})"
            if v not in knobs[k].values:
                return f"value {v!r} of knob {k!r} is outside the declared space {knobs[k].values}"
        cfg, env = self._config_of(p)
        key = self._run_key(p, cfg, env)
        if key in getattr(self, "_inflight", ()):
            return "the same configuration is already running in this batch"
        for f in self.state["frontier"]:
            if f.get("run_key") == key:
                return f"the trunk already ran this configuration: {f.get('page') or f['exp_id']}"
        fp = p.change.fingerprint()
        for h in self.state["history"]:  # a refuted change stays refuted, whatever the trunk has become since
            if h.get("fingerprint") == fp and h.get("verdict") in ("refuted", "invalid"):
                return f"refuted by {h['page']} ({h['verdict']}, hypothesis {h.get('hypothesis_page')})"
        for h in self.state["history"]:
            if h.get("run_key") != key or (h.get("verdict") == "crash" and h.get("interrupted")):
                continue
            if h["verdict"] in ("refuted", "invalid"):
                return f"refuted by {h['page']} ({h['verdict']}, hypothesis {h.get('hypothesis_page')})"
            if h["verdict"] == "inconclusive" and p.repeats > int(h.get("repeats") or 0):
                continue  # successive halving: re-measure with more repeats
            return f"duplicate of {h['page']} ({h['verdict']}): the same configuration already ran"
        if priors.avoid_category and p.category == priors.avoid_category:
            return f"three runs in a row from category {p.category!r}: switch category"
        return None

    def _config_of(self, p: Proposal) -> tuple[dict, dict]:
        trunk = self.state["trunk"]
        start = self.spec.start_config()  # knobs added to the loop file since: their starting value
        cfg = {k: trunk["config"].get(k, v) for k, v in start.items()} | p.change.knobs
        env = dict(trunk.get("env") or {})
        for k, v in p.change.env.items():
            env[k] = f"{env[k]} {v}".strip() if k in env and k.endswith("_FLAGS") else v
        return cfg, env

    # ------------------------------------------------------------------ the phases of a pending iteration

    def _run_pending(self, pend: dict) -> None:
        """Prepare the change and run it; the pending entry ends in phase ``filed`` (``_learn`` takes it on)."""
        n, p = pend["iteration"], Proposal.from_dict(pend["proposal"])
        cfg, env = pend["config"], pend["env"]
        key = f"{n:03d}"
        try:
            with self._git:  # work trees of one repository: one git command at a time
                prep = self.workspace.prepare(key, p.change.patch if p.change.kind == "patch" else "")
        except PatchError as e:
            rec = runs.file_unrunnable(self.project, self.writer, self.spec, p, cfg, str(e), n, pend)
            pend.update(phase="filed", exp_id=rec["exp_id"], record=rec, kept=False)
            self.save()
            return
        pend.update(phase="running", cwd=str(prep.cwd), branch=prep.branch)
        self.save()
        self.say(f"iteration {n}: {p.category}: {p.change.describe()} (expected {p.expected_gain_pct:+.1f} %)")
        trunk = self.state["trunk"]
        ref_cmd, ref_env = runs.reference(self.spec, cfg)
        run = runs.runspec(self.spec, cfg, env, prep.cwd, description=p.change.describe(),
                            slug=f"{self.spec.name}-{n:03d}-{p.change.describe()}", hypothesis=p.statement,
                            extra=runs.extra_keys(self.spec, p, n, cfg, pend), compare_to=trunk["exp_id"],
                            compare_cwd=self.workspace.cwd_in(self.workspace.trunk_dir) if self.spec.code else None,
                            reference_command=ref_cmd, reference_env=ref_env,
                            parent_fingerprint=trunk.get("hlo_fingerprint"), runtime_only=p.change.runtime_only,
                            repeats=p.repeats)
        if prep.branch:
            def commit_patch(exp_id: str) -> None:  # the runner reserved the version: commit with its id
                msg = (f"loop {self.spec.name} {key}: {p.statement[:60]}\n\n{p.change.describe()}\n"
                       f"hypothesis: {pend['hypothesis_page']}\n\nexp: {exp_id}")
                with self._git:
                    pend.update(commit=self.workspace.commit(key, msg), exp_id=exp_id)
                self.save()
            run.on_reserved = commit_patch
        before = (self._record_of(n) or {}).get("exp_id")
        try:
            out = run_experiment(self.project, run, self.writer)
        except ToolsError as e:  # a backend or judging failure: the runner filed a crash saying so; learn it
            rec = self._record_of(n)
            if rec is None or rec.get("status") != "filed" or rec.get("exp_id") == before:
                raise
            self.say(f"  the run failed: {e}")
            pend.update(phase="filed", exp_id=rec["exp_id"], record=rec)
            self.save()
            return
        if out.stopped_by:  # Ctrl-C or SIGTERM: the run is filed as a crash; resume runs this proposal again
            with self._save_lock:
                self.state.update(status="stopped", stop_reason=f"interrupted by {out.stopped_by}: `tools loop "
                                                               "resume` runs the cut-off experiment again")
                self.save()
            raise LoopInterrupted(out.stopped_by)
        pend.update(phase="filed", exp_id=out.exp_id, record=dict(out.record, page=out.page))
        self.save()

    def _finish_pending(self) -> None:
        """Resume: carry the iterations in flight to their end, each from the phase it reached, then learn."""
        for pend in list(self.pendings()):
            self._recover(pend)
        for pend in list(self.pendings()):
            self._learn(pend)

    def _recover(self, pend: dict) -> None:
        if pend["phase"] in ("proposed", "prepared"):
            self._run_pending(pend)
            return
        if pend["phase"] == "running":
            rec = self._record_of(pend["iteration"])
            if rec is None or rec.get("status") != "filed" or runs.interrupted(rec):
                from ..experiments import abandoned

                abandoned.sweep(self.writer, self.project)  # files the cut-off run as a crash, if any
                pend["interrupted"] = pend.get("interrupted", 0) + 1
                if pend["interrupted"] <= MAX_INTERRUPTED_RETRIES:
                    self.say(f"iteration {pend['iteration']}: the run was cut off; running it again")
                    pend["phase"] = "proposed"
                    self.save()
                    self._run_pending(pend)
                    return
                rec = self._record_of(pend["iteration"])
                if rec is None:
                    raise ToolsError(f"loop {self.spec.name}: iteration {pend['iteration']} was cut off "
                                     f"{pend['interrupted']} times and left no record")
            pend.update(phase="filed", exp_id=rec["exp_id"], record=rec)
            self.save()

    def _record_of(self, n: int) -> dict | None:
        """The latest experiment of iteration ``n`` of this run of the loop (a ``--fresh`` start is another run)."""
        mine = [r for r in records.lane_records(self.project.wiki, self.spec.model, self.spec.lane)
                if r.get("loop") == self.spec.name and r.get("iteration") == n
                and r.get("loop_started", self.state.get("started")) == self.state.get("started")]
        return mine[-1] if mine else None

    def _learn(self, pend: dict) -> None:
        """Keep or discard, then the hypothesis status, an observation, the memory (loop) page; idempotent."""
        p, rec, n = Proposal.from_dict(pend["proposal"]), pend["record"], pend["iteration"]
        cfg, env = pend["config"], pend["env"]
        trunk = self.state["trunk"]
        # ``supported`` was judged interleaved against the trunk (compare_to): that is the frontier moving. The
        # trunk's stored tokens/s is an older measurement and drifts with the machine; it does not decide.
        kept = bool(rec.get("verdict") == "supported" and rec.get("ledger_status") == "keep"
                    and trunk["exp_id"] == pend["trunk_exp"] == rec.get("baseline", pend["trunk_exp"]))
        commit = pend.get("commit") or ("" if p.change.kind == "patch" else trunk.get("commit", ""))
        if kept and trunk["exp_id"] != rec["exp_id"]:
            self.workspace.keep(commit)
            # the gain over the baseline, chained from the interleaved gains (each measured against its own trunk)
            prev = self.state["frontier"][-1].get("gain_pct") or 0.0
            chained = 100 * ((1 + prev / 100) * (1 + (rec.get("gain_pct") or 0.0) / 100) - 1)
            new_commit = commit or trunk.get("commit", "")
            self.state["trunk"] = runs.trunk_entry(rec, cfg, env, new_commit)
            self.state["frontier"].append({"iteration": n, "exp_id": rec["exp_id"], "page": rec.get("page", ""),
                                           "tokens_per_s": rec["metrics"]["tokens_per_s"],
                                           "mfu_percent": rec["metrics"].get("mfu_percent"),
                                           "gain_pct": round(chained, 3), "step_gain_pct": rec.get("gain_pct"),
                                           "description": p.change.describe(),
                                           "run_key": run_key(cfg, self.spec.env_for(cfg, env), new_commit)})
        if p.change.kind == "patch":
            with self._git:
                self.workspace.remove(f"{n:03d}")
        if not any(h.get("exp_id") == rec["exp_id"] for h in self.state["history"]):
            self.state["history"].append(runs.history_entry(p, rec, n, kept, pend))
            self.state["usage"]["runs"] += 1
            self.state["usage"]["device_s"] = round(self.state["usage"]["device_s"] + runs.device_seconds(rec), 3)
        self.state["iteration"] = max(self.state["iteration"], n)
        self._file_hypothesis(p, n, HYPOTHESIS_STATUS.get(rec.get("verdict"), "inconclusive"), rec.get("page"),
                              page=pend["hypothesis_page"])
        entry = self.state["history"][-1]
        self.writer.write_page(report.observation_page(self.spec, entry, rec))
        self.state["pending"] = [x for x in self.pendings() if x is not pend and x["iteration"] != n] or None
        self.save()
        self.writer.append_log("loop iteration", f"{self.spec.name} {n}", [
            f"{p.category}: {p.change.describe()}", f"verdict {rec.get('verdict')}"
            + (f", gain {rec['gain_pct']:+.2f} % (band ±{rec.get('noise_band_pct')} %)" if rec.get("gain_pct") is not None else ""),
            "kept: the trunk moved" if kept else "discarded: the trunk is unchanged", f"page {rec.get('page')}"])
        self.say(f"  → {rec.get('verdict')}" + (f" {rec['gain_pct']:+.2f} %" if rec.get("gain_pct") is not None else "")
                 + (" KEPT" if kept else "") + f"  wiki/{rec.get('page')}")
        self._write_loop_page()
        self._maybe_retrospective()

    # ------------------------------------------------------------------ retrospectives and plateaus

    def _maybe_retrospective(self) -> None:
        h = self.state["history"]
        last = self.state["retrospectives"][-1]["iteration"] if self.state["retrospectives"] else 0
        if memory.since_frontier_move(h) >= RETRO_EVERY and self.state["iteration"] - last >= RETRO_EVERY:
            self.retrospective(why=f"{memory.since_frontier_move(h)} iterations without a frontier move")

    def _exhausted(self, n: int) -> None:
        retros = self.state["retrospectives"]
        if retros and retros[-1]["iteration"] == self.state["iteration"]:
            self.state["plateau_stop"] = (f"plateau: the proposer has nothing left that is not refuted or already "
                                          f"tried ({len(retros)} retrospectives)")
            self.save()
            return
        self.retrospective(why="the proposer has nothing left to propose on this trunk")

    def retrospective(self, why: str, manual: bool = False, final: bool = False) -> str:
        """Write an analysis page; a second one with runs between and no frontier move is a double plateau
        (one asked for by hand is written the same way but never counts towards a stop)."""
        s = self.state
        priors = gather.gather(self.project, self.spec, s, self.budget_left())
        untried = self.proposer.untried(priors) if hasattr(self.proposer, "untried") else []
        if not untried:
            from .proposers.sweep import SweepProposer
            untried = SweepProposer().untried(priors)
        n = len(s["retrospectives"]) + 1
        mem = memory.compute(s["history"])
        page = report.retrospective_page(self.spec, s, mem, untried, n)
        self.writer.write_page(page)
        prev = next((r for r in reversed(s["retrospectives"]) if not (r.get("manual") or r.get("final"))), None)
        moved_since = bool(prev) and any(f["iteration"] > prev["iteration"] for f in s["frontier"])
        if prev is None:
            moved_since = any(f["iteration"] > 0 for f in s["frontier"])
        s["retrospectives"].append({"iteration": s["iteration"], "page": page.path, "frontier_moved": moved_since,
                                    "why": why, "manual": manual, "final": final})
        if prev and not moved_since and s["iteration"] > prev["iteration"] and not (manual or final):
            s["plateau_stop"] = (f"double plateau: two retrospectives ({prev['page']}, {page.path}) with "
                                 f"{s['iteration'] - prev['iteration']} runs between and no frontier move")
        self.save()
        self.writer.append_log("loop retrospective", f"{self.spec.name} {n}", [why, f"page {page.path}"])
        self.say(f"retrospective {n}: {why} (wiki/{page.path})")
        self._write_loop_page()
        return page.path

    # ------------------------------------------------------------------ pages and runs

    def _write_loop_page(self) -> None:
        self.writer.write_page(report.loop_page(self.spec, self.state, memory.compute(self.state["history"])))

    def _file_hypothesis(self, p: Proposal, n: int, status: str, experiment: str | None, page: str = "") -> str:
        if p.hypothesis_page:  # a page written by a person or an agent
            return self._update_queued(p.hypothesis_page, status, experiment)
        hid = page.rsplit("/", 1)[-1].removesuffix(".md") if page else f"{n:03d}-{slugify(p.statement)[:40]}"
        pg = hypotheses.hypothesis_page(self.spec, p, hid, status, experiment)
        self.writer.write_page(pg)
        return pg.path

    def _update_queued(self, rel: str, status: str, experiment: str | None, extra: dict | None = None) -> str:
        """A person's (or agent's) page: only its status and experiment link change; their text stays."""
        path = self.writer.target(rel)
        meta, body = pages.split(path.read_text(encoding="utf-8"))
        meta = dict(meta or {}, status=status, loop=self.spec.name, **(extra or {}))
        if experiment:
            meta["experiment"] = experiment
        self.writer.write_page(pages.Page(rel, meta, body))
        return rel

    def _close_queued(self, rel: str, why: str) -> None:
        """A refused page is closed with the reason (the streak rule only defers it: it stays open)."""
        if "in a row from category" in why:
            return
        self._update_queued(rel, "refuted" if why.startswith("refuted by") else "abandoned", None, {"refused": why})

# ---------------------------------------------------------------------- entry points for the faces

def spec_path(project: Project, name_or_path: str) -> Path:
    p = Path(name_or_path)
    if p.suffix in (".yml", ".yaml") or p.exists():
        return p if p.is_absolute() else (Path.cwd() / p)
    return st.LoopPaths(project, name_or_path).spec


def start(project: Project, name_or_path: str, say=None, fresh: bool = False,
          max_iterations: int | None = None) -> dict:
    spec = load(spec_path(project, name_or_path))
    paths = st.LoopPaths(project, spec.name)
    if paths.state.exists() and not fresh:
        s = st.load(paths) or {}
        if s.get("status") == "running" or s.get("pending"):
            raise InputError(paths.state, "this loop has a state already: `tools loop resume` continues it, "
                                          "`tools loop start --fresh` starts over")
    return Loop(project, spec, say).run(max_iterations, fresh=fresh and paths.state.exists())


def resume(project: Project, name: str, say=None, max_iterations: int | None = None) -> dict:
    paths = st.LoopPaths(project, name)
    if st.load(paths) is None:
        raise InputError(paths.state, "no state: `tools loop start` first")
    spec = load(paths.spec)
    return Loop(project, spec, say).run(max_iterations)


def request_stop(project: Project, name: str) -> bool:
    """Ask a running loop to stop after its current iteration; True when a driver is running."""
    paths = st.LoopPaths(project, name)
    if st.load(paths) is None:
        raise InputError(paths.state, "no such loop state")
    atomic_write(paths.stop_request, st.now() + "\n")
    return st.driver_alive(paths)
