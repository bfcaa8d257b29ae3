"""`tools ingest`: turn raw/code/<slug> trees into codebase, kernel and concept pages."""

from __future__ import annotations

import json
import sys

import click

from . import pass_project


def _progress_bar(enabled: bool):
    """A terminal progress bar over the files that need reading; silent when not a TTY."""
    state: dict = {}

    def update(n: int, total: int) -> None:
        if not enabled or total < 20:
            return
        if "bar" not in state:
            state["bar"] = click.progressbar(length=total, label="analysing", file=sys.stderr)
            state["bar"].__enter__()
        state["bar"].update(n)
        if state["bar"].pos >= total:
            state.pop("bar").__exit__(None, None, None)

    return update


@click.command()
@click.argument("targets", nargs=-1, type=click.Path())
@click.option("--all", "all_", is_flag=True, help="Ingest every folder under raw/code/.")
@click.option("--jobs", "-j", type=int, default=0, help="Worker processes for parsing (default: auto).")
@click.option("--quiet", "-q", is_flag=True, help="No progress bar and no per-file listing.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON report (for agents).")
@pass_project
def ingest(project, targets, all_, jobs, quiet, as_json):
    """Ingest code trees: `tools ingest raw/code/<slug>` or `tools ingest --all`.

    Offline and deterministic; reads and parses files, never imports or runs them. Re-ingesting
    an unchanged tree rewrites nothing.
    """
    from ..ingest.run import all_targets, ingest_repo, rebuild_index
    from ..writer import Writer

    project.require_wiki()
    targets = list(targets) + (all_targets(project) if all_ else [])
    if not targets:
        raise click.UsageError("name a tree (raw/code/<slug>) or pass --all")
    reports = []
    for target in targets:
        writer = Writer(project.wiki)
        report = ingest_repo(project, target, writer, jobs=jobs,
                             progress=_progress_bar(not quiet and not as_json and sys.stderr.isatty()))
        rebuild_index(project, writer)
        if writer.changed["created"] or writer.changed["updated"] or writer.changed["removed"]:
            writer.log_changes("ingest", report.slug)
        reports.append(report)
        if not as_json:
            _print_report(report, quiet)
    if as_json:
        click.echo(json.dumps([r.to_dict() for r in reports] if len(reports) > 1 else reports[0].to_dict(), indent=2))


def _print_report(r, quiet: bool) -> None:
    click.echo(f"{r.slug}: {r.files_scanned} files scanned ({r.files_analyzed} parsed, "
               f"{r.files_scanned - r.files_analyzed} from cache), {r.files_skipped} skipped; "
               f"{r.kernels} Pallas kernels at {r.launch_sites} launch sites")
    click.echo(f"  pages: {r.created} created, {r.updated} updated, {r.unchanged} unchanged, "
               f"{r.removed} removed in {r.seconds:.2f} s")
    if r.partial and not quiet:
        for rel, reason in r.partial[:15]:
            click.echo(f"  partial {rel}: {reason}")
    if r.skipped and not quiet:
        for rel, reason in r.skipped[:15]:
            click.echo(f"  skipped {rel}: {reason}")
        if len(r.skipped) > 15:
            click.echo(f"  … {len(r.skipped) - 15} more skipped (see skipped.tsv)")
    click.echo(f"  overview: {r.overview}")
