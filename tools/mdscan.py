"""What one markdown body holds: headings and the ids the site gives them, links with their line numbers (code
blocks and spans skipped), and how a link's target resolves from the page it is on. Pure: text in, values out."""

from __future__ import annotations

import html
import posixpath
import re
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from typing import NamedTuple
from urllib.parse import unquote

from . import mdraw
from .mdtext import unescape


class Link(NamedTuple):  # a tuple: 160,000 of them are made per lint of a large wiki
    target: str  # as written, e.g. "../concepts/remat.md#policies"
    line: int  # 1-based line in the file
    kind: str  # "md" ([t](x) or ![t](x)), "ref" ([t]: x), "wiki" ([[x]]), "auto" (<scheme:...>)
    text: str = ""


def first_block_heading(body: str) -> str | None:
    """The page's title as MkDocs takes it: its first block, when that is a level-1 heading (ATX or setext)."""
    lines = re.sub(r"\r\n?", "\n", body).lstrip("\ufeff").split("\n")  # MkDocs reads CRLF too
    while lines and not lines[0].strip():  # a line of spaces is a blank line too
        lines.pop(0)
    m = re.match(r"#[ \t]+(.+?)[ \t]*#*[ \t]*$", lines[0]) if lines else None  # Python-Markdown: `#` at column 0
    if m:
        return m.group(1)
    if len(lines) > 1 and lines[0].strip() and re.fullmatch(r" {0,3}=+[ \t]*", lines[1]):
        return lines[0].strip()
    return None


# ---------------------------------------------------------------- anchors

_ATX = re.compile(r"^ {0,3}(?:>[ \t]?)*(#{1,6})[ \t]+(\S.*)$")  # a quote's heading is one too


class _Heading(NamedTuple):
    """What ``HEADING.match`` gives: ``group(1)`` the marks, ``group(2)`` the text without a closing ``#`` run."""
    marks: str
    text: str

    def group(self, n: int) -> str:
        return self.marks if n == 1 else self.text


class _HeadingPattern:
    """An ATX heading line: its marks and its text, the optional closing ``#``s (after a space) and trailing
    spaces off. Linear: the text is cut in Python, not by a lazy ``(.+?)`` that a pattern tries at each of its
    lengths against a tail of spaces (cubic: 7.5 s for a heading line of 2,000 spaces)."""

    def match(self, line: str) -> _Heading | None:
        m = _ATX.match(line)
        if m is None:
            return None
        text = m.group(2).rstrip(" \t")
        bare = text.rstrip("#")
        if bare != text and (not bare or bare[-1] in " \t"):
            text = bare.rstrip(" \t")
        return _Heading(m.group(1), text) if text else None


HEADING = _HeadingPattern()
_SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t\r]*$")  # a CRLF file's lines keep their \r
ATTR_ID = re.compile(r"\{[^}]*#([\w.:-]+)[^}]*\}\s*$")
_HTML_ID = re.compile(r"""<[a-zA-Z][^<>]*\s(?:id|name)\s*=\s*["']([^"'<>]+)["']""")  # stops at the next tag


_NOT_SLUG = re.compile(r"[^\w\s-]")
_SLUG_GAPS = re.compile(r"[-\s]+")


def heading_slug(text: str) -> str:
    """The id Python-Markdown's toc extension gives a heading (its default ``slugify``), read from the text the
    heading renders to: links and code as their text, inline HTML out, entities read, emphasis marks off."""
    parts, pos = [], 0
    for m in _INLINE_MD.finditer(text):  # code as written (`__init__`, `<div>`, `a&amp;b`); the rest as rendered
        parts += [_rendered(text[pos:m.start()]), m.group(2) if m.group(2) is not None else _rendered(m.group(1))]
        pos = m.end()
    text = "".join(parts + [_rendered(text[pos:])])
    if not text.isascii():
        text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    return _SLUG_GAPS.sub("-", _NOT_SLUG.sub("", text).strip().lower())


_INLINE_MD = re.compile(r"!?\[([^\[\]\n]*)\]\([^()\n]*\)|`([^`\n]*)`")  # linear: a label holds no "["
_TAG = re.compile(r"</?[A-Za-z][^<>\n]{0,500}>")
_EMPHASIS = re.compile(r"(?<![\w*])[*_]{1,3}(?=[^\s*_])|(?<=[^\s*_])[*_]{1,3}(?![\w*])")  # not snake_case's
_COUNTED = re.compile(r"^(.*)_([0-9]+)$")


def _rendered(text: str) -> str:
    """Heading text outside code as the page shows it: inline HTML out, entities read, emphasis marks off."""
    if "<" in text or "&" in text:
        text = html.unescape(_TAG.sub("", text))
    if "_" in text or "*" in text:
        text = _EMPHASIS.sub("", text)
    return text


def unique_id(ident: str, ids: set[str], last: dict[str, str] | None = None) -> str:
    """toc's ``unique``: ``dup``, ``dup_1``, and a third ``Dup_1`` heading ``dup_2`` (its own count goes up).
    ``last`` (start -> the id it last came to) resumes a count where it stopped: ids only grow, so every id
    before it is still taken, and 10,000 headings named alike cost one step each, not 10,000."""
    start = ident
    ident = (last or {}).get(start, ident)
    while ident in ids or not ident:
        m = _COUNTED.match(ident)
        ident = f"{m.group(1)}_{int(m.group(2)) + 1}" if m else f"{ident}_1"
    if last is not None:
        last[start] = ident
    return ident


@dataclass(frozen=True)
class Heading:
    index: int      # body line index
    text: str       # as written, an explicit {#id} included
    id: str         # the id the page gives it: its {#id}, else its slug (deduplicated like toc: x, x_1)
    explicit: bool  # the id is written ({#id})
    level: int = 1  # 1 for #, 6 for ######


def headings(body: str) -> tuple[list[Heading], set[str]]:
    """The page's headings outside code blocks, and every id a link can target in it (heading ids, html ids)."""
    out: list[Heading] = []
    ids: set[str] = set()
    lines = body.split("\n")
    mask = code_mask(lines) if ("```" in body or "~~~" in body) else [False] * len(lines)
    raw = [False] * len(lines)  # raw HTML (a <div>, a <pre>): no heading, but its tags' ids are the page's
    if "<" in body and mdraw.HINT.search(body):  # a `# line` in a <pre> is no heading
        raw = mdraw.raw_lines(lines, _uncommented(body, mask))
    if "<!--" in body:  # a heading in an HTML comment is no heading; a `<!--` in code opens no comment
        view = "\n".join("" if f or r else _blank_code_spans(ln) for ln, f, r in zip(lines, mask, raw))
        mask = [a or b for a, b in zip(mask, _comment_lines(view))]
    blocked = [a or b for a, b in zip(mask, raw)]
    last: dict[str, str] = {}
    indented: list[bool] | None = None
    for i, ln in enumerate(lines):
        if blocked[i]:
            if raw[i] and not mask[i] and "<" in ln:
                ids.update(_HTML_ID.findall(ln))
            continue
        m = HEADING.match(ln) if ln[:1] in ("#", " ", ">") else None
        if m is None and "#" in ln and ln[:1] in mdraw.CONTAINED_START:  # in a list item or an admonition
            if indented is None and ln[:1] in " \t>":  # read only when a page has an indented `#` line
                indented = mdraw.indented_code(lines, blocked)
            at = mdraw.contained_block(lines, i, indented)
            m = HEADING.match(ln[at:]) if at is not None and ln.startswith("#", at) else None
        level, text = (len(m.group(1)), m.group(2)) if m else (0, "")
        if not m and i + 1 < len(lines) and ln.strip() and not blocked[i + 1] and (i == 0 or not lines[i - 1].strip()) \
                and ln[:1] not in ("|", ">", "-", "*", "+", "<", "!", "#", " ", "\t") and _SETEXT.match(lines[i + 1]):
            level, text = (1 if lines[i + 1].strip()[0] == "=" else 2), ln.strip()  # a setext heading: underlined
        if level:
            explicit = ATTR_ID.search(text)
            ident = explicit.group(1) if explicit else unique_id(heading_slug(text), ids, last)
            ids.add(ident)
            out.append(Heading(i, text, ident, bool(explicit), level))
        if "<" in ln:
            ids.update(_HTML_ID.findall(ln))
    return out, ids


def _comment_lines(body: str) -> list[bool]:
    """True for the lines an HTML comment covers from their start (one pass: ``find``, no pattern backtracking)."""
    out = [False] * (body.count("\n") + 1)
    line, at = 0, 0  # the line number of offset ``at``, counted forward only
    pos = body.find("<!--")
    while pos != -1:
        end = body.find("-->", pos + 4)
        end = len(body) if end == -1 else end + 3
        line, at = line + body.count("\n", at, pos), pos
        first = line if pos == 0 or body[pos - 1] == "\n" else line + 1
        line, at = line + body.count("\n", at, end), end
        for k in range(first, line + 1):
            out[k] = True
        pos = body.find("<!--", end)
    return out


def _uncommented(body: str, code: list[bool]) -> list[bool]:
    """``code`` and the lines an HTML comment starts before: a ``<div>`` commented out opens no raw block."""
    return code if "<!--" not in body else [a or b for a, b in zip(code, _comment_lines(body))]


def anchors(body: str) -> set[str]:
    """Ids a link can target in this page: heading slugs (deduplicated like toc: x, x_1), {#ids}, html ids."""
    return headings(body)[1]


# ---------------------------------------------------------------- links

_FENCE = re.compile(r"^[ \t]*(`{3,}|~{3,})")  # any indent: a fence in a list item or an admonition is one too
_CODE_SPAN = re.compile(r"(`+)(?!`)(.+?)(?<!`)\1(?!`)")
_MD_LINK = re.compile(
    r"\[((?:[^\[\]\\]|\\.|\[[^\[\]]*\])*)\]"  # [text], one level of nested brackets
    # (target or <target>, spaces too as Python-Markdown reads it, a "title" within: _href cuts it). Possessive: a
    # `[x](` and 1,000 spaces with no `)` took 2.6 s of backtracking (cubic) when three parts could take the spaces
    r"\(\s*+(<[^<>\n]*>|[^()\n]*+(?:\([^()\n]*+\)[^()\n]*+)*+)\s*\)"
)
_REF_DEF = re.compile(r"^ {0,3}\[([^\]^][^\]]*)\]:\s*(<[^<>\n]*>|\S+)")  # not [^1]: footnotes
_WIKI = re.compile(r"\[\[([^\[\]\n]+?)\]\]")
_AUTO = re.compile(r"<([a-zA-Z][a-zA-Z0-9+.-]{1,31}:[^\s<>]*)>")


def _href(written: str) -> str:
    """The href Python-Markdown reads from what ``_MD_LINK`` took as the target: ``<...>`` unwrapped, a closing
    ``"title"``/``'title'`` cut at that quote's first use (``[x](my page.md "t")`` links ``my page.md``)."""
    if written.startswith("<"):
        return written[1:-1]
    s = written.rstrip()
    if s[-1:] in ("'", '"') and (first := s.find(s[-1])) < len(s) - 1:
        return s[:first].strip()
    return s


def _blank_code_spans(line: str) -> str:
    if "`" not in line:
        return line
    return _CODE_SPAN.sub(lambda m: " " * len(m.group(0)), line)


_QUOTED = re.compile(r"^[ \t]{0,3}(?:>[ \t]?)+")  # a blockquote's markers: a fence may sit inside a quote


def code_mask(lines: list[str]) -> list[bool]:
    """True for lines inside fenced code blocks (fence lines included), in a blockquote too."""
    out = [False] * len(lines)
    fence: str | None = None
    quoted = False  # the open fence was opened inside a blockquote: its lines carry the quote's markers
    for i, ln in enumerate(lines):
        if (fence is None or quoted) and ln[:4].lstrip().startswith(">"):
            ln, was = _QUOTED.sub("", ln), True
        else:
            was = False
        if fence is None:
            quoted = was
            if ln.lstrip()[:3] in ("```", "~~~"):
                m = _FENCE.match(ln)
                if m:
                    fence = m.group(1)
                    out[i] = True
                    # ``` with a backtick in the info string is not a fence opener
                    if fence[0] == "`" and "`" in ln[m.end():]:
                        fence = None
                        out[i] = False
        else:
            out[i] = True
            s = ln.strip()
            if s.startswith(fence[0] * len(fence)) and not s.strip(fence[0]):
                fence = None
    return out




def _spaces(s: str) -> str:
    if "\n" not in s:
        return " " * len(s)
    return "\n".join(" " * len(part) for part in s.split("\n"))


def prose_view(text: str) -> str:
    """``text`` with what is not prose blanked, same length and lines: fenced code, inline code spans, HTML
    comments (``<!-- [old](gone.md) -->``), and indented code blocks (four spaces or a tab after a blank line,
    outside a list: MkDocs lists indent their paragraphs by four). Links and headings are read from this view."""
    raw = "<" in text and mdraw.HINT.search(text) is not None
    if "```" not in text and "~~~" not in text and "`" not in text and "<!--" not in text \
            and "\n    " not in text and "\n\t" not in text and not raw \
            and not (">" in text and mdraw.QUOTED_INDENT.search(text)):
        return text
    lines = text.split("\n")
    mask = code_mask(lines) if ("```" in text or "~~~" in text) else [False] * len(lines)
    if raw:  # raw HTML blocks Markdown leaves as they are (mdraw)
        mask = [a or b for a, b in zip(mask, mdraw.raw_lines(lines, _uncommented(text, mask)))]
    if "\n    " in text or "\n\t" in text or ">" in text and mdraw.QUOTED_INDENT.search(text):
        # read on the lines as written: blanking makes indents of its own
        mask = [a or b for a, b in zip(mask, mdraw.indented_code(lines, mask))]
    out = "\n".join(" " * len(ln) if m else ln for ln, m in zip(lines, mask))
    return _blank_spans(out) if "`" in out or "<!--" in out else out


_SPAN_START = re.compile(r"`+|<!--")
_CLOSE: dict[str, re.Pattern] = {}  # a run of n backticks -> the pattern of its closing run


def _blank_spans(text: str) -> str:
    """Code spans and HTML comments blanked in one pass, whichever starts first (a backtick inside a comment does
    not open a span past its ``-->``; ``<!--`` inside a span opens no comment). A span closes on the same line by a
    run of as many backticks; a comment at its ``-->``, or ``<!-->`` / ``<!--->`` at once; an unclosed one leaves
    the rest as it is. Linear: each character is looked at a bounded number of times."""
    parts, pos, look = [], 0, 0
    while (m := _SPAN_START.search(text, look)):
        start = m.start()
        if m.group(0) == "<!--":
            end = start + 5 if text.startswith("<!-->", start) else \
                start + 6 if text.startswith("<!--->", start) else text.find("-->", start + 4) + 3
            if end == 2:  # unclosed
                break
        else:
            ticks, line_end = m.group(0), text.find("\n", m.end())
            pat = _CLOSE.get(ticks) or _CLOSE.setdefault(ticks, re.compile(rf"(?<!`){ticks}(?!`)"))
            close = pat.search(text, m.end(), line_end if line_end != -1 else len(text))
            if close is None:  # literal backticks: read on after them
                look = m.end()
                continue
            end = close.end()
        parts += [text[pos:start], _spaces(text[start:end])]
        pos = look = end
    return "".join(parts) + text[pos:]


def extract_links(text: str, first_line: int = 1) -> list[Link]:
    """Links in markdown ``text`` whose first line is file line ``first_line``.

    Skips what is not prose (``prose_view``): code, HTML comments. Angle brackets around targets are removed.
    """
    lines = prose_view(text).split("\n")
    out: list[Link] = []
    for i, ln in enumerate(lines):
        if "[" not in ln and "<" not in ln and "](" not in ln:
            continue
        no = first_line + i
        if "](" in ln and i and lines[i - 1].strip() and "[" in lines[i - 1]:
            out += _across_lines(lines[i - 1], ln, no)
        if "](" in ln:
            for m in _MD_LINK.finditer(ln):
                if _escaped(ln, m.start()):  # `\[text](x)` is text to markdown, not a link
                    continue
                tgt = _href(m.group(2))
                if "\\" in tgt:  # `snake\_case.md` links snake_case.md, as markdown reads the escape
                    tgt = unescape(tgt)
                out.append(Link(tgt, no, "md", m.group(1)))
                for inner in _MD_LINK.finditer(m.group(1)) if "](" in m.group(1) else ():  # [![badge](b.png)](x)
                    t = _href(inner.group(2))
                    out.append(Link(unescape(t) if "\\" in t else t, no, "md", inner.group(1)))
        if "[[" in ln:
            for m in _WIKI.finditer(ln):
                out.append(Link(m.group(1).strip(), no, "wiki", m.group(1)))
        if "]:" in ln:
            m = _REF_DEF.match(ln)
            if m:
                tgt = m.group(2)
                if tgt.startswith("<"):
                    tgt = tgt[1:-1]
                out.append(Link(tgt, no, "ref", m.group(1)))
        if "<" in ln and ":" in ln:
            for m in _AUTO.finditer(ln):
                out.append(Link(m.group(1), no, "auto", ""))
    return out


def _across_lines(above: str, line: str, no: int) -> list[Link]:
    """Links whose text runs over the line break of a paragraph (``[the missing\npage](missing.md)``), on the line of
    their target; a link wholly on either line is the line scan's."""
    both, cut = above + "\n" + line, len(above)
    out = []
    for m in _MD_LINK.finditer(both):
        if m.start() < cut < m.start(2) and not _escaped(both, m.start()):
            tgt = _href(m.group(2))
            out.append(Link(unescape(tgt) if "\\" in tgt else tgt, no, "md", " ".join(m.group(1).split())))
    return out


def _escaped(line: str, at: int) -> bool:
    """Whether the character at ``at`` follows an odd number of backslashes (markdown reads it as text)."""
    n = 0
    while at - n - 1 >= 0 and line[at - n - 1] == "\\":
        n += 1
    return n % 2 == 1


def md_link_spans(text: str) -> Iterator[tuple[int, int, str, str]]:
    """(start, end, text, target) of each inline ``[text](target)`` outside code, to rewrite links in place.

    Offsets are into ``text``; an image's span starts at its ``[`` (``text[start - 1] == "!"``)."""
    view = prose_view(text).split("\n")
    pos = 0
    for ln, seen in zip(text.split("\n"), view):
        start, pos = pos, pos + len(ln) + 1
        if "](" not in seen:
            continue
        for m in _MD_LINK.finditer(seen):  # same lengths: offsets hold
            tgt = _href(m.group(2))
            yield start + m.start(), start + m.end(), ln[m.start(1):m.end(1)], tgt


# ---------------------------------------------------------------- link targets

_SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def is_external(target: str) -> bool:
    """A URL with a scheme (https:, mailto:, file:) or a protocol-relative //host link."""
    if target.startswith("//"):
        return True
    return ":" in target and bool(_SCHEME.match(target))


def split_target(target: str) -> tuple[str, str]:
    """("path", "#anchor?query") with the path URL-decoded."""
    h, q = target.find("#"), target.find("?")
    cut = len(target) if h == q == -1 else h if q == -1 or -1 < h < q else q
    return unquote(target[:cut]), target[cut:]


def resolve(page_rel: str, path: str) -> str:
    """Wiki-relative path of link ``path`` from page ``page_rel`` ('/' = wiki root; '../' kept in front)."""
    if path.startswith("/"):
        return posixpath.normpath(path.lstrip("/"))
    base = page_rel.rpartition("/")[0]
    return posixpath.normpath(f"{base}/{path}" if base else path)
