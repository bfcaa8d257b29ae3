"""`tools ingest raw/sources/...`: one page per document under wiki/sources/, claims linked to concept pages.

Incremental by content hash (``.tools-cache/sources.json``); a document that cannot be read (encrypted, no text layer,
broken) is reported with its reason and never stops the others; raw/ is only read.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from .. import fulltext, mdtext, pages, safeio
from ..concepts import CONCEPTS, concept_page, concepts_index_page
from ..errors import InputError
from ..pages import Page, region
from ..project import Project
from ..writer import Writer, atomic_write, sweep_temps
from . import claims as claims_mod
from .extract import Unreadable, extract, kind_of

CACHE_VERSION = 1


@dataclass
class SourcesReport:
    documents: int = 0
    ingested: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)   # documents whose raw/sources file is gone: page removed
    copies: list[tuple[str, str]] = field(default_factory=list)  # (a file, the file of its bytes that has the page)
    claims: int = 0       # of the documents read this run
    claims_held: int = 0  # of every document the knowledge base holds
    summarized: list[str] = field(default_factory=list)                 # --llm: summaries written this run
    summary_failed: list[tuple[str, str]] = field(default_factory=list)  # --llm: pages written without one, why

    def to_dict(self) -> dict:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


def _located(project: Project, target: str | Path) -> Path:
    """A relative target is the knowledge base's first (``--root``), else the working directory's."""
    p = Path(target)
    if p.is_absolute():
        return p
    return project.root / p if (project.root / p).exists() or not (Path.cwd() / p).exists() else Path.cwd() / p


def is_source_target(project: Project, target: str | Path) -> bool:
    p = _located(project, target)
    try:
        p.absolute().relative_to(project.raw_sources.absolute())
        return True
    except ValueError:
        return False


def files_under(project: Project, target: str | Path) -> list[Path]:
    p = _located(project, target)
    top = project.raw_sources.resolve()
    if not p.resolve().is_relative_to(top):
        raise InputError(target, "not under raw/sources/ (symlinks out are not followed)")
    if p.is_file():
        return [p]
    if not p.is_dir():
        raise InputError(target, "no such file or folder under raw/sources/")
    out = []
    for dirpath, dirs, names in os.walk(p):
        dirs[:] = [d for d in dirs if not d.startswith(".") and not os.path.islink(os.path.join(dirpath, d))]
        out += [Path(dirpath, n) for n in names if not n.startswith(".") and kind_of(Path(n))]
    return sorted(out)


def page_path(rel: str, owners: dict[str, str] | None = None) -> str:
    """The page of source ``rel``: its path without the extension, slugified. Two sources can share that name
    (``notes.md`` and ``notes.html``, ``my notes.md`` and ``my-notes.md``): ``owners`` (plain page -> the source
    that has it) gives it to one, and the others' pages carry a short hash of their own path."""
    plain = f"sources/{mdtext.slugify(rel.rsplit('.', 1)[0].replace('/', '-'))}.md"
    if plain != CATALOG and (owners is None or owners.get(plain, rel) == rel):  # index.md: the catalog's page
        return plain
    return plain[:-3] + "-" + hashlib.sha1(rel.encode()).hexdigest()[:8] + ".md"


def page_owners(rels: list[str], docs: dict) -> dict[str, str]:
    """plain page -> the source that keeps it: the one whose page it already is, else the first by path."""
    owners: dict[str, str] = {}
    for rel, d in sorted(docs.items()):
        if d.get("page") == page_path(rel):
            owners.setdefault(d["page"], rel)
    for rel in sorted(rels):
        owners.setdefault(page_path(rel), rel)
    return owners


def source_page(rel: str, sha: str, doc, found: list, summary: dict | None = None, path: str = "") -> Page:
    path = path or page_path(rel)
    link = lambda c: f"[{mdtext.escape(CONCEPTS[c].title)}](../concepts/{c}.md)"  # noqa: E731
    lines = [f"Source file: {mdtext.code('raw/sources/' + rel)} ({doc.kind}"
             + (f", {doc.pages} pages" if doc.pages else "") + f"), sha256 {mdtext.code(sha[:16])}."]
    if doc.url:
        lines.append(f"Origin: [{mdtext.escape(doc.url)}]({mdtext.url(doc.url)}).")
    if summary:
        from .summary import markdown
        lines += ["", "## Summary", "", markdown(summary), "", "## Opening", "", mdtext.escape(claims_mod.opening(doc)),
                  ""]
    else:
        lines += ["", "## Summary", "", mdtext.escape(claims_mod.opening(doc)), ""]
    if doc.outline:
        lines += ["## Outline", ""] + [f"- {mdtext.escape(t.strip())} ({mdtext.escape(w)})" if not t.startswith("  ")
                                       else f"    - {mdtext.escape(t.strip())} ({mdtext.escape(w)})"
                                       for t, w in doc.outline[:80]] + [""]
    lines += ["## Key claims", ""]
    if found:
        rows = [[mdtext.escape(c.quote[:400]), mdtext.escape(c.where), ", ".join(mdtext.code(n) for n in c.numbers[:4]),
                 link(c.concept) if c.concept else "—"] for c in found]
        lines.append(mdtext.table(["Claim", "Where", "Numbers", "Technique"], rows))
    else:
        lines.append("_No sentence with a measured number and a performance unit._\n")
    figs = claims_mod.figures(doc)
    if figs:
        lines += ["## Figures and tables", ""] + [f"- {mdtext.escape(label)}: {mdtext.escape(text)} "
                                                  f"({mdtext.escape(where)})" for label, text, where in figs] + [""]
    concepts = sorted({c.concept for c in found if c.concept})
    if concepts:
        lines += ["## Techniques", "", ", ".join(link(c) for c in concepts) + ".", ""]
    meta = {"title": doc.title[:200] or rel, "type": "source", "tags": ["source", doc.kind],
            "path": f"raw/sources/{rel}", "sha256": sha, "url": doc.url, "authors": doc.authors or None,
            "year": doc.year, "claims": len(found), "figures": len(figs) or None}
    body = f"# {mdtext.escape(doc.title[:200] or rel)}\n\n" + region("source", "\n".join(lines))
    return Page(path, {k: v for k, v in meta.items() if v is not None}, body)


PER_DOCUMENT, PER_CONCEPT = 3, 25  # claims a concept page lists from one document, and in all


def concept_regions(by_concept: dict[str, list[tuple[str, str, object]]]) -> list[Page]:
    """Each concept page's "Sources" region: the claims about it, with the page and where in the document; a few
    from each document (else the first document's claims filled the list), and how many more the catalog holds."""
    out = []
    for slug in CONCEPTS:
        items = by_concept.get(slug, [])
        text = ""
        if items:
            by_doc: dict[str, list] = defaultdict(list)
            for item in items:
                by_doc[item[0]].append(item)
            shown = [it for its in by_doc.values() for it in its[:PER_DOCUMENT]][:PER_CONCEPT]
            rows = [f"- [{mdtext.escape(title[:80])}](../{path}) ({mdtext.escape(c.where)}): "
                    f"{mdtext.escape(c.quote[:220])}" for path, title, c in shown]
            listed = {id(it) for it in shown}
            left = [it for it in items if id(it) not in listed]
            if left:
                docs = len({it[0] for it in left})
                rows.append(f"- and {len(left)} more claim{'s' * (len(left) != 1)} in {docs} "
                            f"document{'s' * (docs != 1)}: see [the sources catalog](../{CATALOG})")
            text = "### Sources\n\n" + "\n".join(rows) + "\n"
        out.append(concept_page(slug, "sources", text))
    return out


CATALOG = "sources/index.md"


def catalog(docs: dict, skipped: dict, copies: dict | None = None) -> Page:
    """sources/index.md: every document read, with what it holds, and every one that could not be read, with why."""
    lines = []
    if docs:
        rows = []
        for rel, d in sorted(docs.items(), key=lambda kv: (kv[1].get("title") or kv[0]).lower()):
            concepts = sorted({c["concept"] for c in d.get("claims", []) if c.get("concept")})
            rows.append([f"[{mdtext.escape((d.get('title') or rel)[:120])}]({d['page'].split('/', 1)[1]})",
                         mdtext.code(rel), str(d.get("kind") or "—"), str(d.get("year") or "—"),
                         str(d.get("pages") or "—"), str(len(d.get("claims", []))),
                         ", ".join(f"[{mdtext.escape(CONCEPTS[c].title)}](../concepts/{c}.md)" for c in concepts
                                   if c in CONCEPTS) or "—"])
        lines.append(mdtext.table(["Source", "File", "Kind", "Year", "Pages", "Claims", "Techniques"], rows))
    else:
        lines.append("_No source read yet: put papers, docs and saved web pages under `raw/sources/`._\n")
    if copies:
        lines += ["## Copies", "", "The same bytes as a document above, read once, on its page:", ""] + [
            f"- {mdtext.code(rel)}: a copy of {mdtext.code(twin)}" for rel, twin in sorted(copies.items())] + [""]
    if skipped:
        lines += ["## Not read", ""] + [f"- {mdtext.code(rel)}: {mdtext.escape(why)}" for rel, why in sorted(skipped.items())]
        lines.append("")
    body = "# Sources\n\n" + region("sources-catalog", "\n".join(lines))
    return Page(CATALOG, {"title": "Sources", "type": "index", "tags": ["sources"]}, body)


KEPT = "kept on its page"  # a summary the cache lost, still on the page it was written to


def _pages_on_disk(project: Project) -> dict[str, tuple[str, str, bool]]:
    """raw/sources-relative path -> (its page, the sha256 the page was made from, whether the page holds an LLM
    summary), from the source pages in wiki/sources/."""
    out: dict[str, tuple[str, str, bool]] = {}
    folder = project.wiki / "sources"
    for p in sorted(folder.glob("*.md")) if folder.is_dir() else []:
        try:
            text = safeio.read_text(p, 16 * 1024 * 1024, within=project.wiki)
            meta = pages.split(text)[0]
        except (OSError, ValueError, pages.FrontmatterError):
            continue
        src = str((meta or {}).get("path") or "")
        # a page ingest wrote (its generated region), never a source page someone wrote by hand
        if (meta or {}).get("type") == "source" and src.startswith("raw/sources/") and meta.get("sha256") \
                and "<!-- tools:begin source -->" in text:
            out[src.removeprefix("raw/sources/")] = (f"sources/{p.name}", str(meta["sha256"]), "\n## Opening\n" in text)
    return out


def _adopt(project: Project, docs: dict, rel: str, f: Path, data: bytes, path: str,
           on_disk: dict[str, tuple[str, str, bool]]) -> bool:
    """Whether ``rel``'s page is in the wiki as an ingest of these very bytes wrote it; then its cache entry is made
    again from the document (its claims for the catalog and the concept pages), and the page, its summary with it,
    is kept as it is."""
    sha = hashlib.sha256(data).hexdigest()
    if on_disk.get(rel, ("", ""))[:2] != (path, sha) or not (project.wiki / path).is_file():
        return False
    try:
        doc = extract(f, within=project.raw_sources, data=data)
    except (Unreadable, OSError):
        return False
    docs[rel] = _entry(rel, sha, path, on_disk[rel][2], doc)
    _keep_text(project, path, sha, rel, doc)
    return True


def _keep_text(project: Project, page: str, sha: str, rel: str, doc) -> None:
    """The document's whole text for search and query (``fulltext``)."""
    fulltext.write(project, page, sha, f"raw/sources/{rel}", [(s.where, s.text) for s in doc.sections])


def _entry(rel: str, sha: str, page: str, summarized: bool, doc) -> dict:
    """A document's cache entry as an ingest that wrote its page ``page`` would have made it."""
    found = claims_mod.claims(doc)
    return {"sha": sha, "page": page, "title": doc.title[:200] or rel, "kind": doc.kind, "pages": doc.pages,
            "year": doc.year, "claims": [c.as_dict() for c in found], **({"summary": KEPT} if summarized else {})}


def _same_bytes(project: Project, files: list[Path]) -> dict[str, set[str]]:
    """sha256 -> the names among this run's files holding those bytes, where more than one does (only files of equal
    size are hashed)."""
    by_size: dict[int, list[Path]] = defaultdict(list)
    for f in files:
        try:
            by_size[f.stat().st_size].append(f)
        except OSError:
            continue
    out: dict[str, set[str]] = defaultdict(set)
    for group in (g for g in by_size.values() if len(g) > 1):
        for f in group:
            try:
                sha = hashlib.sha256(safeio.read_bytes(f, 200 * 1024 * 1024, within=project.raw_sources)).hexdigest()
            except OSError:
                continue
            out[sha].add(Path(os.path.relpath(f, project.raw_sources)).as_posix())
    return out


def ingest_sources(project: Project, targets: list[str | Path], writer: Writer, provider=None) -> SourcesReport:
    """``provider`` (an ``llm.Provider``): also write a cited summary of each document (``--llm``), kept in the
    cache with the document's hash, so an unchanged document is never summarized twice."""
    report = SourcesReport()
    cache_path = project.cache / "sources.json"
    try:
        cache = json.loads(cache_path.read_text())
        cache = cache if cache.get("version") == CACHE_VERSION else {}
    except (OSError, ValueError):
        cache = {}
    docs: dict = cache.get("docs", {})
    skipped: dict = cache.get("skipped", {})  # rel -> why, for the catalog
    copies: dict = cache.get("copies", {})    # rel -> the file of the same bytes whose page it is
    # a paid summary follows the document's bytes, not its name: a renamed or moved file is not summarized again
    summaries = {d["sha"]: d["summary"] for d in docs.values() if d.get("summary") and d["summary"] != KEPT}
    files = [f for t in targets for f in files_under(project, t)]
    for rel in [r for r in docs if not (project.raw_sources / r).is_file()]:  # a vanished source leaves the wiki
        if writer.remove(docs.pop(rel)["page"]):
            report.removed.append(rel)
    skipped = {r: why for r, why in skipped.items() if (project.raw_sources / r).is_file()}
    copies = {r: t for r, t in copies.items() if (project.raw_sources / r).is_file() and t in docs}
    merged: list[str] = []  # had a page of their own, now the same bytes as another's: it goes after the writes
    everything = [Path(os.path.relpath(f, project.raw_sources)).as_posix()
                  for f in files_under(project, project.raw_sources)] if project.raw_sources.is_dir() else []
    owners = page_owners(everything, docs)
    on_disk = _pages_on_disk(project)  # what earlier ingests wrote, read from the wiki: the cache may be gone
    for rel, (page_rel, _, _) in on_disk.items():
        if rel not in docs and not (project.raw_sources / rel).is_file() and writer.remove(page_rel):
            report.removed.append(rel)  # its source was removed while the cache was gone (a fresh clone)
    # Pages are written by one thread while the next document is read: the writes' disk waits (fsync) overlap
    # pdfium's and pypdf's work instead of adding to it; a single thread keeps the writer's order.
    named = {Path(os.path.relpath(f, project.raw_sources)).as_posix() for f in files}
    for rel in sorted(set(on_disk) - set(docs) - named):  # not named this time, and its entry lost with the cache:
        f = project.raw_sources / rel                    # the catalog and the concept pages still list it
        try:
            data = safeio.read_bytes(f, 200 * 1024 * 1024, within=project.raw_sources)
        except OSError:
            continue
        _adopt(project, docs, rel, f, data, page_path(rel, owners), on_disk)
    same_bytes = _same_bytes(project, files)  # sha256 -> this run's names of those bytes, where files share them
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="source-pages") as out:
        written = []
        for f in files:
            rel = Path(os.path.relpath(f, project.raw_sources)).as_posix()  # a link's own name, not its target's
            report.documents += 1
            try:
                data = safeio.read_bytes(f, 200 * 1024 * 1024, within=project.raw_sources)
            except OSError as e:
                report.skipped.append((rel, str(e)))
                skipped[rel] = str(e)
                continue
            sha = hashlib.sha256(data).hexdigest()
            path = page_path(rel, owners)
            # of files with the same bytes, the one whose page is in the wiki keeps it (a copy made later never
            # takes the page, and the notes on it, from its original), else the shortest name (`paper.pdf`, not
            # `paper (1).pdf`): the same choice on every run
            # the names that hold these bytes now: this run's files hashed above, and files not named this time as
            # their last ingest read them (a name of this run whose bytes changed since is no longer one of them)
            holders = same_bytes.get(sha, set()) | {rel} | {
                r for r, d in docs.items() if d.get("sha") == sha and r not in named
                and (project.raw_sources / r).is_file()}
            have_page = {r for r in holders if docs.get(r, {}).get("sha") == sha or on_disk.get(r, ("", ""))[1] == sha}
            twin = min(holders, key=lambda r: (r not in have_page, len(r), r))
            if twin != rel:  # the same bytes under another name: one page, its claims counted once
                report.copies.append((rel, twin))
                copies[rel] = twin
                merged += [rel] if rel in docs else []
                continue
            copies.pop(rel, None)
            if rel not in docs and _adopt(project, docs, rel, f, data, path, on_disk):
                report.unchanged.append(rel)
                continue
            old = docs.get(rel, {})
            summary = old.get("summary") if old.get("sha") == sha else summaries.get(sha)
            summary = None if summary == KEPT else summary  # rewritten: the page's summary cannot be carried over
            if old.get("sha") == sha and old.get("page") == path and (project.wiki / path).exists() \
                    and (provider is None or old.get("summary")) and fulltext.kept_for(project, path, sha):
                report.unchanged.append(rel)
                continue
            try:
                doc = extract(f, within=project.raw_sources, data=data)
            except (Unreadable, OSError) as e:
                if rel in docs and (project.wiki / docs[rel]["page"]).is_file():
                    # readable before, not now (a truncated download): its page, and the notes on it, stay until
                    # the file is readable again or removed
                    e = f"{e} (its page, made from the last readable version, is kept)"
                report.skipped.append((rel, str(e)))
                skipped[rel] = str(e)
                continue
            skipped.pop(rel, None)
            _keep_text(project, path, sha, rel, doc)
            found = claims_mod.claims(doc)
            if provider is not None and summary is None:
                from ..llm import LLMError
                from .summary import summarize
                try:
                    summary = summarize(doc, provider)
                    report.summarized.append(rel)
                except LLMError as e:  # the page is still written, without a summary; a later --llm run retries
                    report.summary_failed.append((rel, str(e)))
            page = source_page(rel, sha, doc, found, summary, path)
            entry = {"sha": sha, "page": page.path, "title": page.meta["title"], "kind": doc.kind, "pages": doc.pages,
                     "year": doc.year, "claims": [c.as_dict() for c in found], **({"summary": summary} if summary else {})}
            written.append((rel, entry, out.submit(writer.write_page, page)))
        for rel, entry, done in written:
            try:
                done.result()
            except InputError as e:  # e.g. a page someone saved in another encoding: left alone, reported
                report.skipped.append((rel, f"its page was not written: {e}"))
                skipped[rel] = f"its page was not written: {e}"
                continue
            stale = (docs.get(rel) or {}).get("page")
            docs[rel] = entry
            if stale and stale != entry["page"] and not any(d.get("page") == stale for d in docs.values()):
                writer.remove(stale)  # the page it had (a twin's gone, so it takes the plain name now)
            report.ingested.append(rel)
            report.claims += len(entry["claims"])
    for rel in merged:  # reported as a copy, not as removed: its file is there
        writer.remove(docs.pop(rel)["page"])
    report.claims_held = sum(len(d.get("claims", [])) for d in docs.values())
    # Concept regions from every source ingested so far (the cache holds their claims).
    by_concept: dict[str, list] = defaultdict(list)
    for rel, d in sorted(docs.items()):
        for c in d.get("claims", []):
            if c.get("concept"):
                by_concept[c["concept"]].append((d["page"], d["title"], claims_mod.Claim(**c)))
    for p in concept_regions(by_concept) + [concepts_index_page()]:  # the index: no concept page is an orphan
        writer.write_page(p)
    copies = {r: t for r, t in copies.items() if t in docs}
    writer.write_page(catalog(docs, skipped, copies))
    sweep_temps(project.cache)  # a killed earlier run's half-written cache
    fulltext.sweep(project, {d["page"] for d in docs.values()})
    atomic_write(cache_path, json.dumps({"version": CACHE_VERSION, "docs": docs, "skipped": skipped,
                                         "copies": copies}))
    return report
