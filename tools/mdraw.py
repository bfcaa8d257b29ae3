"""The raw HTML blocks Python-Markdown passes through as they are: a ``<script>``, ``<style>``, ``<pre>`` or
``<textarea>`` opened at a line's start runs to its closing tag, and nothing in it is a link or a heading (a MathJax
config's ``[["\\(", "\\)"]]`` in a ``<script>`` was linted as a wikilink)."""

from __future__ import annotations

import re

_OPEN = re.compile(r" {0,3}<(script|style|pre|textarea)(?=[\s>/]|$)", re.I)
HINT = re.compile(r"^ {0,3}<(?:script|style|pre|textarea)(?=[\s>/]|$)", re.I | re.M)


def raw_lines(lines: list[str], code: list[bool]) -> list[bool]:
    """True for the lines of raw HTML blocks (their tag lines included); ``code``: lines already known to be code,
    where no block opens."""
    out = [False] * len(lines)
    closing = None
    for i, ln in enumerate(lines):
        rest = ln
        if closing is None:
            m = _OPEN.match(ln) if not code[i] else None
            if m is None:
                continue
            closing, rest = f"</{m.group(1).lower()}", ln[m.end():]
        out[i] = True
        if closing in rest.lower():
            closing = None
    return out
