"""`tools ingest` as one call: code trees (``run.ingest_repo``) and documents (``sources.run``) named on the command
line or found by ``--all``, each in its own writer, the index rebuilt after each, one bad tree never stopping the
others; trees whose raw/code folder is gone removed with ``--all``. The faces print the ``IngestBatch`` it returns.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field

from ..errors import EXIT_SKIPS, InputError
from ..project import Project
from ..sources.run import SourcesReport, ingest_sources, is_source_target
from ..writer import Writer
from .remove import remove_codebase, vanished
from .run import IngestReport, all_targets, ingest_repo, rebuild_index


@dataclass
class Vanished:
    slug: str
    files: int         # files removed
    regions: int       # concept pages whose region for it was removed


@dataclass
class IngestBatch:
    repos: list[IngestReport] = field(default_factory=list)
    sources: SourcesReport | None = None
    failed: list[dict] = field(default_factory=list)       # {"target", "error"}: a tree that could not be ingested
    vanished: list[Vanished] = field(default_factory=list)
    code_targets: bool = True                               # a tree was named (or --all): else sources alone
    refreshed: list[str] = field(default_factory=list)      # codebases written again: they linked a kernel page
                                                            # an upstream's ingest removed

    @property
    def unwritten(self) -> list[tuple[str, str]]:
        return [w for r in self.repos for w in r.unwritten]

    @property
    def repos_skipped(self) -> bool:
        return any(r.skipped for r in self.repos)

    @property
    def sources_skipped(self) -> bool:
        return bool(self.sources and (self.sources.skipped or self.sources.summary_failed))

    def exit_code(self) -> int:
        """1: a tree failed; ``EXIT_SKIPS``: done, with files skipped or pages left alone; 0: everything."""
        if self.failed:
            return 1
        if self.repos_skipped or self.sources_skipped or self.unwritten:
            return EXIT_SKIPS
        return 0

    def to_dict(self) -> dict | list:
        """The JSON report: one object for one tree or the sources alone, else a list of them."""
        also = {"refreshed": self.refreshed} if self.refreshed else {}
        out = [{**r.to_dict(), **also} for r in self.repos] + self.failed + \
            ([self.sources.to_dict()] if self.sources else [])
        return out if len(out) != 1 else out[0]


def ingest(project: Project, targets: list[str], all_: bool = False, jobs: int = 0,
           summarizer: Callable[[], object] | None = None,
           progress: Callable[[int, int], None] | None = None,
           on_sources: Callable[[SourcesReport], None] | None = None,
           on_repo: Callable[[IngestReport], None] | None = None,
           on_vanished: Callable[[Vanished], None] | None = None,
           on_failed: Callable[[dict], None] | None = None) -> IngestBatch:
    """Ingest every target. Raises InputError when the sources cannot be read at all (nothing else is done then);
    a tree that fails is listed in ``failed`` and the others go on. ``summarizer`` makes the LLM provider that
    writes source summaries, called only when there are sources. The ``on_*`` hooks report as it goes."""
    project.require_wiki()
    targets = list(targets)
    if all_:  # trees --all cannot take (symlinks, names that are not plain) go through resolve_target's refusal
        plain = all_targets(project)
        others = sorted(p.name for p in project.raw_code.iterdir() if not p.name.startswith(".")
                        and p.name not in plain and (p.is_dir() or p.is_symlink())) if project.raw_code.is_dir() else []
        targets += plain + [str(project.raw_code / n) for n in others]
    if not targets and not all_:
        raise InputError("tools ingest", "name a tree (raw/code/<slug>), sources (raw/sources/...) or pass --all")
    sources = [t for t in targets if is_source_target(project, t)]
    trees = [t for t in targets if t not in sources]
    if all_ and project.raw_sources.is_dir():
        sources.append(str(project.raw_sources))
    batch = IngestBatch(code_targets=bool(trees) or all_)
    if sources:
        writer = Writer(project.wiki)
        batch.sources = ingest_sources(project, sources, writer, summarizer() if summarizer else None)
        _finish(project, writer, "raw/sources")
        if on_sources:
            on_sources(batch.sources)
    if all_:  # trees ingested here whose raw/code/<slug> is gone leave the wiki with them
        for slug in vanished(project):
            try:
                r = remove_codebase(project, slug, Writer(project.wiki))
            except InputError as e:  # its folder is a link: reported, the other targets go on
                batch.failed.append({"target": f"raw/code/{slug}", "error": str(e)})
                if on_failed:
                    on_failed(batch.failed[-1])
                continue
            batch.vanished.append(Vanished(slug, len(r.removed), len(r.regions)))
            if on_vanished:
                on_vanished(batch.vanished[-1])
    broken = set(linking_to_missing(project, set())) if trees else set()  # before: not this ingest's doing
    for target in trees:
        writer = Writer(project.wiki)
        try:
            report = ingest_repo(project, target, writer, jobs=jobs, progress=progress)
        except InputError as e:  # one bad target never stops the others
            batch.failed.append({"target": target, "error": str(e)})
            if on_failed:
                on_failed(batch.failed[-1])
            continue
        _finish(project, writer, report.slug)
        batch.repos.append(report)
        if on_repo:
            on_repo(report)
    done = {r.slug for r in batch.repos}
    if done:  # an upstream lost a kernel these link
        refreshed, failed = refresh_linking(project, done | broken, jobs)
        batch.refreshed += refreshed
        batch.failed += failed
    return batch


def refresh_linking(project: Project, skip: set[str], jobs: int = 0) -> tuple[list[str], list[dict]]:
    """The codebases (not in ``skip``) whose kernel selection links a kernel page that is gone (a codebase
    removed, an upstream re-ingested without it), ingested again from their trees so no link breaks: (refreshed,
    failed)."""
    refreshed, failed = [], []
    for slug in linking_to_missing(project, skip):
        writer = Writer(project.wiki)
        try:
            ingest_repo(project, str(project.raw_code / slug), writer, jobs=jobs)
        except InputError as e:
            failed.append({"target": f"raw/code/{slug}", "error": str(e)})
            continue
        _finish(project, writer, slug)
        refreshed.append(slug)
    return refreshed, failed


def linking_to_missing(project: Project, skip: set[str]) -> list[str]:
    """Codebases (not in ``skip``) whose kernel selection links a kernel page that is gone: an upstream re-ingested
    without that kernel. Their overviews are written again from their cache, so no link breaks."""
    out = []
    for sel in sorted((project.wiki / "codebases").glob("*/selection.json")):
        slug = sel.parent.name
        if slug in skip or not (project.raw_code / slug).is_dir():
            continue
        try:
            data = json.loads(sel.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        rows = [c for group in ("choices", "registries") for c in (data.get(group) or [])
                if isinstance(data, dict) and isinstance(c, dict)] if isinstance(data, dict) else []
        linked = {k.get("page") for c in rows for k in (c.get("kernels") or []) if isinstance(k, dict)}
        if any(isinstance(p, str) and not (project.wiki / p).is_file() for p in linked):
            out.append(slug)
    return out


def _finish(project: Project, writer: Writer, what: str) -> None:
    rebuild_index(project, writer)
    if writer.changed["created"] or writer.changed["updated"] or writer.changed["removed"]:
        writer.log_changes("ingest", what)
