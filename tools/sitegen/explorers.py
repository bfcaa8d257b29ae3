"""Experiment explorers: one standalone plotly page per model, and a runs table with comparisons per lane
(``experiments.compare_view``), each embedded in an iframe.

The HTML comes from `tools.experiments.explorer.explorer_html`; this module only places it and
ships ONE copy of plotly.js for all of them (assets/autoresearch/plotly.min.js).
"""

from __future__ import annotations

import hashlib
import html
import posixpath

from .. import mdtext
from ..wikiscan import slug
from .links import href, page_url, rel_url
from .pages_view import SitePage

PLOTLY_ASSET = "assets/autoresearch/plotly.min.js"


def model_pages(pages: list[SitePage]) -> list[SitePage]:
    return [p for p in pages if p.type == "model" and p.rel.startswith("models/")]


def explorer_api():
    """(records_and_problems, explorer_html, load_references or None), or None without the experiments module."""
    try:
        from ..experiments.explorer import explorer_html
        from ..experiments.records import records_and_problems
    except (ImportError, AttributeError):
        return None
    try:
        from ..experiments.explorer import load_references
    except (ImportError, AttributeError):
        load_references = None
    return records_and_problems, explorer_html, load_references


def plotly_js() -> str | None:
    try:
        import plotly.offline
        return plotly.offline.get_plotlyjs()
    except (ImportError, AttributeError):
        return None


def _models(pages: list[SitePage]) -> dict[str, list[SitePage]]:
    """Model name -> its model pages (one per lane, or one for the model)."""
    out: dict[str, list[SitePage]] = {}
    for p in model_pages(pages):
        name = str(p.meta.get("model") or posixpath.splitext(posixpath.basename(p.rel))[0])
        out.setdefault(name, []).append(p)
    return out


def explorer_files(pages: list[SitePage], wiki_dir, directory_urls: bool = True,
                   warnings: list[str] | None = None) -> dict[str, str]:
    """Docs-relative files: explore/experiments/index.md, <model>/index.md + explorer.html per model,
    plotly.js once."""
    models = _models(pages)
    api = explorer_api()
    lines = ["---", "title: Experiments", "---", "", "# Experiments", ""]
    out: dict[str, str] = {}
    records = None
    why = ("the experiments module is not installed" if api is None else "no model pages under `wiki/models/`")
    if api is not None and models:
        from ..errors import ToolsError
        try:
            records, left_out = api[0]((p.rel, p.meta) for p in pages if p.rel.startswith("experiments/"))
            # a run's page broken by a hand edit (`tokens_per_s: "12,000"`) drops out: --strict must fail. A page
            # without an `exp_id` was never a run (a written note of type experiment): no warning
            runs = {p.rel for p in pages if p.meta.get("exp_id")}
            if warnings is not None:
                warnings += [f"wiki/{rel}: left out ({why})" for rel, why in left_out if rel in runs]
        except ToolsError as e:
            why = f"experiment pages could not be read ({html.escape(str(e))})"
            if warnings is not None:
                warnings.append(f"experiment explorers skipped: {e}")
    if records is None:
        out["explore/experiments/index.md"] = "\n".join(lines + [f"No explorers yet: {why}.", ""])
        return out
    _, explorer_html, load_references = api
    from ..experiments.compare_view import compare_html
    lines += ["| Model | Experiments |", "|---|---|"]
    model_slugs: set[str] = set()
    for name, mpages in sorted(models.items()):
        s = _folder(name, "model", model_slugs)  # `llama_7b` and `llama-7b` are two models: two folders
        mine = [r for r in records if str(r.get("model")) == name]
        md_src, html_src = f"explore/experiments/{s}/index.md", f"explore/experiments/{s}/explorer.html"
        html_url = page_url(html_src, directory_urls)
        refs = (load_references(wiki_dir, name) if load_references else
                [r for p in mpages for r in (p.meta.get("references") or []) if isinstance(r, dict)])

        def url(r: dict, _from=html_url) -> str:
            return href(rel_url(_from, page_url("wiki/" + str(r.get("page", "")), directory_urls)))

        out[html_src] = explorer_html(name, mine, refs, rel_url(html_url, PLOTLY_ASSET), url)
        frame = "explorer.html"  # same folder: reads the same from the page URL and from the source file
        # names are other people's text: escaped as markdown where markdown reads them, as an attribute in HTML
        title, title_attr = mdtext.escape(name), mdtext.attr(name)
        model_links = ", ".join(mdtext.link(mdtext.escape(p.title), mdtext.file_target(f"../../../wiki/{p.rel}"))
                                for p in mpages)
        runs_links, taken = [], set()
        for lane in sorted({str(r.get("lane")) for r in mine if r.get("status") == "filed"}):
            ls = _folder(lane, "lane", taken)  # `v5e_8` and `v5e-8` are two lanes: two folders
            # a folder of its own: index.md and the page beside it, so the frame's relative src holds whether
            # the site serves runs-<lane>/ (directory URLs) or runs-<lane>/index.html
            runs_html = f"explore/experiments/{s}/runs-{ls}/runs.html"
            runs_url = page_url(runs_html, directory_urls)

            def run_url(r: dict, _from=runs_url) -> str:
                return href(rel_url(_from, page_url("wiki/" + str(r.get("page", "")), directory_urls)))

            out[runs_html] = compare_html(name, lane, mine, rel_url(runs_url, PLOTLY_ASSET), run_url)
            out[f"explore/experiments/{s}/runs-{ls}/index.md"] = "\n".join([
                "---", f"title: {json_str(f'Runs: {name}/{lane}')}", "---", "", f"# Runs: {title}/{mdtext.escape(lane)}",
                "", "Pin a baseline, sort and filter, tick 2–5 runs to compare them (only the keys that differ), "
                "download the table as CSV or JSON.", "",
                f'<iframe class="arw-frame" src="runs.html" title="{title_attr} {mdtext.attr(lane)} runs" '
                'loading="lazy" style="width:100%;height:1400px;border:0"></iframe>', ""])
            runs_links.append(mdtext.link(mdtext.escape(lane), f"runs-{ls}/index.md"))
        out[md_src] = "\n".join([
            "---", f"title: {json_str('Explorer: ' + name)}", "---", "", f"# Explorer: {title}", "",
            f"{len(mine)} experiments. Model pages: {model_links}. "
            f"Runs tables and comparisons per lane: {', '.join(runs_links) or '—'}.", "",
            f'<iframe class="arw-frame" src="{html.escape(frame)}" title="{title_attr} explorer" '
            'loading="lazy" style="width:100%;height:640px;border:0"></iframe>', ""])
        lines.append(f"| {mdtext.link(title, f'{s}/index.md')} | {len(mine)} |")
    out["explore/experiments/index.md"] = "\n".join(lines + [""])
    if len(models) > 6:  # the sidebar lists the explorers only while they are few
        out["explore/experiments/.nav.yml"] = "nav:\n  - index.md\n"
    js = plotly_js()
    if js:
        out[PLOTLY_ASSET] = js
    return out


def json_str(s: str) -> str:
    import json
    return json.dumps(s)


def _folder(name: str, fallback: str, taken: set[str]) -> str:
    """A folder name for ``name`` that no other name of ``taken`` has: its slug, with a short hash of the name when
    two names slug alike (or to nothing, as a name of only non-Latin letters does)."""
    s = slug(name)
    if not s or s in taken:
        s = f"{s or fallback}-{hashlib.sha1(name.encode()).hexdigest()[:6]}"
    taken.add(s)
    return s
