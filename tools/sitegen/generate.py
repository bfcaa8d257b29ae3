"""Everything the site shows, as files: used by the MkDocs plugin and by `tools site stage`.

`generate()` returns {docs-relative path: text or bytes} for the generated pages and assets;
`stage()` writes docs/ + wiki/ (raw/ links rewritten) + those files + a plugin-free mkdocs.yml into a
folder that `zensical build` or plain `mkdocs build` builds.
"""

from __future__ import annotations

import json
import re
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from .. import mdrisk
from ..errors import ToolsError
from ..mdscan import first_block_heading
from ..wikiscan import Wiki, scan
from . import neutralise
from .dashboard import dashboard_md, fill
from .explorers import explorer_files
from .graph import graph_data
from .kernels import directory_md
from .landing import ROOT_NAV, wiki_files
from .headsafe import file_title, needs_change, theme_safe
from .inertmd import inert
from .links import Sources, href, page_url, rewrite_raw_links
from .gaps import gap_files
from .loops import loop_files
from .pages_view import SitePage, site_pages

ASSETS = Path(__file__).parent / "assets"
ASSET_DIR = "assets/autoresearch"
EXTRA_CSS = [f"{ASSET_DIR}/site.css"]
EXTRA_JS = [f"{ASSET_DIR}/tables.js", f"{ASSET_DIR}/loops.js"]
WIKI = "wiki"  # where wiki pages live in the built site
GRAPH_JSON = "explore/graph/graph.json"


@dataclass
class Generated:
    files: dict[str, str | bytes]  # docs-relative path -> content
    pages: list[SitePage]
    sources: Sources
    stats: dict = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    wiki_files: list[str] = field(default_factory=list)  # wiki-relative files the site copies, .nav.yml included
    appendix: dict[str, str] = field(default_factory=dict)  # wiki-relative hand-written index -> listing to append
    dashboard: str = ""  # the home page's dashboard (replaces <!-- tools:dashboard --> in docs/index.md)


def asset_files() -> dict[str, bytes]:
    """Vendored renderer, our JS/CSS and licences, under assets/autoresearch/."""
    out = {}
    for path in sorted(ASSETS.rglob("*")):
        if path.is_file():
            out[f"{ASSET_DIR}/{path.relative_to(ASSETS).as_posix()}"] = path.read_bytes()
    return out


def graph_page(stats: dict) -> str:
    """explore/graph/index.md. Generated pages are folder/index.md files so that a relative URL in
    raw HTML means the same whether the engine resolves it from the page URL (MkDocs) or from the
    source file (Zensical)."""
    s = stats
    return "\n".join([
        "---", "title: Concept graph", "hide: [toc]", "---", "", "# Concept graph", "",
        f"{s['nodes']} pages, {s['edges']} links and references, {s['components']} connected components "
        f"(largest {s['largest_component']}, {s['isolated']} isolated pages). Search dims the rest "
        "(Enter zooms to the matches), the legend toggles categories, hovering lights up neighbours, "
        "a click opens the page. Data: [graph.json](graph.json).", "",
        '<iframe class="arw-frame arw-graph-frame" src="view.html" title="Concept graph" '
        'style="width:100%;height:75vh;min-height:480px;border:0"></iframe>', ""])


def graph_view_html() -> str:
    """The standalone graph page (explore/graph/view.html), all scripts from the site."""
    a = "../../" + ASSET_DIR
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Concept graph</title>
<meta name="viewport" content="width=device-width,initial-scale=1">
<link rel="icon" href="data:,">
<link rel="stylesheet" href="{a}/graph.css">
</head><body>
<div id="bar"><input id="search" type="search" placeholder="Search pages… (Enter zooms)" aria-label="Search pages">
<span id="info"></span></div>
<div id="legend" aria-label="Legend"></div>
<div id="graph"></div>
<script src="{a}/vendor/graphology.umd.min.js"></script>
<script src="{a}/vendor/sigma.min.js"></script>
<script src="{a}/graph.js" data-graph="graph.json" data-root="../../"></script>
</body></html>
"""


def explore_index(n_kernels: int, stats: dict) -> str:
    return "\n".join([
        "---", "title: Explore", "---", "", "# Explore", "",
        f"- [Concept graph](graph/index.md): {stats['nodes']} pages and {stats['edges']} links at a glance.",
        f"- [Kernel directory](kernels/index.md): {n_kernels} kernels, sortable and filterable.",
        "- [Experiments](experiments/index.md): one interactive explorer per model.",
        "- [Loops](loops/index.md): the frontier staircase of each autoresearch loop.",
        "- [Gaps](gaps/index.md): time per token by op category, each run against its reference.",
        "- [Wiki](../wiki/index.md): every page, by section.", ""])


EXPLORE_NAV = ("title: Explore\nnav:\n  - index.md\n  - Concept graph: graph/index.md\n"
               "  - Kernel directory: kernels/index.md\n  - Experiments: experiments\n  - Loops: loops\n  - Gaps: gaps\n")


def nav_files(wiki: Wiki) -> set[str]:
    """The awesome-nav files written by hand in wiki/ (hidden files: the scan does not list them)."""
    return {f"{d}/.nav.yml" if d else ".nav.yml" for d in ("", *wiki.dirs) if (wiki.root / d / ".nav.yml").is_file()}


def generate(wiki_dir: Path, docs_dir: Path | None = None, *, directory_urls: bool = True,
             raw_url: str | None = None) -> Generated:
    """Scan the wiki and produce every generated page, data file, nav file and asset."""
    t0 = time.perf_counter()
    wiki = scan(wiki_dir) if wiki_dir.is_dir() else Wiki(wiki_dir, [], set(), set())
    pages = site_pages(wiki.pages)
    t_scan = time.perf_counter()
    sources = Sources(pages, raw_url)
    navs = nav_files(wiki) if wiki_dir.is_dir() else set()
    existing = {p.rel for p in pages} | navs
    files: dict[str, str | bytes] = {}
    warnings: list[str] = []
    generated, appendix = wiki_files(pages, existing)
    sources.set_landing(existing | set(generated))
    for rel, text in generated.items():
        files[f"{WIKI}/{rel}"] = text
    as_text = _neutralised(pages, files, warnings)
    # Listing pages (type index/log) link to everything: as hubs they would hide the structure.
    graph_pages = [p for p in pages if p.type not in ("index", "log")]
    data = graph_data(graph_pages, lambda rel: href(page_url(f"{WIKI}/{rel}", directory_urls)))
    t_graph = time.perf_counter()
    files[GRAPH_JSON] = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    files["explore/graph/index.md"] = graph_page(data["stats"])
    files["explore/graph/view.html"] = graph_view_html()
    kern = directory_md(pages, sources, "explore/kernels/index.md", directory_urls)
    files["explore/kernels/index.md"] = kern
    files["explore/index.md"] = explore_index(kern.count("<tr data-"), data["stats"])
    files["explore/.nav.yml"] = EXPLORE_NAV
    files.update(explorer_files(pages, wiki_dir, directory_urls, warnings))
    files.update(loop_files(pages, directory_urls, warnings))
    files.update(gap_files(pages, directory_urls, warnings))
    files.update(asset_files())
    if docs_dir is None or not (docs_dir / ".nav.yml").is_file():
        files[".nav.yml"] = ROOT_NAV
    warnings += [f"wiki/{p.rel}: {p.problem}" for p in pages if p.problem and p.rel not in as_text]
    if directory_urls and docs_dir is not None:  # docs/wiki.md would become wiki/index.html, over the wiki's own
        warnings += [f"docs/{d}.md: its page would be {d}/index.html, which the generated {d}/ section owns; rename it"
                     for d in (WIKI, "explore") if (docs_dir / f"{d}.md").is_file()]
    warnings += [f"wiki/{p.rel}: no frontmatter" for p in pages if not p.has_frontmatter and not p.problem]
    if directory_urls:  # topic.md beside topic/: both are served at topic/ (MkDocs keeps one, in silence)
        folders = {d for p in pages for d in _parents(p.rel)}
        warnings += [f"wiki/{f}.md: its page would be wiki/{f}/, which the folder wiki/{f}/ owns (its landing page "
                     f"is served there instead); move it to wiki/{f}/index.md or rename it"
                     for f in sorted(folders) if f"{f}.md" in existing]
    stats = {"pages": len(pages), **data["stats"], "scan_s": round(t_scan - t0, 3),
             "graph_s": round(t_graph - t_scan, 3), "total_s": round(time.perf_counter() - t0, 3)}
    warnings += [f"wiki/{rel}: {reason}" for rel, reason in wiki.refused]
    return Generated(files, pages, sources, stats, warnings, sorted((wiki.files | navs) - as_text),
                     {rel: text for rel, text in appendix.items() if rel not in as_text},
                     dashboard_md(pages, _lint_counts(wiki)))


def _links_out(root: Path, warnings: list[str]):
    """``copytree``'s ignore: a link in docs/ whose target lies outside the project is not copied (it followed the
    link and published the file outside)."""
    top = root.resolve()

    def ignore(folder: str, names: list[str]) -> set[str]:
        out = set()
        for n in names:
            p = Path(folder, n)
            if p.is_symlink() and not p.resolve().is_relative_to(top):
                warnings.append(f"{p}: a link out of the project, not staged")
                out.add(n)
        return out
    return ignore


def _parents(rel: str) -> list[str]:
    parts = rel.split("/")[:-1]
    return ["/".join(parts[:i]) for i in range(1, len(parts) + 1)]


def _lint_counts(wiki: Wiki) -> tuple[int, int] | None:
    """(errors, warnings) of `tools lint` on this wiki, for the dashboard; None when it cannot run here."""
    try:
        from ..lint import ERROR, check
        from ..project import Project

        issues = check(Project(wiki.root.parent), wiki)
    except Exception:  # noqa: BLE001 - the dashboard never stops a build
        return None
    errors = sum(1 for i in issues if i.severity == ERROR)
    return errors, len(issues) - errors


def _neutralised(pages: list, files: dict, warnings: list[str]) -> set[str]:
    """Pages not UTF-8, with a frontmatter that cannot be read, or built to stall the markdown engine: published as
    text (``files``), not copied."""
    out = set()
    for p in pages:
        text = p.page.text
        # a frontmatter our reader refused (bad YAML, an alias bomb) would be parsed again, unbounded, by the engine
        reason = (p.page.error or "not UTF-8") if text is None or p.page.error else mdrisk.problem(text)
        if reason is None:
            continue
        if text is None:
            text = p.page.body or ""
        files[f"{WIKI}/{p.rel}"] = neutralise.as_text(p.rel, text, reason)
        warnings.append(f"wiki/{p.rel}: {reason}; published as text")
        out.add(p.rel)
    return out


# ---------------------------------------------------------------- plain files for any engine

def staged_config(config_text: str, site_dir: str = "site") -> str:
    """The project's mkdocs.yml for the staged tree: docs_dir docs, no autoresearch-wiki plugin,
    our CSS/JS listed explicitly (the plugin adds them otherwise)."""
    data = yaml.load(config_text, Loader=_TolerantLoader) or {}
    data["docs_dir"] = "docs"
    data["site_dir"] = site_dir
    data.pop("watch", None)
    plugins = []
    for p in data.get("plugins") or []:
        name = p if isinstance(p, str) else next(iter(p))
        if name != "autoresearch-wiki":
            plugins.append(p)
    data["plugins"] = plugins
    for key, extra in (("extra_css", EXTRA_CSS), ("extra_javascript", EXTRA_JS)):
        data[key] = list(data.get(key) or []) + [e for e in extra if e not in (data.get(key) or [])]
    return yaml.dump(data, Dumper=_TolerantDumper, sort_keys=False, allow_unicode=True)


def stage(root: Path, out: Path, *, wiki_dir: Path | None = None, docs_dir: Path | None = None,
          config: Path | None = None, raw_url: str | None = None) -> Generated:
    """Write a self-contained project at ``out``: mkdocs.yml + docs/ (docs, wiki, generated files)."""
    from .config import mkdocs_yml

    wiki_dir = wiki_dir or root / "wiki"
    docs_dir = docs_dir or root / "docs"
    config = config or root / "mkdocs.yml"
    _check_out(out, root, wiki_dir, docs_dir)
    gen = generate(wiki_dir, docs_dir, raw_url=raw_url)
    target = out / "docs"
    if target.exists():
        shutil.rmtree(target)
    if docs_dir.is_dir():
        shutil.copytree(docs_dir, target, ignore=_links_out(root, gen.warnings))
    else:
        target.mkdir(parents=True)
    made: set[Path] = set()
    for rel in gen.wiki_files:
        dest = target / WIKI / rel
        if dest.parent not in made:
            dest.parent.mkdir(parents=True, exist_ok=True)
            made.add(dest.parent)
        shutil.copyfile(wiki_dir / rel, dest)
    for p in gen.pages:
        text = p.page.text  # None: not UTF-8, copied as it is
        if text is None:
            continue
        new = _staged_wiki_page(text, p.rel, gen)
        if new != text:
            (target / WIKI / p.rel).write_text(new, encoding="utf-8")
    for page_path in target.rglob("*.md"):  # the hand-written docs: their frontmatter reaches <head> too
        if page_path.is_relative_to(target / WIKI) or page_path.is_symlink():
            continue
        text = page_path.read_text(encoding="utf-8", errors="replace")
        safe = _theme_safe_text(text, wiki=False)
        if safe != text:
            page_path.write_text(safe, encoding="utf-8")
    home = target / "index.md"
    if home.is_file():
        try:
            text = home.read_text(encoding="utf-8")
        except UnicodeDecodeError as e:
            raise ToolsError(f"{docs_dir / 'index.md'}: not UTF-8 ({e.reason} at byte {e.start}); save it as UTF-8") \
                from None
        if fill(text, gen.dashboard) != text:
            home.write_text(fill(text, gen.dashboard), encoding="utf-8")
    for rel, content in gen.files.items():
        path = target / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, str) and rel.endswith(".md"):  # a folder's name as a landing page's title
            content = _theme_safe_text(content, wiki=False)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
    text = config.read_text(encoding="utf-8") if config.is_file() else mkdocs_yml(root.name)
    (out / "mkdocs.yml").write_text(staged_config(text), encoding="utf-8")
    (out / STAGED_MARK).write_text("staged by `tools site stage`: docs/ and mkdocs.yml are replaced each time\n",
                                   encoding="utf-8")
    return gen


def _check_out(out: Path, root: Path, wiki_dir: Path, docs_dir: Path) -> None:
    """The staged project replaces ``out/docs`` and ``out/mkdocs.yml``: ``out`` must hold none of the knowledge base
    (``--out .`` deleted the user's docs/ and rewrote their mkdocs.yml; ``--out ..`` a docs/ beside it)."""
    o = out.resolve()
    for mine in (root, wiki_dir, docs_dir):
        m = mine.resolve()
        if m.is_relative_to(o) or (mine is not root and o.is_relative_to(m)):
            raise ToolsError(f"--out {out}: the staged project's docs/ and mkdocs.yml would replace the knowledge "
                             f"base's own ({m}); stage into a folder of its own (the default: build/site-src)")
    staged_before = (o / STAGED_MARK).exists() or ((o / "mkdocs.yml").is_file() and (o / "docs" / WIKI).is_dir())
    if (o / "docs").exists() and not staged_before:
        raise ToolsError(f"--out {out}: {o / 'docs'} exists and was not staged here: it is not replaced")


STAGED_MARK = ".tools-staged"  # written into every staged project: its docs/ is the tools' to replace


def _theme_safe_text(text: str, wiki: bool) -> str:
    """The page with its frontmatter as a theme may print it (``headsafe``); text without frontmatter as is."""
    from ..pages import FrontmatterError, render, split

    try:
        meta, body = split(text)
    except FrontmatterError:
        return text
    if meta is None or not needs_change(meta, wiki):
        return text
    return render(theme_safe(meta, wiki), body)


def _staged_wiki_page(text: str, rel: str, gen: Generated) -> str:
    """A wiki page as the staged build gets it: no sanitizer runs there, so its frontmatter is escaped for the
    theme, its body made inert (``inertmd``), and its raw/ links rewritten as in the plugin's build."""
    from ..pages import FrontmatterError, render, split

    try:
        meta, body = split(text)
    except FrontmatterError:
        meta, body = None, text
    meta = dict(meta or {})
    if "title" not in meta:  # the engine would print the first heading or the file name raw: escaped here
        meta["title"] = first_block_heading(body) or file_title(Path(rel).stem)
    body = inert(rewrite_raw_links(body, rel, gen.sources)) + gen.appendix.get(rel, "")
    return render(theme_safe(meta, True), body)


class _Tagged:
    def __init__(self, tag: str, value):
        self.tag, self.value = tag, value


def _construct_any(loader, tag_suffix, node):
    if isinstance(node, yaml.ScalarNode):
        value = loader.construct_scalar(node)
    elif isinstance(node, yaml.SequenceNode):
        value = loader.construct_sequence(node, deep=True)
    else:
        value = loader.construct_mapping(node, deep=True)
    return _Tagged(node.tag, value)


def _represent_tagged(dumper, data: _Tagged):
    if isinstance(data.value, list):
        return dumper.represent_sequence(data.tag, data.value)
    if isinstance(data.value, dict):
        return dumper.represent_mapping(data.tag, data.value)
    return dumper.represent_scalar(data.tag, data.value)


class _TolerantLoader(yaml.SafeLoader):
    """Keeps !!python/name:... and !ENV tags as opaque values so they survive a round trip."""


_TolerantLoader.add_multi_constructor("!", _construct_any)
_TolerantLoader.add_multi_constructor("tag:yaml.org,2002:python/", _construct_any)


class _TolerantDumper(yaml.SafeDumper):
    pass


_TolerantDumper.add_representer(_Tagged, _represent_tagged)

__all__ = ["generate", "stage", "staged_config", "Generated", "asset_files"]
