"""`tools lint`: check the wiki; `--fix` repairs the mechanical problems."""

from __future__ import annotations

import json

import click

from .common import pass_project, printable


@click.command(name="lint")
@click.option("--fix", is_flag=True, help="Repair wikilinks, file:// links, missing frontmatter and index drift.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document instead of lines.")
@click.option("--quiet", "-q", is_flag=True, help="Print errors and the summary only (no warnings).")
@pass_project
def lint(project, fix: bool, as_json: bool, quiet: bool) -> None:
    """Check wiki/: broken links, orphans, frontmatter, experiment ids, index drift, stale pages.

    Prints `path:line: code: message` lines and a summary; a cause with many instances (links naming `#Symbol`
    anchors no heading defines, links to one missing page) is printed once, with its count, first examples and
    the fix. Exits 1 when errors remain.
    """
    from ..lint import ERROR, run
    from ..lint.groups import grouped

    report = run(project, fix=fix)
    if as_json:  # the registry's `wiki.lint` output, every problem listed
        from ..agent.ops_wiki import LintOut, lint_out

        click.echo(json.dumps(LintOut(**lint_out(report)).model_dump(), indent=1, default=str))
    else:
        for line in report.fixed:
            click.echo(f"fixed {printable(line)}")
        groups, single = grouped(report.issues)
        for g in groups:  # one finding per cause with many instances (--json lists every one)
            if not quiet or g.severity == ERROR:
                for line in g.lines():
                    click.echo(printable(line))
        for i in single:
            if not quiet or i.severity == ERROR:
                click.echo(printable(str(i)))
        click.echo(report.summary())
    if not report.ok:
        raise SystemExit(1)
