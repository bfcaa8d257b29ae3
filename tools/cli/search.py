"""`tools search QUERY`: ranked full-text search over every wiki page (tools.search)."""

from __future__ import annotations

import json

import click

from .common import pass_project, printable


@click.command(name="search")
@click.argument("query", nargs=-1, required=True)
@click.option("--type", "type_", default=None, help="Only pages of this type (concept, source, kernel, ...).")
@click.option("--limit", "-n", type=int, default=10, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print the hits as JSON (what the wiki_search MCP tool gives).")
@pass_project
def search(project, query, type_, limit, as_json):
    """Pages holding any word of QUERY, those holding more of them first, with a snippet around the match.

    SQLite FTS5 with BM25 (title, frontmatter, prose, file paths weighted 10 : 4 : 1 : 0.1) scaled by page
    type, then the best 60 re-ranked by the share of the query's words each holds (rarer words weigh more) and
    held in its title. No stemming: a word also finds its plural, -ing and -ed forms and the spellings engineers
    write for it (backward: bwd, vjp); RMSNorm finds rms_norm. The index in .tools-cache/search.sqlite is
    brought up to date on each search (only changed pages are re-read).
    """
    from ..agent.registry import call

    if not " ".join(query).strip():  # an empty argument: no word to look for
        raise click.UsageError("the query holds no words")
    project.require_wiki()
    out = call(project, "wiki.search", {"query": " ".join(query), "type": type_, "limit": limit})
    if as_json:
        click.echo(json.dumps(out, ensure_ascii=False))
        return
    click.echo(f"{out['total']} pages match; best {len(out['hits'])}:")
    for h in out["hits"]:
        click.echo(f"  {h['score']:8.2f}  wiki/{printable(h['path'])}  ({h['type'] or '-'}) {printable(h['title'])}")
        if h["snippet"]:
            click.echo(f"            {printable(h['snippet'])[:200]}")
