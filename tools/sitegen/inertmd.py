"""Markdown from others made inert for a build that runs no sanitizer (`tools site stage`, then Zensical or a plain
MkDocs build).

The plugin's build passes every wiki page's HTML through an allow-list sanitizer (``sitegen.sanitize``). A staged
build has no such step, so the staged copy of each wiki page is rewritten instead, in one linear pass, outside fenced
code blocks (which markdown escapes itself; code spans and indented code are rewritten too, see ``inert``):

- raw HTML: ``<`` escaped unless it opens an HTML comment (the tools' region markers), a tag from a short list
  without attributes (``<br>``, ``<sub>``, ``</td>`` ...): an attribute-free tag cannot run script, or the loop
  report's plot slot (a div with a fixed class and a plain loop name);
- an inline target in angle brackets (``[x](<my notes.md>)``, the form for a path with spaces) percent-encoded
  instead (``my%20notes.md``): it is still a link, and no ``<`` is left to be read as a tag if it is not one;
- link and image targets, inline or reference definitions, whose scheme is not http, https or mailto (after HTML
  entities, whitespace and control characters are taken out, as a browser does) become ``#``;
- a line whose braces hold an event handler or a URL attribute (an attribute list, ``{: onclick=...}``) loses its
  braces.
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
# a fence opener as superfences reads one: the run, then an info string of its own characters (or braces) alone on
# the line; "~~~ <img ...>" is a paragraph to markdown, so it is no fence here either
_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})[ \t]*(?:[\w#.+-]*[ \t]*)?(?:\{[^{}`\n]*\}[ \t]*)?$")
_INLINE_TARGET = re.compile(r"\]\(\s*<?([^)\s>]*)")
_ANGLE_TARGET = re.compile(r"\]\(\s*<([^<>\n]*)>")
_REF_DEF = re.compile(r"^([ \t>]*(?:(?:[-*+]|\d+[.)])[ \t]+)?\[[^\]\n]+\]:\s*)<?(\S+)")  # in a quote or list too
_RISKY_ATTR = re.compile(r"(?:\bon[a-z]+|\bhref|\bsrc|\bstyle|\bformaction|\baction|\bsrcdoc|:href)\s*=", re.I)
_SCHEME = re.compile(r"([a-z][a-z0-9+.\-]*):")
_INVISIBLE = re.compile(r"[\x00-\x20\x7f]+")


def unsafe_target(target: str) -> bool:
    plain = _INVISIBLE.sub("", html.unescape(target)).lower()
    m = _SCHEME.match(plain)
    return bool(m) and m.group(1) not in SAFE_SCHEMES


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
    # attr_list reads a brace to the last "}" of the line (a quoted "}" does not end it): a line whose braces hold
    # a handler or a URL attribute anywhere keeps none of them
    if "{" in text and _RISKY_ATTR.search(text[text.index("{"):]):
        return text.replace("{", "&#123;")
    return text


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


def inert(markdown: str) -> str:
    """The staged copy of a page: raw HTML escaped everywhere but in fenced code blocks, which markdown escapes
    itself. Code spans and indented code are escaped too: where markdown pairs backticks, or reads an indented line
    as code, depends on its extensions (an escaped backtick that still opens a span, an admonition's indented body,
    a span across a line break), and a text thought code that markdown reads as HTML would run; escaping what is
    code only shows ``&lt;`` in the staged copy's code spans (the plugin's build sanitizes its HTML instead)."""
    lines = _targets_on_next_line(markdown.replace("\r\n", "\n").replace("\r", "\n").split("\n"))
    out: list[str] = []
    fence = ""
    comment_end = [-1]
    offset = 0
    for line in lines:
        base, offset = offset, offset + len(line) + 1
        stripped = line.lstrip(" \t")
        if fence:
            if stripped.startswith(fence) and not stripped.strip(fence[0]).strip(" \t"):
                fence = ""
            out.append(line)
            continue
        m = _FENCE.match(line)
        if m:
            fence = m.group(1)
            out.append(line)
            continue
        ref = _REF_DEF.match(line)
        if ref and unsafe_target(ref.group(2)):
            line = ref.group(1) + "#"
        out.append(_inert_text(line, comment_end, base, markdown))
    return "\n".join(out)


def _targets_on_next_line(lines: list[str]) -> list[str]:
    """A link's target or a reference definition's URL on the line after its ``](`` / ``]:`` is checked as if it
    were on that line (``[x](\\njavascript:...)`` linked it)."""
    for i, line in enumerate(lines[:-1]):
        if not line.rstrip().endswith(("](", "]:", "](<")):
            continue
        j = next((k for k in range(i + 1, len(lines)) if lines[k].strip()), None)
        if j is None:
            continue
        token = lines[j].split()[0]
        if unsafe_target(token.lstrip("<").split(")")[0]):
            inline = not line.rstrip().endswith("]:")  # a link's "(" is closed on that line: keep its ")"
            lines[j] = lines[j].replace(token, "#" + (")" if inline and ")" in token else ""), 1)
    return lines
