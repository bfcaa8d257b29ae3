"""Read a wiki folder once: titles, types, categories, links and frontmatter references of every page."""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import yaml

from ..pages import _FM, FrontmatterError

try:  # the C loader is ~10x faster and loads the same values
    _Loader: type = yaml.CSafeLoader
except AttributeError:  # pragma: no cover
    _Loader = yaml.SafeLoader

# Frontmatter keys that point at another page, and the folder their bare names live in.
REF_KEYS = {"model": "models", "hypothesis": "hypotheses", "repo": "codebases",
            "experiment": "experiments", "source": "sources"}

_LINK = re.compile(r"(?<!!)\[(?P<text>(?:[^\[\]]|\[[^\]]*\])*)\]\((?P<target><[^>]*>|[^)\s]+)(?:\s+\"[^\"]*\")?\)")
_FENCE = re.compile(r"^(```|~~~).*?^\1[ \t]*$", re.S | re.M)
_CODESPAN = re.compile(r"`[^`\n]+`")
_H1 = re.compile(r"^#\s+(.+?)\s*#*\s*$", re.M)


@dataclass
class WikiPage:
    rel: str  # posix path relative to wiki/
    meta: dict[str, Any]
    has_frontmatter: bool
    title: str
    type: str
    category: str  # colour group: type, experiments split by model
    links: list[str] = field(default_factory=list)  # resolved wiki-relative .md targets
    raw_links: list[str] = field(default_factory=list)  # project-relative raw/ targets
    broken: list[str] = field(default_factory=list)
    refs: list[tuple[str, str]] = field(default_factory=list)  # (key, value) from frontmatter
    problem: str = ""

    @property
    def folder(self) -> str:
        return self.rel.split("/", 1)[0] if "/" in self.rel else ""


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", str(text).lower()).strip("-")


def strip_code(text: str) -> str:
    """Blank out fenced blocks and code spans (same length, so offsets hold)."""
    text = _FENCE.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)
    return _CODESPAN.sub(lambda m: " " * len(m.group(0)), text)


def iter_links(body: str):
    """Yield (match) for every inline markdown link outside code."""
    yield from _LINK.finditer(strip_code(body))


def link_target(raw: str) -> tuple[str, str]:
    """Split a link target into (path, '#anchor' or '')."""
    raw = raw.strip("<>")
    path, _, anchor = raw.partition("#")
    return unquote(path), ("#" + anchor if anchor else "")


def is_external(target: str) -> bool:
    return bool(re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", target)) or target.startswith("//")


def resolve(page_rel: str, target: str) -> str:
    """Wiki-relative posix path of ``target`` seen from ``page_rel`` ('..' may remain for outside)."""
    if target.startswith("/"):
        return posixpath.normpath(target.lstrip("/"))
    return posixpath.normpath(posixpath.join(posixpath.dirname(page_rel), target))


def _title(meta: dict, body: str, rel: str) -> str:
    t = meta.get("title")
    if t not in (None, ""):
        return str(t)
    m = _H1.search(body)
    if m:
        return m.group(1)
    stem = posixpath.splitext(posixpath.basename(rel))[0]
    if stem in ("index", "README"):
        stem = posixpath.basename(posixpath.dirname(rel)) or "Home"
    return stem.replace("-", " ").replace("_", " ").strip().capitalize() or rel


def category_of(rel: str, meta: dict) -> str:
    ptype = str(meta.get("type") or "")
    folder = rel.split("/", 1)[0] if "/" in rel else ""
    if ptype == "experiment" or (not ptype and folder == "experiments"):
        model = meta.get("model")
        return f"experiment: {model}" if model else "experiment"
    if ptype:
        return ptype
    return folder or "page"


def split(text: str) -> tuple[dict | None, str]:
    """tools.pages.split with the C YAML loader."""
    m = _FM.match(text)
    if not m:
        return None, text
    try:
        meta = yaml.load(m.group(1), Loader=_Loader)
    except yaml.YAMLError as e:
        raise FrontmatterError(f"invalid YAML frontmatter: {getattr(e, 'problem', e)}") from None
    if meta is None:
        meta = {}
    if not isinstance(meta, dict):
        raise FrontmatterError("frontmatter is not a mapping")
    return meta, text[m.end():]


def read_page(rel: str, text: str) -> WikiPage:
    problem = ""
    try:
        meta, body = split(text)
    except FrontmatterError as e:
        meta, body, problem = None, text, str(e)
    has_fm = meta is not None
    meta = meta or {}
    page = WikiPage(rel, meta, has_fm, _title(meta, body, rel), str(meta.get("type") or ""),
                    category_of(rel, meta), problem=problem)
    for m in iter_links(body):
        target, _ = link_target(m.group("target"))
        if not target or is_external(target):
            continue
        path = resolve(rel, target)
        if path.startswith("../"):
            up = posixpath.normpath(posixpath.join("wiki", path))  # relative to the project root
            if up.startswith("raw/"):
                page.raw_links.append(up)
            continue
        if path.endswith(".md"):
            page.links.append(path)
    for key in REF_KEYS:
        v = meta.get(key)
        for item in (v if isinstance(v, list) else [v]):
            if isinstance(item, (str, int, float)) and str(item).strip():
                page.refs.append((key, str(item).strip()))
    return page


def scan(wiki_dir: Path) -> list[WikiPage]:
    """Every *.md under ``wiki_dir`` (dot-folders skipped), sorted by path."""
    out = []
    for path in sorted(wiki_dir.rglob("*.md")):
        rel = path.relative_to(wiki_dir).as_posix()
        if any(part.startswith(".") for part in rel.split("/")):
            continue
        out.append(read_page(rel, path.read_text(encoding="utf-8", errors="replace")))
    known = {p.rel for p in out}
    for p in out:
        p.broken = [t for t in p.links if t not in known]
        p.links = [t for t in p.links if t in known]
    return out


class RefIndex:
    """Resolve frontmatter references (`model: llama`, `repo: org/name`) to pages."""

    def __init__(self, pages: list[WikiPage]):
        self.by_rel = {p.rel: p for p in pages}
        self.by_key: dict[tuple[str, str], str] = {}
        for p in pages:
            stem = posixpath.splitext(posixpath.basename(p.rel))[0]
            for key, folder in REF_KEYS.items():
                if p.folder != folder:
                    continue
                names = [stem, p.title, p.meta.get("model") if key == "model" else None,
                         p.meta.get("repo") if key == "repo" else None,
                         p.meta.get("exp_id") if key == "experiment" else None]
                for n in names:
                    if n:
                        self.by_key.setdefault((key, slug(n)), p.rel)

    def find(self, page: WikiPage, key: str, value: str) -> str | None:
        if value.endswith(".md"):
            for cand in (resolve(page.rel, value), posixpath.normpath(value.lstrip("/"))):
                if cand in self.by_rel:
                    return cand
        return self.by_key.get((key, slug(value)))
