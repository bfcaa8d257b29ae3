"""`tools exp run`: run a training command, keep its log, read its JSON line, file the results.

The steps live apart: ``rounds`` schedules the arms (through a runner backend, ``tools.runners``), ``arms`` checks
each arm's result, ``comparison`` and ``stats`` turn results into a verdict, ``filing`` reserves versions and writes
pages under the lane lock, ``abandoned`` files runs whose runner vanished. This module orders them.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from .. import redact, runners
from ..errors import InputError, ToolsError
from ..project import Project
from ..runners.process import Stop, deferred_signals, stop_on_signals
from ..writer import Writer, atomic_write
from . import abandoned, comparison, filing, integrity, noise, pairs, records, rounds, stats, verdict
from .context import RunContext
from .filing import rel
from .sides import (Side, code_commit, command_files, merged_env, record_side, recorded_env, script_of, stdlib_shadows,
                    uncommitted)

SLUG = re.compile(r"[^a-z0-9]+")
# frontmatter the runner writes: ``RunSpec.extra`` may add keys, never set these
RUNNER_KEYS = frozenset(
    "title type tags model lane variant hypothesis commit exp_id status version slug date description command "
    "script_sha256 script_copy raw_dir cwd runner runs_on env repeats run_wall_s wall_s_total interleaved stop config "
    "shape shape_key loss_trajectory loss_windows metrics compile_cache role baseline best gain_vs_best_pct semantics "
    "runs_tokens_per_s calibration "
    "calibrated_by verdict ledger_status reasons gain_pct noise_band_pct timing hlo_fingerprint attribution_note "
    "statistic_choice runs_tokens_per_s_best pairs "
    "reference_run notes page crash protected integrity uncommitted import_shadows command_files".split())


@dataclass
class RunSpec:
    model: str
    lane: str
    variant: str
    command: list[str]
    hypothesis: str = ""
    description: str = ""
    slug: str = ""
    profile: bool = False
    timeout: float = 1800.0
    hang_s: float | None = None          # no output for this long: hung (stack taken, then killed; kind ``hang``)
    repeats: int = 1                     # fixed count of timed rounds (back-compat); see min/max_repeats
    peak_flops: float | None = None
    baseline: bool = False
    loss_tol: float = verdict.SEMANTICS_TOL
    semantics_steps: int = verdict.SEMANTICS_STEPS
    memory_tol_pct: float = verdict.MEMORY_TOL_PCT   # peak memory may grow this much before a gain is held back
    memory_max_gb: float | None = None               # ... or any amount while the peak stays under this
    trust_step_times: bool = False       # a simulation: step times taken as reported, though no clock checked them
    hlo_module_re: str = ".*train_step.*"
    echo: bool = False
    cwd: Path | None = None
    env: dict[str, str] = field(default_factory=dict)   # the variant's own environment (XLA_FLAGS: appended)
    min_repeats: int = 0                 # adaptive: at least this many rounds (0: ``repeats``)
    max_repeats: int = 0                 # adaptive: at most this many (0: ``max(repeats, min_repeats)``)
    settled: Callable[[stats.Timing], bool] | None = None  # adaptive: stop at a look when this holds (default:
                                         # when the verdict is decided); the gate asks its own question
    compare_to: str | None = None        # exp_id to compare against instead of the variant's latest baseline
    compare_cwd: Path | None = None      # where to rerun that record's command (default: its recorded cwd)
    compare_checkout: bool = False       # compare_cwd is a checkout of that record's own code: run as it is there
    reference_command: list[str] | None = None   # a same-shape semantics reference, run once when the lane has none
    reference_env: dict[str, str] = field(default_factory=dict)
    reference_cwd: Path | None = None
    parent_fingerprint: str | None = None        # the no-op check (needs ``profile``)
    runtime_only: bool = False                   # the change cannot show in the HLO: no no-op check
    extra: dict = field(default_factory=dict)    # frontmatter keys merged into the record (never runner keys)
    runner: str = "local"
    runner_options: dict = field(default_factory=dict)
    calibrate: bool = False              # A/A: the baseline's command against itself, filed with role calibration
    statistic: str = "median"            # a run's tokens/s in comparisons: its median steady step, ``min``, or ``auto``
    on_reserved: Callable[[str], None] | None = None  # called with the exp_id once reserved, before anything runs
    protected: list[str] = field(default_factory=list)  # files (``path``) or functions (``path::name``) hashed
                                         # with the run; a change since the baseline files it invalid
    protected_root: Path | None = None   # the folder the protected paths are relative to (default: ``cwd``)
    compile_cache: bool = False          # timed arms share JAX's compile cache (.tools-cache/jax-compile), never
                                         # the profiled run (its optimized-HLO dump is evidence)
    pairs: bool = False                  # timed rounds as blocks of two processes (``pairs``) when the arms differ in
                                         # flags only; else process-level rounds, the page says why
    pairs_rounds: int = 0                # rounds of those processes (0: ``max_repeats``); a block costs steps, not a
                                         # process, so pairs can afford the rounds a verdict's power needs


@dataclass
class Outcome:
    exp_id: str
    page: str
    verdict: str
    status: str
    metrics: dict
    raw_dir: Path
    reasons: list[str] = field(default_factory=list)
    stopped_by: str | None = None  # "Ctrl-C" or "SIGTERM": the run was filed as a crash, then the runner stops
    record: dict = field(default_factory=dict)   # the filed frontmatter
    hlo_fingerprint: str | None = None

    def summary(self) -> dict:
        """The run as `tools exp run --json` prints it: verdict, metrics, the comparison and where it is filed."""
        r, timing = self.record, self.record.get("timing") or {}
        return {"exp_id": self.exp_id, "page": f"wiki/{self.page}", "verdict": self.verdict, "status": self.status,
                "role": r.get("role"), "metrics": self.metrics, "reasons": self.reasons, "gain_pct": r.get("gain_pct"),
                "noise_band_pct": r.get("noise_band_pct"), "interval_pct": timing.get("interval_pct"),
                "rounds": timing.get("rounds"), "baseline": r.get("baseline"), "hlo_fingerprint": self.hlo_fingerprint,
                "raw_dir": str(self.raw_dir), "stopped_by": self.stopped_by}


def slugify(text: str) -> str:
    return SLUG.sub("-", text.lower()).strip("-")[:48] or "run"


def _check_name(kind: str, value: str) -> None:
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.\-]*", value or ""):
        raise InputError(f"--{kind}", f"{value!r} must be letters, digits, '.', '_' or '-'")


def repeat_range(spec: RunSpec) -> tuple[int, int]:
    """(least, most) timed rounds: ``repeats`` alone is a fixed count; ``max_repeats`` above it is adaptive."""
    lo = spec.min_repeats or spec.repeats
    hi = spec.max_repeats or max(spec.repeats, lo)
    if spec.calibrate:
        n = max(lo, hi)
        lo = hi = max(n, 3) if n > 1 else stats.CALIBRATION_ROUNDS
    if lo < 1 or hi < lo:
        raise InputError("--repeats", f"need 1 <= min repeats ({lo}) <= max repeats ({hi})")
    return lo, hi


def _check_spec(spec: RunSpec) -> None:
    for k in ("model", "lane"):
        _check_name(k, getattr(spec, k))
    if not spec.command and not spec.calibrate:
        raise InputError("command", "nothing to run: give the command after `--`")
    if spec.command and spec.calibrate:
        raise InputError("--calibrate", "a calibration reruns the baseline's own command: give no command")
    repeat_range(spec)
    for name in ("env", "reference_env"):
        d = getattr(spec, name)
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in d.items()):
            raise InputError(name, "environment variables and their values must be strings")
    clash = sorted(set(spec.extra) & RUNNER_KEYS)
    if clash:
        raise InputError("extra", f"keys {', '.join(clash)} are set by the runner; name yours differently")
    try:
        json.dumps(spec.extra, allow_nan=False)
    except (TypeError, ValueError) as e:
        raise InputError("extra", f"must be plain data (strings, numbers, lists, mappings): {e}") from None


def _compared(spec: RunSpec, prior: list[dict]) -> dict | None:
    """The record this run compares against: ``compare_to``, else the variant's latest usable baseline."""
    if spec.compare_to:
        r = records.find(prior, spec.compare_to)
        if r is None:
            raise InputError("compare_to", f"{spec.compare_to} is not an experiment of {spec.model}/{spec.lane}")
        why = records.usable(r) or (None if r.get("command") else "it recorded no command")
        if why:
            raise InputError("compare_to", f"{spec.compare_to} cannot be compared against: {why}")
        return r
    base = None if spec.baseline and not spec.calibrate else records.baseline_for(prior, spec.variant)
    if spec.calibrate and base is None:
        raise InputError("--calibrate", f"variant {spec.variant} has no usable baseline to calibrate: "
                                        "file one with --baseline first")
    return base


class DryRun(ToolsError):
    """A runner set to ``dry_run`` wrote what it would submit: nothing ran, nothing was filed (the message says
    where to look)."""


def run_experiment(project: Project, spec: RunSpec, writer: Writer | None = None) -> Outcome:
    _check_spec(spec)
    redact.hold({**spec.env, **(spec.reference_env or {})})  # a crash that quotes one is filed without it
    backend = runners.get(spec.runner, spec.runner_options)  # an unknown runner fails before anything is filed
    if getattr(backend, "dry_run", False):  # no version, no page: a crash filed for a run never meant to run
        raise DryRun(_dry_run(project, spec, backend))
    w = writer or Writer(project.wiki)
    lane = filing.Lane(project, spec.model, spec.lane)
    lo, hi = repeat_range(spec)
    var_side = Side(list(spec.command), merged_env(spec.env), spec.cwd)
    runs = rounds.Runs(calibration=spec.calibrate)
    rec: dict = {}
    ctx = RunContext(timeout=spec.timeout)
    with stop_on_signals():
        try:
            # 1. file what vanished runners left, pick what to compare with, reserve a version: under the lane lock
            # (waiting for it, SIGTERM and Ctrl-C still stop the command; once it is held they wait for the step)
            with lane.locked(), deferred_signals():
                abandoned.sweep_lane(w, lane)
                prior = lane.records()
                runs.base_rec = _compared(spec, prior)
                base_side = None
                if runs.base_rec is not None and runs.base_rec.get("command"):
                    base_side, notes = record_side(project, runs.base_rec, spec.compare_cwd, spec.cwd,
                                                   spec.compare_checkout)
                    runs.notes += notes
                if spec.calibrate:
                    var_side = base_side
                if spec.statistic == "auto":  # chosen from the lane's earlier rounds, before this run's
                    paired = spec.pairs and pairs.plan(base_side, var_side, spec.runner)[0] is not None
                    choice = noise.choose_reading(prior, spec.variant, records.shape_key_of(runs.base_rec or {}),
                                                  paired)
                    spec = replace(spec, statistic=choice["chosen"])
                    ctx.reading = choice
                command = var_side.command if spec.calibrate else spec.command
                ctx.command_line = shlex.join(command)
                ctx.env = recorded_env(var_side.env, var_side.unset)
                script = script_of(command, var_side.cwd)
                n_runs = 2 * hi + int(spec.profile) + int(bool(spec.reference_command))
                if spec.pairs:  # two processes of (2 + their rounds) timeouts each
                    n_runs = max(n_runs, 4 + (spec.pairs_rounds or hi) + int(spec.profile)
                                 + int(bool(spec.reference_command)))
                version = lane.next_version()
                if spec.on_reserved:  # e.g. the loop commits a code patch with its experiment's id first
                    spec.on_reserved(exp_id_for(spec, version, w.today))
                rec = _started_record(project, spec, version, w.today, script, code_commit(script),
                                      ctx.command_line, n_runs, ctx.env)
                filing.write_in_progress(w, rec, ctx.command_line)
            # 2. the rounds: baseline and variant per round (the order alternating) when there is a baseline to rerun
            raw_dir = project.root / rec["raw_dir"]
            rounds.Schedule(project, spec, raw_dir, prior, var_side, base_side, lo, hi, runs,
                            on_profile=_fingerprint, runner=backend).run()
            # the profile read while signals still stop the run (after this block SIGTERM killed the process with
            # the page left in_progress, and a Ctrl-C went out as click's "Aborted!", exit 1)
            if spec.profile and runs.error is None and runs.stopped_by is None:
                _profile(project, raw_dir, ctx, runs)
                from ..gap.facts import run_facts

                runs.hlo_facts = (run_facts(raw_dir / "hlo") if (raw_dir / "hlo").is_dir()
                                  else {"stage": "none", "modules": []})
        except (KeyboardInterrupt, Stop) as e:  # between two commands: nothing to kill, file what we have
            if not rec:
                raise
            runs.stopped_by = e.how if isinstance(e, Stop) else "Ctrl-C"
        except Exception as e:  # a backend or a profile step failed: file a crash saying so, then raise it
            if not rec:
                raise
            runs.error = e
    raw_dir = project.root / rec["raw_dir"]

    # 3. metrics, verdict, page, ledger row, model page: under the lane lock, signals held back until filed
    failure = None
    with lane.locked(), deferred_signals():
        prior = lane.records()
        try:
            rec, d = comparison.judge(spec, rec, ctx, prior, runs)
            _attribution(project, runs.base_rec, rec, ctx)
        except Exception as e:  # file what happened rather than leave the page in_progress, then re-raise
            failure = e
            d = verdict.Decision("crash", "crash", [f"tools exp run failed while judging: {type(e).__name__}: {e}"])
            rec = dict(rec, status="filed", verdict="crash", ledger_status="crash", reasons=d.reasons, metrics={},
                       role="variant")
            ctx.crash_reason, ctx.log_tail = d.reasons[0], ""
        rec["notes"] = runs.notes + ctx.notes or None
        rec = {**spec.extra, **{k: v for k, v in rec.items() if v is not None}}
        page = filing.file_record(w, lane, rec, ctx, prior)
        w.append_log("exp run", f"{spec.model}/{spec.lane} {rec['exp_id']}", [
            f"verdict {d.verdict} ({d.status}); tokens/s {rec['metrics'].get('tokens_per_s', '—')}",
            f"page {page}", f"raw {rec['raw_dir']}"])
    if failure is not None or runs.error is not None:
        raise failure or runs.error
    return Outcome(rec["exp_id"], page, d.verdict, d.status, rec["metrics"], raw_dir, d.reasons, runs.stopped_by,
                   dict(rec, page=page), rec.get("hlo_fingerprint"))


def _dry_run(project: Project, spec: RunSpec, backend) -> str:
    """One arm of the variant's command through the backend's dry run, its files under .tools-cache/dry-runs/."""
    import time

    folder = project.safe_cache() / "dry-runs" / time.strftime("%Y%m%dT%H%M%S")
    arm = runners.Arm("run-1", list(spec.command), folder / "run-1.log", env=merged_env(spec.env), cwd=spec.cwd,
                      timeout=spec.timeout)
    (proc,) = backend.run_round([arm])
    return proc.not_run or proc.tail


def _slug(spec: RunSpec) -> str:
    """The run's name in its id, redacted first (a key slugified is no longer a key's shape): the slug given, the
    description, else the script the command runs (not its last word: `--api-key K` named the run K)."""
    script = script_of(spec.command, spec.cwd) or next(  # else a file it runs: `bash launch.sh` is "launch"
        (Path(a) for a in spec.command[1:] if not a.startswith("-") and _is_file((spec.cwd or Path.cwd()) / a)), None)
    return slugify(redact.redact(spec.slug or spec.description or ("calibration" if spec.calibrate else Path(
        script or spec.command[0]).stem)))


def _is_file(p: Path) -> bool:
    try:
        return p.is_file()
    except (OSError, ValueError):  # a prompt of 5,000 characters is no file name (ENAMETOOLONG), nor one with a NUL
        return False


def exp_id_for(spec: RunSpec, n: int, date: str) -> str:
    return f"{date}-v{n:03d}-{_slug(spec)}"


def _started_record(project: Project, spec: RunSpec, n: int, date: str, script: Path | None,
                    code: tuple[str, str], command_line: str, n_runs: int, env: dict[str, str]) -> dict:
    """The in_progress page's frontmatter, with who runs it (see ``abandoned``); saves a copy of the script."""
    slug = _slug(spec)
    exp_id = exp_id_for(spec, n, date)
    raw_dir = project.raw_profiles / f"{date}-{spec.model}-{spec.lane}-v{n:03d}-{slug}"
    commit, sha = code
    rec = {"title": f"{spec.model}/{spec.lane} v{n:03d}: {spec.description or slug}", "type": "experiment",
           "tags": ["experiment", spec.model, spec.lane], "model": spec.model, "lane": spec.lane,
           "variant": spec.variant, "hypothesis": spec.hypothesis or None, "commit": commit or None,
           "exp_id": exp_id, "status": "in_progress", "version": n, "slug": slug, "date": date,
           "description": spec.description or None, "command": command_line, "script_sha256": sha or None,
           "raw_dir": rel(raw_dir, project.root), "cwd": rel(spec.cwd or Path.cwd(), project.root),
           "runner": abandoned.stamp(spec.timeout * n_runs, spec.timeout), "env": env,
           "runs_on": spec.runner if spec.runner != "local" else None,  # the backend whose workers ran its rounds
           # a run asked to be the baseline says so while it runs: no run filed meanwhile takes its place
           "role": "calibration" if spec.calibrate else "baseline" if spec.baseline else None,
           "compile_cache": spec.compile_cache or None,
           "protected": integrity.protected_hashes(spec.protected, spec.protected_root or spec.cwd or Path.cwd())
           or None,
           "uncommitted": uncommitted(script, project.root) or None,
           # standard-library modules its own folders take over, as it ran: a rerun of it as a baseline that finds
           # another was planted (`baseline-changed`)
           "import_shadows": stdlib_shadows(script, env) if script is not None else None,
           # the other files its command names (a launch script, a sourced env.sh, a config), as it ran
           "command_files": command_files(shlex.split(command_line), spec.cwd) or None}
    if script is not None:  # a copy of the model code, so a later interleaved rerun can use this exact code
        atomic_write(raw_dir / "code" / script.name, script.read_bytes())
        rec["script_copy"] = rel(raw_dir / "code" / script.name, project.root)
    # the caller's keys too, so a run cut off mid-way is still found as theirs (the loop's resume)
    return {**spec.extra, **{k: v for k, v in rec.items() if v is not None}}


def _fingerprint(raw_dir: Path) -> str | None:
    """Prune the HLO dump to its text and hash it (``tools.profiling.hlo_diff.fingerprint``)."""
    from ..profiling import hlo_diff

    _prune_dump(raw_dir / "hlo")
    return hlo_diff.fingerprint(raw_dir / "hlo")


def _attribution(project: Project, base_rec: dict | None, rec: dict, ctx: RunContext) -> None:
    """A note from ``tools.profiling.diff.attribution_note`` when both runs have a profile summary."""
    if not base_rec or rec.get("gain_pct") is None or not ctx.profile_summary:
        return
    from ..profiling import diff

    note_fn = getattr(diff, "attribution_note", None)
    base_summary = project.root / str(base_rec.get("raw_dir") or "") / "summary.json"
    if note_fn is None or not base_rec.get("raw_dir") or not base_summary.is_file():
        return
    same = bool(rec.get("hlo_fingerprint")) and rec.get("hlo_fingerprint") == base_rec.get("hlo_fingerprint")
    note = note_fn(json.loads(base_summary.read_text(encoding="utf-8")), ctx.profile_summary, rec["gain_pct"], same)
    if note:
        rec["attribution_note"] = ctx.attribution_note = str(note)


def _prune_dump(folder: Path) -> list[Path]:
    """Keep only the HLO text (the CPU backend also dumps LLVM IR and object files)."""
    keep = []
    if not folder.is_dir():
        return keep
    for p in sorted(folder.rglob("*"), key=lambda p: -len(p.parts)):
        if p.is_dir():
            if not any(p.iterdir()):
                p.rmdir()
        elif p.name.endswith(("after_optimizations.txt", "before_optimizations.txt")) and "buffer" not in p.name \
                and "live-range" not in p.name:
            keep.append(p)
        else:
            p.unlink()
    return sorted(keep)


def _profile(project: Project, raw_dir: Path, ctx: RunContext, runs) -> None:
    from ..profiling import hlo, summary  # jax is imported lazily inside

    arm = runs.profile if runs.profile is not None else (runs.var[0] if runs.traced and runs.var else None)
    if runs.calibration:
        ctx.profile_note = "A calibration is not profiled."
        return
    if arm is None or arm.result is None:
        ctx.profile_note = ("The run stopped before its profiled run." if arm is None else
                               f"The profiled run failed: see `{rel(arm.proc.log, project.root)}`.")
        _prune_dump(raw_dir / "hlo")  # what a crashed compile dumped (LLVM IR, object files: megabytes) goes too
        return
    kept = _prune_dump(raw_dir / "hlo")
    ctx.hlo_files = [rel(p, project.root) for p in kept]
    ctx.hlo_stats = [hlo.stats(m) for m in hlo.load_modules(raw_dir / "hlo").values()]
    ctx.trace_dir = rel(raw_dir / "trace", project.root)
    try:
        s = summary.summarize(raw_dir)
    except InputError as e:
        ctx.profile_note = f"No profile summary: {e}"
        return
    md = summary.render_markdown(s)
    atomic_write(raw_dir / "summary.json", json.dumps(s, indent=1, sort_keys=True))
    atomic_write(raw_dir / "summary.md", md)
    ctx.profile_md = md
    ctx.profile_summary = s
