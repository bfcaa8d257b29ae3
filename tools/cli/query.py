"""`tools query QUESTION`: the best passages of the wiki for a question, with citations (offline)."""

from __future__ import annotations

import json

import click

from . import pass_project, printable


@click.command(name="query")
@click.argument("question", nargs=-1, required=True)
@click.option("--limit", "-n", type=int, default=5, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print the passages as JSON.")
@pass_project
def query(project, question, limit, as_json):
    """The passages that answer QUESTION best, each cited as wiki/<page> § <heading>.

    Offline: candidate pages from the search index, then their paragraphs ranked by the question's words.
    """
    from ..query import query as run

    project.require_wiki()
    found = run(project, " ".join(question), limit=limit)
    if as_json:
        click.echo(json.dumps([p.as_dict() for p in found], ensure_ascii=False))
        return
    if not found:
        click.echo("No passage holds the question's words.")
        return
    for i, p in enumerate(found, 1):
        d = p.as_dict()
        click.echo(f"[{i}] {printable(d['cite'])}")
        click.echo(f"    {printable(p.text)[:400]}")
