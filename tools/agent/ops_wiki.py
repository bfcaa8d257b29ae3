"""Operations on the wiki and the kernel catalog: search, read, list, backlinks, lint; kernels list and get."""

from __future__ import annotations

import posixpath
import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from .. import safeio, wikiscan
from .. import mdscan
from ..jsonvalues import as_text, bounded_mapping, plain, short_text, text_or_none
from ..project import Project
from .registry import AgentError, op

MAX_PAGE_BYTES = wikiscan.MAX_PAGE_BYTES  # what search and lint read, a read reads too (paged by limit/offset)


# ---------------------------------------------------------------- models

class PageRef(BaseModel):
    path: str = Field(description="wiki-relative path, e.g. concepts/rematerialization.md")
    title: str
    type: str | None = None


class SearchIn(BaseModel):
    query: str = Field(min_length=1, max_length=2_000, description=(
        "words to look for (case-insensitive; each word also finds its plural, -ing/-ed forms and synonyms); pages "
        "holding more of them, and rarer ones, rank first; the first 32 distinct words count"))
    type: str | None = Field(None, description="only pages of this type (concept, kernel, experiment, ...)")
    limit: int = Field(10, ge=1, le=100)


class SearchHit(PageRef):
    score: float
    snippet: str


class SearchOut(BaseModel):
    query: str
    total: int
    hits: list[SearchHit]


class ReadIn(BaseModel):
    path: str = Field(description="wiki-relative page path")


class PageReadIn(ReadIn):
    section: str | None = Field(None, description="one section only: a heading's id (as in page.md#id) or its "
                                                  "title; `sections` in the answer lists them")
    offset: int = Field(0, ge=0, description="where the body (or the section) starts being returned, in "
                                             "characters: the `next_offset` of the previous answer")
    limit: int = Field(20_000, ge=200, le=400_000, description="characters of body returned at most")


MAX_SECTIONS = 200  # headings listed in a read's answer (the rest counted): an answer stays bounded


class ReadOut(PageRef):
    meta: dict[str, Any]
    body: str = Field(description="the body (or the section) from `offset`, at most `limit` characters, cut at a "
                                  "line end where one is near")
    links: list[str]
    problem: str | None = Field(None, description="why the frontmatter could not be read (then meta is {})")
    meta_cut: bool = Field(False, description="a frontmatter value was longer than a read returns: cut, marked "
                                              "`[... cut]`")
    section: str | None = Field(None, description="the id of the section returned (null: the whole body)")
    sections: list[dict[str, Any]] = Field(default_factory=list, description="the page's headings: title, id, "
                                                                             "level, line (the first "
                                                                             f"{MAX_SECTIONS})")
    sections_total: int = Field(0, description="how many headings the page has")
    total_chars: int = Field(0, description="characters of the body (or the section)")
    next_offset: int | None = Field(None, description="the offset to ask for next; null when nothing is left")


class ListIn(BaseModel):
    type: str | None = None
    under: str | None = Field(None, description="a folder inside wiki/, e.g. kernels/maxtext")
    where: dict[str, str] = Field(default_factory=dict, description="frontmatter key = value filters")
    limit: int = Field(200, ge=1, le=5000)


class ListOut(BaseModel):
    total: int
    pages: list[PageRef]


class BacklinksOut(BaseModel):
    path: str
    backlinks: list[PageRef]


class LintIn(BaseModel):
    limit: int | None = Field(50, ge=0, description="problems to list at most (null: all of them)")


class LintProblem(BaseModel):
    path: str
    line: int | None
    code: str
    severity: str
    message: str
    fixable: bool = False
    cause: str | None = Field(None, description="what many instances share (symbol-anchor, missing:<target>, ...)")


class LintGroup(BaseModel):
    code: str
    severity: str
    cause: str
    count: int
    pages: int = Field(description="pages holding an instance")
    what: str
    fix: str
    fixable: bool
    examples: list[LintProblem]


class LintOut(BaseModel):
    pages: int
    errors: int
    warnings: int
    ok: bool = Field(description="no errors (warnings allowed): `tools lint` exits 0")
    by_code: dict[str, int]
    problems: list[LintProblem]
    groups: list[LintGroup] = Field([], description="causes with many instances, biggest first (every instance "
                                                    "is also in problems)")
    fixed: list[str] = Field([], description="what `tools lint --fix` repaired before this check")


class KernelsIn(BaseModel):
    backend: str | None = None
    category: str | None = None
    repo: str | None = None
    kind: str | None = None
    name: str | None = Field(None, description="substring of the kernel name")
    limit: int = Field(200, ge=1, le=5000)


class Kernel(PageRef):
    repo: str | None = None
    backend: str | None = None
    category: str | None = None
    kind: str | None = None
    source: str | None = Field(None, description="path:line of the launch site")


class KernelsOut(BaseModel):
    total: int
    kernels: list[Kernel]


class KernelIn(BaseModel):
    path: str = Field(description="the kernel page, e.g. kernels/maxtext/gmm.md")


class KernelOut(Kernel):
    meta: dict[str, Any]
    body: str
    total_chars: int = Field(0, description="characters of the page's body")
    next_offset: int | None = Field(None, description="where wiki_read (path, offset=...) goes on; null when the "
                                                      "body is whole")


# ---------------------------------------------------------------- helpers

def confined(root: Path, rel: str, name: str) -> str:
    """``rel`` normalised, as a path an agent may read under ``root`` (the knowledge base's ``name/``, a leading
    ``name/`` allowed): no absolute path, no '..', no NUL, no drive, no symlink out, nothing hidden."""
    rel = str(rel).strip().replace("\\", "/").removeprefix(f"{name}/")
    if not rel or rel.startswith("/") or "\0" in rel or ".." in rel.split("/") or re.match(r"^[A-Za-z]:", rel):
        raise AgentError(f"{rel!r}: not a path inside the knowledge base's {name}/")
    if len(rel.encode()) > 4000 or any(len(part.encode()) > 255 for part in rel.split("/")):
        raise AgentError(f"{rel[:80]!r}...: a name longer than the file system allows (255 bytes a name)")
    norm = posixpath.normpath(rel)
    hidden = next((part for part in norm.split("/") if part.startswith(".") and part != "."), None)
    if hidden:  # .git/config holds a clone's credentials, .env a service's: ingest and the wiki's scan skip them
        raise AgentError(f"{rel[:80]!r}: {hidden[:40]!r} is hidden (as .git and .env are); not read")
    try:
        real, top = (root / norm).resolve(), root.resolve()
    except (OSError, RuntimeError):  # a symlink loop: said as one, not as a way out
        raise AgentError(f"{rel!r}: a symlink loop under {name}/ (not followed)") from None
    if not real.is_relative_to(top):
        raise AgentError(f"{rel!r}: leaves {name}/ (a symlink out is not followed)")
    if hidden := next((p for p in real.relative_to(top).parts if p.startswith(".")), None):  # notes.txt -> .git/config
        raise AgentError(f"{rel[:80]!r}: a link to {hidden[:40]!r}, which is hidden (as .git and .env are); not read")
    return norm


def safe_rel(project: Project, rel: str) -> str:
    """A wiki-relative page path an agent may read."""
    return confined(project.wiki, rel, "wiki")


_CACHE: dict[str, tuple[dict[str, tuple[int, int]], dict[str, wikiscan.WikiPage]]] = {}


def _scan(project: Project, links: bool = True) -> wikiscan.Wiki:
    """The wiki, re-reading only the pages whose size or mtime changed since the last call in this process (a
    server answers many calls: a full scan of 4,000 pages costs ~0.35 s, this ~20 ms)."""
    import os

    root = project.wiki
    refused: list[tuple[str, str]] = []
    md, files, dirs = wikiscan.walk(root, refused)
    sig_old, pages_old = _CACHE.get(str(root), ({}, {}))
    sig, pages = {}, {}
    for rel in md:
        try:
            st = os.stat(root / rel)
        except OSError:
            continue
        sig[rel] = (st.st_mtime_ns, st.st_size)
        page = pages_old.get(rel) if sig_old.get(rel) == sig[rel] else None
        pages[rel] = page or wikiscan.read_page(root / rel, rel, links=True, within=root)
    _CACHE[str(root)] = (sig, pages)
    return wikiscan.Wiki(root, [pages[r] for r in md if r in pages], files, dirs, sorted(refused))


def _ref(p: wikiscan.WikiPage) -> dict:
    meta = p.meta or {}
    return {"path": p.rel, "title": short_text(p.title),
            "type": short_text(meta["type"]) if isinstance(meta.get("type"), str) else None}


# ---------------------------------------------------------------- wiki

@op("wiki.search", SearchIn, SearchOut)
def search(project: Project, a: SearchIn) -> dict:
    """Ranked full-text search (SQLite FTS5, BM25; title, frontmatter and body weighted 10 : 4 : 1, scaled by page
    type so concept and source pages are not buried under long generated pages), with a snippet per hit."""
    from .. import search as fts

    if fts.fts_query(a.query) is None:
        raise AgentError("query holds no words")
    total, hits = fts.search(project, a.query, a.type, a.limit)
    return {"query": a.query, "total": total, "hits": [dict(h.as_dict(), title=short_text(h.title)) for h in hits]}


@op("wiki.read", PageReadIn, ReadOut)
def read(project: Project, a: PageReadIn) -> dict:
    """One page: frontmatter as data, the body as markdown (or one ``section`` of it, by heading id or title),
    bounded to ``limit`` characters with ``next_offset`` to go on, the page's headings, and the wiki pages it
    links to."""
    rel = safe_rel(project, a.path)
    path = project.wiki / rel
    try:
        text = safeio.read_text(path, MAX_PAGE_BYTES, within=project.wiki)
    except FileNotFoundError:
        raise AgentError(f"{rel}: no such page in wiki/") from None
    except OSError as e:
        raise AgentError(f"{rel}: {e}") from None
    p = wikiscan.parse_page(rel, text, path=path)
    links = sorted({mdscan.resolve(rel, mdscan.split_target(ln.target)[0]) for ln in p.links
                    if ln.kind in ("md", "ref") and not mdscan.is_external(ln.target)
                    and mdscan.split_target(ln.target)[0].endswith(".md")})
    from .. import mdsections

    body, chosen = p.body, None
    if a.section:
        chosen = mdsections.find(p.body, a.section)
        if chosen is None:
            raise AgentError(f"{rel}: no section {a.section!r} (its headings are in `sections` of a read without "
                             "one)")
        body = mdsections.text_of(p.body, chosen)
    part, nxt = bounded(body, a.offset, a.limit)
    heads = mdsections.sections(p.body)
    meta, cut = bounded_mapping(plain(p.meta or {}))  # a 3 MB value answered a 200-character read whole
    return {**_ref(p), "meta": meta, "meta_cut": cut, "body": part,
            "links": [x for x in links if not x.startswith("..")],
            "problem": p.error or None, "section": chosen.id if chosen else None,
            # bounded like the body: a 2 MB page of 15,000 headings answered a 200-character read with 1.1 MB
            "sections": [x.as_dict() for x in heads[:MAX_SECTIONS]], "sections_total": len(heads),
            "total_chars": len(body),
            "next_offset": nxt}


def bounded(text: str, offset: int, limit: int) -> tuple[str, int | None]:
    """``text[offset:]`` up to ``limit`` characters, cut after a line end in the last fifth when there is one; and
    the next offset (None at the end)."""
    if offset >= len(text):
        return "", None
    end = offset + limit
    if end >= len(text):
        return text[offset:], None
    cut = text.rfind("\n", offset + limit * 4 // 5, end)
    end = cut + 1 if cut != -1 else end
    return text[offset:end], end


@op("wiki.list", ListIn, ListOut)
def list_pages(project: Project, a: ListIn) -> dict:
    """Pages by type, folder and frontmatter values (``where``: key = value, compared as text)."""
    under = safe_rel(project, a.under).strip("/") if a.under else ""
    under = "" if under in ("", ".") else under + "/"  # `.`: the whole wiki
    out = []
    for p in _scan(project):
        meta = p.meta or {}
        if a.type and meta.get("type") != a.type or (under and not p.rel.startswith(under)):
            continue
        # a value as YAML writes it (`true`, not Python's `True`); a page without the key never matches
        if any(k not in meta or as_text(meta[k]) != v for k, v in a.where.items()):
            continue
        out.append(_ref(p))
    return {"total": len(out), "pages": out[: a.limit]}


@op("wiki.backlinks", ReadIn, BacklinksOut)
def backlinks(project: Project, a: ReadIn) -> dict:
    """Pages that link to this one (markdown links, resolved the way the site resolves them, and [[wikilinks]] the
    one page they name, as lint counts them)."""
    from ..lint.links import Resolver

    rel = safe_rel(project, a.path)
    out = []
    wiki = _scan(project)
    names = None
    for p in wiki:
        for ln in p.links:
            target, _ = mdscan.split_target(ln.target)
            if ln.kind == "wiki" and p.rel != rel:
                names = names or Resolver(project, wiki)
                if (names.wikilink(ln.target) or ("",))[0] == rel:
                    out.append(_ref(p))
                    break
            elif ln.kind in ("md", "ref") and target and not mdscan.is_external(ln.target) \
                    and mdscan.resolve(p.rel, target) == rel and p.rel != rel:
                out.append(_ref(p))
                break
    return {"path": rel, "backlinks": out}


@op("wiki.lint", LintIn, LintOut)
def lint_summary(project: Project, a: LintIn) -> dict:
    """`tools lint` as data: counts by code and the first problems."""
    from .. import lint

    return lint_out(lint.run(project), a.limit)


def lint_out(report, limit: int | None = None) -> dict:
    """A lint report as ``LintOut`` data (the CLI's `tools lint --json` prints the same)."""
    from collections import Counter

    out = {k: v for k, v in report.as_dict().items() if k != "seconds"}  # the same question, the same answer
    from ..lint.groups import grouped

    return {**out, "by_code": dict(Counter(i.code for i in report.issues)),
            "problems": [i.as_dict() for i in report.issues[:limit]],
            "groups": [g.as_dict() for g in grouped(report.issues)[0]]}


# ---------------------------------------------------------------- kernels

def _kernel(p: wikiscan.WikiPage) -> dict:
    m = p.meta or {}
    src = f"{m.get('path')}:{m.get('line')}" if m.get("path") else None
    return {**_ref(p), **_kernel_fields(m), "source": src}


def _kernel_fields(m: dict) -> dict:
    return {k: text_or_none(m.get(k)) for k in ("repo", "backend", "category", "kind")}


@op("kernels.list", KernelsIn, KernelsOut)
def kernels_list(project: Project, a: KernelsIn) -> dict:
    """The kernel catalog, filtered by backend, category, repo, kind and a name substring."""
    out = []
    for p in _scan(project):
        m = p.meta or {}
        if m.get("type") != "kernel":
            continue
        if any(v is not None and (k not in m or as_text(m[k]) != v) for k, v in
               (("backend", a.backend), ("category", a.category), ("repo", a.repo), ("kind", a.kind))):
            continue
        if a.name and a.name.lower() not in p.title.lower():
            continue
        out.append(_kernel(p))
    out.sort(key=lambda k: (str(k["category"]), k["title"], k["path"]))
    return {"total": len(out), "kernels": out[: a.limit]}


@op("kernels.get", KernelIn, KernelOut)
def kernels_get(project: Project, a: KernelIn) -> dict:
    """One kernel page: its catalog fields, frontmatter and body (launch sites, signature, callers)."""
    page = read(project, PageReadIn(path=a.path))  # a first part, as wiki_read gives it; the rest by offset
    if page["meta"].get("type") != "kernel":
        raise AgentError(f"{page['path']}: not a kernel page (type {page['meta'].get('type')!r})")
    m = page["meta"]
    return {"path": page["path"], "title": page["title"], "type": "kernel", **_kernel_fields(m),
            "source": f"{m.get('path')}:{m.get('line')}" if m.get("path") else None, "meta": m, "body": page["body"],
            "total_chars": page["total_chars"], "next_offset": page["next_offset"]}
