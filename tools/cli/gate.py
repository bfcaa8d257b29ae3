"""`tools exp baseline tag|list|show` (named baselines) and `tools exp gate` (the CI performance gate)."""

from __future__ import annotations

import contextlib
import json
import math
import sys
from pathlib import Path

import click

from .common import SECONDS, must_start, pass_project, printable


@click.group(name="baseline")
def baseline() -> None:
    """Named baselines: a name (main, release-1.2) pinned to one filed run of a lane, for `tools exp gate`."""


@baseline.command(name="tag")
@click.argument("name")
@click.argument("exp_id")
@click.option("--model", required=True)
@click.option("--lane", required=True)
@pass_project
def tag(project, name, exp_id, model, lane) -> None:
    """Pin NAME to the filed run EXP_ID of MODEL/LANE (it must be usable: filed, not a crash or invalid)."""
    from ..errors import InputError
    from ..experiments import baselines

    project.require_wiki()
    try:
        e = baselines.tag(project, name, model, lane, exp_id)
    except InputError as err:
        raise click.UsageError(str(err)) from None
    click.echo(f"{name} ({model}/{lane}) = {exp_id}: {e.get('tokens_per_s')} tokens/s, commit "
               f"{(e.get('commit') or '—')[:12]}")


@baseline.command(name="list")
@click.option("--json", "as_json", is_flag=True)
@pass_project
def list_(project, as_json) -> None:
    """Every named baseline, per lane."""
    from ..experiments import baselines

    data = baselines.load(project)
    if as_json:
        click.echo(json.dumps(data, sort_keys=True))
        return
    if not data:
        click.echo("no named baselines (tools exp baseline tag NAME EXP --model M --lane L)")
    for name, lanes in sorted(data.items()):
        for key, e in sorted(lanes.items()):
            if why := baselines.problem(name, key, e):
                click.echo(printable(f"{name:<16} {key:<24} {why}"))
                continue
            click.echo(printable(f"{name:<16} {key:<24} {e['exp_id']:<28} {e.get('tokens_per_s')} tokens/s  "
                                 f"tagged {e.get('tagged')}"))


@baseline.command(name="show")
@click.argument("name")
@click.option("--model", default=None)
@click.option("--lane", default=None)
@pass_project
def show(project, name, model, lane) -> None:
    """One baseline's entry as JSON (its run, command, commit, tokens/s)."""
    from ..errors import InputError
    from ..experiments import baselines

    try:
        click.echo(json.dumps(baselines.get(project, name, model, lane), sort_keys=True))
    except InputError as e:
        raise click.UsageError(str(e)) from None


def _percent(v: float) -> float:
    """A regression limit the gate can compare with: a finite percent from 0 to 100 (``nan`` compares false with
    everything, so the gate would pass whatever it measured)."""
    if not math.isfinite(v) or not 0.0 <= v <= 100.0:
        raise click.BadParameter(f"{v}: a percent from 0 to 100")
    return v


@click.command(name="gate", context_settings={"ignore_unknown_options": True})
@click.option("--baseline", "name", required=True, help="The named baseline to compare against (tools exp baseline).")
@click.option("--model", default=None, help="The baseline's model (when the name holds several lanes).")
@click.option("--lane", default=None, help="The baseline's lane (when the name holds several lanes).")
@click.option("--max-regression", "max_regression_pct", default=2.0, show_default=True, type=float,
              callback=lambda ctx, param, v: _percent(v),
              help="Percent slower the change may be: the gate fails when the whole 95 % interval lies below it.")
@click.option("--repeats", default=4, show_default=True, type=click.IntRange(2, 50),
              help="Interleaved rounds before the first look (each runs the baseline's command and COMMAND, the "
                   "order alternating).")
@click.option("--max-repeats", default=12, show_default=True, type=click.IntRange(0, 50),
              help="While the interval is undecided and the estimate is slower than --max-regression (with --strict: "
                   "while undecided), two more rounds at a time up to this many; 0: exactly --repeats.")
@click.option("--statistic", type=click.Choice(["median", "min", "auto"]), default="median", show_default=True)
@click.option("--timeout", default=1800.0, show_default=True, type=SECONDS, help="Seconds per run.")
@click.option("--baseline-cwd", type=click.Path(file_okay=False, exists=True), default=None,
              help="A checkout of the baseline's code (in CI: the pull request's base commit); the baseline's command "
                   "runs there, COMMAND here. Without it both run this checkout's modules.")
@click.option("--strict", is_flag=True,
              help="Fail (exit 1) unless the interval decides no regression (lies wholly above the limit).")
@click.option("--quiet", "-q", is_flag=True, help="Do not echo the commands' output.")
@click.option("--summary", "summary_path", default=None, type=click.Path(dir_okay=False),
              help="Also append the verdict as markdown to this file (in GitHub Actions: $GITHUB_STEP_SUMMARY).")
@click.option("--runner", default="local", show_default=True,
              help="Where the rounds run: local, xpk, ray or template (docs/runners.md).")
@click.option("--runner-option", "runner_pairs", multiple=True, metavar="KEY=VALUE",
              help="An option of the runner, its value read as YAML. Repeatable.")
@click.argument("command", nargs=-1, type=click.UNPROCESSED, required=True)
@pass_project
def gate(project, name, model, lane, max_regression_pct, repeats, max_repeats, statistic, timeout, baseline_cwd,
         strict, quiet, summary_path, runner, runner_pairs, command) -> None:
    """Run COMMAND (after `--`) interleaved against a named baseline and exit 0 (no regression), 1 (slower beyond
    --max-regression, or a crash), 3 (incomparable: another shape, changed loss, an integrity finding), 2 (usage)
    or 143/130 (stopped: nothing decided). Prints one JSON verdict on stdout (the commands' output goes to stderr);
    the run is filed like any experiment.

    \b
    tools exp gate --baseline main -- python experiments/llama_train.py --preset tiny
    """
    from ..errors import InputError, ProjectError
    from ..experiments import baselines
    from ..experiments.gate import gate as run_gate
    from .common import runner_options

    try:  # no knowledge base, a baseline that is not there: usage errors, exit 2, nothing run (1 is a regression)
        project.require_wiki()
        baselines.get(project, name, model, lane)
    except (InputError, ProjectError) as e:
        raise click.UsageError(str(e)) from None
    if summary_path and not Path(summary_path).resolve().parent.is_dir():  # checked before anything runs
        raise click.UsageError(f"--summary {summary_path}: its folder does not exist")
    try:
        options = runner_options(runner_pairs)
    except InputError as e:
        raise click.UsageError(str(e)) from None
    if runner == "local":  # a command that cannot start is usage (exit 2), not a crash read as a regression
        must_start(list(command), {})
    try:  # what the run itself finds wrong with the arguments is usage too: exit 2, never read as a regression
        # the commands' echo goes to stderr: stdout holds the one JSON verdict (`tools exp gate ... | jq`)
        with contextlib.redirect_stdout(sys.stderr):
            out = run_gate(project, name, list(command), Path.cwd(), model, lane, max_regression_pct, repeats,
                           max_repeats, statistic, timeout, echo=not quiet, strict=strict,
                           baseline_cwd=Path(baseline_cwd).resolve() if baseline_cwd else None, runner=runner,
                           runner_options=options)
    except InputError as e:
        raise click.UsageError(str(e)) from None
    click.echo(json.dumps(out.verdict, sort_keys=True, default=str))
    if summary_path:
        from ..experiments.gate import summary_markdown

        try:
            with open(summary_path, "a", encoding="utf-8") as f:
                f.write(summary_markdown(out))
        except OSError as e:  # the verdict stands: a summary that cannot be written is said, not read as a regression
            click.echo(f"warning: --summary {summary_path}: not written ({e.strerror})", err=True)
    raise SystemExit(out.exit_code)
