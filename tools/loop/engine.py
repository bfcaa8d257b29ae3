"""The loop, one step at a time: priors → proposal (filed as a hypothesis page) → change (knobs, env or a code
patch on its own branch) → run (interleaved against the trunk, profiled) → verdict → keep or discard → learn.

Each phase writes the state before the next begins (tools/loop/state.py), so ``kill -9`` at any moment and then
``resume`` continues with nothing lost and nothing run twice: a run cut off mid-way is filed as a crash by the
runner's abandoned-run sweep and its proposal is run again as a new experiment.

The loop stops only on a budget (runs, wall time, LLM tokens or cost, device-seconds), the target, a double plateau
(two retrospectives with runs between and no frontier move), or a person's ``tools loop stop``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import threading

from .. import runners, safeio
from ..errors import InputError, ToolsError
from ..llm import LLMUnavailable
from ..experiments import filing
from ..experiments.runner import slugify
from ..project import Project
from ..runners import process
from ..writer import Writer, atomic_write
from . import (admission, asking, gates, gather, hypotheses, learn, memory, opening, page_names, pending, power,
               reference_lane, report, retro, retro_page, screening, state as st)
from .gates import StopGate
from .hypothesis_filer import HypothesisFiler
from .pending import LoopInterrupted
from .priors import Attempt, Priors
from .proposal import Proposal
from .proposers import BudgetExhausted
from .proposers import get as get_proposer
from .proposers.queue import QueueProposer
from .proposers.sweep import SweepProposer
from .spec import LoopSpec, load
from .state import LoopState
from .workspace import Workspace



class Loop:
    def __init__(self, project: Project, spec: LoopSpec, say: Callable[[str], None] | None = None,
                 proposer=None, fresh: bool = False):
        self.project, self.spec = project, spec
        self.paths = st.LoopPaths(project, spec.name)
        self.say = say or (lambda msg: None)
        self.writer = Writer(project.wiki)
        self.hyp = HypothesisFiler(self.writer, spec)
        try:  # a proposer or runner the loop file names wrongly: refused naming the file, before any state
            self.proposer = proposer or get_proposer(spec.proposer, spec.proposer_options)
            runners.get(spec.runner, spec.runner_options)
        except InputError:
            raise
        except ToolsError as e:
            raise InputError(spec.path, str(e)) from None
        self.people = QueueProposer(people_only=True)
        code = (project.root / spec.code).resolve() if spec.code else None
        self.workspace = Workspace(project.root, code, self.paths.folder, spec.name, spec.cwd)
        try:
            self.state: LoopState = st.read(self.paths) or LoopState.new(spec)
        except InputError:
            if not fresh:
                raise
            self.state = LoopState.new(spec)  # `start --fresh` replaces a state it cannot read
        self._mark = time.monotonic()
        self._save_lock = threading.RLock()  # parallel iterations save the one state file
        self._git = threading.Lock()
        self._inflight: set[str] = set()
        self.rejected: set[str] = set()  # hypothesis pages a queue could not use, said once

    # ------------------------------------------------------------------ state

    def save(self) -> None:
        with self._save_lock:
            self._save()

    def _save(self) -> None:
        t = time.monotonic()
        self.state.usage["wall_s"] = round(self.state.usage["wall_s"] + t - self._mark, 3)
        self._mark = t
        st.save(self.paths, self.state)

    def budget_left(self) -> dict[str, float]:
        return gates.budget_left(self.state, self.spec.budget)

    # ------------------------------------------------------------------ the driver

    def run(self, max_iterations: int | None = None, fresh: bool = False) -> dict:
        """Drive the loop until it must stop (or for ``max_iterations`` more iterations: tests, the demo).
        ``fresh``: start over, once this process holds the loop (a running driver keeps its state and work trees)."""
        if not fresh and (why := admission.trunk_outside_spec(self.spec, self.state.trunk)):
            raise InputError(self.spec.path, why)  # checked when it would run, not for a retrospective
        try:  # a proposer that cannot work here is said before the baseline and calibration run
            getattr(self.proposer, "ready", lambda: None)()
        except ToolsError as e:
            raise InputError(self.spec.path, f"proposer {self.spec.proposer}: {e}") from None
        try:
            with st.driving(self.paths), process.stop_on_signals():
                self._spec_copy()  # a loop file of another origin under this name: refused before any reset
                if fresh:  # start over: the old state, work trees and any stop asked of the old run go
                    old = self.state  # what it ran, kept on the new state before the old one is gone
                    earlier = old.as_earlier() if old.started else [e for e in old.earlier if isinstance(e, dict)]
                    self.workspace.start_over()
                    st.start_over(self.paths)
                    self.state = LoopState.new(self.spec)
                    self.state.spec_source = old.spec_source  # the loop file its copy in loops/ came from
                    self.state.earlier = earlier
                    self.save()
                self._drive(max_iterations)
                return self.state.to_dict()
        except process.Stop as e:  # SIGTERM between two runs (a run in flight files its own crash)
            self._stopped(f"interrupted by {e.how}: `tools loop resume` goes on")
            raise LoopInterrupted(e.how, "between two runs, nothing in flight") from None

    def _stopped(self, reason: str) -> None:
        with self._save_lock:
            self.state.status, self.state.stop_reason = "stopped", reason
            self.save()

    def _drive(self, max_iterations: int | None) -> None:
        self.workspace.ensure()  # a `code:` folder that is not there stops the start before any state is written
        self._keep_spec()
        self.state.status, self.state.stop_reason = "running", None
        self.save()
        if self.pendings():  # resume: carry the iterations in flight to their end, then learn from each
            for pend in list(self.pendings()):
                pending.recover(self, pend)
            for pend in list(self.pendings()):
                self._learn(pend)
        if not self.state.trunk and self.paths.stop_request.exists():  # asked before a baseline spent anything
            self.paths.stop_request.unlink(missing_ok=True)
            self._stopped("stopped by request (tools loop stop) before the baseline ran")
            self.say("stopped: by request, before the baseline ran")
            return
        if not self.state.trunk:
            opening.baseline(self)
        if self.spec.calibrate and not self.state.calibration:
            opening.calibrate(self)
        if self.spec.reference:
            self._reference_steps()
        done = 0
        while True:
            gate = self.stop_gate()
            if gate:
                self._stop(gate)
                break
            if max_iterations is not None and done >= max_iterations:
                self._stopped(f"paused after {done} iterations (--iterations); resume continues")
                break
            self.iteration()
            done += 1
        self._write_loop_page()
        from ..wikiindex import rebuild

        # the loop's own pages (observations, retrospectives, its page) counted once it stops or pauses: the lint
        # finds no drift (one scan of the wiki, not one an iteration)
        rebuild(self.project.wiki, self.writer, log=False)

    def _spec_copy(self) -> tuple[str, str, str | None] | None:
        """(source, its text, the copy's text) for a loop started from a file outside ``loops/`` (or named
        otherwise inside its file); InputError when ``loops/<name>.yml`` holds a different loop file that did not
        come from that source."""
        source, own = Path(self.spec.path).resolve(), self.paths.spec
        if source == own.resolve():
            return None
        text = safeio.read_text(source, 4 * 1024 * 1024)
        try:
            there = safeio.read_text(own, 4 * 1024 * 1024, within=self.project.root / "loops")
        except FileNotFoundError:
            there = None
        except safeio.Refused as e:
            raise InputError(own, f"not read: {e}") from None
        if there is not None and there != text and self.state.spec_source != str(source):
            raise InputError(own, f"a different loop file of this name is there already; start it by name, or "
                                  f"rename `{self.spec.name}` in {source}")
        return str(source), text, there

    def _keep_spec(self) -> None:
        """Such a loop keeps its copy as ``loops/<name>.yml``, so that `tools loop resume NAME` and an agent's
        ``loop_resume`` find it; the copy follows its file on each start (made once the start has started)."""
        if (copy := self._spec_copy()) is None:
            return
        source, text, there = copy
        self.state.spec_source = source
        if there != text:
            atomic_write(self.paths.spec, text)

    def stop_gate(self) -> StopGate | None:
        return gates.stop_gate(self.state, self.spec.budget, self.spec.target, self.paths.stop_request.exists())

    def _stop(self, gate: StopGate) -> None:
        s = self.state
        mark = {"reason": gate.reason, "iteration": s.iteration, "runs": s.usage["runs"]}
        if s.last_stop == mark:  # a resume of a loop that stopped right here: said and filed already
            gates.clear(s)
            self.paths.stop_request.unlink(missing_ok=True)
            self._stopped(gate.reason)
            self.say(f"stopped: {gate.reason} (as before)")
            return
        # every stop leaves a retrospective (where the loop stands, the best untried ideas) for whoever goes on,
        # unless one was written at this very iteration (a double plateau writes its own)
        if not retro.written_now(self.state):
            self.retrospective(why=f"the loop stops: {gate.reason}", final=True)
        gates.clear(self.state)
        self.paths.stop_request.unlink(missing_ok=True)
        s.last_stop = mark  # before the row: a kill in between loses the row rather than writing it twice
        self._stopped(gate.reason)
        self._ledger_stop_row(gate.reason)
        self.writer.append_log("loop stop", f"{self.spec.name}", [
            gate.reason, f"iterations {s.iteration}, runs {s.usage['runs']}, wall {s.usage['wall_s']:.0f} s",
            f"trunk {(s.trunk or {}).get('exp_id')}"])
        self.say(f"stopped: {gate.reason}")

    def _ledger_stop_row(self, reason: str) -> None:
        filing.Lane(self.project, self.spec.model, self.spec.lane).append_rows(self.writer, [{
            "status": "stop", "date": self.writer.today, "description": f"loop {self.spec.name} stopped: {reason}",
            "commit": (self.state.trunk or {}).get("commit", "")[:12]}])

    def _reference_steps(self) -> None:
        """The reference run (once), the gap page of this trunk against it, the interleaved check for the target."""
        reference_lane.ensure_reference(self)
        reference_lane.write_gap_page(self)
        reference_lane.check(self)
        reference_lane.write_model_gap(self)

    def pendings(self) -> list[dict]:
        """The iterations in flight (a list: ``parallel`` > 1 runs several at once)."""
        return self.state.pendings()

    def iteration(self) -> None:
        """Propose up to ``parallel`` hypotheses, run them at once, learn from each in order."""
        left = self.spec.budget.get("runs", float("inf")) - self.state.usage["runs"]
        if (w := screening.wave(self, self.state.iteration + 1)) and w.get("stopped_by"):
            self._stopped(f"interrupted by {w['stopped_by']} during a screen: `tools loop resume` screens again")
            raise LoopInterrupted(w["stopped_by"], "the screen was cut off, nothing filed")
        batch: list[dict] = []
        for _ in range(int(max(1, min(self.spec.parallel, left)))):
            pend = self._next_pending(self.state.iteration + 1 + len(batch), batch)
            if pend is None:
                break
            batch.append(pend)
            self.state.pending = batch
            self.save()  # the state holds the proposal before its hypothesis page says "testing"
            self.hyp.file(Proposal.from_dict(pend["proposal"]), pend["iteration"], "testing", None,
                          page=pend["hypothesis_page"])
        if not batch:
            return
        if len(batch) == 1:
            pending.run(self, batch[0])
        else:
            pending.run_batch(self, batch)
        for pend in list(batch):
            self._learn(pend)

    def _next_pending(self, n: int, batch: list[dict]) -> dict | None:
        """One proposal, filed as a hypothesis page; None when there is none (the iteration ends)."""
        priors = gather.gather(self.project, self.spec, self.state.to_dict(), self.budget_left())
        for pend in batch:  # proposals already in this batch count as tried
            priors.attempts.append(Attempt("(in flight)", pend["proposal"]["category"], pend["proposal"]["change"],
                                           "", "pending", config=pend["config"], run_key=pend["run_key"],
                                           trunk_exp=pend["trunk_exp"]))
        self._inflight = {pend["run_key"] for pend in batch}
        try:
            proposal = self.propose(priors, n)
        except BudgetExhausted as e:
            learn.charge(self.state, e.usage)
            self.state.budget_hit = f"budget: the next proposal would exceed {e.what} ({e})"
            self.save()
            return None
        except LLMUnavailable as e:  # overloaded, rate-limited, unreachable: waited out, not a bad answer
            asking.wait_out(self, n, e)
            return None
        except ToolsError as e:  # the proposer failed (an unusable LLM proposal twice, a refused request)
            asking.failed(self, n, e)
            return None
        self.state.proposer_failures = self.state.proposer_waits = 0
        if proposal is None:
            if not batch:
                self._exhausted(n)
            return None
        trunk = self.state.trunk
        cfg, env = admission.config_of(self.spec, trunk, proposal)
        page = proposal.hypothesis_page or page_names.free(self.project.wiki, hypotheses.hypothesis_path(
            self.spec.model, self.spec.lane, f"{n:03d}-{slugify(proposal.statement)[:40]}"))
        key = admission.key_of(self.spec, trunk, proposal, cfg, env)
        rounds, why = power.rounds_for(self.spec, priors, proposal, key)
        return {"phase": "proposed", "iteration": n, "proposal": proposal.to_dict(), "config": cfg, "env": env,
                "run_key": key, "trunk_exp": trunk["exp_id"],
                "trunk_commit": trunk.get("commit", ""), "interrupted": 0, "hypothesis_page": page,
                "loop_started": self.state.started, **({"pairs_rounds": rounds, "rounds_why": why} if why else {})}

    def propose(self, priors: Priors, n: int) -> Proposal | None:
        """People's hypotheses first, then the loop's proposer; refused proposals are asked for again."""
        return asking.ask(self, priors, n)

    def refuse(self, p: Proposal, priors: Priors) -> str | None:
        """Why this proposal may not run (unknown knob, duplicate, refuted, category streak), else None."""
        return admission.refuse(self.spec, self.state, p, priors, self._inflight)

    def _learn(self, pend: dict) -> None:
        """Keep or discard, then the hypothesis status, an observation, the memory (loop) page; idempotent."""
        p, rec, n = Proposal.from_dict(pend["proposal"]), pend["record"], pend["iteration"]
        lesson = learn.learn(self.spec, self.state, pend)
        if lesson.moved:
            self.workspace.keep(lesson.commit)
        if rec.get("ledger_status") == "keep" and not lesson.kept:  # supported against a trunk that has moved since
            filing.Lane(self.project, self.spec.model, self.spec.lane).discard(
                self.writer, rec["exp_id"], rec.get("page") or "", "measured against a trunk another iteration moved")
            rec["ledger_status"] = "discard"
        if p.change.kind == "patch":
            with self._git:
                self.workspace.remove(f"{n:03d}")
        self.hyp.file(p, n, lesson.status, rec.get("page"), page=pend["hypothesis_page"])
        entry = next(h for h in reversed(self.state.history) if h.get("exp_id") == rec["exp_id"])
        self.writer.write_page(report.observation_page(self.spec, entry, rec))
        self.save()
        gain = f", gain {rec['gain_pct']:+.2f} % (band ±{rec.get('noise_band_pct')} %)" \
            if rec.get("gain_pct") is not None else ""
        self.writer.append_log("loop iteration", f"{self.spec.name} {n}", [
            f"{p.category}: {p.change.describe()}", f"verdict {rec.get('verdict')}{gain}",
            "kept: the trunk moved" if lesson.kept else "discarded: the trunk is unchanged", f"page {rec.get('page')}"])
        self.say(f"  → {rec.get('verdict')}" + (f" {rec['gain_pct']:+.2f} %" if rec.get("gain_pct") is not None else "")
                 + (" KEPT" if lesson.kept else "") + f"  wiki/{rec.get('page')}")
        if lesson.moved and self.spec.reference:
            self._reference_steps()
        self._write_loop_page()
        why = retro.due(self.state)
        if why:
            self.retrospective(why=why)

    def _exhausted(self, n: int) -> None:
        if retro.exhausted(self.state):
            if self.rejected:
                self.state.plateau_stop += (f"; {len(self.rejected)} open hypothesis page(s) not usable (listed "
                                            "in iterations/*/rejected.txt)")
            self.save()
            return
        self.retrospective(why="the proposer has nothing left to propose on this trunk")

    def retrospective(self, why: str, manual: bool = False, final: bool = False) -> str:
        """Write an analysis page; a second one with runs between and no frontier move is a double plateau
        (one asked for by hand is written the same way but never counts towards a stop)."""
        s = self.state
        doc = s.to_dict()
        priors = gather.gather(self.project, self.spec, doc, self.budget_left())
        untried = self.proposer.untried(priors) or SweepProposer().untried(priors)
        rules = SweepProposer()  # what the sweep's rules set aside, whoever proposes
        rules.candidates(priors)
        n = page_names.next_retrospective(self.project.wiki, self.spec.name, len(s.retrospectives))
        page = retro_page.retrospective_page(self.spec, doc, memory.compute(s.history), untried, n, rules.refused)
        self.writer.write_page(page)
        retro.record(s, page.path, why, manual, final)
        self.save()
        self.writer.append_log("loop retrospective", f"{self.spec.name} {n}", [why, f"page {page.path}"])
        self.say(f"retrospective {n}: {why} (wiki/{page.path})")
        self._write_loop_page()
        return page.path

    # ------------------------------------------------------------------ pages and runs

    def _write_loop_page(self) -> None:
        self.writer.write_page(report.loop_page(self.spec, self.state.to_dict(), memory.compute(self.state.history)))


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
    return Loop(project, spec, say, fresh=fresh).run(max_iterations, fresh=fresh and paths.state.exists())


def resume(project: Project, name: str, say=None, max_iterations: int | None = None) -> dict:
    paths = st.LoopPaths(project, name)
    if st.load(paths) is None:
        raise InputError(paths.state, "no state: `tools loop start` first")
    spec = load(paths.spec)
    return Loop(project, spec, say).run(max_iterations)
