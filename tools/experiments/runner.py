"""`tools exp run`: run a training command, keep its log, read its JSON line, file the results.

The steps live apart: ``command`` runs one command (log, timeout, process-group kill), ``filing`` reserves
versions and writes pages under the lane lock, ``comparison`` turns results into a verdict, ``abandoned`` files
runs whose runner vanished. This module orders them.
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import InputError
from ..project import Project
from ..writer import Writer
from . import abandoned, comparison, filing, records, verdict
from .command import (
    Proc,
    Stop,
    deferred_signals,
    env_with,
    run_command,
    stop_on_signals,
)
from .filing import rel

ENV_KEYS = ("XLA_FLAGS", "LIBTPU_INIT_ARGS", "JAX_PLATFORMS", "CUDA_VISIBLE_DEVICES", "TPU_VISIBLE_CHIPS")
PROFILE_ENV = "AUTORESEARCH_PROFILE_DIR"
SLUG = re.compile(r"[^a-z0-9]+")


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
    repeats: int = 1
    peak_flops: float | None = None
    baseline: bool = False
    loss_tol: float = verdict.SEMANTICS_TOL
    semantics_steps: int = verdict.SEMANTICS_STEPS
    hlo_module_re: str = ".*train_step.*"
    echo: bool = False
    cwd: Path | None = None


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


def slugify(text: str) -> str:
    return SLUG.sub("-", text.lower()).strip("-")[:48] or "run"


def _check_name(kind: str, value: str) -> None:
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.\-]*", value or ""):
        raise InputError(f"--{kind}", f"{value!r} must be letters, digits, '.', '_' or '-'")


def _script(cmd: list[str], cwd: Path | None) -> Path | None:
    for a in cmd:
        if a.endswith(".py"):
            p = Path(a) if Path(a).is_absolute() else (cwd or Path.cwd()) / a
            if p.is_file():
                return p
    return None


def code_commit(script: Path | None) -> tuple[str, str]:
    """(commit of the repo holding the model script, plus '-dirty' if it differs; sha256 of the script)."""
    if script is None:
        return "", ""
    sha = hashlib.sha256(script.read_bytes()).hexdigest()[:16]
    try:
        head = subprocess.run(["git", "-C", str(script.parent), "rev-parse", "--short=12", "HEAD"],
                              capture_output=True, text=True, timeout=10, check=False)
        if head.returncode != 0:
            return "", sha
        dirty = subprocess.run(["git", "-C", str(script.parent), "status", "--porcelain", "--", script.name],
                               capture_output=True, text=True, timeout=10, check=False)
        return head.stdout.strip() + ("-dirty" if dirty.stdout.strip() else ""), sha
    except (OSError, subprocess.TimeoutExpired):
        return "", sha


def run_experiment(project: Project, spec: RunSpec, writer: Writer | None = None) -> Outcome:
    for k in ("model", "lane"):
        _check_name(k, getattr(spec, k))
    if not spec.command:
        raise InputError("command", "nothing to run: give the command after `--`")
    w = writer or Writer(project.wiki)
    lane = filing.Lane(project, spec.model, spec.lane)
    script = _script(spec.command, spec.cwd)
    command_line = shlex.join(spec.command)
    code = code_commit(script)

    # 1. file what vanished runners left, then reserve a version: an in_progress page, under the lane lock
    # 2. run: interleaved with the baseline when repeats > 1 and a baseline exists
    rec: dict = {}
    ctx: dict = {"command_line": command_line, "timeout": spec.timeout, "traced_timing": spec.profile and spec.repeats == 1,
                 "env": {k: os.environ[k] for k in ENV_KEYS if os.environ.get(k)}}
    base_rec, interleave = None, False
    base_runs: list[Proc] = []
    var_runs: list[Proc] = []
    with stop_on_signals():
        try:
            with deferred_signals(), lane.locked():
                abandoned.sweep_lane(w, lane)
                rec = _started_record(project, spec, lane.next_version(), w.today, script, code, command_line)
                filing.write_in_progress(w, rec, command_line)
            base_rec = None if spec.baseline else records.baseline_for(lane.records(), spec.variant)
            interleave = bool(spec.repeats > 1 and base_rec is not None and base_rec.get("command"))
            _run_all(project, spec, project.root / rec["raw_dir"], base_rec if interleave else None,
                     base_runs, var_runs, ctx)
        except (KeyboardInterrupt, Stop) as e:  # between two commands: nothing to kill, file what we have
            if not rec:
                raise
            how = e.how if isinstance(e, Stop) else "Ctrl-C"
            var_runs.append(Proc(None, False, 0.0, project.root / rec["raw_dir"] / "run.log", None,
                                 f"[tools exp run] stopped by {how}", how))
    raw_dir = project.root / rec["raw_dir"]

    # 3. metrics, verdict, page, ledger row, model page: under the lane lock, signals held back until filed
    with deferred_signals(), lane.locked():
        prior = lane.records()
        rec, d = comparison.judge(spec, rec, ctx, prior, base_rec, base_runs, var_runs, interleave)
        page = filing.file_record(w, lane, rec, ctx, prior)
        w.append_log("exp run", f"{spec.model}/{spec.lane} {rec['exp_id']}", [
            f"verdict {d.verdict} ({d.status}); tokens/s {rec['metrics'].get('tokens_per_s', '—')}",
            f"page {page}", f"raw {rec['raw_dir']}"])
    return Outcome(rec["exp_id"], page, d.verdict, d.status, rec["metrics"], raw_dir, d.reasons,
                   var_runs[-1].stopped_by)


def _started_record(project: Project, spec: RunSpec, n: int, date: str, script: Path | None,
                    code: tuple[str, str], command_line: str) -> dict:
    """The in_progress page's frontmatter, with who runs it (see ``abandoned``); saves a copy of the script."""
    slug = slugify(spec.slug or spec.description or Path(spec.command[-1]).stem)
    exp_id = f"{date}-v{n:03d}-{slug}"
    raw_dir = project.raw_profiles / f"{date}-{spec.model}-{spec.lane}-v{n:03d}-{slug}"
    commit, sha = code
    runs = 2 * max(1, spec.repeats) + (1 if spec.profile else 0)
    rec = {"title": f"{spec.model}/{spec.lane} v{n:03d}: {spec.description or slug}", "type": "experiment",
           "tags": ["experiment", spec.model, spec.lane], "model": spec.model, "lane": spec.lane,
           "variant": spec.variant, "hypothesis": spec.hypothesis or None, "commit": commit or None,
           "exp_id": exp_id, "status": "in_progress", "version": n, "slug": slug, "date": date,
           "description": spec.description or None, "command": command_line, "script_sha256": sha or None,
           "raw_dir": rel(raw_dir, project.root), "cwd": rel(spec.cwd or Path.cwd(), project.root),
           "runner": abandoned.stamp(spec.timeout * runs, spec.timeout)}
    if script is not None:  # a copy of the model code, so a later interleaved rerun can use this exact code
        from ..writer import atomic_write
        atomic_write(raw_dir / "code" / script.name, script.read_bytes())
        rec["script_copy"] = rel(raw_dir / "code" / script.name, project.root)
    return {k: v for k, v in rec.items() if v is not None}


def _run_all(project: Project, spec: RunSpec, raw_dir: Path, base_rec: dict | None,
             base_runs: list[Proc], var_runs: list[Proc], ctx: dict) -> None:
    """The timed runs (A B A B with a baseline to rerun), then the profile; stops at the first crash."""
    base_cwd = None
    if base_rec:  # rerun the baseline's command from the folder it ran in, when that still exists
        c = Path(str(base_rec.get("cwd") or ""))
        c = c if c.is_absolute() else project.root / c
        base_cwd = c if base_rec.get("cwd") and c.is_dir() else spec.cwd
    base_cmd, ctx["baseline_note"] = _baseline_command(project, base_rec, base_cwd) if base_rec else ([], "")
    prof_env = env_with(_profile_env(raw_dir, spec.hlo_module_re)) if spec.profile else None
    for i in range(max(1, spec.repeats)):
        if base_rec:
            base_runs.append(run_command(base_cmd, raw_dir / f"baseline-{i + 1}.log", env_with({}), spec.timeout,
                                         base_cwd, spec.echo))
            if base_runs[-1].stopped_by:
                var_runs.append(base_runs[-1])  # stopped during the baseline arm: the experiment stops too
                return
        log = raw_dir / (f"run-{i + 1}.log" if spec.repeats > 1 else "run.log")
        env = prof_env if spec.profile and spec.repeats == 1 else env_with({})
        var_runs.append(run_command(spec.command, log, env, spec.timeout, spec.cwd, spec.echo))
        if var_runs[-1].result is None:
            break  # a crash ends the experiment
    if not spec.profile:
        return
    if var_runs[-1].result is None:
        ctx["profile_note"] = "The run crashed before a profile could be summarized."
        return
    if spec.repeats > 1:  # timed runs stay untraced; one more run carries the profiler
        prof = run_command(spec.command, raw_dir / "profile-run.log", prof_env, spec.timeout, spec.cwd, spec.echo)
        if prof.stopped_by:
            var_runs.append(prof)
            return
        if prof.result is None:
            ctx["profile_note"] = f"The profiled run failed: see `{rel(prof.log, project.root)}`."
    _profile(project, raw_dir, ctx)


def _baseline_command(project: Project, base_rec: dict, cwd: Path | None) -> tuple[list[str], str]:
    """The baseline's command; when its script changed since, the copy saved with the baseline instead."""
    cmd = shlex.split(base_rec["command"])
    copy = base_rec.get("script_copy")
    script = _script(cmd, cwd)
    if not (copy and script and base_rec.get("script_sha256")):
        return cmd, ""
    if code_commit(script)[1] == base_rec["script_sha256"]:
        return cmd, ""
    saved = project.root / copy
    if not saved.is_file():
        return cmd, (f"the baseline script changed since {base_rec['exp_id']} and its saved copy is missing: "
                     "the current script was rerun as the baseline")
    i = next(i for i, a in enumerate(cmd) if a.endswith(".py"))
    cmd[i] = str(saved)
    return cmd, f"the baseline script changed since {base_rec['exp_id']}: its saved copy `{copy}` was rerun"


def _profile_env(raw_dir: Path, module_re: str) -> dict[str, str]:
    """The trace folder the script honours, and XLA flags that dump optimized HLO as text."""
    flags = f"--xla_dump_to={raw_dir / 'hlo'} --xla_dump_hlo_as_text --xla_dump_hlo_module_re={module_re}"
    return {PROFILE_ENV: str(raw_dir / "trace"), "XLA_FLAGS": f"{os.environ.get('XLA_FLAGS', '')} {flags}".strip()}


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


def _profile(project: Project, raw_dir: Path, ctx: dict) -> None:
    import json

    from ..profiling import hlo, summary  # jax is imported lazily inside
    from ..writer import atomic_write

    kept = _prune_dump(raw_dir / "hlo")
    ctx["hlo_files"] = [rel(p, project.root) for p in kept]
    ctx["hlo_stats"] = [hlo.stats(m) for m in hlo.load_modules(raw_dir / "hlo").values()]
    ctx["trace_dir"] = rel(raw_dir / "trace", project.root)
    try:
        s = summary.summarize(raw_dir)
    except InputError as e:
        ctx["profile_note"] = f"No profile summary: {e}"
        return
    md = summary.render_markdown(s)
    atomic_write(raw_dir / "summary.json", json.dumps(s, indent=1, sort_keys=True))
    atomic_write(raw_dir / "summary.md", md)
    ctx["profile_md"] = md
    ctx["profile_summary"] = s
