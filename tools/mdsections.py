"""A page's sections: each heading with the lines it governs (to the next heading of the same or a higher level),
so a reader can take one section of a 100 KB page instead of all of it. Pure; headings inside code blocks are not
headings (``mdscan.headings``)."""

from __future__ import annotations

import html
from dataclasses import dataclass

from .mdscan import ATTR_ID, headings


@dataclass(frozen=True)
class Section:
    title: str   # the heading as written, without its {#id}
    id: str      # the id a link uses (#id)
    level: int
    start: int   # body line index of the heading
    end: int     # body line index after the section's last line

    def as_dict(self) -> dict:
        return {"title": self.title, "id": self.id, "level": self.level, "line": self.start + 1}


def sections(body: str) -> list[Section]:
    heads, _ = headings(body)
    n = body.count("\n") + 1
    return [Section(ATTR_ID.sub("", h.text).strip(), h.id, h.level, h.index,
                    next((g.index for g in heads[k + 1:] if g.level <= h.level), n))
            for k, h in enumerate(heads)]


def find(body: str, wanted: str) -> Section | None:
    """The section whose id is ``wanted`` (with or without ``#``), else whose title matches it case-insensitively
    (code marks ignored), else the first whose title starts with it."""
    want = wanted.strip().lstrip("#").strip()
    secs = sections(body)

    def plain(s: str) -> str:  # `tools query` cites a heading as read: "A &amp; B" is "A & B"
        return html.unescape(s.replace("`", "")).casefold()
    for test in (lambda s: s.id == want, lambda s: plain(s.title) == plain(want),
                 lambda s: plain(s.title).startswith(plain(want))):
        hit = next((s for s in secs if test(s)), None)
        if hit is not None:
            return hit
    return None


def text_of(body: str, section: Section) -> str:
    return "\n".join(body.split("\n")[section.start:section.end]).rstrip() + "\n"
