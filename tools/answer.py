"""`tools query --llm`: an answer to a question written from the wiki's best passages, every sentence citing the
passages it rests on, filed back as an analysis page (the wiki grows from questions too).

The passages come from ``tools.query`` (offline); the model only phrases what they say (``tools.llm.cited``:
a sentence that cites nothing is dropped). The page links each citation to its page and lists the passages.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import llm, pages
from .llm import cited
from .mdtext import escape, link, slugify
from .project import Project
from .query import Passage, query
from .writer import Writer

SYSTEM = ("You answer questions of performance engineers (ML training and inference on TPUs and GPUs) from "
          "passages of their knowledge base. Be specific: keep the numbers, units and names the passages give.")


@dataclass
class Answer:
    page: str                    # wiki-relative path of the analysis page
    sentences: list[dict]
    dropped: list[str]
    passages: list[Passage]
    usage: llm.Usage


def page_path(question: str) -> str:
    return f"analyses/query-{slugify(question)[:80] or 'question'}.md"


def answer(project: Project, question: str, provider: llm.Provider, limit: int = 8,
           max_tokens: int = 1500) -> Answer:
    found = query(project, question, limit=limit)
    if not found:
        raise llm.LLMError(f"no passage of the wiki holds the words of {question!r}: nothing to answer from")
    spans = [cited.Span(f"S{i}", p.as_dict()["cite"], p.text) for i, p in enumerate(found, 1)]
    got = cited.write(provider, SYSTEM, spans, f"Question: {question}", max_tokens)
    path = page_path(question)
    by_id = {s.id: p for s, p in zip(spans, found)}
    refs = {sid: n for n, sid in enumerate(dict.fromkeys(c for s in got.sentences for c in s["cites"]), 1)}

    def cite(sid: str) -> str:
        p = by_id[sid]
        return link(f"\\[{refs[sid]}\\]", "../" + p.path)  # `[[1]](…)` would read as a [[wikilink]]

    body = [" ".join(f"{escape(s['text'])} {''.join(cite(c) for c in s['cites'])}" for s in got.sentences), "",
            "## Passages cited", ""]
    for sid, n in refs.items():
        p = by_id[sid]
        where = escape(p.title) + (f" § {escape(p.heading)}" if p.heading else "")
        body.append(f"{n}. {link(where, '../' + p.path)}: “{escape(p.text[:300])}”")
    if got.dropped:
        body += ["", f"{len(got.dropped)} sentence(s) of the model's reply cited no passage and were dropped."]
    meta = {"title": f"Q: {question}"[:200], "type": "analysis", "tags": ["analysis", "query"],
            "question": question, "sources": sorted({by_id[s].path for s in refs}),
            "llm": {"provider": getattr(provider, "name", ""), "model": getattr(provider, "model", ""),
                    "input_tokens": got.usage.total_input, "output_tokens": got.usage.output_tokens}}
    w = Writer(project.wiki)
    text = f"# {escape(question)}\n\n" + pages.region("answer", "\n".join(body) + "\n")  # re-asking updates it
    w.write_page(pages.Page(path, meta, text))
    w.append_log("query", question[:120], [f"page {path}", f"{len(got.sentences)} cited sentence(s), "
                                                            f"{len(got.dropped)} dropped"])
    return Answer(path, got.sentences, got.dropped, found, got.usage)
