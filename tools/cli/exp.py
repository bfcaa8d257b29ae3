"""`tools exp`: run experiments and file their results."""

from __future__ import annotations

import re
from pathlib import Path

import click


from .common import NON_NEGATIVE, POSITIVE, SECONDS


def _variant(value: str) -> str:
    """``<size>/<hardware>``: the model page groups runs by it and the explorer reads the hardware from it."""
    if not re.fullmatch(r"[A-Za-z0-9][\w.+-]*/[A-Za-z0-9][\w.+-]*", value or ""):
        raise click.BadParameter(f"{value!r}: expected <size>/<hardware>, e.g. tiny/cpu or 8b/v6e-8")
    return value

from .common import must_start, pass_project, printable, runner_options


@click.group(name="exp")
def exp() -> None:
    """Run a training command as an experiment; file its page, ledger row and model page."""


@exp.command(name="run", context_settings={"ignore_unknown_options": True})
@click.option("--model", required=True, help="Model name, e.g. llama.")
@click.option("--lane", required=True, help="Lane: an independent line of optimization, e.g. cpu or tpu-v5e.")
@click.option("--variant", required=True, callback=lambda ctx, p, v: _variant(v),
              help="<size>/<hardware>, e.g. tiny/cpu or 1b/v5e-8.")
@click.option("--hypothesis", default="", help="The falsifiable claim this run tests.")
@click.option("--description", "-m", default="", help="The change, in a few words (ledger description).")
@click.option("--slug", default="", help="Short name for the page (default: from the description).")
@click.option("--baseline", is_flag=True, help="File this run as the variant's baseline (of its shape).")
@click.option("--repeats", default=1, show_default=True, type=click.IntRange(1, 50),
              help="Timed rounds; with a baseline each round runs both, the order alternating (A B, B A, ...).")
@click.option("--max-repeats", default=0, type=click.IntRange(0, 50),
              help="Adaptive: from --repeats rounds up to this many, until the gain's interval is decided.")
@click.option("--calibrate", is_flag=True,
              help="A/A: rerun the baseline's command against itself, interleaved; later verdicts use its noise.")
@click.option("--statistic", type=click.Choice(["median", "min", "auto"]), default="median", show_default=True,
              help="What a run's tokens/s is read from in comparisons: its median steady step, or its fastest "
                   "(robust on a machine shared with other jobs), or auto: the reading whose rounds in this lane "
                   "have been steadier.")
@click.option("--compare-to", default=None, help="exp_id to compare against (default: the variant's latest baseline).")
@click.option("--env", "env_pairs", multiple=True, metavar="KEY=VALUE",
              help="Environment of this run only (XLA_FLAGS: appended); recorded, never given to the baseline.")
@click.option("--profile", is_flag=True, help="Capture a jax.profiler trace and an optimized-HLO dump.")
@click.option("--compile-cache", is_flag=True,
              help="Timed runs share JAX's persistent compile cache (.tools-cache/jax-compile): each program "
                   "compiles once across rounds. The profiled run always compiles (its HLO dump is evidence).")
@click.option("--pairs", is_flag=True,
              help="Interleaved rounds as blocks of two processes (the arms' positions swapped in the second): both "
                   "arms of the reference model built in each and stepped in turn, when they differ in flags only "
                   "(else process-level rounds, the page says why).")
@click.option("--pairs-rounds", type=click.IntRange(min=2), default=None,
              help="Rounds of the pairs processes (implies --pairs; default: --max-repeats). A round of pairs costs "
                   "one block of steps per arm, not two processes.")
@click.option("--timeout", default=1800.0, show_default=True, type=SECONDS, help="Seconds per run before it is killed.")
@click.option("--hang-after", "hang_s", type=SECONDS, default=None,
              help="Seconds without output after which a run is hung: its Python stack is taken, then it is killed.")
@click.option("--peak-flops", type=POSITIVE, default=None, help="Peak FLOP/s per device (overrides the device table).")
@click.option("--loss-tol", default=0.025, show_default=True, type=NON_NEGATIVE,
              help="Semantics check: max |Δloss| over the early trajectory.")
@click.option("--memory-tol", "memory_tol_pct", default=5.0, show_default=True, type=NON_NEGATIVE,
              help="Peak memory may grow this many percent over the baseline before a gain is held back.")
@click.option("--memory-max-gb", type=POSITIVE, default=None,
              help="Peak memory may grow by any amount while it stays under this (e.g. the device's HBM).")
@click.option("--trust-step-times", is_flag=True,
              help="A simulated program (its step times are made up, not measured): a gain may be supported though "
                   "no clock checked the times (no step lines, not profiled); its reasons say so.")
@click.option("--protect", "protected", multiple=True, metavar="PATH[::NAME]",
              help="A file (or one top-level function or class of a Python file, PATH::NAME) hashed with the run: "
                   "a change since the baseline files the run invalid (docs/integrity.md). Repeatable.")
@click.option("--hlo-module-re", default=".*train_step.*", show_default=True, help="Which jitted modules to dump.")
@click.option("--runner", default="local", show_default=True,
              help="Where the rounds run: local, xpk, ray or template (Slurm by default), as a loop file's `runner:` "
                   "(docs/runners.md).")
@click.option("--runner-option", "runner_pairs", multiple=True, metavar="KEY=VALUE",
              help="An option of the runner, its value read as YAML (poll_s=5, \"header=['#SBATCH -p tpu']\"). "
                   "Repeatable.")
@click.option("--quiet", "-q", is_flag=True, help="Do not echo the command's output.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object (implies --quiet).")
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
@pass_project
def run(project, command, quiet, as_json, env_pairs, runner_pairs, **opts) -> None:
    """Run COMMAND (after `--`) and file the experiment. Exits 1 when the run crashed.

    \b
    tools exp run --model llama --lane cpu --variant tiny/cpu --baseline \\
        -- python experiments/llama_train.py --preset tiny
    """
    import json

    from ..errors import InputError
    from ..experiments.runner import DryRun, RunSpec, run_experiment

    project.require_wiki()
    env = {}
    for pair in env_pairs:
        if "=" not in pair:
            raise InputError("--env", f"{pair!r} is not KEY=VALUE")
        k, v = pair.split("=", 1)
        env[k] = v
    opts["runner_options"] = runner_options(runner_pairs)
    if not opts.get("calibrate") and opts["runner"] == "local":  # a calibration reruns the baseline's own command;
        must_start(list(command), env)                              # a remote worker has its own programs
    opts["protected"] = list(opts.get("protected") or ())
    opts["pairs_rounds"] = opts.get("pairs_rounds") or 0
    opts["pairs"] = bool(opts.get("pairs") or opts["pairs_rounds"])
    if opts["pairs_rounds"]:  # an interleaved comparison (where pairs cannot run: up to 2 process-level rounds)
        opts["max_repeats"] = max(opts.get("max_repeats") or 0, 2)
    try:
        out = run_experiment(project, RunSpec(command=list(command), echo=not (quiet or as_json), cwd=Path.cwd(),
                                              env=env, **opts))
    except DryRun as e:  # the runner's dry run: what it would submit was written, nothing ran or was filed
        click.echo(json.dumps({"dry_run": True, "filed": False, "message": str(e)}) if as_json else str(e))
        return
    m = out.metrics
    if as_json:
        click.echo(json.dumps(out.summary(), sort_keys=True, default=str))
    else:
        basis = m.get("mfu_basis") or m.get("mfu_note")
        click.echo(f"{out.exp_id}: {out.verdict} ({out.status})  tokens/s {m.get('tokens_per_s', '—')}  "
                   f"MFU {m.get('mfu_percent', '—')}" + (f" ({basis})" if basis else ""))
        for r in out.reasons:
            click.echo(f"  - {r}")
        click.echo(f"  page wiki/{out.page}\n  raw  {out.raw_dir}")
    if out.stopped_by:  # filed as a crash; exit as a stopped process does
        raise SystemExit(143 if out.stopped_by == "SIGTERM" else 130)
    if out.verdict == "crash":
        raise SystemExit(1)


def _int(v) -> int:
    try:
        return int(v or 0)
    except (TypeError, ValueError, OverflowError):
        return 0


@exp.command(name="list")
@click.option("--model", default=None, help="Only this model.")
@click.option("--json", "as_json", is_flag=True, help="JSON Lines: one experiment's frontmatter (plus page) a line.")
@pass_project
def list_(project, model, as_json) -> None:
    """List experiments: version, verdict, tokens/s, page. Runs whose runner vanished are filed as crashes first."""
    import json

    from ..experiments.abandoned import sweep
    from ..experiments.filing import repair_ledgers
    from ..experiments.metrics import finite
    from ..experiments.records import load_experiments
    from ..writer import Writer

    w = Writer(project.wiki)
    for exp_id in sweep(w, project):
        click.echo(f"filed {exp_id} as crash: its runner is gone (see its page)", err=True)
    recs = load_experiments(project.wiki)
    for exp_id in repair_ledgers(w, project, recs):  # a kill between a page and its ledger row
        click.echo(f"wrote the ledger row of {exp_id}: its page was filed, its row was not", err=True)
    for r in recs:
        if model and r.get("model") != model:
            continue
        if as_json:
            click.echo(json.dumps(finite(r), sort_keys=True, default=str))
            continue
        m = r.get("metrics") if isinstance(r.get("metrics"), dict) else {}
        tps = m.get("tokens_per_s")
        click.echo(f"{printable(r.get('model'))}/{printable(r.get('lane'))} v{_int(r.get('version')):03d} "
                   f"{printable(r.get('status') or '—'):<11} {printable(r.get('verdict') or ''):<12} "
                   f"{'—' if tps is None else printable(tps):>12}  {printable(r['page'])}")


@exp.command(name="explorer")
@click.argument("model")
@click.option("--out", "out_path", required=True, type=click.Path(dir_okay=False), help="HTML file to write.")
@click.option("--plotly-src", required=True, help="URL of plotly.js relative to the HTML file (never inlined).")
@pass_project
def explorer(project, model, out_path, plotly_src) -> None:
    """Write the explorer plot of MODEL as a standalone HTML file."""
    from ..experiments.explorer import write_explorer

    n = write_explorer(project.wiki, model, Path(out_path), plotly_src)
    click.echo(f"{out_path}: {n} experiments")


@exp.command(name="crashes")
@click.argument("pairs", nargs=-1)
@click.option("--model", default=None, help="Only this model.")
@click.option("--lane", default=None, help="Only this lane (with --model).")
@click.option("--args", "args_json", default=None, help="The arguments as one JSON object (as for every registry op).")
@click.option("--json", "as_json", is_flag=True, help="Print the registry's exp.crashes output.")
@pass_project
def crashes(project, pairs, model, lane, args_json, as_json) -> None:
    """Crash signatures, most frequent first: kind, count, last run, lanes, and the signature page (every run that
    hit it, the configuration they share, the first fix). Arguments as options or as the registry's key=value
    pairs (`model=llama lane=cpu`)."""
    import json

    from ..agent.registry import call
    from .agent import parse_pairs

    given = {k: v for k, v in (("model", model), ("lane", lane)) if v is not None}
    args = given | parse_pairs(pairs, args_json, frozenset({"model", "lane"}))
    out = call(project, "exp.crashes", args)
    if as_json:
        click.echo(json.dumps(out, default=str))
        return
    if not out["signatures"]:
        click.echo("no crashes filed")
    for s in out["signatures"]:
        click.echo(printable(f"{s['signature']}  {s['kind']}  x{s['count']}  last {s['last_seen']}  "
                             f"{', '.join(s['lanes'])}"))
        click.echo(printable(f"  {s['message'][:160]}"))
        click.echo(f"  wiki/{s['page']}")


def _register() -> None:
    from .export import export
    from .gate import baseline, gate

    exp.add_command(baseline)
    exp.add_command(gate)
    exp.add_command(export)


_register()

