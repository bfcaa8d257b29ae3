"""Pages that would stall or abort a site build (``mdrisk.problem``) shown as text instead.

One such page must not cost the whole site, so it is published as a code block under a warning, and ``tools lint``
names it. Pages that are not UTF-8 are published the same way (decoded with replacement characters), and left
untouched in ``wiki/``.
"""

from __future__ import annotations

import re


def as_text(rel: str, text: str, reason: str) -> str:
    """The page published as a code block under a warning (its frontmatter, if any, is part of the text)."""
    longest = max((len(m.group(0)) for m in re.finditer(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    title = rel.rsplit("/", 1)[-1].removesuffix(".md")
    safe_title = re.sub(r"[^\w .-]+", "-", title)[:80] or "page"
    return (f"---\ntitle: {safe_title!r}\n---\n\n# {safe_title}\n\n"
            f"!!! warning \"Shown as text\"\n    `wiki/{_plain(rel)}`: {_plain(reason)}. It is published as text so it "
            "cannot stall or abort the site build; the file in wiki/ is unchanged, and `tools lint` lists it.\n\n"
            f"{fence}text\n{text}\n{fence}\n")


def _plain(s: str) -> str:
    return re.sub(r"[^\w ./:'(),-]+", "?", s)
