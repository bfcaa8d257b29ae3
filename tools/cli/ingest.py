"""`tools ingest`: turn raw/code/<slug> trees into codebase, kernel and concept pages, raw/sources/ into source pages."""

from __future__ import annotations

import json
import sys

import click

from ..errors import InputError
from . import EXIT_SKIPS, llm_options, pass_project, printable


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
    from ..ingest.run import all_targets, ingest_repo, rebuild_index
    from ..writer import Writer

    project.require_wiki()
    targets = list(targets)
    if all_:  # trees --all cannot take (symlinks, names that are not plain) go through resolve_target's refusal
        plain = all_targets(project)
        others = sorted(p.name for p in project.raw_code.iterdir() if not p.name.startswith(".")
                        and p.name not in plain and (p.is_dir() or p.is_symlink())) if project.raw_code.is_dir() else []
        targets += plain + [str(project.raw_code / n) for n in others]
    if not targets and not all_:
        raise click.UsageError("name a tree (raw/code/<slug>), sources (raw/sources/...) or pass --all")
    from ..sources.run import is_source_target

    sources = [t for t in targets if is_source_target(project, t)]
    targets = [t for t in targets if t not in sources]
    if all_ and project.raw_sources.is_dir():
        sources.append(str(project.raw_sources))
    source_report = None
    if sources:
        from ..sources.run import ingest_sources

        writer = Writer(project.wiki)
        from .. import llm

        llm_provider = llm.from_options(provider, model, base_url, api_key_env) if use_llm else None
        try:
            source_report = ingest_sources(project, sources, writer, llm_provider)
        except InputError as e:
            click.echo(f"error: {printable(e)}", err=True)
            sys.exit(1)
        rebuild_index(project, writer)
        if writer.changed["created"] or writer.changed["updated"] or writer.changed["removed"]:
            writer.log_changes("ingest", "raw/sources")
        if not as_json:
            r = source_report
            click.echo(f"sources: {r.documents} documents ({len(r.ingested)} read, {len(r.unchanged)} unchanged), "
                       f"{r.claims} claims with numbers, {len(r.skipped)} skipped")
            for rel, why in r.skipped:
                click.echo(f"  skipped {printable(rel)}: {printable(why)}")
            for rel in r.removed:
                click.echo(f"  removed {printable(rel)}: raw/sources/{printable(rel)} is gone, so is its page")
            if use_llm:
                click.echo(f"  summaries: {len(r.summarized)} written, {len(r.summary_failed)} failed")
            for rel, why in r.summary_failed:
                click.echo(f"  no summary for {printable(rel)}: {printable(why)}")
    if not targets and not all_:
        if as_json:
            click.echo(json.dumps(source_report.to_dict(), indent=2))
        if source_report and (source_report.skipped or source_report.summary_failed):
            if not as_json:
                click.echo(f"completed with skips (exit {EXIT_SKIPS}): every document not read is in "
                           "wiki/sources/index.md with its reason", err=True)
            sys.exit(EXIT_SKIPS)
        sys.exit(0)
    reports, failed = [], []
    if all_:  # trees ingested here whose raw/code/<slug> is gone leave the wiki with them
        from ..ingest.remove import remove_codebase, vanished

        for slug in vanished(project):
            r = remove_codebase(project, slug, Writer(project.wiki))
            if not as_json:
                click.echo(f"{printable(slug)}: raw/code/{printable(slug)} is gone; removed {len(r.removed)} files "
                           f"and its region on {len(r.regions)} concept pages")
    for target in targets:
        writer = Writer(project.wiki)
        try:
            report = ingest_repo(project, target, writer, jobs=jobs,
                                 progress=_progress_bar(not quiet and not as_json and sys.stderr.isatty()))
        except InputError as e:  # one bad target never stops the others
            failed.append({"target": printable(target), "error": printable(e)})
            click.echo(f"error: {printable(e)}", err=True)
            continue
        rebuild_index(project, writer)
        if writer.changed["created"] or writer.changed["updated"] or writer.changed["removed"]:
            writer.log_changes("ingest", report.slug)
        reports.append(report)
        if not as_json:
            _print_report(report, quiet)
    if as_json:
        out = [r.to_dict() for r in reports] + failed + ([source_report.to_dict()] if source_report else [])
        click.echo(json.dumps(out if len(out) != 1 else out[0], indent=2))
    if failed:
        sys.exit(1)
    unwritten = [w for r in reports for w in r.unwritten]
    if unwritten and not as_json:
        for rel, why in unwritten:
            click.echo(f"not written: {printable(rel)}: {printable(why)}", err=True)
    if unwritten and not any(r.skipped for r in reports):
        if not as_json:
            click.echo(f"completed with pages left alone (exit {EXIT_SKIPS}): each is named above", err=True)
        sys.exit(EXIT_SKIPS)
    if any(r.skipped for r in reports) or (source_report and source_report.skipped):
        if not as_json:
            where = (["wiki/codebases/<slug>/skipped.tsv"] if any(r.skipped for r in reports) else []) + \
                (["wiki/sources/index.md"] if source_report and source_report.skipped else [])
            click.echo(f"completed with skips (exit {EXIT_SKIPS}): every skipped file is in "
                       f"{' and '.join(where)} with its reason", err=True)
        sys.exit(EXIT_SKIPS)


def _print_report(r, quiet: bool) -> None:
    click.echo(f"{printable(r.slug)}: {r.files_scanned} files scanned ({r.files_analyzed} parsed, "
               f"{r.files_scanned - r.files_analyzed} from cache), {r.files_skipped} skipped; "
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
