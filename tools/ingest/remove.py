"""`tools remove <slug>`: a codebase leaves the knowledge base as if it had never been ingested.

Its codebase folder (overview, module pages, symbols.tsv, skipped.tsv), its kernel pages, its ``appears-<slug>``
region on every concept page, its ingest cache; then the index and the kernel directory are rebuilt, so lint is
clean after. ``raw/code/<slug>`` itself is never touched (raw/ is immutable: delete it yourself, before or after).
What is removed is found from the wiki (and the ingest cache when there is one), so a clone without the cache
can remove a codebase too.
"""

from __future__ import annotations

import contextlib
import os
import re
from dataclasses import dataclass, field

from ..errors import InputError
from ..project import Project
from ..writer import Writer
from . import analyze
from .made import folders_of, linked_out, made_for, walk_own


@dataclass
class RemoveReport:
    slug: str
    removed: list[str] = field(default_factory=list)  # wiki-relative files removed
    regions: list[str] = field(default_factory=list)  # pages that lost the repo's region
    skipped: list[tuple[str, str]] = field(default_factory=list)  # concept pages left as they are, and why

    def to_dict(self) -> dict:
        return {"slug": self.slug, "removed": self.removed, "regions": self.regions,
                "skipped": [{"page": p, "why": why} for p, why in self.skipped]}


def _region_re(slug: str) -> re.Pattern:
    return re.compile(rf"\n*<!-- tools:begin appears-{re.escape(slug)} -->\n.*?<!-- tools:end appears-{re.escape(slug)} -->\n?",
                      re.S)


def ingested(project: Project, slug: str) -> bool:
    return (project.wiki / "codebases" / slug).is_dir() or analyze._cache_path(project.cache, slug).is_file()


def remove_codebase(project: Project, slug: str, writer: Writer) -> RemoveReport:
    from .run import SLUG, _kernel_directory, rebuild_index

    if not SLUG.fullmatch(slug):
        raise InputError(slug, "not a codebase slug (a raw/code folder name)")
    if not ingested(project, slug):
        raise InputError(f"wiki/codebases/{slug}", "no such codebase in this knowledge base")
    folders = folders_of(slug)
    for folder in folders:
        if (real := linked_out(project, folder)) is not None:
            raise InputError(f"wiki/{folder}", f"a link to {real}, not a folder ingest wrote: nothing removed "
                             "(remove the link yourself)")
    report = RemoveReport(slug)
    cache = analyze.load_cache(project.cache, slug)
    outputs = set(cache.get("outputs", ()))
    for folder in folders:  # what ingest wrote there (the cache may be gone): its data files, and pages of this repo
        for dirpath, _, files in walk_own(project, folder):
            for f in files:
                rel = os.path.relpath(os.path.join(dirpath, f), project.wiki)
                if not f.startswith(".") and (rel in outputs or made_for(project.wiki / rel, slug)):
                    outputs.add(rel)
    with writer.exclusive():
        for rel in sorted(outputs):
            if writer.remove(rel):
                report.removed.append(rel)
        for folder in folders:
            if linked_out(project, folder) is None:  # a link made since: not walked
                for dirpath, _, _ in os.walk(project.wiki / folder, topdown=False):
                    with contextlib.suppress(OSError):
                        os.rmdir(dirpath)  # only when empty: hand-written notes in them stay
        strip = _region_re(slug)

        def change(text: str) -> str | None:
            new = strip.sub("\n", text)
            return None if new == text else new.rstrip("\n") + "\n"
        concepts = project.wiki / "concepts"
        for path in [] if linked_out(project, "concepts") else sorted(concepts.glob("*.md")):
            rel = path.relative_to(project.wiki).as_posix()
            if path.is_symlink():  # never written through: it may lead out of the wiki
                continue
            if not path.is_file():  # a FIFO waits for a writer forever
                report.skipped.append((rel, "not a regular file"))
                continue
            try:
                if writer.update_file(rel, change) != "unchanged":
                    report.regions.append(rel)
            except InputError as e:  # one page that cannot be rewritten never leaves the remove half done
                report.skipped.append((rel, str(e)))
        _kernel_directory(project, writer)
        rebuild_index(project, writer)
    writer.log_changes("remove", slug)
    # the cache last: it is what says the codebase is here, so a remove killed before this point runs again
    # (killed earlier, the cache was gone and a re-run refused "no such codebase", with the index still linking it)
    for part in ("", ".kernels"):
        with contextlib.suppress(FileNotFoundError):
            analyze._cache_path(project.cache, slug, part).unlink()
    return report


def vanished(project: Project) -> list[str]:
    """Codebases ingested here (an ingest cache exists) whose raw/code/<slug> is gone."""
    folder = project.cache / "ingest"
    if not folder.is_dir():
        return []
    slugs = {p.name[:-5] for p in folder.glob("*.json") if not p.name.endswith(".kernels.json")}
    return sorted(s for s in slugs if not os.path.lexists(project.raw_code / s))

