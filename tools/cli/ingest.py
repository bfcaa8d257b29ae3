"""`tools ingest`: turn raw/code/<slug> trees into codebase, kernel and concept pages, raw/sources/ into source pages."""

from __future__ import annotations

import json
import sys

import click

from ..errors import InputError
from .common import EXIT_SKIPS, llm_options, pass_project, printable


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
@click.option("--llm", "use_llm", is_flag=True,
              help="Sources: also write a summary whose every sentence cites its page or section (needs a key).")
@llm_options
@pass_project
def ingest(project, targets, all_, jobs, quiet, as_json, use_llm, provider, model, base_url, api_key_env):
    """Ingest code trees and sources: `tools ingest raw/code/<slug>`, `tools ingest raw/sources/<file or folder>`,
    or `tools ingest --all` (every tree and every source).

    Offline and deterministic; reads and parses files, never imports or runs them. Re-ingesting
    an unchanged tree rewrites nothing.
    """
    from .. import llm
    from ..ingest.batch import ingest as ingest_all

    project.require_wiki()
    if not targets and not all_:
        raise click.UsageError("name a tree (raw/code/<slug>), sources (raw/sources/...) or pass --all")
    say = (lambda *a: None) if as_json else None
    try:
        batch = ingest_all(project, list(targets), all_, jobs,
                           (lambda: llm.from_options(provider, model, base_url, api_key_env)) if use_llm else None,
                           progress=_progress_bar(not quiet and not as_json and sys.stderr.isatty()),
                           on_sources=say or (lambda r: _print_sources(r, use_llm)),
                           on_repo=say or (lambda r: _print_report(r, quiet)),
                           on_vanished=say or _print_vanished,
                           on_failed=lambda f: click.echo(f"error: {printable(f['error'])}", err=True))
    except InputError as e:  # the sources could not be read at all
        click.echo(f"error: {printable(e)}", err=True)
        sys.exit(1)
    if as_json:  # failed targets' names and errors made safe for a terminal, as the text report has them
        batch.failed = [{k: printable(v) for k, v in f.items()} for f in batch.failed]
        click.echo(json.dumps(batch.to_dict(), indent=2))
    else:
        for slug in batch.refreshed:
            click.echo(f"{printable(slug)}: written again: its overview linked kernel pages this ingest removed")
        _print_ending(batch)
    sys.exit(batch.exit_code())


def _print_sources(r, use_llm: bool) -> None:
    click.echo(f"sources: {r.documents} documents ({len(r.ingested)} read, {len(r.unchanged)} unchanged), "
               f"{r.claims_held} claims with numbers ({r.claims} from documents read now), {len(r.skipped)} skipped")
    for rel, why in r.skipped:
        click.echo(f"  skipped {printable(rel)}: {printable(why)}")
    for rel in r.removed:
        click.echo(f"  removed {printable(rel)}: raw/sources/{printable(rel)} is gone, so is its page")
    for rel, twin in r.copies:
        click.echo(f"  {printable(rel)}: the same bytes as {printable(twin)}, read once, on its page")
    if use_llm:
        click.echo(f"  summaries: {len(r.summarized)} written, {len(r.summary_failed)} failed")
    for rel, why in r.summary_failed:
        click.echo(f"  no summary for {printable(rel)}: {printable(why)}")


def _print_vanished(v) -> None:
    click.echo(f"{printable(v.slug)}: raw/code/{printable(v.slug)} is gone; removed {v.files} files "
               f"and its region on {v.regions} concept pages")


def _print_ending(batch) -> None:
    """What the exit code means, when it is not 0."""
    failed_summaries = len(batch.sources.summary_failed) if batch.sources else 0
    if failed_summaries:  # each named above ("no summary for ..."); a later --llm run retries them
        click.echo(f"completed without {failed_summaries} summar{'y' if failed_summaries == 1 else 'ies'} "
                   f"(exit {EXIT_SKIPS}): each named above, with its reason; run again with --llm to retry",
                   err=True)
    if not batch.code_targets:
        if batch.sources and batch.sources.skipped:
            click.echo(f"completed with skips (exit {EXIT_SKIPS}): every document not read is in "
                       "wiki/sources/index.md with its reason", err=True)
        return
    if batch.failed:
        return
    for rel, why in batch.unwritten:
        click.echo(f"not written: {printable(rel)}: {printable(why)}", err=True)
    if batch.unwritten and not batch.repos_skipped:
        click.echo(f"completed with pages left alone (exit {EXIT_SKIPS}): each is named above", err=True)
    elif batch.repos_skipped or (batch.sources and batch.sources.skipped):
        where = (["wiki/codebases/<slug>/skipped.tsv"] if batch.repos_skipped else []) + \
            (["wiki/sources/index.md"] if batch.sources and batch.sources.skipped else [])
        click.echo(f"completed with skips (exit {EXIT_SKIPS}): every skipped file is in "
                   f"{' and '.join(where)} with its reason", err=True)


def _print_report(r, quiet: bool) -> None:
    click.echo(f"{printable(r.slug)}: {r.files_scanned} files scanned ({r.files_analyzed} parsed, "
               f"{r.files_cached} from cache), {r.files_skipped} skipped; "
               f"{r.kernels} Pallas kernels at {r.launch_sites} launch sites")
    click.echo(f"  pages: {r.created} created, {r.updated} updated, {r.unchanged} unchanged, "
               f"{r.removed} removed in {r.seconds:.2f} s")
    if r.partial and not quiet:
        for rel, reason in r.partial[:15]:
            click.echo(f"  partial {printable(rel)}: {printable(reason)}")
    if r.skipped and not quiet:
        for rel, reason in r.skipped[:15]:
            click.echo(f"  skipped {printable(rel)}: {printable(reason)}")
        if len(r.skipped) > 15:
            click.echo(f"  … {len(r.skipped) - 15} more skipped (see skipped.tsv)")
    click.echo(f"  overview: {r.overview}")
