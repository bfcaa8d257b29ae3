"""Read every page under wiki/ once: path, frontmatter (or why it failed), body, links with line numbers.

The one place that walks wiki/. Index, lint and the site reuse the result. Pure apart from reading
files; never raises on a bad page (unreadable bytes, bad YAML, odd values are recorded on the page).
Also the shared vocabulary of links (split_target, resolve, is_external) and of frontmatter
references (REF_KEYS, WikiPage.refs).
"""

from __future__ import annotations

import os
import posixpath
import re
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple
from urllib.parse import unquote

import yaml

from . import pages, safeio

try:  # the C loader is ~10x faster than the pure-Python one and loads the same values
    _Loader: type = yaml.CSafeLoader
except AttributeError:  # pragma: no cover - PyYAML built without libyaml
    _Loader = yaml.SafeLoader

SKIP_DIRS = frozenset({"__pycache__", "node_modules"})

# Frontmatter keys that name another page, and the folder where a bare name (`model: llama`) lives.
REF_KEYS = {"model": "models", "hypothesis": "hypotheses", "repo": "codebases",
            "experiment": "experiments", "source": "sources"}


class Link(NamedTuple):  # a tuple: 160,000 of them are made per lint of a large wiki
    target: str  # as written, e.g. "../concepts/remat.md#policies"
    line: int  # 1-based line in the file
    kind: str  # "md" ([t](x) or ![t](x)), "ref" ([t]: x), "wiki" ([[x]]), "auto" (<scheme:...>)
    text: str = ""


@dataclass
class WikiPage:
    rel: str  # posix path relative to wiki/
    path: Path
    meta: dict[str, Any] | None = None  # None: no frontmatter (or unreadable)
    body: str = ""
    body_line: int = 1  # 1-based file line where the body starts
    error: str | None = None  # "not UTF-8 ...", "invalid YAML frontmatter ..."
    links: list[Link] = field(default_factory=list)
    text: str | None = None  # the whole file, None when it could not be decoded

    @property
    def type(self) -> str | None:
        t = self.meta.get("type") if self.meta else None
        return t if isinstance(t, str) else None

    @property
    def title(self) -> str:
        return self.given_title or Path(self.rel).stem.replace("-", " ").replace("_", " ")

    @property
    def given_title(self) -> str | None:
        """The frontmatter title, else the first ``# heading``; None when the page names itself nowhere."""
        t = self.meta.get("title") if self.meta else None
        if isinstance(t, (str, int, float)) and str(t).strip():
            return str(t).strip()
        return first_heading(self.body)

    @property
    def refs(self) -> list[tuple[str, str]]:
        """(key, value) for each frontmatter reference to another page (REF_KEYS; lists give one each)."""
        out = []
        for key in REF_KEYS:
            v = self.meta.get(key) if self.meta else None
            for item in (v if isinstance(v, list) else [v]):
                if isinstance(item, (str, int, float)) and str(item).strip():
                    out.append((key, str(item).strip()))
        return out

    @property
    def folder_type(self) -> str | None:
        """The page type its folder implies (wiki/concepts/x.md -> concept)."""
        return type_for_folder(self.rel)


@dataclass
class Wiki:
    root: Path  # the wiki/ folder
    pages: list[WikiPage]
    files: set[str]  # every non-hidden file under wiki/, posix, relative (pages included)
    dirs: set[str]
    refused: list[tuple[str, str]] = field(default_factory=list)  # (rel, reason): symlinks out, special files

    def __post_init__(self) -> None:
        self.by_rel = {p.rel: p for p in self.pages}

    def __iter__(self) -> Iterator[WikiPage]:
        return iter(self.pages)

    def __len__(self) -> int:
        return len(self.pages)


# ---------------------------------------------------------------- folders and types

_FOLDER_TYPE = {t.folder: name for name, t in pages.TYPES.items() if t.folder}


def type_for_folder(rel: str) -> str | None:
    top = rel.split("/", 1)[0] if "/" in rel else ""
    return _FOLDER_TYPE.get(top)


# ---------------------------------------------------------------- frontmatter

def split(text: str) -> tuple[dict[str, Any] | None, str, int]:
    """Like pages.split (same rules, same errors) with the C YAML loader; also the body's first line."""
    m = pages.FRONTMATTER_RE.match(text)
    if not m:
        return None, text, 1
    try:
        meta = pages.load_yaml(m.group(1) + "\n", _Loader)
    except pages.FrontmatterError:
        raise
    except (yaml.YAMLError, ValueError, RecursionError):
        # rare: the reference parser raises FrontmatterError with its own (documented) message
        try:
            meta, body = pages.split(text)
        except ValueError as e:  # FrontmatterError, or a date like 2026-13-45 that PyYAML cannot build
            raise pages.FrontmatterError(str(e) if isinstance(e, pages.FrontmatterError)
                                         else f"invalid YAML frontmatter: {e}") from None
        return meta, body, text.count("\n", 0, m.end()) + 1
    if meta is None:
        meta = {}
    if not isinstance(meta, dict):
        raise pages.FrontmatterError("frontmatter is not a mapping")
    return meta, text[m.end():], text.count("\n", 0, m.end()) + 1


_H1 = re.compile(r"^#\s+(.+?)\s*#*\s*$", re.M)


def first_heading(body: str) -> str | None:
    m = _H1.search(body)
    return m.group(1).strip() if m else None


# ---------------------------------------------------------------- anchors

HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.+?)[ \t]*#*[ \t]*$")
ATTR_ID = re.compile(r"\{[^}]*#([\w.:-]+)[^}]*\}\s*$")
_HTML_ID = re.compile(r"""<[a-zA-Z][^>]*\s(?:id|name)\s*=\s*["']([^"']+)["']""")


_NOT_SLUG = re.compile(r"[^\w\s-]")
_SLUG_GAPS = re.compile(r"[-\s]+")


def heading_slug(text: str) -> str:
    """The id Python-Markdown's toc extension gives a heading (its default ``slugify``)."""
    text = _INLINE_MD.sub(lambda m: m.group(1) or m.group(2) or "", text)
    if not text.isascii():
        text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    return _SLUG_GAPS.sub("-", _NOT_SLUG.sub("", text).strip().lower())


_INLINE_MD = re.compile(r"!?\[([^\[\]\n]*)\]\([^()\n]*\)|`([^`\n]*)`")  # linear: a label holds no "["


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
    mask = code_mask(lines) if ("```" in body or "~~~" in body) else None
    for i, ln in enumerate(lines):
        if mask is not None and mask[i]:
            continue
        m = HEADING.match(ln) if ln[:1] == "#" or ln[:1] == " " else None
        if m:
            text = m.group(2)
            explicit = ATTR_ID.search(text)
            if explicit:
                ident = explicit.group(1)
            else:
                base = heading_slug(text)
                ident, n = base, 0
                while ident in ids:
                    n += 1
                    ident = f"{base}_{n}"
            ids.add(ident)
            out.append(Heading(i, text, ident, bool(explicit), len(m.group(1))))
        if "<" in ln:
            ids.update(_HTML_ID.findall(ln))
    return out, ids


def anchors(body: str) -> set[str]:
    """Ids a link can target in this page: heading slugs (deduplicated like toc: x, x_1), {#ids}, html ids."""
    return headings(body)[1]


# ---------------------------------------------------------------- links

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_CODE_SPAN = re.compile(r"(`+)(?!`)(.+?)(?<!`)\1(?!`)")
_MD_LINK = re.compile(
    r"\[((?:[^\[\]\\]|\\.|\[[^\[\]]*\])*)\]"  # [text], one level of nested brackets
    r"\(\s*(<[^<>\n]*>|[^\s()]*(?:\([^\s()]*\)[^\s()]*)*)"  # (target or <target>
    r"(?:\s+(?:\"[^\"]*\"|'[^']*'|\([^()]*\)))?\s*\)"  # optional "title")
)
_REF_DEF = re.compile(r"^ {0,3}\[([^\]^][^\]]*)\]:\s*(<[^<>\n]*>|\S+)")  # not [^1]: footnotes
_WIKI = re.compile(r"\[\[([^\[\]\n]+?)\]\]")
_AUTO = re.compile(r"<([a-zA-Z][a-zA-Z0-9+.-]{1,31}:[^\s<>]*)>")


def _blank_code_spans(line: str) -> str:
    if "`" not in line:
        return line
    return _CODE_SPAN.sub(lambda m: " " * len(m.group(0)), line)


def code_mask(lines: list[str]) -> list[bool]:
    """True for lines inside fenced code blocks (fence lines included)."""
    out = [False] * len(lines)
    fence: str | None = None
    for i, ln in enumerate(lines):
        if fence is None:
            if "`" in ln[:6] or "~" in ln[:6]:
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


def extract_links(text: str, first_line: int = 1) -> list[Link]:
    """Links in markdown ``text`` whose first line is file line ``first_line``.

    Skips fenced code blocks and inline code spans. Angle brackets around targets are removed.
    """
    lines = text.split("\n")
    mask = code_mask(lines) if ("```" in text or "~~~" in text) else None
    out: list[Link] = []
    for i, ln in enumerate(lines):
        if mask is not None and mask[i]:
            continue
        if "[" not in ln and "<" not in ln:
            continue
        ln = _blank_code_spans(ln)
        no = first_line + i
        if "](" in ln:
            for m in _MD_LINK.finditer(ln):
                tgt = m.group(2)
                if tgt.startswith("<"):
                    tgt = tgt[1:-1]
                out.append(Link(tgt, no, "md", m.group(1)))
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


def md_link_spans(text: str) -> Iterator[tuple[int, int, str, str]]:
    """(start, end, text, target) of each inline ``[text](target)`` outside code, to rewrite links in place.

    Offsets are into ``text``; an image's span starts at its ``[`` (``text[start - 1] == "!"``)."""
    lines = text.split("\n")
    mask = code_mask(lines) if ("```" in text or "~~~" in text) else None
    pos = 0
    for i, ln in enumerate(lines):
        start, pos = pos, pos + len(ln) + 1
        if "](" not in ln or (mask is not None and mask[i]):
            continue
        for m in _MD_LINK.finditer(_blank_code_spans(ln)):  # same lengths: offsets hold
            tgt = m.group(2)
            if tgt.startswith("<"):
                tgt = tgt[1:-1]
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


def slug(text: Any) -> str:
    """A loose key for matching names: lower-case letters and digits joined by '-' ("Org/Repo" -> "org-repo")."""
    return re.sub(r"[^a-z0-9]+", "-", str(text).casefold()).strip("-")


# ---------------------------------------------------------------- reading

MAX_PAGE_BYTES = 16 * 1024 * 1024


def read_page(path: Path, rel: str, *, links: bool = True, within: Path | None = None) -> WikiPage:
    page = WikiPage(rel=rel, path=path)
    try:
        raw = safeio.read_bytes(path, MAX_PAGE_BYTES, within=within)
    except safeio.Refused as e:
        page.error = e.reason
        return page
    except OSError as e:
        page.error = f"unreadable: {e.strerror or e}"
        return page
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        page.error = f"not UTF-8 (byte {e.start})"
        text = raw.decode("utf-8", errors="replace")
        page.body = text
        if links:
            page.links = extract_links(text)
        return page
    return parse_page(rel, text, path=path, links=links)


def parse_page(rel: str, text: str, *, path: Path | None = None, links: bool = True) -> WikiPage:
    """The page ``read_page`` gives for a file holding ``text`` (already decoded)."""
    page = WikiPage(rel=rel, path=Path(rel) if path is None else path)
    page.text = text = text.removeprefix("\ufeff")
    try:
        page.meta, page.body, page.body_line = split(text)
    except pages.FrontmatterError as e:
        page.error = str(e)
        m = pages.FRONTMATTER_RE.match(text)  # the block is delimited even if its YAML is not valid
        page.body = text[m.end():] if m else text
        page.body_line = text.count("\n", 0, m.end()) + 1 if m else 1
    if links:
        page.links = extract_links(page.body, page.body_line)
    return page


def walk(wiki: Path, refused: list[tuple[str, str]] | None = None) -> tuple[list[str], set[str], set[str]]:
    """(markdown pages, all files, all dirs) under wiki/, posix and relative; hidden entries skipped.

    A symlink is taken only when it resolves to a regular file inside wiki/; folders are never followed through
    a symlink; anything else (a link out of the tree, a FIFO) goes to ``refused`` with its reason."""
    md: list[str] = []
    files: set[str] = set()
    dirs: set[str] = set()
    refused = refused if refused is not None else []
    top = wiki.resolve()
    stack = [("", str(wiki))]
    while stack:
        prefix, folder = stack.pop()
        try:
            it = os.scandir(folder)
        except OSError:
            continue
        with it:
            for e in it:
                name = e.name
                if name.startswith("."):
                    continue
                rel = prefix + name
                try:
                    if e.is_symlink():
                        target = Path(e.path).resolve()
                        if not (target.is_relative_to(top) and target.is_file()):
                            refused.append((rel, "symlink out of wiki/ (not followed)" if not target.is_relative_to(top)
                                            else "symlink to a folder or special file (not followed)"))
                            continue
                    elif e.is_dir(follow_symlinks=False):
                        if name in SKIP_DIRS:
                            continue
                        dirs.add(rel)
                        stack.append((rel + "/", e.path))
                        continue
                    elif not e.is_file(follow_symlinks=False):
                        refused.append((rel, f"{safeio.kind(e.stat(follow_symlinks=False).st_mode)} (not read)"))
                        continue
                    files.add(rel)
                    if name.endswith(".md"):
                        md.append(rel)
                except (OSError, RuntimeError):
                    continue
    md.sort()
    return md, files, dirs


def scan(wiki: Path, *, links: bool = True) -> Wiki:
    """Read every ``*.md`` under ``wiki`` (sorted by path)."""
    wiki = Path(wiki)
    refused: list[tuple[str, str]] = []
    md, files, dirs = walk(wiki, refused)
    refused.sort()
    return Wiki(wiki, [read_page(wiki / rel, rel, links=links, within=wiki) for rel in md], files, dirs, refused)
