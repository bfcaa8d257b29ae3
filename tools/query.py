"""`tools query QUESTION`: the passages of the wiki that answer a question best, each with its citation.

Offline: the question's words go through the search index (tools.search) for candidate pages, then each page's
paragraphs (and a source page's document's, ``fulltext``) are scored by the distinct question words they, their
heading and their page's title hold (stemmed prefix match, code names whole, rarer words weigh more) and the best
passages are returned with the page, the heading above them and the page's rank.
"""

from __future__ import annotations

import html
import math
import re
from dataclasses import dataclass

from . import fulltext, mdscan, search, wikiscan
from .project import Project

STOP = search.STOP


@dataclass
class Passage:
    path: str
    title: str
    heading: str
    text: str
    score: float
    source: str = ""  # a passage of a source's document (``fulltext``): its raw/ path, ``heading`` the place in it

    def as_dict(self) -> dict:
        cite = f"{self.source} {self.heading}" if self.source else \
            f"wiki/{self.path}" + (f" § {self.heading}" if self.heading else "")
        return {"path": self.path, "title": self.title, "heading": self.heading, "text": self.text,
                "score": self.score, "cite": cite}


def _terms(question: str) -> list[str]:
    """The question's words as prefixes to find in a passage: a crude stem (the first 6 letters) for a word, the
    whole name for a code name (``rms_norm_forward`` is not ``rms_no``, which ``rms_norm`` also starts with)."""
    words = [w.strip(".-") for w in re.findall(r"\w[\w.-]*", question.lower())]
    words = [w for w in words if w not in STOP and len(w) > 1]
    return list(dict.fromkeys(w if set(w) & set("_.") or len(w) <= 6 else w[:6] for w in words))


def _pattern(term: str) -> re.Pattern:
    """A term's match: a stem starts a word; a code name is matched whole (not inside a longer name)."""
    if set(term) & set("_."):
        return re.compile(r"(?<![\w.])" + re.escape(term) + r"(?!\w)")
    return re.compile(r"\b" + re.escape(term))


def _blocks(body: str):
    """(the heading above, a paragraph's text) for each paragraph: the headings Markdown renders (``mdscan``), so a
    ``# comment`` in a code block neither names a section nor starts one."""
    heads = {h.index: h for h in mdscan.headings(body)[0]}
    lines = body.split("\n")
    heading, para, skip = "", [], False
    for i, ln in enumerate(lines):
        if skip:  # a setext heading's underline
            skip = False
            continue
        if i in heads or not ln.strip():
            if para:
                yield heading, "\n".join(para)
                para = []
            if i in heads:
                heading = mdscan.ATTR_ID.sub("", heads[i].text).strip()  # as `tools wiki read section=` finds it
                skip = not ln.lstrip(" >").startswith("#")
            continue
        para.append(ln)
    if para:
        yield heading, "\n".join(para)


def _paragraphs(body: str):
    for heading, block in _blocks(body):
        text = search.readable(block.strip())  # region markers out: a generated list between them is a passage
        if not re.search(r"\w\w", text):  # a rule, a lone marker: nothing to read
            continue
        lines = [ln for ln in text.splitlines() if ln.strip()]
        if len(lines) >= 3 and all(ln.lstrip().startswith("|") for ln in lines):
            # a table: each row is a passage under its header, so the answer is the row, not the table's top
            for row in lines[2:]:
                yield heading, lines[0] + "\n" + row
            continue
        yield heading, text


_CODE_SPAN = re.compile(r"(`+)[^`]*?\1")


def _as_read(text: str) -> str:
    """A passage as the rendered page reads: the pages write a source's `&` as `&amp;` (tools.mdtext.escape), and a
    passage quoted that markdown, so the escape showed; code spans keep theirs (markdown shows them as written)."""
    if "&" not in text:
        return text
    out, last = [], 0
    for m in _CODE_SPAN.finditer(text):
        out += [html.unescape(text[last:m.start()]), m.group(0)]
        last = m.end()
    return "".join(out + [html.unescape(text[last:])])


def query(project: Project, question: str, limit: int = 5, pages: int = 20) -> list[Passage]:
    terms = _terms(question)
    if not terms:
        return []
    # the search gets the question's words whole (it finds their forms itself); the prefixes match paragraphs
    words = [w for w in re.findall(r"\w[\w.-]*", question.lower()) if w not in STOP and len(w) > 1]
    _, hits = search.search(project, " ".join(words), limit=pages)
    out: list[Passage] = []
    n_hits = max(len(hits), 1)
    patterns = [_pattern(t) for t in terms]
    for rank, h in enumerate(hits):
        if h.path == "index.md":  # the generated listing of every page: no answer of its own
            continue
        p = wikiscan.read_page(project.wiki / h.path, h.path, links=False, within=project.wiki)
        if p.text is None:
            continue
        kept = fulltext.read(project, h.path) if h.type == "source" else {}
        doc = [(where, para, kept.get("source", "")) for where, section in kept.get("sections", [])
               for _, para in _paragraphs(section)]
        for heading, text, source in [(hd, t, "") for hd, t in _paragraphs(p.body or "")] + doc:
            # the page's title and the heading above count as the passage's words ("callers of tgmm": the
            # tgmm page's "Callers" section)
            low = f"{h.title}\n{heading}\n{text}".lower()
            found = [t for t, pat in zip(terms, patterns) if pat.search(low)]
            near = f"{heading}\n{text}".lower()
            if not found or not any(pat.search(near) for pat in patterns):
                continue  # words in the page's title alone: every paragraph of the page would score the same
            score = sum(1.0 + math.log(1 + len(terms) / (1 + i)) for i, _ in enumerate(found)) * len(found) / len(terms)
            score *= 1.0 + (n_hits - rank) / n_hits  # the page's own rank counts too
            text = " ".join(text.split())
            text, heading = (text, heading) if source else (_as_read(text), _as_read(heading))  # a page's markdown
            out.append(Passage(h.path, h.title, heading, text[:700], round(score, 3), source))
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
