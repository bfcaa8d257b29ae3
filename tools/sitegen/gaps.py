"""Gap explorers: for each gap analysis (``wiki/analyses/gap-*.md``, written by `tools gap` and the loop's
reference lane), a plotly bar chart of µs per token by op category for both runs, read from the page's
``categories_us_per_token`` frontmatter. Per analysis: explore/gaps/<name>/index.md (the iframe and a link back),
chart.html and chart.json; explore/gaps/index.md lists them."""

from __future__ import annotations

import json
import math
import posixpath

from .. import mdtext
from ..htmlpage import plotly_page
from ..jsonvalues import finite, plain
from .explorers import PLOTLY_ASSET, json_str
from .links import page_url, rel_url
from .loops import NAME
from .pages_view import SitePage


def _num(v):  # `.nan` is a float to YAML, and no figure: the table said "+nan %"
    try:
        return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) else None
    except OverflowError:  # an integer past any float (400 digits): no figure either
        return None


def gap_pages(pages: list[SitePage]) -> list[SitePage]:
    return [p for p in pages if p.type == "analysis" and p.rel.startswith("analyses/gap-")
            and isinstance(p.meta.get("categories_us_per_token"), list)]


def chart_data(p: SitePage) -> dict:
    cats = [{"category": str(c.get("category")), "ours": _num(c.get("ours")) or 0.0, "ref": _num(c.get("ref")) or 0.0}
            for c in p.meta["categories_us_per_token"] if isinstance(c, dict) and c.get("category")]
    return {"ours": str(p.meta.get("ours") or ""), "ref": str(p.meta.get("reference") or ""),
            "gap_pct": _num(p.meta.get("gap_pct")), "items": plain(p.meta.get("items")), "categories": cats}


def gap_files(pages: list[SitePage], directory_urls: bool = True,
              warnings: list[str] | None = None) -> dict[str, str]:
    """Docs-relative files: explore/gaps/index.md, and per analysis index.md + chart.html + chart.json."""
    out: dict[str, str] = {}
    lines = ["---", "title: Gaps", "---", "", "# Gaps to a reference", ""]
    good = [p for p in gap_pages(pages) if NAME.fullmatch(posixpath.basename(p.rel).removesuffix(".md"))]
    if not good:
        out["explore/gaps/index.md"] = "\n".join(lines + ["No gap analyses yet: run `tools gap OURS REF`, or a loop "
                                                          "with `reference:`.", ""])
        return out
    lines += ["One bar chart per gap analysis: µs per token by op category, ours against the reference.", "",
              "| Analysis | Ours | Reference | Reference faster by | Items |", "|---|---|---|---:|---:|"]
    for p in sorted(good, key=lambda p: p.rel):
        name = posixpath.basename(p.rel).removesuffix(".md")
        base = f"explore/gaps/{name}/"
        try:  # one hand-edited page never stops the build: it is named in a warning, the rest builds
            data = chart_data(p)
            chart_json = json.dumps(finite(data), sort_keys=True, indent=1, default=str, allow_nan=False)
        except (TypeError, ValueError) as e:
            if warnings is not None:
                warnings.append(f"wiki/{p.rel}: no gap chart ({e})")
            continue
        html_url = page_url(base + "chart.html", directory_urls)
        out[base + "chart.json"] = chart_json
        out[base + "chart.html"] = plotly_page("gapbars", f"{name}: time per token by category",
                                               rel_url(html_url, PLOTLY_ASSET), data)
        title = mdtext.escape(name)  # frontmatter and file names are other people's text
        out[base + "index.md"] = "\n".join([
            "---", f"title: {json_str('Gap: ' + name)}", "---", "", f"# {title}", "",
            f"The analysis page: {mdtext.link(title, mdtext.file_target(f'../../../wiki/{p.rel}'))}. "
            "Data: [chart.json](chart.json).", "",
            f'<iframe class="arw-frame arw-gap-frame" src="chart.html" title="{mdtext.attr(name)} time per token" '
            'loading="lazy" style="width:100%;height:520px;border:0"></iframe>', ""])
        gap = "—" if data["gap_pct"] is None else f"{data['gap_pct']:+.1f} %"
        items = data["items"] if data["items"] is not None else "—"
        lines.append(f"| {mdtext.link(title, mdtext.file_target(f'{name}/index.md'))} | {mdtext.code(data['ours'])} | "
                     f"{mdtext.code(data['ref'])} | {gap} | {mdtext.escape(str(items))} |")
    out["explore/gaps/index.md"] = "\n".join(lines + [""])
    if len(good) > 6:
        out["explore/gaps/.nav.yml"] = "nav:\n  - index.md\n"
    return out
