"""A source document's whole text, as its ingest extracted it, kept beside the search index: a source page holds the
document's title, outline, opening and measured claims, not its text, so a question answered in a paragraph of a
guide found nothing. The sources ingest writes ``.tools-cache/sources-text/<page>.json`` (one per source page, each
section with where it is: ``p. 3``, ``§ Memory``); search indexes it with the page, and ``tools query`` cites its
paragraphs by the raw file and place. Derived from raw/ alone: a fresh clone's next ingest makes it again.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from . import safeio
from .errors import InputError
from .project import Project
from .writer import atomic_write

FOLDER = "sources-text"
LIMIT = 64 * 1024 * 1024  # more text than this was not made by our ingest: not read


def _folder(project: Project) -> Path | None:
    """``.tools-cache/sources-text``, or None where a link takes it (or the cache) out of the knowledge base: then no
    text is kept, and nothing is read or written through the link."""
    try:
        folder = project.safe_cache() / FOLDER
    except InputError:
        return None
    return None if folder.is_symlink() else folder


def path_of(project: Project, page_rel: str) -> Path:
    """Where the text of the source page ``page_rel`` (``sources/<name>.md``) is kept: named by the whole page path,
    so a page of the same name in another folder never reads another document's text."""
    return project.cache / FOLDER / f"{page_rel}.json"


def write(project: Project, page_rel: str, sha: str, source: str, sections: list[tuple[str, str]]) -> bool:
    """Keep ``sections`` ((where, text) each) of the document ``source`` (its raw/ path) whose bytes hash to
    ``sha``, for the page ``page_rel``; False where the text cannot be kept (``_folder``)."""
    folder = _folder(project)
    if folder is None:
        return False
    path = path_of(project, page_rel)
    path.parent.mkdir(parents=True, exist_ok=True)
    if not safeio.inside(path.parent, folder):  # a folder on the way is a link out
        return False
    atomic_write(path, json.dumps({"page": page_rel, "sha": sha, "source": source,
                                   "sections": [[w, t] for w, t in sections]}))
    return True


def read(project: Project, page_rel: str) -> dict:
    """{"page", "sha", "source", "sections": [[where, text], ...]} of a source page, or {} when none is kept (or it
    is not one this module wrote for that page)."""
    folder = _folder(project)
    try:
        data = json.loads(safeio.read_text(path_of(project, page_rel), LIMIT, within=folder)) if folder else None
    except Exception:  # noqa: BLE001 - unreadable, not JSON, nested past the recursion limit: no text kept
        return {}
    ok = isinstance(data, dict) and data.get("page") == page_rel and isinstance(data.get("sections"), list) and all(
        isinstance(s, list) and len(s) == 2 and all(isinstance(x, str) for x in s) for s in data["sections"])
    return data if ok else {}


def kept_for(project: Project, page_rel: str, sha: str) -> bool:
    """Whether the text kept for the page is of the bytes ``sha`` (or none can be kept here: an ingest then never
    reads a document again to keep it)."""
    return _folder(project) is None or read(project, page_rel).get("sha") == sha


def signature(project: Project, page_rel: str, page_sig: tuple[int, int]) -> tuple[int, int]:
    """The (mtime in ns, size) signature of a source page, ``page_sig``, and its kept text together: a search
    re-indexes the page when its text changes, as when the page does."""
    try:
        st = os.stat(path_of(project, page_rel))
    except OSError:
        return page_sig
    return max(page_sig[0], st.st_mtime_ns), page_sig[1] + st.st_size


def whole(project: Project, page_rel: str) -> str:
    """A source page's document's whole text, as search indexes it ('' when none is kept)."""
    return "\n\n".join(t for _, t in read(project, page_rel).get("sections", []))


def sweep(project: Project, pages: set[str]) -> None:
    """Remove the kept texts of pages not in ``pages`` (their documents left, or became a copy of another)."""
    folder = _folder(project)
    keep = {f"{p}.json" for p in pages}
    for dirpath, _, files in os.walk(folder) if folder and folder.is_dir() else []:  # links never followed
        for f in files:
            rel = os.path.relpath(os.path.join(dirpath, f), folder)
            if rel.endswith(".json") and Path(rel).as_posix() not in keep:
                os.unlink(os.path.join(dirpath, f))
