"""`tools query QUESTION`: the best passages of the wiki for a question, with citations (offline); with `--llm`,
an answer whose every sentence cites them, filed as an analysis page."""

from __future__ import annotations

import json

import click

from .common import llm_options, pass_project, printable


@click.command(name="query")
@click.argument("question", nargs=-1, required=True)
@click.option("--limit", "-n", type=click.IntRange(min=1), default=None,
              help="Passages to show or answer from (5; with --llm 8).")
@click.option("--json", "as_json", is_flag=True, help="Print the passages (or the answer) as JSON.")
@click.option("--llm", "use_llm", is_flag=True,
              help="Write an answer from the passages (every sentence cites one) and file it under wiki/analyses/.")
@llm_options
@pass_project
def query(project, question, limit, as_json, use_llm, provider, model, base_url, api_key_env):
    """The passages that answer QUESTION best, each cited as wiki/<page> § <heading>.

    Offline: candidate pages from the search index, then their paragraphs ranked by the question's words.
    With --llm: an answer phrased from those passages by the model, sentence by sentence cited, filed back as
    wiki/analyses/query-<slug>.md (the key is read from the environment).
    """
    from ..query import query as run

    from ..search import fts_query

    project.require_wiki()
    q = " ".join(question)
    if fts_query(q) is None:  # as `tools search` says it: `*` or punctuation alone asks nothing
        raise click.UsageError("the question holds no words")
    if use_llm:
        _answer(project, q, limit or 8, as_json, provider, model, base_url, api_key_env)
        return
    found = run(project, q, limit=limit or 5)
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


def _answer(project, question, limit, as_json, provider, model, base_url, api_key_env):
    from .. import llm
    from ..answer import answer

    got = answer(project, question, llm.from_options(provider, model, base_url, api_key_env), limit=limit)
    if as_json:
        click.echo(json.dumps({"page": f"wiki/{got.page}", "sentences": got.sentences, "dropped": got.dropped,
                               "passages": [p.as_dict() for p in got.passages],
                               "usage": {"input_tokens": got.usage.total_input,
                                         "output_tokens": got.usage.output_tokens}}, ensure_ascii=False))
        return
    for s in got.sentences:
        click.echo(f"{printable(s['text'])} [{', '.join(s['cites'])}]")
    click.echo(f"\nfiled wiki/{got.page} ({len(got.sentences)} cited sentence(s), {len(got.dropped)} dropped)")
