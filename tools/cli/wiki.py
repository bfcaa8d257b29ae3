"""`tools index`: rebuild wiki/index.md from the pages' frontmatter."""

from __future__ import annotations

import json

import click

from .common import pass_project


@click.command(name="index")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@pass_project
def index(project, as_json: bool) -> None:
    """Rebuild wiki/index.md: one section per page type with counts and one-line summaries.

    Text outside the generated block survives; an unchanged wiki writes nothing.
    """
    from ..wikiindex import rebuild

    project.require_wiki()
    result = rebuild(project.wiki)
    if as_json:
        click.echo(json.dumps({"path": "wiki/index.md", "status": result.status, "pages": result.pages,
                               "counts": result.counts}))
        return
    counts = ", ".join(f"{k.lower()} {v}" for k, v in result.counts.items()) or "no pages"
    click.echo(f"wiki/index.md: {result.status} ({result.pages} pages: {counts})")
