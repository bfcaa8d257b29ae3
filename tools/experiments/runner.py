"""`tools exp run`: run a training command, keep its log, read its JSON line, file the results.

One lane lock (``wiki/experiments/<model>/<lane>/.lane.lock``) is held while a version number is
reserved and again while the verdict, the page, the ledger row and the model page are written,
never while the command runs: concurrent runs never share or lose a version or a row.
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex
import signal
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from .. import pages
from ..errors import InputError
from ..project import Project
from ..writer import Writer, locked
from . import ledger, metrics, records, report, verdict

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
class Proc:
    rc: int | None
    timed_out: bool
    wall_s: float
    log: Path
    result: dict | None
    tail: str


@dataclass
class Outcome:
    exp_id: str
    page: str
    verdict: str
    status: str
    metrics: dict
    raw_dir: Path
    reasons: list[str] = field(default_factory=list)


def slugify(text: str) -> str:
    return SLUG.sub("-", text.lower()).strip("-")[:48] or "run"


def _check_name(kind: str, value: str) -> None:
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.\-]*", value or ""):
        raise InputError(f"--{kind}", f"{value!r} must be letters, digits, '.', '_' or '-'")


def run_command(cmd: list[str], log: Path, env: dict, timeout: float, cwd: Path | None, echo: bool) -> Proc:
    """Run ``cmd``, streaming stdout+stderr into ``log`` (and to our stdout with ``echo``)."""
    log.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    timed_out = False
    with open(log, "wb") as f:
        try:
            p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, cwd=cwd,
                                 start_new_session=True)
        except OSError as e:
            f.write(f"could not start {cmd[0]!r}: {e}\n".encode())
            return Proc(127, False, 0.0, log, None, f"could not start {cmd[0]!r}: {e}")
        deadline = t0 + timeout
        os.set_blocking(p.stdout.fileno(), False)
        import selectors
        sel = selectors.DefaultSelector()
        sel.register(p.stdout, selectors.EVENT_READ)
        interrupted = False
        while True:
            left = deadline - time.perf_counter()
            if left <= 0:
                timed_out = True
                _kill(p)
                break
            try:
                ready = sel.select(timeout=min(left, 0.5))
            except KeyboardInterrupt:  # Ctrl-C: stop the command, file what we have as a crash
                interrupted = True
                _kill(p)
                break
            for _ in ready:
                chunk = p.stdout.read()
                if chunk:
                    f.write(chunk)
                    if echo:
                        sys.stdout.buffer.write(chunk)
                        sys.stdout.flush()
            if p.poll() is not None:
                rest = p.stdout.read() or b""
                f.write(rest)
                if echo and rest:
                    sys.stdout.buffer.write(rest)
                break
        sel.close()
        p.stdout.close()
        rc = p.wait()
        if timed_out:
            f.write(f"\n[tools exp run] killed after the {timeout:g} s timeout\n".encode())
        if interrupted:
            f.write(b"\n[tools exp run] interrupted (Ctrl-C)\n")
    wall = time.perf_counter() - t0
    text = log.read_text(encoding="utf-8", errors="replace")
    tail = "\n".join(text.splitlines()[-40:])
    return Proc(rc, timed_out, wall, log, None if timed_out or interrupted else metrics.parse_result(text), tail)


def _kill(p: subprocess.Popen) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(p.pid, sig)
        except ProcessLookupError:
            return
        try:
            p.wait(timeout=3)
            return
        except subprocess.TimeoutExpired:
            continue


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
                              capture_output=True, text=True, timeout=10)
        if head.returncode != 0:
            return "", sha
        dirty = subprocess.run(["git", "-C", str(script.parent), "status", "--porcelain", "--", script.name],
                               capture_output=True, text=True, timeout=10)
        return head.stdout.strip() + ("-dirty" if dirty.stdout.strip() else ""), sha
    except (OSError, subprocess.TimeoutExpired):
        return "", sha


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


def _env(extra: dict[str, str]) -> dict[str, str]:
    env = dict(os.environ)
    env.update(extra)
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


def run_experiment(project: Project, spec: RunSpec, writer: Writer | None = None) -> Outcome:
    for k in ("model", "lane"):
        _check_name(k, getattr(spec, k))
    if not spec.command:
        raise InputError("command", "nothing to run: give the command after `--`")
    w = writer or Writer(project.wiki)
    date = w.today
    slug = slugify(spec.slug or spec.description or Path(spec.command[-1]).stem)
    lane_dir = project.wiki / "experiments" / spec.model / spec.lane
    lock = lane_dir / ".lane.lock"
    ledger_rel = f"experiments/{spec.model}/{spec.lane}/RESULTS.tsv"
    script = _script(spec.command, spec.cwd)
    commit, sha = code_commit(script)
    command_line = shlex.join(spec.command)

    # 1. reserve a version number: an in_progress page, written under the lane lock
    with locked(lock):
        rows = ledger.read(_read(project.wiki / ledger_rel))
        n = records.next_version(lane_dir, rows)
        exp_id = f"{date}-v{n:03d}-{slug}"
        raw_dir = project.raw_profiles / f"{date}-{spec.model}-{spec.lane}-v{n:03d}-{slug}"
        rec = {"title": f"{spec.model}/{spec.lane} v{n:03d}: {spec.description or slug}", "type": "experiment",
               "tags": ["experiment", spec.model, spec.lane], "model": spec.model, "lane": spec.lane,
               "variant": spec.variant, "hypothesis": spec.hypothesis or None, "commit": commit or None,
               "exp_id": exp_id, "status": "in_progress", "version": n, "slug": slug, "date": date,
               "description": spec.description or None, "command": command_line, "script_sha256": sha or None,
               "raw_dir": _rel(raw_dir, project.root), "cwd": _rel(spec.cwd or Path.cwd(), project.root)}
        if script is not None:  # a copy of the model code, so a later interleaved rerun can use this exact code
            from ..writer import atomic_write
            atomic_write(raw_dir / "code" / script.name, script.read_bytes())
            rec["script_copy"] = _rel(raw_dir / "code" / script.name, project.root)
        page_rel = report.experiment_path(spec.model, spec.lane, exp_id)
        _refuse_filed(w, page_rel)
        w.write_page(report.experiment_page({k: v for k, v in rec.items() if v is not None},
                                            {"command_line": command_line}))

    # 2. run: interleaved with the baseline when repeats > 1 and a baseline exists
    prior = records.lane_records(project.wiki, spec.model, spec.lane)
    base_rec = None if spec.baseline else records.baseline_for(prior, spec.variant)
    interleave = spec.repeats > 1 and base_rec is not None and base_rec.get("command")
    base_runs: list[Proc] = []
    var_runs: list[Proc] = []
    base_cwd = None
    if interleave:  # rerun the baseline's command from the folder it ran in, when that still exists
        c = Path(str(base_rec.get("cwd") or ""))
        c = c if c.is_absolute() else project.root / c
        base_cwd = c if base_rec.get("cwd") and c.is_dir() else spec.cwd
    base_cmd, base_note = (_baseline_command(project, base_rec, base_cwd) if interleave else ([], ""))
    for i in range(max(1, spec.repeats)):
        if interleave:
            base_runs.append(run_command(base_cmd, raw_dir / f"baseline-{i + 1}.log",
                                         _env({}), spec.timeout, base_cwd, spec.echo))
        prof_here = spec.profile and spec.repeats == 1
        var_runs.append(run_command(spec.command, raw_dir / (f"run-{i + 1}.log" if spec.repeats > 1 else "run.log"),
                                    _env(_profile_env(raw_dir, spec.hlo_module_re) if prof_here else {}), spec.timeout, spec.cwd,
                                    spec.echo))
        if var_runs[-1].result is None:
            break  # a crash ends the experiment
    ctx: dict = {"command_line": command_line, "baseline_note": base_note, "timeout": spec.timeout, "traced_timing": spec.profile and spec.repeats == 1,
                 "env": {k: os.environ[k] for k in ENV_KEYS if os.environ.get(k)}}
    crashed = var_runs[-1].result is None
    if spec.profile and not crashed:
        if spec.repeats > 1:  # timed runs stay untraced; one more run carries the profiler
            var_runs_prof = run_command(spec.command, raw_dir / "profile-run.log", _env(_profile_env(raw_dir, spec.hlo_module_re)),
                                        spec.timeout, spec.cwd, spec.echo)
            if var_runs_prof.result is None:
                ctx["profile_note"] = f"The profiled run failed: see `{_rel(var_runs_prof.log, project.root)}`."
        _profile(project, raw_dir, ctx)
    elif spec.profile:
        ctx["profile_note"] = "The run crashed before a profile could be summarized."

    # 3. metrics, verdict, page, ledger row, model page: under the lane lock
    with locked(lock):
        prior = records.lane_records(project.wiki, spec.model, spec.lane)
        out = _file(project, w, spec, rec, ctx, prior, base_rec if not spec.baseline else None,
                    base_runs, var_runs, bool(interleave), ledger_rel)
    w.append_log("exp run", f"{spec.model}/{spec.lane} {exp_id}", [
        f"verdict {out.verdict} ({out.status}); tokens/s {out.metrics.get('tokens_per_s', '—')}",
        f"page {out.page}", f"raw {_rel(raw_dir, project.root)}"])
    return out


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
        return cmd, f"the baseline script changed since {base_rec['exp_id']} and its saved copy is missing: " \
                    "the current script was rerun as the baseline"
    i = next(i for i, a in enumerate(cmd) if a.endswith(".py"))
    cmd[i] = str(saved)
    return cmd, f"the baseline script changed since {base_rec['exp_id']}: its saved copy `{copy}` was rerun"


def _profile_env(raw_dir: Path, module_re: str) -> dict[str, str]:
    """The trace folder the script honours, and XLA flags that dump optimized HLO as text."""
    flags = f"--xla_dump_to={raw_dir / 'hlo'} --xla_dump_hlo_as_text --xla_dump_hlo_module_re={module_re}"
    return {PROFILE_ENV: str(raw_dir / "trace"), "XLA_FLAGS": f"{os.environ.get('XLA_FLAGS', '')} {flags}".strip()}


def _profile(project: Project, raw_dir: Path, ctx: dict) -> None:
    from ..profiling import summary  # jax is imported lazily inside

    from ..profiling import hlo

    kept = _prune_dump(raw_dir / "hlo")
    ctx["hlo_files"] = [_rel(p, project.root) for p in kept]
    ctx["hlo_stats"] = [hlo.stats(m) for m in hlo.load_modules(raw_dir / "hlo").values()]
    ctx["trace_dir"] = _rel(raw_dir / "trace", project.root)
    try:
        s = summary.summarize(raw_dir)
    except InputError as e:
        ctx["profile_note"] = f"No profile summary: {e}"
        return
    md = summary.render_markdown(s)
    import json

    from ..writer import atomic_write
    atomic_write(raw_dir / "summary.json", json.dumps(s, indent=1, sort_keys=True))
    atomic_write(raw_dir / "summary.md", md)
    ctx["profile_md"] = md
    ctx["profile_summary"] = s


def _file(project, w, spec, rec, ctx, prior, base_rec, base_runs, var_runs, interleaved, ledger_rel) -> Outcome:
    good = [p for p in var_runs if p.result is not None]
    crashed = var_runs[-1].result is None
    rec = dict(rec)
    rec["repeats"] = len(var_runs)
    rec["run_wall_s"] = [round(p.wall_s, 3) for p in var_runs]
    rec["interleaved"] = interleaved
    m: dict = {}
    if crashed:
        last = var_runs[-1]
        ctx["log_tail"] = last.tail
        ctx["crash_reason"] = (f"timed out after {spec.timeout:g} s" if last.timed_out
                               else f"exit code {last.rc}" + ("" if last.rc else ", no JSON result line"))
    else:
        per_run = [metrics.compute(p.result, spec.peak_flops) for p in good]
        m = dict(per_run[len(per_run) // 2 if len(per_run) % 2 else 0])
        tps = [x["tokens_per_s"] for x in per_run]
        m["tokens_per_s"] = round(statistics.median(tps), 2)
        m["tokens_per_s_per_chip"] = round(m["tokens_per_s"] / m["n_chips"], 2)
        m["step_time_ms"] = round(statistics.median(x["step_time_ms"] for x in per_run), 4)
        for b in ("mfu_causal_percent", "mfu_noncausal_percent", "mfu_percent"):
            vals = [x[b] for x in per_run if x.get(b) is not None]
            m[b] = round(statistics.median(vals), 3) if vals else None
        res = good[-1].result
        rec["config"] = res.get("config")
        rec["shape"] = res.get("shape")
        rec["loss_trajectory"] = [round(float(x), 6) for x in (res.get("losses") or [])[:spec.semantics_steps]]
    rec["metrics"] = m

    # baseline and semantics reference
    is_baseline = spec.baseline or (base_rec is None and not crashed and
                                    not any(r.get("variant") == spec.variant and r.get("role") == "baseline"
                                            for r in prior))
    rec["role"] = "baseline" if is_baseline else "variant"
    if not is_baseline and base_rec is None:  # a baseline filed meanwhile by a concurrent run
        base_rec = records.baseline_for(prior, spec.variant)
    gain = band = mem_delta = None
    sem = None
    if not crashed:
        res = good[-1].result
        key = verdict.shape_key(res)
        base_ok = [p for p in base_runs if p.result is not None]
        if interleaved and base_ok:
            base_tps = [metrics.compute(p.result, spec.peak_flops)["tokens_per_s"] for p in base_ok]
            ctx["arms"] = {"base": base_tps, "var": tps}
            ref_res = base_ok[-1].result
            ref_losses = ref_res.get("losses") if verdict.shape_key(ref_res) == key else None
            ref_name = f"{base_rec['exp_id']} (rerun interleaved)"
            base_mem = metrics.compute(ref_res, spec.peak_flops).get("memory_gb")
        else:
            base_tps = [base_rec["metrics"]["tokens_per_s"]] if base_rec and base_rec.get("metrics") else []
            ref_losses, ref_name, base_mem = None, "", (base_rec or {}).get("metrics", {}).get("memory_gb")
        if ref_losses is None:  # the earliest same-shape baseline or semantics-ok run in the lane
            for r in prior:
                if r.get("status") == "filed" and r.get("loss_trajectory") and \
                        verdict.shape_key({"shape": r.get("shape"), "tokens_per_step": None}) == key and \
                        (r.get("role") == "baseline" or (r.get("semantics") or {}).get("status") == "ok"):
                    ref_losses, ref_name = r["loss_trajectory"], r["exp_id"]
                    break
        if is_baseline and ref_losses is None:
            sem = verdict.Semantics("unchecked", tol=spec.loss_tol, reason="this run is the first of its shape: "
                                    "it becomes the semantics reference")
        else:
            sem = verdict.semantics(ref_losses, res.get("losses"), ref_name, spec.semantics_steps, spec.loss_tol)
        if base_tps and not is_baseline:
            base_med = statistics.median(base_tps)
            gain = round(100 * (m["tokens_per_s"] / base_med - 1), 3)
            band, ctx["band_how"] = verdict.noise_band(base_tps, tps, interleaved and bool(base_ok))
            rec["baseline"] = base_rec["exp_id"]
            if base_mem and m.get("memory_gb"):
                mem_delta = 100 * (m["memory_gb"] / base_mem - 1)
        best = records.best_for(prior, spec.variant)
        if best:
            rec["best"] = best["exp_id"]
            rec["gain_vs_best_pct"] = round(100 * (m["tokens_per_s"] / best["metrics"]["tokens_per_s"] - 1), 3)
        rec["semantics"] = {k: v for k, v in vars(sem).items() if v not in ("", None)}
    sep = verdict.separation(ctx["arms"]["base"], ctx["arms"]["var"]) if ctx.get("arms") else None
    d = verdict.decide(crashed=crashed, is_baseline=is_baseline, gain_pct=gain, band_pct=band, sem=sem,
                       memory_delta_pct=mem_delta, separated=sep)
    rec.update({"status": "filed", "verdict": d.verdict, "ledger_status": d.status, "reasons": d.reasons,
                "gain_pct": gain, "noise_band_pct": band})
    rec = {k: v for k, v in rec.items() if v is not None}

    page = report.experiment_page(rec, ctx)
    _refuse_filed(w, page.path)
    w.write_page(page)
    rows = ledger.read(_read(project.wiki / ledger_rel))
    rows.append(ledger.row_for(rec))
    w.write_file(ledger_rel, ledger.render(rows))
    lane_recs = records.lane_records(project.wiki, spec.model, spec.lane)
    w.write_page(report.model_page(spec.model, spec.lane, lane_recs))
    return Outcome(rec["exp_id"], page.path, d.verdict, d.status, m, Path(project.root) / rec["raw_dir"], d.reasons)


def _refuse_filed(w: Writer, rel: str) -> None:
    p = w.target(rel)
    if p.exists():
        meta, _ = pages.split(p.read_text(encoding="utf-8"))
        if (meta or {}).get("status") == "filed":
            raise InputError(p, "experiment page is filed and immutable; start a new run instead")


def _read(p: Path) -> str:
    try:
        return p.read_text(encoding="utf-8")
    except FileNotFoundError:
        return ""


def _rel(p: Path, root: Path) -> str:
    try:
        return Path(p).resolve().relative_to(Path(root).resolve()).as_posix()
    except ValueError:
        return str(p)
