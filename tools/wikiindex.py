"""wiki/index.md from frontmatter: one section per page type, true counts, one-line summaries.

The listing lives in the generated region ``index``; text written around it survives.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass

from . import mdtext, pages
from .wikiscan import Wiki, WikiPage, scan
from .writer import Writer

INDEX = "index.md"
LOG = "log.md"
REGION = "index"
SUMMARY_CHARS = 140
NO_FRONTMATTER = "Pages without frontmatter"
OTHER = "Other pages"

INTRO = """# Index

Every page of this wiki by type, rebuilt by `tools index` from the pages' frontmatter.
Text outside the generated block below is yours and survives rebuilds.
"""


def label(type_name: str) -> str:
    """Section heading for a page type: its folder name, capitalized (``hypotheses`` -> ``Hypotheses``)."""
    t = pages.TYPES.get(type_name)
    word = t.folder if t and t.folder else f"{type_name} pages"
    return word[:1].upper() + word[1:]


def listed(wiki: Wiki) -> list[WikiPage]:
    """Pages the index lists: everything but the root index and log."""
    return [p for p in wiki.pages if p.rel not in (INDEX, LOG)]


def group(wiki: Wiki) -> dict[str, list[WikiPage]]:
    """Section label -> pages, in index order (type order, then other, then no frontmatter)."""
    out: dict[str, list[WikiPage]] = {label(t): [] for t in pages.TYPES}
    out[OTHER] = []
    out[NO_FRONTMATTER] = []
    for p in listed(wiki):
        if p.meta is None:
            out[NO_FRONTMATTER].append(p)
        elif p.type in pages.TYPES:
            out[label(p.type)].append(p)
        else:
            out[OTHER].append(p)
    return out


def expected_counts(wiki: Wiki) -> dict[str, int]:
    """The counts a fresh index would show (sections that would appear only)."""
    shown = {}
    for name, items in group(wiki).items():
        if items or _always_shown(name):
            shown[name] = len(items)
    return shown


def _always_shown(section: str) -> bool:
    return section in {label(t) for t in pages.CONTENT_TYPES}


# ---------------------------------------------------------------- summaries

# Every pattern here is linear on any input: no class overlaps what follows it (a label holds no "[", a run of
# marks is matched whole and judged by its neighbours), so 20,000 "[" cost what 20,000 letters cost.
_LINK = re.compile(r"!?\[([^\[\]\n]*)\]\([^()\n]*\)")
_WIKILINK = re.compile(r"\[\[(?:[^\[\]|\n]*\|)?([^\[\]\n]*)\]\]")
_TICKS = re.compile(r"`+")
_MARK_RUN = re.compile(r"[*_]+")


def _strip_marks(text: str) -> str:
    """Drop code ticks and emphasis marks; keep snake_case (a run of marks between two word characters)."""
    def keep(m: re.Match) -> str:
        before = text[m.start() - 1] if m.start() else " "
        after = text[m.end()] if m.end() < len(text) else " "
        return m.group(0) if (before.isalnum() or before == "_") and (after.isalnum() or after == "_") else ""
    return _MARK_RUN.sub(keep, text)



def first_paragraph(body: str) -> str:
    """The first prose paragraph of a markdown body (no headings, code, tables, lists or comments)."""
    body = mdtext.drop_spans(body, "<!--", "-->")
    para: list[str] = []
    fence = False
    for ln in body.split("\n"):
        s = ln.strip()
        if s.startswith(("```", "~~~")):
            fence = not fence
            if para:
                break
            continue
        if fence:
            continue
        if not s:
            if para:
                break
            continue
        if s.startswith(("#", "|", "<", "- ", "* ", "+ ", ">", "!", "---", "===")) or re.match(r"\d+[.)] ", s):
            if para:
                break
            continue
        para.append(s)
    return " ".join(para)


_CODE_SPAN = re.compile(r"`([^`\n]+)`")  # linear: only a backtick starts a match, the next one ends it


def _plain(text: str) -> str:
    """Markdown inline text as plain words: code spans kept verbatim (``jax/_src/config.py`` keeps its
    underscore), emphasis marks and stray ticks dropped elsewhere."""
    out, last = [], 0
    for m in _CODE_SPAN.finditer(text):
        out += [_prose(text[last:m.start()]), m.group(1)]
        last = m.end()
    out.append(_prose(text[last:]))
    return "".join(out)


def _prose(text: str) -> str:
    """Markdown prose as the words it renders: escapes and entities undone (``pallas\\_call`` is pallas_call, and
    the listing escapes it once again), emphasis marks and stray ticks dropped."""
    return _strip_marks(html.unescape(mdtext.unescape(_TICKS.sub("", text))))


def one_line(text: str, limit: int = SUMMARY_CHARS) -> str:
    text = _WIKILINK.sub(r"\1", _LINK.sub(r"\1", text))
    text = _plain(text)
    text = " ".join(text.split())
    if len(text) > limit:
        cut = text[: limit - 1].rsplit(" ", 1)[0].rstrip(",;:.")
        text = cut + "…"
    return text


def summary(page: WikiPage) -> str:
    for key in ("summary", "description"):
        v = page.meta.get(key) if page.meta else None
        if isinstance(v, str) and v.strip():
            return one_line(v)
    return one_line(first_paragraph(page.body))


# ---------------------------------------------------------------- rendering

def _href(rel: str) -> str:
    return mdtext.url(mdtext.path_target(rel))


def listing(wiki: Wiki) -> str:
    """The generated part of index.md."""
    groups = group(wiki)
    total = sum(len(v) for v in groups.values())
    out = [f"{total} pages.", ""]
    for name, items in groups.items():
        if not items and not _always_shown(name):
            continue
        out.append(f"## {name} ({len(items)})")
        out.append("")
        t = next((pages.TYPES[k] for k in pages.TYPES if label(k) == name), None)
        if t and t.summary:
            out.append(f"_{t.summary}._")
            out.append("")
        if not items:
            out.append("None yet.")
            out.append("")
            continue
        for p in sorted(items, key=lambda p: p.rel):
            line = f"- [{mdtext.escape(p.title)}]({_href(p.rel)})"
            if p.error:
                line += " (not UTF-8)" if p.error.startswith("not UTF-8") else " (invalid frontmatter)"
            if name == OTHER:
                line += f" (type {mdtext.escape(repr(p.meta.get('type')))})" if p.meta and "type" in p.meta else " (no type)"
            s = summary(p)
            if s:
                line += f" — {mdtext.escape(s)}"
            out.append(line)
        out.append("")
    return "\n".join(out).rstrip("\n") + "\n"


def index_page(wiki: Wiki) -> pages.Page:
    body = INTRO + "\n" + pages.region(REGION, listing(wiki))
    return pages.Page(INDEX, {"title": "Index", "type": "index"}, body,
                      preserve_meta=("created", "title"))


@dataclass(frozen=True)
class IndexResult:
    status: str  # created | updated | unchanged
    pages: int
    counts: dict[str, int]


def rebuild(wiki_dir, writer: Writer | None = None, wiki: Wiki | None = None, log: bool = True) -> IndexResult:
    """Rebuild wiki/index.md; log the change (only when something changed)."""
    writer = writer or Writer(wiki.root if wiki is not None else wiki_dir)
    with writer.exclusive():  # the scan and the write as one step: a concurrent ingest cannot slip between
        wiki = wiki if wiki is not None else scan(wiki_dir, links=False)
        status = writer.write_page(index_page(wiki))
    counts = {k: v for k, v in expected_counts(wiki).items() if v}
    if log and status != "unchanged":
        detail = ", ".join(f"{k.lower()} {v}" for k, v in counts.items()) or "no pages"
        writer.append_log("index", "wiki/index.md", [f"{status} wiki/index.md: {len(listed(wiki))} pages ({detail})"])
    return IndexResult(status, len(listed(wiki)), counts)


# ---------------------------------------------------------------- reading an index back (lint)

_COUNT_HEAD = re.compile(r"^#{2,3}\s+(.+?)\s*\((\d+)\)\s*$", re.M)


def recorded_counts(index_body: str) -> dict[str, int] | None:
    """Section -> count as written in index.md (generated region if any, else whole page); None if no counts."""
    region = pages.regions(index_body).get(REGION)
    text = region if region is not None else index_body
    found = {m.group(1).strip(): int(m.group(2)) for m in _COUNT_HEAD.finditer(text)}
    return found or None
