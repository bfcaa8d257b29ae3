"""`tools ingest`: raw/code/<slug> -> wiki/codebases/<slug>/, kernel pages, concept pages, index, log."""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from .. import gitindex, gitinfo, mdtext, pages, safeio
from .. import writer as writer_mod
from ..concepts import CONCEPTS, concepts_index_page
from ..errors import InputError
from ..kernels.pages import directory_page, kernel_pages, page_paths
from ..kernels.scan import resolve, root_package
from ..kernels.vendored import link_vendored
from ..project import Project
from ..writer import Writer
from . import analyze, codebase_pages, config_knobs, flag_pages, metadata, selection
from .made import pages_made_for


@dataclass
class IngestReport:
    slug: str
    files_scanned: int = 0
    files_analyzed: int = 0
    files_cached: int = 0
    files_skipped: int = 0
    skipped: list[tuple[str, str]] = field(default_factory=list)
    unwritten: list[tuple[str, str]] = field(default_factory=list)  # pages that could not be written, and why
    partial: list[tuple[str, str]] = field(default_factory=list)
    kernels: int = 0
    launch_sites: int = 0
    created: int = 0
    updated: int = 0
    unchanged: int = 0
    removed: int = 0
    seconds: float = 0.0
    overview: str = ""

    def to_dict(self) -> dict:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


SLUG = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")


def check_slug(slug: str, where: str | Path) -> None:
    """A slug names pages, folders and URLs: a plain name, or a clear refusal."""
    if not SLUG.fullmatch(slug):
        raise InputError(where, f"{slug!r} is not a plain name: a raw/code folder name is letters, digits, '.', "
                                "'_' and '-' (at most 100, not starting with '.' or '-'); rename the folder")


def resolve_target(project: Project, target: str | Path) -> tuple[str, Path]:
    """Accept `raw/code/<slug>`, an absolute path to it, or a bare slug. Never a symlink out of raw/code/,
    never ``raw/code/..`` (which would ingest all of raw/)."""
    p = Path(target)
    if ".." in p.parts:
        raise InputError(target, "'..' in an ingest target: name the folder as raw/code/<slug>")
    candidates = [p] if p.is_absolute() else [Path.cwd() / p, project.root / p, project.raw_code / p]
    for c in candidates:
        if c.is_file():
            raise InputError(target, "is a file; ingest takes a folder (raw/code/<slug>)")
        if c.is_dir():
            try:
                rel = c.absolute().relative_to(project.raw_code.absolute())
            except ValueError:
                try:
                    rel = c.resolve().relative_to(project.raw_code.resolve())
                except ValueError:
                    raise InputError(target, f"not under {project.raw_code}: put code trees in raw/code/<slug>") from None
            if len(rel.parts) != 1:
                raise InputError(target, "expected raw/code/<slug> (one folder level below raw/code)")
            check_slug(rel.parts[0], target)
            tree = project.raw_code / rel.parts[0]
            _one_kernel_folder(project, rel.parts[0], target)
            if tree.is_symlink():
                raise InputError(target, f"is a symlink ({tree} -> {os.readlink(tree)}); ingest follows no symlink "
                                         "out of raw/code/: copy or clone the tree there")
            return rel.parts[0], tree
    raise InputError(target, "no such folder (expected raw/code/<slug>)")


def _one_kernel_folder(project: Project, slug: str, target) -> None:
    """Two trees whose names differ only in case (``Pops``, ``pops``) would write their kernel pages into one
    folder, ``wiki/kernels/pops/``, each over the other's and each removed with the other: refused, naming both."""
    mine = mdtext.slugify(slug)
    twins = sorted(p.name for p in project.raw_code.iterdir() if p.is_dir() and p.name != slug
                   and mdtext.slugify(p.name) == mine)
    if twins:
        raise InputError(target, f"its kernel pages would share wiki/kernels/{mine}/ with raw/code/{twins[0]} (names "
                                 "that differ only in case): rename one of the folders")


def all_targets(project: Project) -> list[str]:
    """Every tree under raw/code, upstream libraries first so forks can cite them."""
    if not project.raw_code.is_dir():
        return []
    names = [p.name for p in project.raw_code.iterdir()
             if p.is_dir() and not p.is_symlink() and not p.name.startswith(".") and SLUG.fullmatch(p.name)]
    return sorted(names, key=lambda r: (UPSTREAMS.index(r) if r in UPSTREAMS else len(UPSTREAMS), r))


# Repositories taken as the origin when the same kernel source appears in several (forks cite them).
UPSTREAMS = ("jax", "tokamax")


def _kernel_sites(project: Project, slug: str, scan: analyze.Scan) -> tuple[list, dict[str, list]]:
    """This repo's launch sites, with ``vendored_from`` set against every repo ingested so far, and those repos'
    sites."""
    sites = resolve({rel: rec.facts["kernels"] for rel, rec in scan.files.items() if "kernels" in rec.facts})
    others = {}
    for other in all_targets(project):
        if other == slug:
            continue
        facts = analyze.load_kernel_facts(project.cache, other)
        if facts:
            others[other] = resolve(facts)
    if sites and others:
        others[slug] = sites
        order = sorted(others, key=lambda r: (UPSTREAMS.index(r) if r in UPSTREAMS else len(UPSTREAMS), r))
        link_vendored({r: others[r] for r in order})
    others.pop(slug, None)
    return sites, others


def _kernel_pages(sites: list, slug: str, links: codebase_pages.SourceLinks, model: analyze.RepoModel,
                  chosen_by: dict[str, list[str]]) -> list[pages.Page]:
    if not sites:
        return []
    link = links.for_page(f"kernels/{slug}/kernel.md")
    knobs = {}  # each configuration knob -> its default (else first) setting in the config files
    for k in config_knobs.config_knobs(model):
        rel, _, line = (k.get("default_at") or k["example"]).rpartition(":")
        knobs[k["key"]] = link(rel, int(line))
    return kernel_pages(sites, slug, links.git.commit, link, knobs, chosen_by)


def _write(report: IngestReport, rel: str, write) -> None:
    try:
        write()
    except InputError as e:
        report.unwritten.append((f"wiki/{rel}", str(e)))


def _kernel_directory(project: Project, writer: Writer) -> None:
    with writer.exclusive():  # read every kernel page and write the directory as one step
        _write_kernel_directory(project, writer, directory_page)


def _write_kernel_directory(project: Project, writer: Writer, directory_page) -> None:
    records = []
    folder = project.wiki / "kernels"
    for path in sorted(folder.glob("*/*.md")):
        try:  # a FIFO, a link out, a huge page: not read
            meta, _ = pages.split(safeio.read_text(path, writer_mod.PAGE_LIMIT, within=project.wiki))
        except (OSError, pages.FrontmatterError):
            continue
        if meta and meta.get("type") == "kernel":
            records.append({**meta, "page": project.wiki_rel(path)})
    if records or (folder / "index.md").exists():
        writer.write_page(directory_page(records))


def rebuild_index(project: Project, writer: Writer) -> None:
    """Keep wiki/index.md's counts true after pages appear or disappear (logged with the ingest)."""
    from ..wikiindex import rebuild

    rebuild(project.wiki, writer, log=False)


def ingest_repo(project: Project, target: str | Path, writer: Writer, jobs: int = 0,
                progress: Callable[[int, int], None] | None = None) -> IngestReport:
    t0 = time.perf_counter()
    slug, root = resolve_target(project, target)
    report = IngestReport(slug)
    before = dict(writer.stats)
    cache = analyze.load_cache(project.cache, slug)
    package = root_package(root)  # module names start with the root's name when it is a package: facts read
    cached = cache.get("files", {}) if cache.get("package", "") == package else {}  # otherwise are read again
    scan = analyze.scan_tree(root, cached, jobs=jobs, progress=progress)
    scan.skips = sorted(scan.skips + [analyze.Skip(rel, reason) for rel, reason in gitinfo.problems(root)],
                        key=lambda s: s.rel)
    model = analyze.build_model(scan)
    meta = metadata.package_metadata(root)
    if not meta.get("version") and (prov := gitinfo.provenance(root)):  # a copy of an installed release
        if m := re.search(r"(\d+(?:\.\d+)+\w*)$", prov[1]):
            meta["version"] = m.group(1)
    links = codebase_pages.SourceLinks(slug, gitinfo.read(root), gitindex.Tracked(root))

    sites, others = _kernel_sites(project, slug, scan)
    page_of = page_paths(sites, slug)
    reachable = {slug: [(s, page_of[(s.path, s.line)]) for s in sites]}
    for other, other_sites in others.items():  # a setting here may choose a kernel of a repo ingested before
        pages_of = page_paths(other_sites, other)
        reachable[other] = [(s, pages_of[(s.path, s.line)]) for s in other_sites]
    chosen = selection.selection_map(model, selection.KernelIndex(reachable))
    kpages = _kernel_pages(sites, slug, links, model, selection.chosen_by(chosen, links.for_page(
        f"kernels/{slug}/kernel.md")))
    kernel_rows = []
    for s in sites:
        d = s.to_dict()
        d["page"] = page_of.get((d["path"], d["line"]))
        kernel_rows.append(d)

    central = [m for m, _ in codebase_pages.central_modules(model)]
    module_pages = {m: codebase_pages.module_page_path(slug, m) for m in central}
    overview = codebase_pages.overview_page(slug, model, meta, links, kernel_rows, module_pages, chosen)
    out_pages = [overview, *kpages]
    flags = flag_pages.flags_page(slug, model, links, overview.path)
    if flags is not None:
        out_pages.append(flags)
    out_pages += [codebase_pages.module_page(slug, model, m, links, overview.path) for m in central]
    outputs = [p.path for p in out_pages]
    # Every concept page exists (they link to each other); each repo owns one region on each.
    out_pages += [codebase_pages.concept_page(concept, slug, model, links) for concept in CONCEPTS]
    out_pages.append(concepts_index_page())

    for page in out_pages:  # one page that cannot be written (a FIFO, someone's Latin-1 file) stops nothing
        _write(report, page.path, lambda page=page: writer.write_page(page))
    files = {f"codebases/{slug}/symbols.tsv": codebase_pages.symbols_tsv(model),
             f"codebases/{slug}/skipped.tsv": codebase_pages.skipped_tsv(model),
             f"codebases/{slug}/knobs.json": config_knobs.knobs_json(model),
             f"codebases/{slug}/selection.json": selection.selection_json(chosen)}
    for rel, text in files.items():
        _write(report, rel, lambda rel=rel, text=text: writer.write_file(rel, text))
    outputs += list(files)
    # What this repo produced last time and no longer does (a deleted file's kernel, a module
    # that stopped being central) disappears.
    # The cache says what it wrote; the wiki says it too when the cache is gone or of another version.
    for stale in sorted((set(cache.get("outputs", ())) | pages_made_for(project, slug)) - set(outputs)):
        writer.remove(stale)
    _write(report, "kernels/index.md", lambda: _kernel_directory(project, writer))

    analyze.save_cache(project.cache, slug, {"files": analyze.cache_entries(scan), "outputs": outputs,
                                             "package": package})
    report.files_scanned = len(scan.files)
    report.files_analyzed = scan.analyzed
    report.files_cached = scan.cached
    report.files_skipped = len(scan.skips)
    report.skipped = [(s.rel, s.reason) for s in scan.skips]
    report.partial = [(s.rel, s.reason) for s in scan.partial]
    report.kernels = len({(r["kernel"], r["path"]) for r in kernel_rows})
    report.launch_sites = len(kernel_rows)
    for k in ("created", "updated", "unchanged", "removed"):
        setattr(report, k, writer.stats[k] - before.get(k, 0))
    report.overview = str(project.wiki / overview.path)
    report.seconds = round(time.perf_counter() - t0, 3)
    return report
