"""Markdown from others made inert for a build that runs no sanitizer (`tools site stage`, then Zensical or a plain
MkDocs build).

The plugin's build passes every wiki page's HTML through an allow-list sanitizer (``sitegen.sanitize``). A staged
build has no such step, so the staged copy of each wiki page is rewritten instead, in one linear pass, outside code
blocks and code spans (which markdown escapes itself):

- raw HTML: ``<`` escaped unless it opens an HTML comment (the tools' region markers), a tag from a short list
  without attributes (``<br>``, ``<sub>``, ``</td>`` ...): an attribute-free tag cannot run script, or the loop
  report's plot slot (a div with a fixed class and a plain loop name);
- an inline target in angle brackets (``[x](<my notes.md>)``, the form for a path with spaces) percent-encoded
  instead (``my%20notes.md``): it is still a link, and no ``<`` is left to be read as a tag if it is not one;
- link and image targets, inline or reference definitions, whose scheme is not http, https or mailto (after HTML
  entities, whitespace and control characters are taken out, as a browser does) become ``#``;
- attribute lists (``{: onclick=...}``) naming an event handler or a URL attribute lose their brace.
"""

from __future__ import annotations

import html
import re
from urllib.parse import quote

SAFE_TAGS = ("br", "wbr", "sub", "sup", "b", "i", "em", "strong", "code", "kbd", "small", "s", "u", "mark", "p",
             "ul", "ol", "li", "table", "thead", "tbody", "tr", "td", "th", "details", "summary", "hr")
SAFE_SCHEMES = ("http", "https", "mailto")
# the loop report's plot slot (`loop/report.py`): a div whose only attributes are a fixed class and a plain name
_TAG = re.compile(r"</?(?:" + "|".join(SAFE_TAGS) + r")\s*/?>"
                  r'|<div class="arw-loop-plot" data-loop="[A-Za-z0-9._-]{1,128}">|</div>', re.I)
_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})")
_TICKS = re.compile(r"`+")
_INLINE_TARGET = re.compile(r"\]\(\s*<?([^)\s>]*)")
_ANGLE_TARGET = re.compile(r"\]\(\s*<([^<>\n]*)>")
_REF_DEF = re.compile(r"^( {0,3}\[[^\]\n]+\]:\s*)<?(\S+)")
_ATTR_LIST = re.compile(r"\{[^{}\n]*\}")
_RISKY_ATTR = re.compile(r"(?:\bon[a-z]+|\bhref|\bsrc|\bstyle|\bformaction|\baction|\bsrcdoc|:href)\s*=", re.I)
_SCHEME = re.compile(r"([a-z][a-z0-9+.\-]*):")
_INVISIBLE = re.compile(r"[\x00-\x20\x7f]+")


def unsafe_target(target: str) -> bool:
    plain = _INVISIBLE.sub("", html.unescape(target)).lower()
    m = _SCHEME.match(plain)
    return bool(m) and m.group(1) not in SAFE_SCHEMES


def _code_spans(line: str) -> tuple[list[tuple[int, int]], int | None]:
    """(start, end) of the inline code spans of one line (a run of N backticks closes at the next run of N), and
    where the first run no later run closes starts (None: every run is closed on this line)."""
    # a run after a backslash never opens here (markdown may read it as an escaped backtick): what is wrongly
    # taken for text gets escaped, which is safe; what is wrongly taken for code would not be
    runs = [(m.start(), m.end()) for m in _TICKS.finditer(line) if not (m.start() and line[m.start() - 1] == "\\")]
    by_len: dict[int, list[int]] = {}
    for i, (a, b) in enumerate(runs):
        by_len.setdefault(b - a, []).append(i)
    nxt = {n: 0 for n in by_len}
    spans, i, left_open = [], 0, None
    while i < len(runs):
        a, b = runs[i]
        n = b - a
        same = by_len[n]
        while nxt[n] < len(same) and same[nxt[n]] <= i:
            nxt[n] += 1
        if nxt[n] < len(same):
            j = same[nxt[n]]
            spans.append((a, runs[j][1]))
            i = j + 1
        else:
            left_open = a if left_open is None else left_open
            i += 1
    return spans, left_open


def _inert_text(text: str, comment_end: list[int], base: int, whole: str) -> str:
    """Escape raw HTML in a piece of a line outside code spans. ``comment_end`` caches the next ``-->``."""
    if "](" in text:
        text = _ANGLE_TARGET.sub(lambda m: "](" + quote(html.unescape(m.group(1)), safe="/#:?=&%@+,;~._!$'*-"), text)
    out, last, i = [], 0, text.find("<")
    while i != -1:
        if text.startswith("<!--", i):
            pos = base + i
            if comment_end[0] < pos:
                comment_end[0] = whole.find("-->", pos + 4)
                if comment_end[0] == -1:
                    comment_end[0] = len(whole) + 1  # none later either
            if comment_end[0] <= len(whole):
                i = text.find("<", i + 4)
                continue
        m = _TAG.match(text, i)
        if m:
            i = text.find("<", m.end())
            continue
        out.append(text[last:i] + "&lt;")
        last = i + 1
        i = text.find("<", i + 1)
    out.append(text[last:])
    text = "".join(out)
    text = _inert_targets(text)
    return _ATTR_LIST.sub(lambda m: "&#123;" + m.group(0)[1:] if _RISKY_ATTR.search(m.group(0)) else m.group(0), text)


def _inert_targets(text: str) -> str:
    """Inline link targets of an unsafe scheme as ``#``, with the rest of the destination (``javascript:alert(1)``'s
    parentheses, a title) up to the ``)`` that closes the link, so none of it is left behind as text."""
    out, last = [], 0
    for m in _INLINE_TARGET.finditer(text):
        if m.start() < last or not (m.group(1) and unsafe_target(m.group(1))):
            continue
        depth, i = 1, m.start(1)  # the link's own "(" is open
        while i < len(text) and depth:
            depth += {"(": 1, ")": -1}.get(text[i], 0)
            i += 1
        out.append(text[last:m.start(1)] + "#")
        # no closing parenthesis on this line: only the target goes
        last = i - 1 if not depth else m.end()
    out.append(text[last:])
    return "".join(out)


# A line opening a raw HTML block with an allowed tag: markdown reads no code span there (to the blank line), so
# nothing in it is spared escaping. A whole comment on its line (the tools' region markers) opens no block.
_HTML_BLOCK = re.compile(r" {0,3}<(?:!--|/?(?:p|ul|ol|li|table|thead|tbody|tr|td|th|details|summary|hr)\b)", re.I)
_WHOLE_COMMENT = re.compile(r" {0,3}<!--.*-->\s*$")


def inert(markdown: str) -> str:
    """The staged copy of a page: raw HTML escaped outside code blocks and code spans. Spans are paired line by
    line, which is how markdown pairs them while no earlier line of the paragraph left a backtick run open (a span
    closes at the next run of its length, left to right). Once a line leaves one open, markdown may pair it with a
    run on a later line (a span across a line break, which admonitions, lists and other blocks can also cut short):
    from there to the next blank line nothing is spared escaping. Escaping code is only cosmetic (``&lt;`` shown);
    sparing text that markdown reads as HTML would run it."""
    lines = markdown.split("\n")
    out: list[str] = []
    fence = ""
    comment_end = [-1]
    offset = 0
    prev_blank, in_list = True, False
    open_run = html_block = False  # a backtick run left open above; a raw HTML block: both until a blank line
    for line in lines:
        base, offset = offset, offset + len(line) + 1
        stripped = line.lstrip()
        if fence:
            if stripped.startswith(fence) and not stripped.strip(fence[0]).strip():
                fence = ""
            out.append(line)
            continue
        m = _FENCE.match(line)
        if m:
            fence = m.group(1)
            open_run = html_block = False
            out.append(line)
            continue
        if not stripped:
            prev_blank, open_run, html_block = True, False, False
            out.append(line)
            continue
        indent = len(line) - len(stripped)
        if indent >= 4 and prev_blank and not in_list:  # an indented code block
            out.append(line)
            continue
        if indent < 4:
            in_list = bool(re.match(r"(?:[-*+]|\d+[.)])\s", stripped)) or (in_list and not prev_blank)
        if prev_blank and _HTML_BLOCK.match(line) and not _WHOLE_COMMENT.match(line):
            html_block = True
        prev_blank = False
        ref = _REF_DEF.match(line)
        if ref and unsafe_target(ref.group(2)):
            line = ref.group(1) + "#"
        spans: list[tuple[int, int]] = []
        if not (open_run or html_block):
            spans, left_open = _code_spans(line)
            if left_open is not None:  # what follows the open run, on this line and below, is escaped whole
                spans = [sp for sp in spans if sp[1] <= left_open]
                open_run = True
        pieces, last = [], 0
        for a, b in spans:
            pieces += [_inert_text(line[last:a], comment_end, base + last, markdown), line[a:b]]
            last = b
        pieces.append(_inert_text(line[last:], comment_end, base + last, markdown))
        out.append("".join(pieces))
    return "\n".join(out)
