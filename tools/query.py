"""`tools query QUESTION`: the passages of the wiki that answer a question best, each with its citation.

Offline: the question's words go through the search index (tools.search) for candidate pages, then each page's
paragraphs are scored by the distinct question words they hold (stemmed prefix match, rarer words weigh more) and
the best passages are returned with the page, the heading above them and the page's rank.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from . import search, wikiscan
from .project import Project

STOP = search.STOP


@dataclass
class Passage:
    path: str
    title: str
    heading: str
    text: str
    score: float

    def as_dict(self) -> dict:
        return {"path": self.path, "title": self.title, "heading": self.heading, "text": self.text,
                "score": self.score, "cite": f"wiki/{self.path}" + (f" § {self.heading}" if self.heading else "")}


def _terms(question: str) -> list[str]:
    words = [w for w in re.findall(r"\w[\w.-]*", question.lower()) if w not in STOP and len(w) > 1]
    return list(dict.fromkeys(w[:6] if len(w) > 6 else w for w in words))  # a crude stem: the first 6 letters


def _paragraphs(body: str):
    heading = ""
    for block in re.split(r"\n\s*\n", body):
        text = block.strip()
        if not text or text.startswith("<!--") and text.endswith("-->"):
            continue
        m = re.match(r"^#{1,6}\s+(.+)$", text.splitlines()[0])
        if m:
            heading = m.group(1).strip()
            text = "\n".join(text.splitlines()[1:]).strip()
            if not text:
                continue
        text = search.readable(text)
        lines = [ln for ln in text.splitlines() if ln.strip()]
        if len(lines) >= 3 and all(ln.lstrip().startswith("|") for ln in lines):
            # a table: each row is a passage under its header, so the answer is the row, not the table's top
            for row in lines[2:]:
                yield heading, lines[0] + "\n" + row
            continue
        yield heading, text


def query(project: Project, question: str, limit: int = 5, pages: int = 20) -> list[Passage]:
    terms = _terms(question)
    if not terms:
        return []
    # the search gets the question's words whole (it finds their forms itself); the prefixes match paragraphs
    words = [w for w in re.findall(r"\w[\w.-]*", question.lower()) if w not in STOP and len(w) > 1]
    _, hits = search.search(project, " ".join(words), limit=pages)
    out: list[Passage] = []
    n_hits = max(len(hits), 1)
    for rank, h in enumerate(hits):
        p = wikiscan.read_page(project.wiki / h.path, h.path, links=False, within=project.wiki)
        if p.text is None:
            continue
        for heading, text in _paragraphs(p.body or ""):
            low = text.lower()
            found = [t for t in terms if re.search(r"\b" + re.escape(t), low)]
            if not found:
                continue
            score = sum(1.0 + math.log(1 + len(terms) / (1 + i)) for i, _ in enumerate(found)) * len(found) / len(terms)
            score *= 1.0 + (n_hits - rank) / n_hits  # the page's own rank counts too
            out.append(Passage(h.path, h.title, heading, " ".join(text.split())[:700], round(score, 3)))
    out.sort(key=lambda x: (-x.score, x.path))
    seen, best = set(), []
    for x in out:
        key = (x.path, x.text[:80])
        if key not in seen:
            seen.add(key)
            best.append(x)
        if len(best) == limit:
            break
    return best
