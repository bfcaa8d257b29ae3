"""Link checks: broken relative links, [[wikilinks]], file:// and absolute links, orphan pages."""

from __future__ import annotations

import os
import posixpath
import re
from typing import NamedTuple
from pathlib import Path
from urllib.parse import unquote, urlsplit

from ..mdtext import file_target
from ..mdscan import Heading, Link, heading_slug, headings, is_external, resolve, split_target
from ..project import Project
from ..wikiscan import Wiki, WikiPage, slug
from .issues import issue

NOT_COUNTED = ("index.md", "log.md")  # their links do not save a page from being an orphan
UNCHECKED = ("log.md",)  # append-only history: its old links are not checked

OK, EXTERNAL, BROKEN, WIKI, FILE, ABSOLUTE, SKIP = "ok", "external", "broken", "wiki", "file", "absolute", "skip"
OUTSIDE = "outside"  # leaves the project, or reaches out through a link inside it: never looked at
HIDDEN = "hidden"  # a file in a hidden folder of wiki/ (.attachments/): there, and never published by the site
ANCHOR = "anchor"  # the page exists, the #fragment names no heading or id in it


class Target(NamedTuple):
    status: str  # one of the constants above
    rel: str | None = None  # wiki-relative page/file it points at (internal targets)
    fix: str | None = None  # a replacement target, when one is known


class Resolver:
    """Resolves link targets against the scanned wiki and the project tree; caches file-system checks."""

    def __init__(self, project: Project, wiki: Wiki):
        self.project = project
        self.wiki = wiki
        self.root = str(project.root.resolve())
        self.wiki_abs = str(Path(wiki.root).resolve())
        self._exists: dict[str, str] = {}
        self._names: dict[str, dict[str, list[str]]] | None = None
        self._headings: dict[str, tuple[list[Heading], set[str]]] = {}
        self._symbols: dict[str, set[str]] = {}
        self._targets: dict[tuple[str, str, str], Target] = {}
        self._dirs: dict[tuple[str, str], str] = {}
        self._refused: set[str] | None = None

    # --------------------------------------------------------- helpers

    def outside_wiki(self, root_rel: str) -> str:
        """``OK``, ``BROKEN`` or ``OUTSIDE`` for ``root_rel`` (relative to the project root, normalised): a path
        that leaves the project, or whose links lead out of it, is never looked at, so a page's links cannot ask
        whether a file exists anywhere on the machine."""
        hit = self._exists.get(root_rel)
        if hit is None:
            path = os.path.join(self.root, root_rel)
            if root_rel == ".." or root_rel.startswith("../"):
                hit = OUTSIDE
            elif not os.path.realpath(path).startswith(self.root.rstrip(os.sep) + os.sep):
                hit = OUTSIDE
            else:
                hit = OK if os.path.exists(path) else BROKEN
            self._exists[root_rel] = hit
        return hit

    def internal(self, joined: str) -> bool:
        w = self.wiki
        return joined in w.files or joined in w.dirs or joined in (".", "")

    def relative_from(self, page_rel: str, wiki_rel: str) -> str:
        return posixpath.relpath(wiki_rel, posixpath.dirname(page_rel) or ".")

    def from_abs(self, page_rel: str, abs_path: str) -> str | None:
        """A relative link from the page to an absolute file-system path inside the project, if it exists."""
        p = os.path.normpath(abs_path)
        if not (p == self.root or p.startswith(self.root + os.sep)) or not os.path.exists(p):
            return None
        page_dir = os.path.dirname(os.path.join(self.wiki_abs, page_rel))
        return Path(os.path.relpath(p, page_dir)).as_posix()

    # --------------------------------------------------------- resolution

    def resolve(self, page: WikiPage, link: Link) -> Target:
        """What ``link`` on ``page`` points at. The answer depends on the page's folder and the link alone, so it
        is computed once per (folder, kind, target): catalog pages of one folder link the same targets."""
        key = (page.rel.rpartition("/")[0], link.kind, link.target)
        hit = self._targets.get(key)
        if hit is None:
            hit = self._targets[key] = self._resolve(page, link)
        return hit

    def _resolve(self, page: WikiPage, link: Link) -> Target:
        raw = link.target.strip()
        if link.kind == "wiki":
            hit = self.wikilink(link.target)
            if hit is None:
                return Target(WIKI)
            rel, anchor = hit
            return Target(WIKI, rel, file_target(self.relative_from(page.rel, rel)) + anchor)
        if not raw or raw.startswith("#") or "{" in raw:
            return Target(SKIP)
        if raw[:5].lower() == "file:":
            parts = urlsplit(raw)
            fix = self.from_abs(page.rel, unquote(parts.path)) if parts.path else None
            anchor = f"#{parts.fragment}" if parts.fragment else ""
            return Target(FILE, None, file_target(fix) + anchor if fix else None)
        if is_external(raw):
            return Target(EXTERNAL)
        if link.kind == "auto":
            return Target(SKIP)
        path, anchor = split_target(raw)
        if not path:
            return Target(SKIP)
        if path.startswith("/"):
            fix = self.from_abs(page.rel, path)
            if fix is None:
                inside = posixpath.normpath(path.lstrip("/"))
                if self.internal(inside):
                    fix = self.relative_from(page.rel, inside)
            return Target(ABSOLUTE, None, file_target(fix) + anchor if fix else None)
        joined = self._join(page.rel.rpartition("/")[0], path)
        if joined.startswith("../wiki/"):  # out of wiki/ and back in (`../../wiki/concepts/b.md`): a page link
            joined = joined[len("../wiki/"):]
        if not joined.startswith("../") and joined != "..":
            if not self.internal(joined):
                hidden = any(part.startswith(".") for part in joined.split("/"))
                if hidden and self.outside_wiki(posixpath.normpath("wiki/" + joined)) == OK:
                    return Target(HIDDEN, "wiki/" + joined)
                if self._through_refused(joined) or self.outside_wiki("wiki/" + joined) == OUTSIDE:
                    return Target(OUTSIDE, "wiki/" + joined)  # the scan did not follow it: there or not, unasked
                return Target(BROKEN, "wiki/" + joined)
            if anchor.startswith("#") and len(anchor) > 1 and not self.has_anchor(joined, anchor):
                return Target(ANCHOR, joined)
            return Target(OK, joined)
        root_rel = posixpath.normpath("wiki/" + joined)
        status = self.outside_wiki(root_rel)
        return Target(OK) if status == OK else Target(status, root_rel)

    def _through_refused(self, joined: str) -> bool:
        """Whether ``joined`` is, or runs through, an entry the wiki scan refused (a symlink out of wiki/, a
        folder link): the scan has no files under it, which says nothing about whether the target exists."""
        if not self.wiki.refused:
            return False
        if self._refused is None:
            self._refused = {rel for rel, _ in self.wiki.refused}
        parts = joined.split("/")
        return any("/".join(parts[:n]) in self._refused for n in range(1, len(parts) + 1))

    def _page_headings(self, rel: str) -> tuple[list[Heading], set[str]] | None:
        page = self.wiki.by_rel.get(rel)
        if page is None or page.text is None:
            return None
        hit = self._headings.get(rel)
        if hit is None:
            hit = self._headings[rel] = headings(page.body)
        return hit

    def _join(self, base: str, path: str) -> str:
        """``resolve(page, path)`` with the folder part normalised once per (page folder, link folder): a page's
        links point into few folders, and ``posixpath.normpath`` is most of a link's cost."""
        folder, _, name = path.rpartition("/")
        if name in ("", ".", "..") or path.startswith("/"):
            return resolve(base + "/x" if base else "x", path)
        key = (base, folder)
        hit = self._dirs.get(key)
        if hit is None:
            hit = self._dirs[key] = posixpath.normpath(f"{base}/{folder}" if base else folder or ".")
        return name if hit == "." else f"{hit}/{name}"

    def has_anchor(self, rel: str, anchor: str) -> bool:
        found = self._page_headings(rel)
        if found is None:
            return True  # not a page we can read (an image, a folder): nothing to check
        frag = unquote(anchor[1:].split("?", 1)[0])
        return frag in found[1]  # fragments are case-sensitive in browsers

    def symbol_heading(self, rel: str, frag: str) -> bool:
        """Does a heading of ``rel`` start with the symbol ``frag`` (``### `Frag` · implements ...``) while its id
        is something else? Then links naming ``#Frag`` follow a scheme the page's headings do not carry."""
        syms = self._symbols.get(rel)
        if syms is None:
            found = self._page_headings(rel)
            syms = self._symbols[rel] = set(_symbols(found[0])) if found else set()
        return frag in syms

    def _name_maps(self) -> dict[str, dict[str, list[str]]]:
        if self._names is None:
            maps: dict[str, dict[str, list[str]]] = {"path": {}, "stem": {}, "title": {}}
            for p in self.wiki.pages:
                noext = p.rel[:-3]
                maps["path"].setdefault(noext.casefold(), []).append(p.rel)
                maps["stem"].setdefault(slug(posixpath.basename(noext)), []).append(p.rel)
                maps["title"].setdefault(slug(p.title), []).append(p.rel)
            self._names = maps
        return self._names

    def wikilink(self, inner: str) -> tuple[str, str] | None:
        """The one page ``[[inner]]`` names (by path, file name or title), with its anchor; None if 0 or 2+."""
        name = inner.split("|", 1)[0].strip()
        name, _, anchor = name.partition("#")
        anchor = f"#{heading_slug(anchor)}" if anchor.strip() else ""
        name = name.strip().removesuffix(".md")
        if not name:
            return None
        maps = self._name_maps()
        for table, key in (("path", name.strip("/").casefold()), ("stem", slug(posixpath.basename(name))),
                           ("title", slug(name))):
            hits = maps[table].get(key, [])
            if len(set(hits)) == 1:
                return hits[0], anchor
            if len(set(hits)) > 1:
                return None
        return None


_SYMBOL = re.compile(r"^`?([A-Za-z_][\w.]*)`?(?=\s|$|\(|\[)")


def _symbols(heads: list[Heading]) -> dict[str, int]:
    out: dict[str, int] = {}
    for h in heads:
        if h.explicit:
            continue
        sym = _SYMBOL.match(h.text)
        if sym and h.id != sym.group(1):
            out.setdefault(sym.group(1), h.index)
    return out


def symbol_headings(body: str) -> dict[str, int]:
    """Headings that start with a symbol and carry no explicit id: symbol -> body line index (the first one)."""
    return _symbols(headings(body)[0])


def fragment(target: str) -> str:
    return unquote(split_target(target)[1][1:].split("?", 1)[0])


Resolved = list[tuple[WikiPage, Link, Target]]


def resolve_all(wiki: Wiki, res: Resolver) -> Resolved:
    return [(page, link, res.resolve(page, link))
            for page in wiki.pages if page.rel not in UNCHECKED for link in page.links]


def _absent_tree(rel: str | None, root: Path | None) -> str | None:
    """``raw/code/<slug>`` when ``rel`` points into a code tree that is not there at all (not checked out)."""
    if root is None or not rel or not rel.startswith("raw/code/"):
        return None
    parts = rel.split("/")
    if len(parts) < 3 or not parts[2]:
        return None
    tree = "/".join(parts[:3])
    return tree if not (root / tree).exists() else None


def check_links(resolved: Resolved, root: Path | None = None, res: Resolver | None = None) -> list:
    """Link problems, one per link, each with its cause (``issues.Issue.cause``) where many can share one; links
    into a code tree absent from this clone are one problem per tree."""
    out = []
    absent: dict[str, list[tuple[str, int]]] = {}
    for page, link, t in resolved:
        if t.status in (OK, EXTERNAL, SKIP):
            continue
        where = "wiki/" + page.rel
        if t.status == BROKEN and (tree := _absent_tree(t.rel, root)):
            absent.setdefault(tree, []).append((where, link.line))
            continue
        if t.status == BROKEN:
            out.append(issue(where, link.line, "broken-link", f"{link.target} -> {t.rel} does not exist",
                             cause=f"missing:{t.rel}"))
        elif t.status == HIDDEN:
            out.append(issue(where, link.line, "hidden-target", f"{link.target} -> {t.rel}: in a hidden folder, "
                             "which the site does not publish", cause="hidden"))
        elif t.status == OUTSIDE:
            out.append(issue(where, link.line, "outside-link", f"{link.target} -> {t.rel}: leaves the project "
                             "(not checked)", cause="outside"))
        elif t.status == ANCHOR:
            symbol = res is not None and res.symbol_heading(t.rel, fragment(link.target))
            out.append(issue(where, link.line, "broken-anchor",
                             f"{link.target}: no such heading or id in wiki/{t.rel}"
                             + (" (a heading starts with that symbol: --fix gives it the id)" if symbol else ""),
                             fixable=symbol, cause="symbol-anchor" if symbol else f"anchor-into:{t.rel}"))
        elif t.status == WIKI:
            how = f"use [{_label(link)}]({t.fix})" if t.fix else "no unique page matches; use a relative link"
            out.append(issue(where, link.line, "wikilink", f"[[{link.target}]]: {how}{_unfixable(page, t)}",
                             _fixable(page, t), cause="wikilink" if t.fix else ""))
        elif t.status == FILE:
            how = f"use {t.fix}" if t.fix else "outside the project or missing"
            out.append(issue(where, link.line, "file-link", f"{link.target}: {how}{_unfixable(page, t)}",
                             _fixable(page, t)))
        elif t.status == ABSOLUTE:
            how = f"use {t.fix}" if t.fix else "target not found"
            out.append(issue(where, link.line, "absolute-link", f"{link.target}: {how}{_unfixable(page, t)}",
                             _fixable(page, t)))
    for tree, sites in sorted(absent.items()):
        pages = len({w for w, _ in sites})
        first, line = min(sites)
        out.append(issue(tree, None, "missing-tree",
                         f"not checked out here: {len(sites):,} links from {pages:,} pages point into it (first "
                         f"{first}:{line}); clone the code tree into {tree} to check them, or `tools remove "
                         f"{tree.rsplit('/', 1)[1]}` if it is gone for good"))
    return out


def _fixable(page: WikiPage, t: Target) -> bool:
    """A rewrite is known and the page can take it: ``--fix`` writes UTF-8 pages only (a page that is not UTF-8
    was said fixable on every run and never fixed)."""
    return bool(t.fix) and page.text is not None


def _unfixable(page: WikiPage, t: Target) -> str:
    return " (not fixable: the page is not UTF-8; save it as UTF-8 first)" if t.fix and page.text is None else ""


def _label(link: Link) -> str:
    inner = link.target
    return inner.split("|", 1)[1].strip() if "|" in inner else inner.split("#", 1)[0].strip()


def inbound(wiki: Wiki, resolved: Resolved) -> dict[str, set[str]]:
    """page rel -> pages linking to it (self-links and links from index.md/log.md excluded)."""
    into: dict[str, set[str]] = {}
    for page, _link, t in resolved:
        if t.rel is None or t.status not in (OK, WIKI, ANCHOR) or page.rel in NOT_COUNTED:
            continue
        rel = t.rel
        if rel in wiki.dirs or rel in (".", ""):
            rel = posixpath.join(rel, "index.md") if rel not in (".", "") else "index.md"
        if rel != page.rel:
            into.setdefault(rel, set()).add(page.rel)
    return into


def check_orphans(wiki: Wiki, resolved: Resolved) -> list:
    into = inbound(wiki, resolved)
    out = []
    for page in wiki.pages:
        name = posixpath.basename(page.rel)
        if name == "index.md" or page.rel in NOT_COUNTED or page.rel in into:
            continue
        out.append(issue("wiki/" + page.rel, None, "orphan", "no page links here"))
    return out
