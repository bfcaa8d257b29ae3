"""Section landing pages and awesome-nav `.nav.yml` files that keep the sidebar small.

Every page renders the whole sidebar, so a sidebar listing 4,000 pages makes the build quadratic.
Here each folder gets a landing page listing its pages (generated only when the wiki has no
index.md there; a hand-written one gets the listing appended in the site), and the sidebar has one budget for
the whole wiki, ``NAV_BUDGET`` entries: folders are opened breadth first (the shallow ones a reader starts from)
while the budget lasts, and a folder past it shows only its landing page, which lists the rest. A per-folder limit
alone never triggers on a hand-kept wiki of hundreds of small folders (each under it, ~3,300 entries in all).
"""

from __future__ import annotations

import html
import posixpath

import yaml

from ..mdtext import escape as md_text
from ..mdtext import file_target
from .pages_view import SitePage, words

NAV_PAGES = 20  # a folder with more direct pages than this shows only its landing page in the sidebar
NAV_FOLDERS = 30  # ... and more subfolders than this: only the landing page too
NAV_BUDGET = 160  # sidebar entries for the whole wiki, whatever its layout


def folder_title(folder: str) -> str:
    return words(posixpath.basename(folder) or "Wiki")


def folders_of(pages: list[SitePage]) -> dict[str, dict]:
    """Folder ('' = wiki root) -> {'pages': [...direct pages], 'subs': [...direct subfolders]}."""
    tree: dict[str, dict] = {"": {"pages": [], "subs": set()}}
    for p in pages:
        d = posixpath.dirname(p.rel)
        tree.setdefault(d, {"pages": [], "subs": set()})["pages"].append(p)
        while d:
            parent = posixpath.dirname(d)
            tree.setdefault(parent, {"pages": [], "subs": set()})["subs"].add(d)
            tree.setdefault(d, {"pages": [], "subs": set()})
            d = parent
    for v in tree.values():
        v["subs"] = sorted(v["subs"])
        v["pages"] = sorted(v["pages"], key=lambda p: p.rel)
    return tree


def _is_index(rel: str) -> bool:
    return posixpath.basename(rel) in ("index.md", "README.md")


def landing_page(folder: str, node: dict, tree: dict, linked: set[str] | None = None,
                 landings: dict[str, str] | None = None) -> str:
    """Markdown listing a folder's pages (title, type, updated) and its subfolders."""
    title = folder_title(folder)
    lines = ["---", f"title: {yaml.safe_dump(title, default_style=chr(34)).strip()}", "---", "",
             f"# {md_text(title)}", ""]
    return "\n".join(lines + listing(folder, node, tree, linked, landings))


def _page_rows(pages: list, base: str) -> list[str]:
    rows = ["| Page | Type | Updated |", "|---|---|---|"]
    for p in pages:
        upd = p.meta.get("updated") or p.meta.get("created") or ""
        rows.append(f"| [{md_text(p.title)}]({file_target(posixpath.relpath(p.rel, base or '.'))}) | "
                    f"{md_text(p.type or '-')} | {md_text(upd)} |")
    return rows + [""]


def _subtree(tree: dict, folder: str) -> list[str]:
    return sorted(k for k in tree if k.startswith(folder + "/"))


def listing(folder: str, node: dict, tree: dict, linked: set[str] | None = None,
            landings: dict[str, str] | None = None) -> list[str]:
    """The tables of a folder's subfolders and pages (the body of its landing page). A subfolder in ``linked``
    has a landing page of its own and gets a row (to its ``landings`` file: ``index.md``, or a hand-kept
    ``README.md``); one that has none (``linked`` given, it is not in it) has its whole subtree listed here, a table
    per folder, so every page stays one click from a landing page."""
    lines: list[str] = []
    pages = [p for p in node["pages"] if not _is_index(p.rel)]
    rows, flat = [], []
    for sub in node["subs"]:
        if linked is None or sub in linked:
            n = len(tree[sub]["pages"]) + sum(len(tree[k]["pages"]) for k in _subtree(tree, sub))
            land = (landings or {}).get(sub, "index.md")
            rows.append(f"| [{md_text(folder_title(sub))}]({file_target(posixpath.basename(sub))}/{land}) "
                        f"| {n} |")
        else:
            flat += [sub, *_subtree(tree, sub)]
    if rows:
        lines += ["| Section | Pages |", "|---|---|", *rows, ""]
    if pages:
        lines += [f"{len(pages)} pages.", "", *_page_rows(pages, folder)]
    for sub in flat:
        if tree[sub]["pages"]:
            lines += [f"### {md_text(posixpath.relpath(sub, folder or '.'))}", "",
                      *_page_rows(tree[sub]["pages"], folder)]
    if not pages and not node["subs"]:
        lines += ["No pages yet.", ""]
    return lines


def _shown(node: dict) -> tuple[list[str], list]:
    """The subfolders and pages a folder lists in the sidebar when it is opened."""
    pages = [p for p in node["pages"] if not _is_index(p.rel)]
    return (node["subs"] if len(node["subs"]) <= NAV_FOLDERS else [],
            pages if len(pages) <= NAV_PAGES else [])


def opened(tree: dict, budget: int = NAV_BUDGET) -> set[str]:
    """The folders whose sidebar entries are listed: breadth first from the wiki root while ``budget`` lasts
    (the root always). The others show only their landing page."""
    out: set[str] = set()
    used = 0
    queue = [""]
    while queue:
        folder = queue.pop(0)
        subs, pages = _shown(tree[folder])
        cost = len(subs) + len(pages)
        if folder and used + cost > budget:
            continue
        out.add(folder)
        used += cost
        queue += subs
    return out


def nav_yml(folder: str, node: dict, is_open: bool = True, landing: str = "index.md") -> str:
    """awesome-nav config for one wiki folder: landing page (``index.md``, or a hand-kept ``README.md``), then (when
    opened) its subfolders and pages."""
    nav: list = [landing]
    if is_open:
        subs, pages = _shown(node)
        nav += [{html.escape(folder_title(s)): posixpath.basename(s)} for s in subs]
        nav += [posixpath.basename(p.rel) for p in pages]
    data = {"title": html.escape(folder_title(folder)), "nav": nav}  # the theme prints section titles raw
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True)


def wiki_files(pages: list[SitePage], existing: set[str]) -> tuple[dict[str, str], dict[str, str]]:
    """Generated files under wiki/ (keys relative to wiki/): missing landing pages and .nav.yml files; and, for
    each hand-written index.md of a folder the sidebar does not open, the listing the site appends to it."""
    tree = folders_of(pages)
    shown = opened(tree)
    # Folders the sidebar reaches (opened ones and the sections they list) get a landing page and a .nav.yml;
    # deeper ones are listed whole on the nearest landing page instead (hundreds fewer pages to build).
    linked = shown | {s for f in shown for s in _shown(tree[f])[0]}
    out: dict[str, str] = {}
    appendix: dict[str, str] = {}
    # a folder whose landing page is a hand-kept README.md (MkDocs serves it as the folder's index)
    landings = {f: "README.md" for f in tree if posixpath.join(f, "README.md").lstrip("/") in existing
                and (posixpath.join(f, "index.md") if f else "index.md") not in existing}
    for folder, node in tree.items():
        index = posixpath.join(folder, "index.md") if folder else "index.md"
        readme = posixpath.join(folder, "README.md").lstrip("/")
        hand = index in existing or readme in existing
        if folder in linked and not hand:
            out[index] = landing_page(folder, node, tree, linked, landings)
        elif hand and folder and folder not in shown:
            rows = listing(folder, node, tree, linked, landings)
            if rows != ["No pages yet.", ""]:
                appendix[index if index in existing else readme] = "\n".join(["", "## In this folder", "", *rows])
        nav = posixpath.join(folder, ".nav.yml") if folder else ".nav.yml"
        if folder in linked and nav not in existing:
            out[nav] = nav_yml(folder, node, folder in shown, landings.get(folder, "index.md"))
    return out, appendix


ROOT_NAV = """\
# Sidebar order (mkdocs-awesome-nav; Zensical reads it too). Wiki folders show only their landing
# pages once they grow, so the sidebar stays small at thousands of pages.
nav:
  - index.md
  - glob: "*.md"
    ignore_no_matches: true
  - Wiki: wiki
  - Explore: explore
"""
