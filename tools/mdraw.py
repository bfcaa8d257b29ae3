"""What Python-Markdown leaves as it is, where nothing is a link or a heading: raw HTML blocks (a ``<script>``,
``<style>``, ``<pre>`` or ``<textarea>`` opened at a line's start runs to its closing tag: a MathJax config's
``[["\\(", "\\)"]]`` in a ``<script>`` was linted as a wikilink) and indented code blocks; and where a block starts
inside a list item or an admonition."""

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


_LIST_ITEM = re.compile(r" {0,3}(?:[-*+]|\d{1,9}[.)]|!!!|\?\?\?\+?)(?:[ \t]|$)")  # admonitions: an indented body
_ANY_ITEM = re.compile(r"( *)(?:[-*+]|\d{1,9}[.)]|!!!|\?\?\?\+?)(?:[ \t]|$)")  # ... or a nested one's


def _indent(ln: str) -> int:
    return len(ln.expandtabs(4)) - len(ln.expandtabs(4).lstrip(" "))


_QUOTE = re.compile(r" {0,3}> ?")  # what Python-Markdown strips from a blockquote's line before reading the rest
QUOTED_INDENT = re.compile(r"^ {0,3}>(?: {0,3}>)* ?(?: {4}|\t)", re.M)  # a quoted line indented as code


def _unquoted(ln: str) -> tuple[int, str]:
    """(how many blockquotes ``ln`` is in, the line inside them)."""
    level = 0
    while m := _QUOTE.match(ln):
        ln, level = ln[m.end():], level + 1
    return level, ln


def indented_code(lines: list[str], fenced: list[bool]) -> list[bool]:
    """True for the lines of indented code blocks: four spaces or a tab after a blank line outside a list, and
    inside a list item four more than its content's (MkDocs lists indent their paragraphs by four: a link in an
    8-space block under a top-level item is code); inside a blockquote, the same of what follows its ``>``."""
    out, blank_before, in_list, in_code, item, quoted = [], True, False, False, 0, 0
    for ln, f in zip(lines, fenced):
        level, ln = _unquoted(ln) if ">" in ln else (0, ln)
        if level != quoted and not f:  # a blockquote's content is read as a document of its own
            in_list, in_code, item = False, False, 0
            blank_before = blank_before or level > quoted
            quoted = level
        if f or not ln.strip():
            out.append(False)
            blank_before, in_code = not f, in_code and not f
            continue
        depth = _indent(ln)
        code_at = (item // 4 * 4 + 8) if in_list else 4
        if depth >= code_at and (in_code or blank_before):
            in_code = True
            out.append(True)
        else:
            in_code = False
            if _LIST_ITEM.match(ln):
                in_list, item = True, 0
            elif in_list and (m := _ANY_ITEM.match(ln)):
                item = _indent(m.group(1))
            elif depth < 4 and blank_before:
                in_list = False
            elif in_list and blank_before:  # a paragraph of an outer item, after a nested one's
                item = max(0, depth // 4 * 4 - 4)
            out.append(False)
        blank_before = False
    return out


CONTAINED_START = frozenset(" \t>-*+0123456789")  # what a line in a list item or an admonition can start with
_CONTAINER = re.compile(r"[ \t]*(?:>[ \t]?)*[ \t]*((?:(?:[-*+]|\d{1,9}\.)[ \t]+)*)")  # indent, quotes, list markers


def contained_block(lines: list[str], i: int, indented: list[bool] | None) -> int | None:
    """Where the block on line ``i`` starts past the list markers (``- ## In list``) or the indent of an admonition's
    body (``!!! warning`` then ``    ## Known``): the site's toc gives a heading there an id. None where no block
    starts: indented code, or a line indented under an item's text (it goes on with that paragraph)."""
    ln = lines[i]
    prefix = _CONTAINER.match(ln)
    if indented is not None and indented[i]:
        return None
    if not prefix.group(1):
        above = lines[i - 1].lstrip() if i else ""
        if above and not above.startswith(("!!!", "???")):
            return None
    return prefix.end()
