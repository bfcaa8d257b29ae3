"""Page objects for one ingested repository: overview, module pages, concept regions, symbol index.

Pure: a RepoModel and metadata in, Pages and file contents out. The writer puts them on disk.
"""

from __future__ import annotations

import posixpath
import re
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass

from .. import concepts, mdtext
from ..concepts import CONCEPTS
from ..gitinfo import GitInfo
from ..pages import Page, region
from . import config_knobs, flag_pages, selection
from .paths import is_bench_or_config, is_test, rel_link
from .analyze import RepoModel

CENTRAL_MODULES = 12
FILES_PER_CONCEPT = 12
LINES_PER_FILE = 6


@dataclass(frozen=True)
class SourceLinks:
    """file:line links: the hosted source at the pinned commit when known and the file is as committed there, else
    the raw/ path (a file edited in place, or one git does not track, is not at those lines on the forge)."""

    slug: str
    git: GitInfo
    tracked: Callable[[str], bool | None] = lambda rel: None  # gitindex.Tracked: None when not known

    def url(self, rel: str, line: int | None, from_page: str) -> str:
        hosted = self.git.blob_url(rel, line) if self.tracked(rel) is not False else None
        if hosted:
            return mdtext.url(hosted)
        # Pages live under wiki/, raw/ sits beside it at the project root.
        target = posixpath.relpath(f"raw/code/{self.slug}/{rel}", posixpath.dirname(f"wiki/{from_page}"))
        return mdtext.url(mdtext.path_target(target)) + (f"#L{line}" if line else "")

    def for_page(self, page: str):
        return lambda rel, line=None: self.url(rel, line, page)


def _files_row(scan, py_files: int) -> str:
    """Files read and set aside; links and special files (never followed, not in the tree's count) apart."""
    set_aside = sum("skip" in r.facts for r in scan.files.values())
    return (f"{sum(scan.languages.values())} in the tree, {len(scan.files) - set_aside} read ({py_files} Python)"
            + (f", {set_aside} set aside (binary, too large, unreadable)" if set_aside else "")
            + (f"; {len(scan.skips) - set_aside} links or special files not followed" if len(scan.skips) > set_aside
               else ""))


def _local_changes(links: SourceLinks, scan) -> str:
    """What of the tree is not the pinned commit's: files edited in place or that git does not track (their lines
    are linked to raw/, not to the forge)."""
    if not links.git.blob_url("x"):
        return ""
    off = sum(links.tracked(rel) is False for rel in scan.files)
    return (f"; {off} file{'s' * (off != 1)} read here differ from it or are not in it (edited in place, untracked "
            "or in a nested repository: linked to their raw/ copy)") if off else ""


LOCAL_REMOTE = "a local path (not shown)"


def shown_remote(remote: str | None) -> str:
    """The remote as a page may show it: a URL or ``host:path`` form (credentials dropped), never a local path."""
    if not remote:
        return "unknown"
    r = remote.strip()
    m = re.match(r"^([a-z][a-z0-9+.-]*)://(?:[^@/]*@)?(.*)$", r, re.I)
    if m and m.group(1).lower() != "file":
        return f"{m.group(1)}://{m.group(2)}"
    if re.match(r"^[\w.-]+@[\w.-]+:(?!/)", r):  # scp-like git@host:owner/repo
        return r
    return LOCAL_REMOTE


def _public_remote(remote: str | None) -> str | None:
    shown = shown_remote(remote)
    return shown if remote and shown != LOCAL_REMOTE else None


def _counts_line(labels: list[str], n: int = 4) -> str:
    c = Counter(labels)
    return ", ".join(f"{mdtext.code(k)} ×{v}" if v > 1 else mdtext.code(k) for k, v in c.most_common(n))


def _surface_files(occ: list[tuple[str, int, str]], link, limit_files: int) -> list[str]:
    by_file: dict[str, list[tuple[int, str]]] = defaultdict(list)
    for rel, line, label in occ:
        by_file[rel].append((line, label))
    # Library code first, then benchmarks, examples and configs, then tests; busiest files first within each.
    ranked = sorted(by_file.items(), key=lambda kv: (is_test(kv[0]), is_bench_or_config(kv[0]), -len(kv[1]), kv[0]))
    out = []
    for rel, hits in ranked[:limit_files]:
        lines = sorted({ln for ln, _ in hits})
        shown = ", ".join(f"[{ln}]({link(rel, ln)})" for ln in lines[:LINES_PER_FILE])
        more = f" +{len(lines) - LINES_PER_FILE}" if len(lines) > LINES_PER_FILE else ""
        out.append(f"- [{mdtext.code(rel)}]({link(rel)}): {_counts_line([lb for _, lb in hits])} — lines {shown}{more}")
    if len(ranked) > limit_files:
        out.append(f"- … and {len(ranked) - limit_files} more files")
    return out


def deciding_functions(model: RepoModel, occ, n: int = 3) -> list[tuple[str, str, int, int]]:
    """(module.function, file, line, sites): the library functions holding the most sites of one surface, the
    places where a remat policy, a mesh or an attention implementation is chosen. Tests, benchmarks, examples and
    configs are left out; a site belongs to the innermost function around it."""
    mod_of = {rel: name for name, rel in model.modules.items()}
    count: Counter = Counter()
    where: dict[tuple[str, str], int] = {}
    for rel, line, _ in occ:
        if is_test(rel) or is_bench_or_config(rel):
            continue
        spans = model.scan.files[rel].facts.get("spans") or []
        inner = min((s for s in spans if s[1] <= line <= s[2]), key=lambda s: s[2] - s[1], default=None)
        if inner is None:
            continue
        key = (rel, inner[0])
        count[key] += 1
        where[key] = inner[1]
    top = sorted(count.items(), key=lambda kv: (-kv[1], kv[0]))[:n]
    return [(f"{mod_of.get(rel, rel)}.{qual}", rel, where[(rel, qual)], k) for (rel, qual), k in top if k >= 1]


def module_page_path(slug: str, module: str) -> str:
    return f"codebases/{slug}/modules/{mdtext.slugify(module)}.md"


def central_modules(model: RepoModel, n: int = CENTRAL_MODULES) -> list[tuple[str, int]]:
    """The most imported library modules (test helpers are imported a lot and explain little)."""
    ranked = sorted(((m, len(v)) for m, v in model.fan_in.items() if not is_test(model.modules[m])),
                    key=lambda kv: (-kv[1], kv[0]))
    return [kv for kv in ranked if kv[1] > 1][:n]


def symbols_tsv(model: RepoModel) -> str:
    rows = ["module\tqualname\tkind\tpath\tline\tdoc"]
    by_rel = {rel: name for name, rel in model.modules.items()}
    for rel in sorted(by_rel):
        facts = model.scan.files[rel].facts
        for qual, kind, line, doc in facts.get("symbols", ()):
            doc = " ".join(str(doc).split())[:200]
            rows.append("\t".join(mdtext.tsv(x) for x in (by_rel[rel], qual, kind, rel, line, doc)))
    return "\n".join(rows) + "\n"


def skipped_tsv(model: RepoModel) -> str:
    return "path\treason\n" + "".join(f"{mdtext.tsv(s.rel)}\t{mdtext.tsv(s.reason)}\n" for s in model.scan.skips)


def entry_points(model: RepoModel, meta: dict) -> list[tuple[str, str, int | None, str]]:
    """(label, rel path or '', line, how found)."""
    from .metadata import ENTRY_NAME

    out = []
    for name, target in sorted(meta.get("scripts", {}).items()):
        mod = target.split(":")[0].strip()
        rel = model.modules.get(mod, "")
        out.append((f"{name} → {target}", rel, None, "console script"))
    files = model.scan.files
    for rel in sorted(files):
        if rel.endswith("/__main__.py") or rel == "__main__.py":
            out.append((rel, rel, None, "`python -m` entry"))
    mains = [rel for rel in sorted(files) if files[rel].facts.get("main") and not rel.endswith("__main__.py")]
    mains.sort(key=lambda r: (not ENTRY_NAME.search(r), "/test" in r or r.startswith("test"), r))
    for rel in mains[:25]:
        out.append((rel, rel, None, "script (`if __name__ == '__main__'`)"))
    if len(mains) > 25:
        out.append((f"… {len(mains) - 25} more scripts with a main guard", "", None, ""))
    return out


def overview_page(slug: str, model: RepoModel, meta: dict, links: SourceLinks,
                  kernels: list[dict], module_pages: dict[str, str], chosen: dict | None = None) -> Page:
    path = f"codebases/{slug}/overview.md"
    link = links.for_page(path)
    git = links.git
    scan = model.scan
    n_sym = sum(len(r.facts.get("symbols", ())) for r in scan.files.values())
    py_files = sum(1 for r in scan.files.values() if r.facts.get("lang") == "python")
    body = [f"# {mdtext.escape(slug)}\n"]
    g = []
    head = " ".join(x for x in (meta.get("name"), meta.get("version")) if x)
    if meta.get("description"):
        g.append(f"> {mdtext.escape(head) + ' — ' if head else ''}{mdtext.escape(meta['description'])}\n")
    rows = [["Source", mdtext.code(f"raw/code/{slug}")],
            ["Commit", mdtext.code(git.commit) + " (pinned)" + _local_changes(links, scan) if git.commit
             else "not a git checkout"],
            ["Remote", mdtext.escape(shown_remote(git.remote))],
            ["Files", _files_row(scan, py_files)],
            ["Symbols", f"{n_sym} in [symbols.tsv](symbols.tsv)"],
            ["Pallas kernels", f"{len({(k['kernel'], k['path']) for k in kernels})} kernels, "  # one page each
                               f"{len(kernels)} launch sites"
             + (" ([catalog](../../kernels/index.md))" if any(k.get("page") for k in kernels) else "")]]
    g.append(mdtext.table(["Field", "Value"], rows))
    g.append("## What it is\n")
    g.append((mdtext.escape(meta["summary"]) if meta.get("summary") else "_No README summary found._") + "\n")
    if meta.get("dependencies"):
        deps = ", ".join(mdtext.code(d) for d in meta["dependencies"][:15])
        g.append(f"Declared dependencies: {deps}{' …' if len(meta['dependencies']) > 15 else ''}\n")
    g.append("## Languages\n")
    g.append(mdtext.table(["Language", "Files"], [[mdtext.escape(k), str(v)] for k, v in scan.languages.most_common(12)]))
    g.append("## Package map\n")
    g.append(_package_map(model) or "_No Python packages._\n")
    g.append("## Entry points\n")
    eps = entry_points(model, meta)
    g.append("\n".join(f"- {f'[{mdtext.code(lbl)}]({link(rel)})' if rel else mdtext.code(lbl)}"
                       f"{' — ' + how if how else ''}" for lbl, rel, _, how in eps) + "\n" if eps else "_None found._\n")
    g.append(_surfaces_section(model, link, kernels, path, chosen))
    g.append("## Central modules\n")
    cm = central_modules(model)
    if cm:
        g.append("Most imported modules of this repository (by import fan-in):\n")
        g.append(mdtext.table(["Module", "Imported by", "Source"], [
            [f"[{mdtext.code(m)}]({rel_link(path, module_pages[m])})" if m in module_pages else mdtext.code(m),
             str(n), f"[{mdtext.code(model.modules[m])}]({link(model.modules[m])})"] for m, n in cm]))
    else:
        g.append("_No module is imported by more than one other._\n")
    g.append("## Skipped files\n")
    if scan.skips:
        reasons = Counter(s.reason.split(" (")[0] for s in scan.skips)
        g.append(f"{len(scan.skips)} files skipped ({', '.join(f'{r}: {n}' for r, n in reasons.most_common())}); "
                 "all listed with reasons in [skipped.tsv](skipped.tsv).\n")
        g.append("\n".join(f"- {mdtext.code(s.rel)}: {mdtext.escape(s.reason)}" for s in scan.skips[:20]) + "\n")
    else:
        g.append("None.\n")
    if scan.partial:
        g.append(f"{len(scan.partial)} files read partially (lines this Python cannot parse were set aside):\n")
        g.append("\n".join(f"- {mdtext.code(s.rel)}: {mdtext.escape(s.reason)}" for s in scan.partial[:20]) + "\n")
    body.append(region("overview", "\n".join(g)))
    fm = {"title": f"{slug} codebase", "type": "codebase", "tags": ["codebase"], "repo": slug,
          "commit": git.commit, "remote": _public_remote(git.remote), "path": f"raw/code/{slug}",
          "version": str(meta["version"]) if meta.get("version") else None,
          "summary": (meta.get("description") or (meta.get("summary") or "").split("\n")[0])[:200] or None}
    return Page(path, {k: v for k, v in fm.items() if v is not None}, "\n".join(body))


def _package_map(model: RepoModel) -> str:
    """Python code by folder, two levels below the folder all Python files share."""
    folders = [rel.rsplit("/", 1)[0].split("/") if "/" in rel else [] for rel in model.modules.values()]
    common = folders[0] if folders else []
    for f in folders[1:]:
        n = 0
        while n < min(len(common), len(f)) and common[n] == f[n]:
            n += 1
        common = common[:n]
    depth = len(common) + 2
    stats: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0, 0])  # modules, lines, symbols, surfaces
    for rel in model.modules.values():
        key = "/".join(rel.split("/")[:-1][:depth]) or "."
        f = model.scan.files[rel].facts
        s = stats[key]
        s[0] += 1
        s[1] += f.get("lines", 0)
        s[2] += len(f.get("symbols", ()))
        s[3] += len(f.get("surfaces", ()))
    rows = sorted(stats.items(), key=lambda kv: (-kv[1][1], kv[0]))
    out = mdtext.table(["Folder", "Modules", "Lines", "Symbols", "Perf. sites"],
                       [[mdtext.code(k + "/" if k != "." else k), *map(str, v)] for k, v in rows[:40]])
    if len(rows) > 40:
        out += f"\n… and {len(rows) - 40} more folders.\n"
    return out


def _surfaces_section(model: RepoModel, link, kernels: list[dict], path: str, chosen: dict | None = None) -> str:
    repo_slug = path.split("/")[1]
    out = ["## Performance-relevant surfaces\n"]
    rows = []
    for slug, c in CONCEPTS.items():
        occ = model.surfaces.get(slug, [])
        if slug == "pallas-kernels" and kernels:
            n, files = len(kernels), len({k["path"] for k in kernels})
        else:
            n, files = len(occ), len({o[0] for o in occ})
        if n:
            rows.append([f"[{c.title}]({rel_link(path, f'concepts/{slug}.md')})", str(n), str(files)])
    if not rows:
        return out[0] + "_None found._\n"
    out.append(mdtext.table(["Surface", "Sites", "Files"], rows))
    if kernels:
        out.append("### Pallas kernels\n")
        krows = []
        for k in sorted(kernels, key=lambda k: (k["category"], k["kernel"], k["path"], k["line"])):
            name = mdtext.code(k["kernel"])
            if k.get("page"):
                name = f"[{name}]({rel_link(path, k['page'])})"
            krows.append([name, k["backend"], mdtext.escape(k["category"]), k["kind"],
                          f"[{mdtext.code(str(k['path']) + ':' + str(k['line']))}]({link(k['path'], k['line'])})"])
        out.append(mdtext.table(["Kernel", "Backend", "Category", "Kind", "Launch site"], krows[:80]))
        if len(krows) > 80:
            out.append(f"… and {len(krows) - 80} more in the kernel catalog.\n")
    out.append(_config_knobs(model, link))
    if chosen:
        out.append(selection.selection_section(chosen, link, lambda page: rel_link(path, page)))
    for slug, c in CONCEPTS.items():
        occ = model.surfaces.get(slug, [])
        if not occ or (slug == "pallas-kernels" and kernels):
            continue
        files = len({o[0] for o in occ})
        out.append(f"### {c.title}\n")
        out.append(f"{len(occ)} sites in {files} files. "
                   f"See [{c.title}]({rel_link(path, f'concepts/{slug}.md')}).\n")
        deciders = deciding_functions(model, occ) if slug != "xla-flags" else []  # flags: the table says where
        if deciders:
            out.append("Decided in: " + ", ".join(
                f"[{mdtext.code(name)}]({link(rel, line)}) ({n} sites)" for name, rel, line, n in deciders) + ".\n")
        if slug == "sharding":
            builders = deciding_functions(model, [o for o in occ if _MESH_BUILD.search(o[2])])
            if builders:
                out.append("Mesh built in: " + ", ".join(
                    f"[{mdtext.code(name)}]({link(rel, line)}) ({n} sites)" for name, rel, line, n in builders) + ".\n")
        if slug == "xla-flags":
            out.append(flag_pages.flags_section(model, occ, link, repo_slug, path))
        else:
            out.append("\n".join(_surface_files(occ, link, FILES_PER_CONCEPT)) + "\n")
    return "\n".join(out)


def _short(value: str, n: int = 100) -> str:
    if value == "":
        return '""'  # a setting written empty (`quantization: ""`: off), not a missing one
    return value if len(value) <= n else value[: n - 1] + "…"


def _config_knobs(model: RepoModel, link) -> str:
    knobs = config_knobs.config_knobs(model)
    if not knobs:
        return ""
    rows = []
    for k in knobs:
        values = ", ".join(mdtext.code(_short(v)) for v in k["values"][:4])
        more = f" +{len(k['values']) - 4}" if len(k["values"]) > 4 else ""
        if k.get("offered"):
            more += " (its comment offers " + ", ".join(mdtext.code(v) for v in k["offered"][:12]) + ")"
        rel, _, line = k["example"].rpartition(":")
        default = "—"
        if k["default"] is not None:
            drel, _, dline = k["default_at"].rpartition(":")
            default = f"[{mdtext.code(_short(k['default']))}]({link(drel, int(dline))})"
        rows.append([mdtext.code(k["key"]), CONCEPTS[k["concept"]].title, default, (values + more) or "—",
                     str(k["files"]), f"[{mdtext.code(k['example'])}]({link(rel, int(line))})"])
    return ("### Configuration knobs\n\nSettings in config and launch files that move performance (the default "
            "is the value in the repository's base or default config file; every knob in "
            "[knobs.json](knobs.json)):\n\n"
            + mdtext.table(["Setting", "Concept", "Default", "Values seen", "Files", "Example"], rows[:60]))


_MESH_BUILD = re.compile(r"(?:^|\.)(?:Mesh|AbstractMesh|make_mesh|create_device_mesh|create_hybrid_device_mesh)$")
def module_page(slug: str, model: RepoModel, module: str, links: SourceLinks, overview: str) -> Page:
    path = module_page_path(slug, module)
    link = links.for_page(path)
    rel = model.modules[module]
    f = model.scan.files[rel].facts
    importers = sorted(model.fan_in.get(module, ()))
    g = [f"Source: [{mdtext.code(rel)}]({link(rel)}) · {f.get('lines', 0)} lines · imported by {len(importers)} modules · "
         f"[{slug} overview]({rel_link(path, overview)})\n"]
    if f.get("doc"):
        g.append(f"> {mdtext.escape(f['doc'])}\n")
    syms = f.get("symbols", ())
    if syms:
        g.append("## Symbols\n")
        g.append(mdtext.table(["Name", "Kind", "Summary"], [
            [f"[{mdtext.code(q)}]({link(rel, ln)})", k, mdtext.escape(d)[:160]] for q, k, ln, d in syms[:150]]))
        if len(syms) > 150:
            g.append(f"… {len(syms) - 150} more in [symbols.tsv](../symbols.tsv).\n")
    g.append("## Performance-relevant surfaces\n")
    if not f.get("surfaces"):
        g.append("None found in this module.\n")
    else:
        by_concept: dict[str, list] = defaultdict(list)
        for cs, ln, lb in f["surfaces"]:
            by_concept[cs].append((ln, lb))
        for cs, hits in by_concept.items():
            lines = ", ".join(f"[{ln}]({link(rel, ln)})" for ln, _ in hits[:10])
            g.append(f"- [{CONCEPTS[cs].title}]({rel_link(path, f'concepts/{cs}.md')}): "
                     f"{_counts_line([lb for _, lb in hits])} — lines {lines}")
        g.append("")
    g.append("## Imported by\n")
    g.append("\n".join(f"- [{mdtext.code(m)}]({link(model.modules[m])})" for m in importers[:40]) + "\n")
    if len(importers) > 40:
        g.append(f"… and {len(importers) - 40} more.\n")
    fm = {"title": module, "type": "codebase", "tags": ["codebase", "module"], "repo": slug,
          "commit": links.git.commit, "path": f"raw/code/{slug}/{rel}", "module": module,
          "summary": f.get("doc") or None}
    return Page(path, {k: v for k, v in fm.items() if v is not None},
                f"# {mdtext.escape(module)}\n\n" + region("module", "\n".join(g)))


def concept_page(slug: str, repo: str, model: RepoModel | None, links: SourceLinks | None) -> Page:
    """The concept page's own text plus this repo's 'Where it appears' region (other repos' regions stay)."""
    occ = model.surfaces.get(slug, []) if model else []
    text = ""  # an empty region is dropped: this repo no longer shows the concept
    if occ and links:
        link = links.for_page(f"concepts/{slug}.md")
        files = len({o[0] for o in occ})
        text = "\n".join([f"### [{mdtext.escape(repo)}](../codebases/{repo}/overview.md)\n",
                          f"{len(occ)} sites in {files} files.\n",
                          "\n".join(_surface_files(occ, link, FILES_PER_CONCEPT)) + "\n"])
    return concepts.concept_page(slug, f"appears-{repo}", text)
