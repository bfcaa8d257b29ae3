"""Which files of the wiki an ingest of a codebase made: read from the wiki itself, so it is known when the ingest
cache is gone (deleted, a fresh clone) or of another version. Shared by ingest (its stale pages) and remove."""

from __future__ import annotations

import os
from pathlib import Path

from .. import mdtext, pages, safeio
from ..project import Project

INGEST_TYPES = ("codebase", "kernel")  # the page types ingest writes into a codebase's two folders
DATA_FILES = ("symbols.tsv", "skipped.tsv", "knobs.json", "selection.json")  # written beside its overview


def data_files(slug: str) -> list[str]:
    """The wiki-relative data files an ingest of ``slug`` writes (``ingest/run.py``)."""
    return [f"codebases/{slug}/{name}" for name in DATA_FILES]


def made_for(path, slug: str, types: tuple[str, ...] | None = None) -> bool:
    """Whether ingest of ``slug`` wrote this file: one of its data files (symbols.tsv, knobs.json), or a page
    whose frontmatter names the repository (and, given ``types``, has one of them). A note written by hand there
    (a page, a table, a diagram), a link, and a page of another codebase whose slug differs only in case (``Pops``
    and ``pops`` share ``kernels/pops/``), are not."""
    path = Path(path)
    if path.is_symlink():
        return False  # someone's link: ingest writes files
    if path.suffix != ".md":
        return types is None and path.parent.name == slug and path.parent.parent.name == "codebases" \
            and path.name in DATA_FILES
    try:
        meta = pages.split(safeio.read_text(path, 4 * 1024 * 1024))[0]
    except (OSError, pages.FrontmatterError, ValueError):
        return False
    return isinstance(meta, dict) and str(meta.get("repo") or "") == slug and (types is None
                                                                                or meta.get("type") in types)


def folders_of(slug: str) -> tuple[str, str]:
    return f"codebases/{slug}", f"kernels/{mdtext.slugify(slug)}"


def linked_out(project: Project, folder: str) -> str | None:
    """Where the wiki folder ``folder`` really is, when it is a link or lies under one (a codebase folder someone
    linked to a tree elsewhere); None for a plain folder of the wiki, or none at all. Its files are not ingest's to
    read or remove: walking it followed the link and removed that tree's empty folders."""
    path = project.wiki
    for part in Path(folder).parts:
        path = path / part
        if path.is_symlink():
            return os.path.realpath(path)
    return None


def walk_own(project: Project, folder: str):
    """``os.walk`` of a wiki folder, nothing when the folder is a link (``linked_out``); links inside it are never
    followed."""
    if linked_out(project, folder) is not None:
        return iter(())
    return os.walk(project.wiki / folder)


def pages_made_for(project: Project, slug: str) -> set[str]:
    """The pages in ``slug``'s folders that an ingest of it wrote, read from the wiki itself: what the last ingest
    made even when its cache is gone (deleted, a fresh clone) or of another version (the tools upgraded)."""
    out = set()
    for folder in folders_of(slug):
        for dirpath, _, files in walk_own(project, folder):
            for f in files:
                rel = os.path.relpath(os.path.join(dirpath, f), project.wiki)
                if f.endswith(".md") and not f.startswith(".") and made_for(project.wiki / rel, slug, INGEST_TYPES):
                    out.add(Path(rel).as_posix())
    return out
