"""Text of a source document with positions: PDF (pypdfium2 text per page, pypdf metadata and outline), HTML
(readability-lxml main content, converted to markdown with markdownify), markdown and plain text.

Pure readers: a path in, a :class:`Document` out, or :class:`Unreadable` with the reason (encrypted, no text
layer, broken). Nothing is executed; bytes are read through tools.safeio (bounded, no symlinks out).
"""

from __future__ import annotations

import html
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from .. import safeio

MAX_BYTES = 200 * 1024 * 1024
KINDS = {".pdf": "pdf", ".html": "html", ".htm": "html", ".md": "markdown", ".markdown": "markdown",
         ".txt": "text", ".rst": "text"}


class Unreadable(ValueError):
    """The document holds no usable text; the message is the reason."""


@dataclass
class Section:
    title: str
    where: str          # "p. 3" (PDF) or "§ Heading" (HTML, markdown)
    text: str


@dataclass
class Document:
    kind: str
    title: str
    sections: list[Section]
    authors: list[str] = field(default_factory=list)
    year: int | None = None
    url: str | None = None
    outline: list[tuple[str, str]] = field(default_factory=list)  # (heading, where)
    pages: int | None = None


def kind_of(path: Path) -> str | None:
    return KINDS.get(path.suffix.lower())


def extract(path: Path, within: Path | None = None, data: bytes | None = None) -> Document:
    """``data``: the file's bytes when the caller has read them already (``path`` still names it)."""
    kind = kind_of(path)
    if kind is None:
        raise Unreadable(f"not a source type ({', '.join(sorted(KINDS))})")
    if data is None:
        data = safeio.read_bytes(path, MAX_BYTES, within=within)
    if kind == "pdf":
        return _pdf(data, path)
    text = _decode(data)
    if kind == "html":
        return _html(text, path)
    return _markdown(text, path, kind)


def _decode(data: bytes) -> str:
    """The text of a text file (UTF-8, UTF-16 with its mark, else Windows-1252, else Latin-1), terminal escapes
    and control characters out (they must not reach a page); a file that is mostly not text (a binary named
    ``.md``) is Unreadable. A coloured log's escapes and a stray NUL are not what makes a file binary."""
    encs = ("utf-8", "utf-16") if data[:2] in (b"\xff\xfe", b"\xfe\xff") else ("utf-8", "mostly-utf-8", "cp1252",
                                                                                "latin-1")
    for enc in encs:
        try:
            text = (_mostly_utf8(data) if enc == "mostly-utf-8" else data.decode(enc)).lstrip("\ufeff")
        except UnicodeDecodeError:
            continue
        text = _ANSI.sub("", text)
        head = text[:65536]
        odd = len(_NOT_TEXT.findall(head))
        if odd > max(8, len(head) // 100):
            raise Unreadable(f"binary, not text ({odd} control characters in its first 64 KiB)")
        return _numbers(_NOT_TEXT.sub(" ", text))
    raise Unreadable("not valid text")


def _mostly_utf8(data: bytes) -> str:
    """UTF-8 with a stray byte or two: the file's many well-formed multi-byte characters (`×`, `µ`) say UTF-8, and
    the stray bytes become U+FFFD; read as Windows-1252 every one of those characters would be mojibake (`Ã—`).
    A Latin-1 file, whose accented letters are each malformed UTF-8, is not this."""
    text = data.decode("utf-8", errors="replace")
    bad = text.count("\ufffd")
    good = sum(1 for ch in text if ord(ch) > 127) - bad
    if good < 2 * bad:
        raise UnicodeDecodeError("utf-8", data, 0, 1, f"{bad} malformed sequences against {good} characters")
    return text


_NOT_TEXT = re.compile("[\x00-\x08\x0b\x0e-\x1f\x7f-\x9f]")  # tab, newline, form feed and CR stay
_ANSI = re.compile(r"\x1b(?:\[[0-9;?]*[ -/]*[@-~]|\][^\x07\x1b]{0,4096}(?:\x07|\x1b\\)?)")  # colours, titles
_GROUPED = re.compile(r"(?<=\d)[\u2009\u202f\u00a0](?=\d{3}(?!\d))")


def _numbers(text: str) -> str:
    """Numbers as the claim patterns read them: the minus sign (U+2212, what typeset documents print) as ``-``, and
    thin or no-break spaces between digit groups dropped (``1 250 000`` is one number)."""
    return _GROUPED.sub("", text.replace("\u2212", "-"))


def _year(text: str | None) -> int | None:
    m = re.search(r"(19[89]\d|20[0-4]\d)", text or "")
    return int(m.group(1)) if m else None


def _pdf(data: bytes, path: Path) -> Document:
    import io

    import logging

    import pypdf
    import pypdfium2 as pdfium

    logging.getLogger("pypdf").setLevel(logging.ERROR)  # damaged-file repairs are not the user's business

    try:
        reader = pypdf.PdfReader(io.BytesIO(data))
        locked = reader.is_encrypted
        if locked:  # an empty user password (permissions only) opens in any viewer: so here too
            try:
                locked = not reader.decrypt("")
            except Exception:  # noqa: BLE001 - an unsupported cipher: pdfium decides below
                pass
        info = {} if locked else reader.metadata or {}
    except pypdf.errors.PdfReadError as e:
        raise Unreadable(f"broken PDF ({e})") from None
    except Exception as e:  # noqa: BLE001 - pypdf raises many kinds on damaged files
        raise Unreadable(f"broken PDF ({type(e).__name__}: {e})") from None
    try:
        doc = pdfium.PdfDocument(data)
    except pdfium.PdfiumError as e:
        if "password" in str(e).lower():
            raise Unreadable("encrypted PDF (it needs a password to open)") from None
        raise Unreadable(f"broken PDF ({e})") from None
    sections = []
    try:
        for i in range(len(doc)):
            try:
                page = doc[i]
                text = page.get_textpage().get_text_range()
            except (pdfium.PdfiumError, RecursionError) as e:  # a cyclic or very deep page tree, a damaged page
                raise Unreadable(f"broken PDF page tree (page {i + 1} of {len(doc)} does not load: {e})") from None
            text = _SOFT_HYPHEN.sub("", text.replace("\r\n", "\n").replace("\r", "\n"))
            text = _CONTROL_IN_TEXT.sub(" ", text)  # glyphs without a character (bullets drawn as \x17)
            sections.append(Section(f"Page {i + 1}", f"p. {i + 1}", text))
    finally:
        doc.close()
    if not any(s.text.strip() for s in sections):
        raise Unreadable(f"no text layer in {len(sections)} pages (a scanned PDF: OCR it first)")
    outline = []
    try:
        def walk(items, depth=0):
            for it in items:
                if isinstance(it, list):
                    walk(it, depth + 1)
                else:
                    n = reader.get_destination_page_number(it)
                    outline.append(("  " * depth + (_clean(str(it.title or "")) or "(untitled entry)"),
                                    f"p. {n + 1}"))
        if not locked:
            walk(reader.outline)
    except Exception:  # noqa: BLE001 - an outline that does not resolve is only left out
        outline = outline[:]
    title = _title(str(info.get("/Title") or "")) or _first_line(sections[0].text) or path.stem
    authors = [a for a in (_clean(a) for a in re.split(r",| and |;", str(info.get("/Author") or ""))) if a]
    return Document("pdf", title, sections, authors, _year(str(info.get("/CreationDate") or "")), None, outline,
                    len(sections))


# pdfium marks a word hyphenated at a line end with U+FFFE (or U+0002): the word is joined again.
_SOFT_HYPHEN = re.compile("[\ufffe\x02]\n?")
_CONTROL_IN_TEXT = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]+")
# What word processors put in /Title instead of one: "Microsoft Word - paper.docx", "Binder1.pdf", "untitled".
_APP_PREFIX = re.compile(r"^Microsoft (?:Word|PowerPoint|Excel) - ", re.I)
_FILE_NAME = re.compile(r"\.(?:pdf|docx?|pptx?|xlsx?|tex|dvi|odt)$", re.I)


def _clean(text: str) -> str:
    return " ".join(_CONTROL.sub(" ", text).split())


def _title(meta_title: str) -> str:
    """The metadata title, unless it is a file name or a placeholder (then the first line of text is used)."""
    t = _clean(meta_title)
    if _APP_PREFIX.match(t):  # the document's own name is what follows
        return _FILE_NAME.sub("", _APP_PREFIX.sub("", t)).strip()
    return "" if _FILE_NAME.search(t) or t.lower() in {"untitled", "title", "document", "slide 1"} else t


def _first_line(text: str) -> str:
    return next((_clean(ln) for ln in text.splitlines() if len(ln.strip()) > 3), "")[:200]


_DATA_URI = re.compile(r"""(["'(])data:[^"')]{256,}""")


def _html(text: str, path: Path) -> Document:
    from markdownify import markdownify
    from readability import Document as Readable

    # an inline data: URI (a "save as single file" page's images, tens of MB) is no text, and libxml2 cuts a text
    # node at 10 MB: everything after one went missing, silently
    text = _DATA_URI.sub(r"\1data:,", text)
    try:
        r = Readable(_plain_headings(text))
        body = r.summary(html_partial=True)
        title = _short_title(r)
    except Exception as e:  # noqa: BLE001 - readability raises on pages it cannot parse
        raise Unreadable(f"HTML without readable content ({type(e).__name__})") from None
    md = markdownify(body, heading_style="ATX", code_language="", strip=["script", "style"])
    url = None
    m = re.search(r"""<link[^>]+rel=["']canonical["'][^>]*href=["']([^"']+)""", text, re.I) or \
        re.search(r"""<meta[^>]+property=["']og:url["'][^>]*content=["']([^"']+)""", text, re.I)
    if m and m.group(1).startswith(("http://", "https://")):
        url = html.unescape(m.group(1))  # the attribute's &amp; is a &
    doc = _markdown(md, path, "html")
    doc.title, doc.url = title or doc.title, url
    return doc


_ANCHOR_TEXT = re.compile(r"^[\s\u200b\u200c\u200d\ufeff]*(?:[#¶§🔗]|\W)?[\s\u200b\u200c\u200d\ufeff]*$")


def _plain_headings(text: str) -> str:
    """The page with its headings' links unwrapped and their anchor-only links ("#", "¶", empty) out: readability
    dropped a heading that is all link (`<h2><a href="#mem">Memory</a></h2>`) as navigation, so its claims were cited
    under the heading before, and kept a Sphinx heading's "#" as `[#](#id)` in every citation."""
    if not re.search(r"<h[1-6][\s>]", text, re.I):
        return text
    import lxml.html

    try:  # an XHTML page's encoding declaration: lxml refuses it in text already decoded
        root = lxml.html.document_fromstring(re.sub(r"^\s*<\?xml[^>]*\?>", "", text, count=1))
    except (ValueError, lxml.etree.ParserError):
        return text  # readability says what it cannot read
    for link in root.xpath("//h1//a|//h2//a|//h3//a|//h4//a|//h5//a|//h6//a"):
        words = link.text_content()
        if not words.strip("\u200b\u200c\u200d\ufeff \n\t") or \
                (link.get("href", "").startswith("#") and _ANCHOR_TEXT.match(words)):
            link.drop_tree()  # its tail stays
        else:
            link.drop_tag()
    return lxml.html.tostring(root, encoding="unicode")


class _InOrder(dict):
    """A set that remembers the order things were added in."""
    def add(self, item) -> None:
        self.setdefault(item, None)


def _short_title(r) -> str:
    """readability's short title (the longest heading the <title> holds, else a part of the <title>), its ties broken
    by where the <title> names them: readability kept the candidates in a set, so a title changed with the hash seed."""
    from readability import htmls

    doc = r._html(True)
    found = doc.find(".//title")
    orig = htmls.norm_title(found.text) if found is not None and found.text else ""
    if not orig:
        return ""
    candidates = _InOrder()
    elements = [e for tag in (".//h1", ".//h2", ".//h3") for e in doc.iterfind(tag)]
    for e in elements + [e for css in htmls.TITLE_CSS_HEURISTICS for e in doc.cssselect(css)]:
        for text in (e.text, e.text_content()):
            if text:
                htmls.add_match(candidates, text, orig)
    if not candidates:
        return (htmls.shorten_title(doc) or "").strip()  # no heading in it: readability's own rules, none by chance
    # of the longest, the one the <title> names first ("What is rustdoc? - The rustdoc book": the page, then the site)
    title = max(candidates, key=lambda c: (len(c), -orig.find(c)))
    cjk = re.search("[\u4e00-\u9fff]", title)
    return (title if (4 <= len(title) < 100 if cjk else 15 < len(title) < 150) else orig).strip()


_HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")
_HTML_HEADING = re.compile(r"^\s*<h([1-6])\b[^>]*>(.*?)</h\1>\s*$", re.I)  # a README's <h1 align="center">
_COMMENT = re.compile(r"<!--(?:(?!<!--).)*?-->", re.S)  # stops at the next opening: linear on any page
PRE = "§ Introduction"  # where text before a markdown file's first heading is cited


def _heading(line: str) -> tuple[int, str, int] | None:
    """(level, text, 0): an ATX heading (``## Title``) or an HTML one, on its own line."""
    m = _HEADING.match(line)
    if m:
        return len(m.group(1)), m.group(2).strip(), 0
    m = _HTML_HEADING.match(line)
    text = re.sub(r"<[^>]*>", "", m.group(2)).strip() if m else ""
    return (int(m.group(1)), text, 0) if text else None


_ADORNMENT = re.compile(r"^([!-/:-@\[-`{-~])\1{2,}\s*$")  # three or more of one punctuation character
_LIST_ITEM = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s")


class _Underlines:
    """Titles marked by the line under them: markdown's setext (``Title`` over ``=====`` or ``-----``) and
    reStructuredText's (any punctuation, with or without the same line over it; levels in the order the styles
    first appear, as docutils numbers them). A title is one line of text right under a blank line (or the file's
    start) and not indented, so a paragraph's last line over a thematic break, a list item, a table row and the
    closing ``---`` of a front matter are not titles."""

    def __init__(self, lines: list[str], rst: bool):
        self.lines, self.rst = lines, rst
        self.styles: dict[tuple[str, bool], int] = {}
        self.front_end = self._front_matter_end()

    def _front_matter_end(self) -> int:
        if not self.lines or self.lines[0].strip() not in ("---", "+++") or self.rst:
            return -1
        return next((i for i, ln in enumerate(self.lines[1:], 1) if ln.strip() == self.lines[0].strip()), -1)

    def heading(self, i: int, buffered: bool) -> tuple[int, str, int] | None:
        m = _ADORNMENT.match(self.lines[i])
        if not m or i == 0 or not buffered or i <= self.front_end:
            return None
        char, title = m.group(1), self.lines[i - 1]
        if not self.rst and char not in "=-":
            return None
        if not title.strip() or title[:1].isspace() or title.startswith("|") or _ADORNMENT.match(title) \
                or _LIST_ITEM.match(title):
            return None
        over = i >= 2 and self.lines[i - 2].strip() == self.lines[i].strip()
        if not over and i >= 2 and self.lines[i - 2].strip():
            return None  # the last line of a paragraph
        level = self.styles.setdefault((char, over), len(self.styles) + 1) if self.rst else "=-".index(char) + 1
        return level, title.strip(), 2 if over else 1


def _where_names(paths: list[tuple[str, ...]]) -> dict[tuple[str, ...], str]:
    """Each heading's path -> where a claim under it is: its own title where no other heading has it, else the
    fewest headings above it that tell it apart (MaxText's tiering page has a "Gold" under each chip)."""
    tails = Counter(p[-n:] for p in paths for n in range(1, len(p) + 1))  # one pass: linear in the headings
    out = {}
    for p in paths:
        for n in range(1, len(p) + 1):
            tail = p[-n:]
            if n == len(p) or tails[tail] == 1:
                out[p] = "§ " + " › ".join(tail)
                break
    return out


def _markdown(text: str, path: Path, kind: str) -> Document:
    sections: list[Section] = []
    outline: list[tuple[str, str]] = []
    title, current, buf, fence = "", "Introduction", [], False
    where = PRE  # text before the first heading
    # a comment is no text (a licence header in <!-- -->): blank lines in its place keep the line numbers
    text = _COMMENT.sub(lambda c: "\n" * c.group(0).count("\n"), text) if "<!--" in text else text
    lines = text.splitlines()
    rst = path.suffix.lower() == ".rst"
    underlined = _Underlines(lines, rst)
    stack: list[tuple[int, str]] = []  # the headings above this line, outermost first
    here: tuple[str, ...] = ()
    paths: dict[str, tuple[str, ...]] = {}  # a heading's `where` as first made -> its path (one made per heading)
    for i, line in enumerate(lines):
        if not rst and line.lstrip().startswith(("```", "~~~")):  # "~~~" under a title is no fence in rst
            fence = not fence
        buffered = bool(buf) and buf[-1] is lines[i - 1]
        h = None if fence else _heading(line) or underlined.heading(i, buffered)
        if h:
            level, heading, above = h
            del buf[len(buf) - above:]  # a setext or reStructuredText title's own lines were read as text
            if buf:
                sections.append(Section(current, where, "\n".join(buf)))
            current = heading
            while stack and stack[-1][0] >= level:
                stack.pop()
            stack.append((level, heading))
            here = tuple(t for _, t in stack)
            buf, where = [], f"§ {current}\0{len(paths)}"
            paths[where] = here
            title = title or (current if level == 1 else "")
            outline.append(("  " * (level - 1) + current, where))
            continue
        buf.append(line)
    if buf:
        sections.append(Section(current, where, "\n".join(buf)))
    named = _where_names(list(paths.values()))  # "§ Gold" once, "§ v5p › Gold" where two sections are "Gold"
    sections = [Section(s.title, named.get(paths.get(s.where), s.where), s.text) for s in sections]
    outline = [(o, named.get(paths.get(w), w)) for o, w in outline]
    if not any(s.text.strip() for s in sections):
        raise Unreadable("no text")
    if sections and sections[0].where == PRE and any(h.strip().lower() == "introduction" for h, _ in outline):
        top = "Introduction (before the first heading)"  # the file's own "Introduction" is another section
        sections[0] = Section(top, f"§ {top}", sections[0].text)
    return Document(kind, title or (outline[0][0].strip() if outline else path.stem), sections, [], None, None,
                    outline)
