"""`tools exp export EXP… --name NAME`: runs made by hand as reviewable branches (the registry's exp.export)."""

from __future__ import annotations

import json
from pathlib import Path

import click

from .common import pass_project, printable


@click.command(name="export")
@click.argument("exp_ids", nargs=-1, required=True)
@click.option("--name", required=True,
              help="Names the branches perf/NAME/<n>-<change> and exports/NAME/PERF.md "
                   "(letters, digits, '.', '_', '-').")
@click.option("--repo", default=None, type=click.Path(file_okay=False, exists=True),
              help="The model code's git repository (default: the top of the first run's folder).")
@click.option("--config-file", default=None,
              help="Launch script or YAML (relative to the repository) where the changed --flags are written; "
                   "without it they are listed as the launch command to use.")
@click.option("--patches", "patches_dir", default=None, type=click.Path(file_okay=False),
              help="Also write a `git format-patch` series of every change to this folder.")
@click.option("--pr", is_flag=True, help="Push each supported branch to --remote and open a draft PR with `gh`.")
@click.option("--remote", default="origin", show_default=True, help="With --pr: where branches are pushed.")
@click.option("--base", default="main", show_default=True, help="With --pr: the branch the pull requests target.")
@click.option("--json", "as_json", is_flag=True, help="Print the registry's exp.export output.")
@pass_project
def export(project, exp_ids, name, repo, config_file, patches_dir, pr, remote, base, as_json) -> None:
    """Turn runs made by hand (EXP_IDS, each measured against a baseline) into branches perf/NAME/<n>-<change>
    from each baseline's commit, and perf/NAME/all with PERF.md; each commit message carries the run's evidence.
    The user's checkout is never modified; nothing is pushed without --pr; a run that was not supported is never
    offered as a pull request. Exits 1 when no run left a code, flag or environment change to export."""
    from ..experiments.export import export as run

    project.require_wiki()
    out = run(project, list(exp_ids), name, Path(repo).resolve() if repo else None, config_file,
              Path(patches_dir) if patches_dir else None, pr, remote, base)
    if as_json:
        click.echo(json.dumps(out, default=str))
    else:
        _print(out, patches_dir)
    if not out["branches"] and not out["settings"]:
        raise SystemExit(1)  # no run left anything a reviewer could merge


def _print(out: dict, patches_dir) -> None:
    click.echo(f"{len(out['branches'])} run(s) from {printable(out['repository'])} at {out['start'][:12]}")
    for b in out["branches"]:
        click.echo(printable(f"  {b['branch']}  {b['exp_id']}  {b['verdict']} {b.get('gain_pct')} %"
                             + (f"  (stacked: measured against {b['baseline']})" if b["stacked_on"] else "")))
    for br in out["not_supported"]:
        click.echo(printable(f"  {br}: its run was not supported (not offered as a pull request)"))
    for s in out["settings"]:
        click.echo(printable(f"  setting #{s['n']} {s['exp_id']}: {s['knobs'] or ''} {s['env'] or ''}".rstrip()))
    click.echo(f"  {out['combined']}  every change, with PERF.md ({out['perf_md']})")
    for p in out["prs"]:
        click.echo(printable(f"  draft PR {p['url']}  ({p['branch']})"))
    if out["patches"]:
        click.echo(f"  {len(out['patches'])} patches in {patches_dir}")
    for w in out.get("warnings", []):
        click.echo(printable(f"warning: {w}"), err=True)
    for x in out.get("nothing") or []:
        click.echo(printable(f"  nothing to export from #{x['n']} {x['exp_id']}: {x['why']}"), err=True)
