"""Read every page under wiki/ once: path, frontmatter (or why it failed), body, links with line numbers.

The one place that walks wiki/. Index, lint and the site reuse the result. Pure apart from reading
files; never raises on a bad page (unreadable bytes, bad YAML, odd values are recorded on the page).
Also the shared vocabulary of frontmatter references (REF_KEYS, WikiPage.refs); what one body holds (headings,
links, how a target resolves) is ``mdscan``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from . import pages, safeio
from .mdscan import Link, extract_links, first_block_heading

try:  # the C loader is ~10x faster than the pure-Python one and loads the same values
    _Loader: type = yaml.CSafeLoader
except AttributeError:  # pragma: no cover - PyYAML built without libyaml
    _Loader = yaml.SafeLoader

SKIP_DIRS = frozenset({"__pycache__", "node_modules"})

# Frontmatter keys that name another page, and the folder where a bare name (`model: llama`) lives.
REF_KEYS = {"model": "models", "hypothesis": "hypotheses", "repo": "codebases",
            "experiment": "experiments", "source": "sources"}


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
        """The frontmatter title, else a ``# heading`` that is the body's first block (as MkDocs titles the page:
        a heading after the first paragraph named it in tables while its own page showed the file name); None when
        the page names itself nowhere, or its frontmatter failed (its body is not what MkDocs reads)."""
        t = self.meta.get("title") if self.meta else None
        if isinstance(t, (str, int, float)) and str(t).strip():
            return str(t).strip()
        return None if self.error else first_block_heading(self.body)

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
        # read as the site would show it (frontmatter apart, title "L" not the whole file), but never written back
        page = parse_page(rel, raw.decode("utf-8", errors="replace"), path=path, links=links)
        page.text, page.error = None, f"not UTF-8 (byte {e.start})"
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
                except (OSError, RuntimeError) as err:  # a link loop (loop1.md -> loop2.md -> loop1.md): said
                    refused.append((rel, "symlink loop (not followed)" if isinstance(err, RuntimeError)
                                    or "loop" in str(err).lower() else f"not read ({type(err).__name__})"))
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
