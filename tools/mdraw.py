"""What Python-Markdown leaves as it is, where nothing is a link or a heading: raw HTML blocks (a ``<script>``,
``<div>`` or ``<details>`` opened at a line's start runs to its closing tag: a MathJax config's ``[["\\(", "\\)"]]``
in a ``<script>`` was linted as a wikilink) and indented code blocks; and where a block starts inside a list item or
an admonition."""

from __future__ import annotations

import re

# Python-Markdown's block-level elements (``Markdown().block_level_elements``) less the void <hr>: opened at a line's
# start (up to three spaces, not in a list item, quote or admonition), each runs to its own closing tag, nesting
# counted, blank lines and all; an unclosed one to the page's end
_BLOCK = ("address|article|aside|blockquote|body|canvas|center|colgroup|dd|details|div|dl|dt|fieldset|figcaption|"
          "figure|footer|form|group|h[1-6]|header|hgroup|html|iframe|legend|li|main|map|math|menu|nav|noscript|"
          "object|ol|option|output|p|pre|progress|script|section|style|summary|table|tbody|td|textarea|tfoot|th|"
          "thead|tr|ul|video")
_OPEN = re.compile(rf" {{0,3}}<({_BLOCK})(?=[\s>/]|$)", re.I)
HINT = re.compile(rf"^ {{0,3}}<(?:{_BLOCK})(?=[\s>/]|$)", re.I | re.M)
_TEXT_ONLY = ("script", "style", "pre", "textarea")  # raw whatever their attributes; no tag opens inside them
_MARKDOWN_ATTR = re.compile(r"""\smarkdown(?:\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s"'>]*)))?(?=[\s/>]|$)""", re.I)
_TAGS: dict[str, re.Pattern] = {}  # tag name -> its opening and closing tags, with what they hold up to ">"


def _is_markdown(lines: list[str], i: int, at: int) -> bool:
    """Whether the tag opened at ``lines[i][at:]`` holds Markdown (md_in_html: a ``markdown`` attribute, not "0"),
    or closes itself (``<div/>``): either way its lines are read as Markdown. The tag may run over a few lines."""
    tag = lines[i][at:]
    if ">" not in tag:
        tag = "\n".join([tag, *lines[i + 1:i + 20]])
    tag = tag.split(">", 1)[0]
    if tag.endswith("/"):
        return True
    m = _MARKDOWN_ATTR.search(tag)
    return m is not None and "0" != next((g for g in m.groups() if g is not None), "")


def raw_lines(lines: list[str], code: list[bool]) -> list[bool]:
    """True for the lines of raw HTML blocks (their tag lines included), which Python-Markdown leaves as written;
    ``code``: lines already known to be code, where no block opens. A closing line with text after its tag is
    left to be read (``</div>[tail](t.md)``: the tail is Markdown)."""
    out = [False] * len(lines)
    name, depth, tags = None, 0, None
    for i, ln in enumerate(lines):
        at = 0
        if name is None:
            m = _OPEN.match(ln) if not code[i] else None
            if m is None:
                continue
            name, at = m.group(1).lower(), m.start()
            if name not in _TEXT_ONLY and _is_markdown(lines, i, m.end()):
                name = None
                continue
            tags, depth = _TAGS.get(name) or _TAGS.setdefault(
                name, re.compile(rf"<(/?){name}(?=[\s>/]|$)([^<>]*)(>?)", re.I)), 0
        out[i] = True
        for t in tags.finditer(ln, at):
            if t.group(1):
                depth -= 1
            elif name not in _TEXT_ONLY or depth == 0:
                depth += 0 if t.group(2).endswith("/") and t.group(3) else 1
            if depth <= 0:
                out[i] = not ln[t.end():].strip()
                name = None
                break
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
