"""What the site shows of each page, computed once from the shared reader (`tools.wikiscan`).

`site_pages(wiki)` turns the scanned pages into `SitePage`s: a display title, a type, a colour
group (category), the wiki pages it links to and its frontmatter references. `RefIndex` resolves
those references (`model: llama`, `repo: org/name`) to pages.
"""

from __future__ import annotations

import posixpath
from collections.abc import Container, Iterable
from dataclasses import dataclass, field
from typing import Any

from ..mdscan import is_external, resolve, split_target
from ..wikiscan import REF_KEYS, WikiPage, slug

LINK_KINDS = ("md", "ref")  # links MkDocs renders; [[wikilinks]] and <autolinks> are not page links


@dataclass
class SitePage:
    page: WikiPage  # the shared reader's record
    meta: dict[str, Any]  # {} when the page has no (readable) frontmatter
    title: str
    type: str  # "" when unknown
    category: str  # colour group: the type, experiments split by model
    links: list[str] = field(default_factory=list)  # wiki-relative .md pages it links to

    @property
    def rel(self) -> str:
        return self.page.rel

    @property
    def folder(self) -> str:
        return self.rel.split("/", 1)[0] if "/" in self.rel else ""

    @property
    def refs(self) -> list[tuple[str, str]]:
        return self.page.refs

    @property
    def problem(self) -> str:
        return self.page.error or ""

    @property
    def has_frontmatter(self) -> bool:
        return self.page.meta is not None


def words(name: str) -> str:
    """'flash-attention' -> 'Flash attention' (titles from file and folder names)."""
    return name.replace("-", " ").replace("_", " ").strip().capitalize()


def fallback_title(rel: str) -> str:
    """The title of a page without a frontmatter title or heading: its file name (folder name for index.md)."""
    stem = posixpath.splitext(posixpath.basename(rel))[0]
    if stem in ("index", "README"):
        stem = posixpath.basename(posixpath.dirname(rel)) or "Home"
    return words(stem) or rel


def category_of(rel: str, meta: dict) -> str:
    ptype = str(meta.get("type") or "")
    folder = rel.split("/", 1)[0] if "/" in rel else ""
    if ptype == "experiment" or (not ptype and folder == "experiments"):
        model = meta.get("model")
        return f"experiment: {model}" if model else "experiment"
    tags = meta.get("tags") if isinstance(meta.get("tags"), list) else []
    if ptype == "codebase" and {"module", "xla-flags"} & set(tags):
        return "codebase module"  # a codebase's module and flags pages are not codebases of their own
    if ptype:
        return ptype
    return folder or "page"


def page_links(page: WikiPage) -> list[str]:
    """Wiki-relative .md paths of the page's markdown links that stay inside wiki/ (in order)."""
    out = []
    for link in page.links:
        if link.kind not in LINK_KINDS or is_external(link.target):
            continue
        path = split_target(link.target.strip())[0]
        if path.endswith(".md"):
            path = resolve(page.rel, path)
            if not path.startswith("../"):
                out.append(path)
    return out


def site_page(page: WikiPage, known: Container[str] | None = None) -> SitePage:
    """The site's view of one page; ``known`` (wiki-relative paths) keeps only links to existing pages."""
    meta = page.meta or {}
    links = page_links(page)
    if known is not None:
        links = [t for t in links if t in known]
    return SitePage(page, meta, page.given_title or fallback_title(page.rel), str(meta.get("type") or ""),
                    category_of(page.rel, meta), links)


def site_pages(pages: Iterable[WikiPage]) -> list[SitePage]:
    pages = list(pages)
    known = {p.rel for p in pages}
    return [site_page(p, known) for p in pages]


class RefIndex:
    """Resolve frontmatter references (`model: llama`, `repo: org/name`) to pages."""

    def __init__(self, pages: list[SitePage]):
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

    def find(self, page: SitePage, key: str, value: str) -> str | None:
        if value.endswith(".md"):
            for cand in (resolve(page.rel, value), posixpath.normpath(value.lstrip("/"))):
                if cand in self.by_rel:
                    return cand
        return self.by_key.get((key, slug(value)))
