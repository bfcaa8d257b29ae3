"""`tools ingest raw/sources/... --llm`: a summary of a document whose every sentence cites the page or section
of the extracted text it rests on (``tools.llm.cited``: a sentence that cites nothing given is dropped).

Off by default; the rest of a source page never needs it. The spans are the document's sections (PDF pages, HTML
and markdown sections), the first ``MAX_SPANS``, each cut at ``SPAN_CHARS``: a long book costs what its first
pages cost.
"""

from __future__ import annotations

from .. import llm, mdtext
from ..llm import cited
from .extract import Document

MAX_SPANS = 40
SPAN_CHARS = 2500
SYSTEM = ("You summarize papers, guides and posts for performance engineers of ML training and inference on TPUs "
          "and GPUs: what the document is about, the techniques it describes, and the measured results with their "
          "numbers and units. Four to eight sentences.")


def spans_of(doc: Document) -> list[cited.Span]:
    out = []
    for s in doc.sections:
        text = " ".join(s.text.split())
        if text:
            out.append(cited.Span(f"S{len(out) + 1}", s.where, text[:SPAN_CHARS]))
        if len(out) == MAX_SPANS:
            break
    return out


def summarize(doc: Document, provider: llm.Provider) -> dict:
    """``{"sentences": [{"text", "where": [...]}], "dropped": n, "model", "input_tokens", "output_tokens"}``."""
    spans = spans_of(doc)
    got = cited.write(provider, SYSTEM, spans, f"Summarize this document: {doc.title or 'untitled'}.")
    where = {s.id: s.cite for s in spans}
    return {"sentences": [{"text": s["text"], "where": [where[c] for c in s["cites"]]} for s in got.sentences],
            "dropped": len(got.dropped), "model": getattr(provider, "model", ""),
            "input_tokens": got.usage.total_input, "output_tokens": got.usage.output_tokens}


def markdown(summary: dict) -> str:
    """The summary's sentences, each followed by where it comes from: "... (p. 3, p. 4)"."""
    text = " ".join(f"{mdtext.prose(s['text'])} ({mdtext.escape(', '.join(dict.fromkeys(s['where'])))})"
                    for s in summary["sentences"])
    return (f"{text}\n\n_Written by {mdtext.escape(summary['model'] or 'an LLM')} from the extracted text; each "
            f"sentence names the page or section it cites"
            + (f"; {summary['dropped']} uncited sentence(s) dropped" if summary.get("dropped") else "") + "._")
