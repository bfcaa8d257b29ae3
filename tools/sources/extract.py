"""Text of a source document with positions: PDF (pypdfium2 text per page, pypdf metadata and outline), HTML
(readability-lxml main content, converted to markdown with markdownify), markdown and plain text.

Pure readers: a path in, a :class:`Document` out, or :class:`Unreadable` with the reason (encrypted, no text
layer, broken). Nothing is executed; bytes are read through tools.safeio (bounded, no symlinks out).
"""

from __future__ import annotations

import re
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


def extract(path: Path, within: Path | None = None) -> Document:
    kind = kind_of(path)
    if kind is None:
        raise Unreadable(f"not a source type ({', '.join(sorted(KINDS))})")
    data = safeio.read_bytes(path, MAX_BYTES, within=within)
    if kind == "pdf":
        return _pdf(data, path)
    text = _decode(data)
    if kind == "html":
        return _html(text, path)
    return _markdown(text, path, kind)


def _decode(data: bytes) -> str:
    for enc in ("utf-8", "utf-16") if data[:2] in (b"\xff\xfe", b"\xfe\xff") else ("utf-8", "latin-1"):
        try:
            return data.decode(enc).lstrip("\ufeff")
        except UnicodeDecodeError:
            continue
    raise Unreadable("not valid text")


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
        if reader.is_encrypted:
            raise Unreadable("encrypted PDF (no password given)")
        info = reader.metadata or {}
    except pypdf.errors.PdfReadError as e:
        raise Unreadable(f"broken PDF ({e})") from None
    except Unreadable:
        raise
    except Exception as e:  # noqa: BLE001 - pypdf raises many kinds on damaged files
        raise Unreadable(f"broken PDF ({type(e).__name__}: {e})") from None
    try:
        doc = pdfium.PdfDocument(data)
    except pdfium.PdfiumError as e:
        raise Unreadable(f"broken PDF ({e})") from None
    sections = []
    try:
        for i in range(len(doc)):
            page = doc[i]
            text = page.get_textpage().get_text_range()
            sections.append(Section(f"Page {i + 1}", f"p. {i + 1}", text.replace("\r\n", "\n").replace("\r", "\n")))
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
                    outline.append(("  " * depth + str(it.title), f"p. {n + 1}"))
        walk(reader.outline)
    except Exception:  # noqa: BLE001 - an outline that does not resolve is only left out
        outline = outline[:]
    title = str(info.get("/Title") or "").strip() or _first_line(sections[0].text) or path.stem
    authors = [a.strip() for a in re.split(r",| and |;", str(info.get("/Author") or "")) if a.strip()]
    return Document("pdf", title, sections, authors, _year(str(info.get("/CreationDate") or "")), None, outline,
                    len(sections))


def _first_line(text: str) -> str:
    return next((ln.strip() for ln in text.splitlines() if len(ln.strip()) > 3), "")[:200]


def _html(text: str, path: Path) -> Document:
    from markdownify import markdownify
    from readability import Document as Readable

    try:
        r = Readable(text)
        body = r.summary(html_partial=True)
        title = (r.short_title() or "").strip()
    except Exception as e:  # noqa: BLE001 - readability raises on pages it cannot parse
        raise Unreadable(f"HTML without readable content ({type(e).__name__})") from None
    md = markdownify(body, heading_style="ATX", code_language="", strip=["script", "style"])
    url = None
    m = re.search(r"""<link[^>]+rel=["']canonical["'][^>]*href=["']([^"']+)""", text, re.I) or \
        re.search(r"""<meta[^>]+property=["']og:url["'][^>]*content=["']([^"']+)""", text, re.I)
    if m and m.group(1).startswith(("http://", "https://")):
        url = m.group(1)
    doc = _markdown(md, path, "html")
    doc.title, doc.url = title or doc.title, url
    return doc


_HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")


def _markdown(text: str, path: Path, kind: str) -> Document:
    sections: list[Section] = []
    outline: list[tuple[str, str]] = []
    title, current, buf, fence = "", "Introduction", [], False
    for line in text.splitlines():
        if line.lstrip().startswith(("```", "~~~")):
            fence = not fence
        m = None if fence else _HEADING.match(line)
        if m:
            if buf:
                sections.append(Section(current, f"§ {current}", "\n".join(buf)))
            current, buf = m.group(2).strip(), []
            title = title or (current if len(m.group(1)) == 1 else "")
            outline.append(("  " * (len(m.group(1)) - 1) + current, f"§ {current}"))
            continue
        buf.append(line)
    if buf:
        sections.append(Section(current, f"§ {current}", "\n".join(buf)))
    if not any(s.text.strip() for s in sections):
        raise Unreadable("no text")
    return Document(kind, title or (outline[0][0].strip() if outline else path.stem), sections, [], None, None,
                    outline)
