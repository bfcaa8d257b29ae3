"""The schedule of an experiment: rounds of arms, each round run by one ``run_round`` call of a runner backend
(``tools.runners``), so both arms of a round always share a worker.

- a separate profile run is its own round and goes first: a crash, a broken loss trajectory or a no-op (the same
  optimized HLO as the parent's) is then known before any timed round is spent;
- timed rounds alternate ``[baseline, variant]`` and ``[variant, baseline]`` (A B, B A, ...), as many as
  ``min_repeats`` and then more, up to ``max_repeats``, until the interval of the gain is decided
  (``stats.paired``, looked at after every even round and at the cap);
- a same-shape semantics reference (``reference_command``) is its own round, run once when the lane has none;
- the baseline reruns with the environment its record kept, never the variant's;
- with ``pairs`` (``tools exp run --pairs``) and arms that differ in flags only, the timed rounds are blocks of two
  processes (``pairs``, then ``pairs-swapped`` with the arms' positions swapped): all of them, looked at once; an
  A/A calibration with ``pairs`` is the baseline's flags as both arms of the same two processes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from . import arms, comparison, pairs, records, stats, verdict
from .arms import ArmResult
from .sides import (HLO_ENV, PROFILE_ENV, Side, code_commit, command_files_changed, compile_cache_env,
                    importable_beside, importable_changed, merged_env, profile_env, record_side, script_of,
                    stdlib_shadows)


# ----------------------------------------------------------------------------- what ran

@dataclass
class Runs:
    base_rec: dict | None = None         # the record compared against (its command is the baseline arm)
    interleaved: bool = False
    calibration: bool = False
    base: list[ArmResult] = field(default_factory=list)   # timed baseline arms, round by round
    var: list[ArmResult] = field(default_factory=list)    # timed variant arms
    profile: ArmResult | None = None
    traced: bool = False                 # the single timed run carried the profiler
    reference: ArmResult | None = None
    all_arms: list[ArmResult] = field(default_factory=list)
    stopped_by: str | None = None
    crash: ArmResult | None = None       # the variant arm that crashed
    base_failure: ArmResult | None = None
    early_semantics: verdict.Semantics | None = None
    noop: bool = False
    fingerprint: str | None = None
    hlo_facts: dict | None = None        # the profiled arm's compiled step (``gap.facts.run_facts``)
    timing: stats.Timing | None = None
    looks: int = 1                       # how often the interval may be looked at (adaptive: once per round)
    stop: str = ""                       # why the rounds ended
    error: Exception | None = None       # the runner backend raised: filed as a crash, then raised again
    pairs: dict | None = None            # the timed rounds ran as in-process pairs: rounds, block steps, log
    notes: list[str] = field(default_factory=list)
    base_doubt: str = ""                 # why the baseline's reruns are not the baseline filed (a file it names)
    base_changed: str = ""               # the baseline's script changed during the rounds (a variant rewrote it)


@dataclass
class Schedule:
    project: object
    spec: object
    raw_dir: Path
    prior: list[dict]
    variant: Side
    base: Side | None
    lo: int
    hi: int
    runs: Runs
    on_profile: object = None            # callable(raw_dir) -> fingerprint, after the profile arm
    runner: object = None
    base_sha: str = ""                   # the baseline's script before its first arm
    base_beside: dict | None = None      # ... and what its folder offers its imports (sides.importable_beside)

    def _round(self, arm_list, kinds: list[str]) -> list[ArmResult]:
        if "base" in kinds:
            self._base_script_held()
        for arm in arm_list:
            arm.hang_s = self.spec.hang_s
        procs = self.runner.run_round(arm_list, self.spec.echo)
        out = []
        for arm, kind, p in zip(arm_list, kinds, procs):
            a = arms.check(arm.name, p, arm.timeout, self.spec.peak_flops)
            a.kind = kind
            out.append(a)
            self.runs.all_arms.append(a)
            if p.stopped_by:
                self.runs.stopped_by = p.stopped_by
        return out

    def _base_script_held(self) -> None:
        """The baseline arm reruns the script its record hashed: a variant that rewrites it (and the saved copies)
        from inside its own process slows every later baseline arm. Checked before each; a change is kept for
        the integrity checks (``baseline-changed``)."""
        if self.base is not None and not self.runs.base_doubt:  # a file its command names (a sourced env.sh)
            self.runs.base_doubt = command_files_changed((self.runs.base_rec or {}).get("command_files"), self.base)
        script = script_of(self.base.command, self.base.cwd) if self.base is not None else None
        if script is None or self.runs.base_changed:
            return
        now, beside = code_commit(script)[1], importable_beside(script, self.base.env)
        self.base_sha = self.base_sha or now  # as it was before any arm ran (the record's script, or its copy)
        if self.base_beside is None and isinstance(filed := (self.runs.base_rec or {}).get("import_shadows"), list) \
                and (new := sorted(set(stdlib_shadows(script, self.base.env)) - set(filed))):
            self.runs.base_changed = (f"where the baseline's script `{script.name}` imports from first, a module takes "
                                      f"over the standard library's `{new[0]}`, which none did when it was filed")
        self.base_beside = beside if self.base_beside is None else self.base_beside
        if now and now != self.base_sha:
            self.runs.base_changed = (f"the baseline's script `{script.name}` (sha256 {self.base_sha[:12]}) read "
                                      f"{now[:12]} before baseline arm {len(self.runs.base) + 1}")
        elif what := importable_changed(self.base_beside, beside):  # a module planted where its imports look first
            self.runs.base_changed = (f"where the baseline's script `{script.name}` imports from first, {what} before "
                                      f"baseline arm {len(self.runs.base) + 1}: it read other code than it ran with")

    def noise(self) -> stats.Noise:
        return comparison.current_noise(self.prior, self.spec.variant, self.runs.base_rec, self.spec.statistic)

    # --------------------------------------------------------------- the steps

    def run(self) -> Runs:
        r, spec = self.runs, self.spec
        self._base_script_held()  # its hash before any arm ran (the profiled variant arm goes first)
        r.interleaved = self.base is not None and (self.hi >= 2 or r.calibration)
        r.traced = spec.profile and not r.interleaved and self.hi == 1 and not r.calibration
        checked = False
        if spec.profile and not r.traced and not r.calibration:
            if not self._profile_round() or not self._after_first(r.profile):
                return r
            checked = True
        limit = self.hi if r.interleaved and not r.calibration else self.lo
        r.looks = stats.looks(self.lo, self.hi) if r.interleaved and self.lo < self.hi else 1
        if spec.pairs and r.interleaved:
            # an A/A calibration of pairs is the baseline's flags as both arms: the noise pairs comparisons see
            n = limit if r.calibration else (spec.pairs_rounds or limit)
            handled, checked = self._pairs_rounds(n, checked or r.calibration)
            if handled:
                return r
        i = 0
        while len(r.var) < limit:
            i += 1
            if not self._timed_round(i, single=limit == 1 and not r.interleaved):
                return r
            if r.calibration:
                continue
            if not checked:
                checked = True
                if not self._after_first(r.var[-1]):
                    return r
            if r.interleaved and self.lo < self.hi and len(r.var) in stats.look_points(self.lo, self.hi):
                b, v = comparison.pairs(r, self.spec.statistic)
                r.timing = stats.paired(b, v, self.noise(), r.looks)
                if r.timing and (spec.settled or (lambda t: t.decision != "undecided"))(r.timing):
                    d = r.timing.decision  # undecided: the caller's rule (the gate's) settled it
                    r.stop = f"{'decided' if d != 'undecided' else 'settled'} ({d}) after {len(r.var)} rounds"
                    return r
        if r.interleaved and not r.calibration:
            r.stop = f"{len(r.var)} rounds" + (" (the cap)" if self.lo < self.hi else "")
        return r

    def _pairs_rounds(self, rounds: int, checked: bool) -> tuple[bool, bool]:
        """Every timed round as a block of one of two processes; (handled, checked). The first runs the baseline as
        arm A, the second (``-swapped``) the variant as arm A: in one process the arm built and warmed second ran
        faster (A/A, bench/noise_model.py --kind pairs: +0.7 % over 60 processes, +2-3 % in the first rounds), and
        a bias of the position cancels when each arm holds each position for half the rounds. Not handled
        (process-level rounds follow, the page says why) when the arms differ in more than flags."""
        r, spec = self.runs, self.spec
        for attempt in (1, 2):  # again when the first result moves the comparison to a same-shape baseline
            for a in r.all_arms:  # the process against the other baseline: its wall time counts, its clock not
                if a.kind == "pairs":
                    a.kind = "pairs-dropped"
            planned, why = pairs.plan(self.base, self.variant, spec.runner)
            if planned is None:
                r.notes.append(f"in-process pairs not used: {why}; process-level rounds instead")
                r.pairs = None
                return False, checked
            name = "pairs" if attempt == 1 else "pairs-2"
            first = (rounds + 1) // 2
            r.base, r.var = [], []
            r.pairs = {"rounds": rounds, "block_steps": pairs.BLOCK_STEPS, "log": f"{name}.log"}
            witnesses = self._witnesses(planned, name) if planned.options else {}
            if witnesses is None:
                return True, checked
            if not self._pairs_process(planned, name, first, False):
                if why := self._options_refused():
                    return self._no_pairs(why), checked
                return True, checked
            if witnesses:
                if why := pairs.options_hold(planned, self.raw_dir / f"{name}-hlo", witnesses):
                    return self._no_pairs(why), checked
                r.pairs["xla_options"] = {k: v for k, v in (("a", planned.options_a), ("b", planned.options_b)) if v}
                r.notes.append("in-process pairs with XLA flags as compile options: " + "; ".join(
                    f"arm {k} ({'baseline' if k == 'a' else 'variant'}) compiled the program its XLA_FLAGS give "
                    f"(witness process {name}-witness-{k})" for k in witnesses))
            if not checked and not r.calibration:
                checked = True
                if not self._after_first(r.var[0]):
                    return True, checked
                if not r.var:  # the comparison moved to a same-shape baseline: both processes again against it
                    continue
            looked = not r.calibration and rounds - first and first >= stats.MIN_FIRST_ROUNDS
            r.looks = stats.PAIRS_LOOKS if looked else 1
            if looked and self._first_look(first):
                return True, checked
            if rounds - first:
                r.pairs.update(swapped_log=f"{name}-swapped.log", swapped_rounds=rounds - first)
                if not self._pairs_process(planned, f"{name}-swapped", rounds - first, True):
                    return True, checked
            break
        r.stop = (f"{len(r.var)} rounds of {pairs.BLOCK_STEPS}-step blocks in two processes (in-process pairs, the "
                  "arms' positions swapped in the second)")
        return True, checked

    def _first_look(self, first: int) -> bool:
        """Whether the first pairs process decided on its own (``stats.first_process``): then the swapped one is not
        run and the page says the verdict held with the variant's position worth ``POSITION_ALLOWANCE_PCT``."""
        r = self.runs
        noise = comparison.current_noise(self.prior, self.spec.variant, r.base_rec, self.spec.statistic, True)
        t = stats.first_process(*comparison.pairs(r, self.spec.statistic), noise)
        if t is None:
            return False
        allowance = stats.POSITION_ALLOWANCE_PCT
        r.pairs["first_look"] = {"decision": t.decision, "rounds": t.rounds, "allowance_pct": allowance}
        r.stop = (f"decided ({t.decision}) after the first process's {first} rounds of {pairs.BLOCK_STEPS}-step "
                  "blocks: the swapped process was not needed")
        r.notes.append(f"in-process pairs decided after the first process ({first} rounds, the variant as arm B in "
                       f"each): the {t.decision} verdict held with the variant's tokens/s "
                       f"{'cut' if t.decision == 'supported' else 'raised'} by {allowance:g} % (what being arm B, "
                       f"built second, can be worth), at {t.confidence_pct:g} % (one of {stats.PAIRS_LOOKS} looks)")
        return True

    def _witnesses(self, planned: pairs.Planned, name: str) -> dict[str, Path] | None:
        """For each arm with XLA compile options, a process with its own XLA_FLAGS that compiles it and writes the
        program (``pairs.witness``): {arm: folder}; None when the schedule ends here (stopped, or a crash)."""
        r, spec = self.runs, self.spec
        got = {}
        for letter, side, options in (("a", self.base, planned.options_a), ("b", self.variant, planned.options_b)):
            if not options:
                continue
            folder = self.raw_dir / f"{name}-witness-{letter}"
            w = pairs.witness(planned, side, letter, folder)
            arm = w.arm(f"{name}-witness-{letter}", self.raw_dir, spec.timeout, self._timed_env(w))
            arm.hang_s = spec.hang_s
            (p,) = self.runner.run_round([arm], spec.echo)
            whole = ArmResult(arm.name, p, None, None, kind="witness")
            r.all_arms.append(whole)
            if p.stopped_by:
                r.stopped_by, r.stop = p.stopped_by, f"stopped by {p.stopped_by}"
                return None
            if p.timed_out or p.hung_s or p.rc != 0:
                whole.crash = arms.crash_reason(p, arm.timeout, None, pairs.output(p)) or f"exit {p.rc}"
                crashed = whole if letter == "b" else None
                r.crash, r.stop = crashed, f"the {'variant' if letter == 'b' else 'baseline'} did not compile " \
                                           f"with its XLA flags (witness process): {whole.crash}"
                if letter == "a":
                    r.base_failure = whole
                return None
            got[letter] = folder
        return got

    def _options_refused(self) -> str:
        """Why the last pairs process stopped before its rounds when XLA refused an arm's compile option ("" when
        it did not)."""
        r = self.runs
        whole = r.all_arms[-1] if r.all_arms else None
        out = pairs.output(whole.proc) if whole is not None and whole.kind == "pairs" else None
        if not out or not out.get("refused_option"):
            return ""
        whole.kind, whole.crash = "pairs-dropped", None
        r.crash, r.stop = None, ""
        return f"XLA does not take the flag as a compile option ({out['refused_option']})"

    def _no_pairs(self, why: str) -> bool:
        """The pairs rounds set aside (their processes' wall time still counts): process-level rounds follow."""
        r = self.runs
        for a in r.all_arms:
            if a.kind == "pairs":
                a.kind = "pairs-dropped"
        r.base, r.var, r.pairs = [], [], None
        r.notes.append(f"in-process pairs not used: {why}; process-level rounds instead")
        return False

    def _pairs_process(self, planned: pairs.Planned, name: str, rounds: int, swapped: bool) -> bool:
        """One pairs process of ``rounds`` blocks, its rounds appended; False when the schedule ends here."""
        r, spec = self.runs, self.spec
        order = planned.swapped() if swapped else planned
        # two compiles and (rounds + 1) blocks per arm: a generous multiple of one run's timeout
        hlo = self.raw_dir / f"{name}-hlo" if planned.options and not swapped else None
        side = pairs.side(order, self.variant, rounds, hlo_dir=hlo)
        arm = side.arm(name, self.raw_dir, (2 + rounds) * spec.timeout, self._timed_env(side))
        arm.hang_s = spec.hang_s
        (p,) = self.runner.run_round([arm], spec.echo)
        whole, base, var = pairs.split(name, p, arm.timeout, spec.peak_flops, swapped, len(r.var) + 1)
        r.all_arms.append(whole)
        if p.stopped_by:
            r.stopped_by, r.stop = p.stopped_by, f"stopped by {p.stopped_by}"
            return False
        if whole.crash:
            r.crash, r.stop = whole, f"the in-process pairs crashed (both arms ran in it): {whole.crash}"
            return False
        if not base or len(base) != len(var):
            r.crash, whole.crash = whole, "the pairs JSON line holds no rounds of both arms"
            r.stop = f"the in-process pairs crashed: {whole.crash}"
            return False
        r.base += base
        r.var += var
        if failed := next((a for a in base if not a.ok), None):
            r.base_failure = failed
            r.stop = f"the baseline arm {failed.name} failed: {failed.crash or failed.bad_loss}"
            return False
        if failed := next((a for a in var if not a.ok), None):
            r.crash = failed if failed.result is None else None
            r.stop = f"{failed.name}: {failed.crash or failed.bad_loss}"
            return False
        return True

    def _profile_round(self) -> bool:
        r, spec = self.runs, self.spec
        env = profile_env(self.raw_dir, spec.hlo_module_re, self.variant.env)
        arm = self.variant.arm("profile-run", self.raw_dir, spec.timeout, env,
                               {PROFILE_ENV: self.raw_dir / "trace", HLO_ENV: self.raw_dir / "hlo"})
        (r.profile,) = self._round([arm], ["profile"])
        if r.stopped_by or r.profile.result is None or r.profile.bad_loss:
            r.crash = r.profile if r.profile.result is None else None
            r.stop = "the profiled run " + ("was stopped" if r.stopped_by else "failed")
            return False
        r.fingerprint = self.on_profile(self.raw_dir) if self.on_profile else None
        if spec.parent_fingerprint and r.fingerprint == spec.parent_fingerprint and not spec.runtime_only:
            r.noop, r.stop = True, "no-op: the optimized HLO equals the parent's, timed rounds skipped"
            return False
        return True

    def _timed_env(self, side: Side) -> dict[str, str]:
        """A timed arm's environment: the side's own, with the shared compile cache when the run asks for it."""
        if not self.spec.compile_cache:
            return dict(side.env)
        return compile_cache_env(self.project.cache / "jax-compile", side.env)

    def _timed_round(self, i: int, single: bool) -> bool:
        r, spec = self.runs, self.spec
        name = "run" if single else f"run-{i}"
        if r.calibration:
            arm_list = [self.base.arm(f"baseline-{i}", self.raw_dir, spec.timeout, self._timed_env(self.base)),
                        self.base.arm(f"run-{i}", self.raw_dir, spec.timeout, self._timed_env(self.base))]
        elif r.traced:
            env = profile_env(self.raw_dir, spec.hlo_module_re, self.variant.env)
            arm_list = [self.variant.arm(name, self.raw_dir, spec.timeout, env,
                                         {PROFILE_ENV: self.raw_dir / "trace", HLO_ENV: self.raw_dir / "hlo"})]
        else:
            arm_list = [self.variant.arm(name, self.raw_dir, spec.timeout, self._timed_env(self.variant))]
            if r.interleaved:
                arm_list.insert(0, self.base.arm(f"baseline-{i}", self.raw_dir, spec.timeout,
                                                 self._timed_env(self.base)))
        kinds = ["base", "var"] if len(arm_list) == 2 else ["var"]
        if len(arm_list) == 2 and not r.calibration and i % 2 == 0:  # B A: the position effect cancels in pairs
            arm_list, kinds = arm_list[::-1], kinds[::-1]
        got = self._round(arm_list, kinds)
        for a in got:
            (r.base if a.kind == "base" else r.var).append(a)
        if r.stopped_by:
            r.stop = f"stopped by {r.stopped_by}"
            return False
        if len(got) < len(arm_list):  # a backend that stopped early without a stop signal
            r.stop = "the runner returned fewer arms than it was given"
            return False
        if r.traced and got[-1].result is not None:
            r.fingerprint = self.on_profile(self.raw_dir) if self.on_profile else None
            r.noop = bool(spec.parent_fingerprint and r.fingerprint == spec.parent_fingerprint
                          and not spec.runtime_only)
        for a in got:
            if a.kind == "base" and not a.ok:
                r.base_failure = a
                r.stop = f"the baseline arm {a.name} failed: {a.crash or a.bad_loss}"
                return False
        v = next((a for a in got if a.kind == "var"), got[-1])
        if v.result is None:
            r.crash = v
            r.stop = f"{v.name} crashed"
            return False
        if v.bad_loss:
            r.stop = f"{v.name}: {v.bad_loss}"
            return False
        return True

    def _after_first(self, first: ArmResult) -> bool:
        """After the variant's first result: the same-shape baseline, the reference round, the early semantics."""
        r, spec = self.runs, self.spec
        key = verdict.shape_key(first.result)
        base_key = records.shape_key_of(r.base_rec or {})
        if r.base_rec and spec.compare_to is None and base_key not in (None, key):
            alt = records.baseline_for(self.prior, spec.variant, key)
            if alt is not None and records.shape_key_of(alt) == key and alt is not r.base_rec:
                dropped = len(r.var) if self.base is not None else 0
                r.notes.append(f"this run's shape differs from `{r.base_rec['exp_id']}`: compared with the same-shape "
                               f"baseline `{alt['exp_id']}` instead"
                               + (f" ({dropped} round dropped)" if dropped else ""))
                r.base_rec = alt
                if self.base is not None:
                    self.base, notes = record_side(self.project, alt, None, spec.cwd)
                    r.notes += notes
                    r.base, r.var = [], []
        return self._semantics_first(first, key)

    def _semantics_first(self, first: ArmResult, key: str) -> bool:
        r, spec = self.runs, self.spec
        ref, _ = comparison.reference_losses(key, r, self.prior)
        if ref is None and spec.reference_command and r.reference is None:
            side = Side(list(spec.reference_command), merged_env(spec.reference_env), spec.reference_cwd or spec.cwd)
            (r.reference,) = self._round([side.arm("reference", self.raw_dir, spec.timeout)], ["reference"])
            if r.stopped_by:
                r.stop = "stopped by " + r.stopped_by
                return False
            ref, _ = comparison.reference_losses(key, r, self.prior)
        if ref is not None:
            sem = comparison.check_semantics(spec, key, first.result, r, self.prior)
            if sem.status == "changed":
                r.early_semantics = sem
                r.stop = "the loss trajectory changed: timed rounds skipped"
                return False
        return True
