"""Generated regions of a page: the text between ``<!-- tools:begin NAME -->`` and ``<!-- tools:end NAME -->`` is
the tools'; everything outside is a person's and is kept by every rewrite. Markers quoted in a fenced code block are
text, never a region's edge."""

from __future__ import annotations

import bisect
import re


# a region: a begin marker at the start of a line, its end, and no other begin marker between them, so that a
# stray begin (a page quoting the markers, or an end deleted by hand) never swallows the text after it
_REGION = re.compile(
    r"^<!-- tools:begin (?P<name>[\w.-]+) -->\n(?P<content>(?:(?!<!-- tools:begin ).)*?)"
    r"<!-- tools:end (?P=name) -->\n?", re.S | re.M
)
_FENCE = re.compile(r"^[ ]{0,3}(`{3,}|~{3,})", re.M)


def _fenced(body: str) -> list[tuple[int, int]]:
    """The spans of fenced code blocks: markers quoted there are text, never a region."""
    spans, opened = [], None
    for m in _FENCE.finditer(body):
        if opened is None:
            opened = m
        elif m.group(1)[0] == opened.group(1)[0] and len(m.group(1)) >= len(opened.group(1)):
            spans.append((opened.start(), m.end()))
            opened = None
    if opened is not None:
        spans.append((opened.start(), len(body)))
    return spans


class _Region:
    """A region found by :func:`_real_regions`, read as its callers read a match of :data:`_REGION`."""

    def __init__(self, body: str, begin: re.Match, end: re.Match):
        self._body, self._begin, self._end = body, begin, end

    def start(self) -> int:
        return self._begin.start()

    def end(self) -> int:
        return self._end.end()

    def group(self, key: int | str = 0) -> str:
        if key == "name":
            return self._begin.group("name")
        if key == "content":
            return self._body[self._begin.end():self._end.start()]
        return self._body[self.start():self.end()]


_BEGIN = re.compile(r"^<!-- tools:begin (?P<name>[\w.-]+) -->\n", re.M)


def _real_regions(body: str) -> list:
    """The regions of ``body`` whose markers lie outside fenced code blocks: a marker quoted in a block is text,
    so a program's log that prints an end marker does not end the region there (the rest of the page was lost)."""
    fences = _fenced(body)
    if not fences:
        return list(_REGION.finditer(body))
    starts = [a for a, _ in fences]

    def inside(pos: int) -> bool:
        i = bisect.bisect_right(starts, pos) - 1
        return i >= 0 and pos < fences[i][1]

    stops = [m.start() for m in re.finditer("<!-- tools:begin ", body) if not inside(m.start())]
    out, at = [], 0
    for begin in _BEGIN.finditer(body):
        if begin.start() < at or inside(begin.start()):
            continue
        nxt = bisect.bisect_right(stops, begin.start())
        limit = stops[nxt] if nxt < len(stops) else len(body)
        ends = re.compile(rf"<!-- tools:end {re.escape(begin.group('name'))} -->\n?").finditer(body, begin.end(), limit)
        end = next((e for e in ends if not inside(e.start())), None)
        if end is not None:
            out.append(_Region(body, begin, end))
            at = end.end()
    return out


def region(name: str, content: str) -> str:
    """Wrap generated text so that regeneration replaces exactly this part. A marker inside ``content`` (a log, a
    hypothesis or a quoted file that prints one) gets a word joiner, so it can neither end nor open a region."""
    if "<!-- tools:" in content:
        content = content.replace("<!-- tools:", "<!-- tools\u2060:")
    if not content.endswith("\n"):
        content += "\n"
    return f"<!-- tools:begin {name} -->\n{content}<!-- tools:end {name} -->\n"


def regions(body: str) -> dict[str, str]:
    return {m.group("name"): m.group("content") for m in _real_regions(body)}


def _substitute(body: str, repl) -> str:
    """``body`` with each real region replaced by ``repl(match)``; quoted markers and the text around them kept."""
    out, at = [], 0
    for m in _real_regions(body):
        out += [body[at:m.start()], repl(m)]
        at = m.end()
    return "".join(out) + body[at:]


def drop_empty_regions(body: str) -> str:
    return _substitute(body, lambda m: m.group(0) if m.group("content").strip() else "")


def merge_body(existing: str, generated: str, keep_other_regions: bool = False) -> str:
    """Put the generated regions into the existing body, keeping everything written outside them.

    Regions present in ``generated`` replace their namesakes; new ones are appended in order;
    regions the generator no longer produces are dropped (they were ours) unless
    ``keep_other_regions`` (pages that several generators share, such as concept pages, where
    each repository owns one region). A region generated empty is removed.
    """
    new = regions(generated)
    if not new:
        return generated
    seen: set[str] = set()

    def swap(m: re.Match) -> str:
        name = m.group("name")
        if name in new and name not in seen:
            seen.add(name)
            return region(name, new[name]) if new[name].strip() else ""
        return m.group(0) if keep_other_regions and name not in new else ""

    merged = _substitute(existing, swap)
    missing = [n for n in new if n not in seen and new[n].strip()]
    if missing:
        merged = merged.rstrip("\n") + "\n\n" + "\n".join(region(n, new[n]) for n in missing)
    return merged
