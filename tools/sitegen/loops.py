"""Loop explorers: the frontier staircase of each autoresearch loop (wiki/loops/<name>.md), as a standalone
plotly page embedded in an iframe, like the model explorers, with the same one shared copy of plotly.js.

Per loop: explore/loops/<name>/index.md (the iframe), staircase.html (the plot) and staircase.json (its data).
A run belongs to a loop when its experiment page says ``loop: <name>`` or the loop page links to it. On the
wiki's own loop page, ``assets/autoresearch/loops.js`` puts the same iframe where the page holds
``<div class="arw-loop-plot" data-loop="<name>">`` (the loop report writes it): a script finds the site root
from its own URL, so the frame is right on direct loads, under instant navigation and under Zensical.
"""

from __future__ import annotations

import hashlib
import json
import math
import posixpath
import re

from .. import mdtext
from ..htmlpage import plotly_page
from ..jsonvalues import finite, plain
from .explorers import PLOTLY_ASSET, json_str, plotly_js
from .links import href, page_url, rel_url
from .pages_view import SitePage

NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]*")  # loop names (tools.loop.spec.NAME); loops.js checks the same
VERSION = re.compile(r"-v(\d{3,})-")


def loop_pages(pages: list[SitePage]) -> list[SitePage]:
    return [p for p in pages if p.type == "loop" and p.rel.startswith("loops/")]


def loop_name(page: SitePage) -> str:
    return posixpath.splitext(posixpath.basename(page.rel))[0]


def _version(p: SitePage) -> int:
    v = p.meta.get("version")
    if isinstance(v, int):
        return v
    m = VERSION.search(posixpath.basename(p.rel))
    return int(m.group(1)) if m else 0


def loop_runs(loop: SitePage, pages: list[SitePage]) -> list[SitePage]:
    """The loop's experiment pages in run order: ``loop: <name>`` or linked from the loop page."""
    name, linked = loop_name(loop), set(loop.links)
    mine = [p for p in pages if p.type == "experiment" and p.meta.get("status", "filed") == "filed"
            and (p.meta.get("loop") == name or (p.rel in linked and p.meta.get("loop") in (None, "", name)))]
    return sorted(mine, key=lambda p: (_version(p), p.rel))  # the lane's run order


def _iteration(p: SitePage) -> int | None:
    it = p.meta.get("iteration")
    return it if isinstance(it, int) and not isinstance(it, bool) else None


def _num(v):  # `.nan` is a float to YAML, and no figure: a NaN run would carry the frontier with it
    try:
        return v if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) else None
    except OverflowError:  # an integer past any float (400 digits): no figure either
        return None


def staircase_data(loop: SitePage, runs: list[SitePage], url) -> dict:
    """Points (one per run: iteration, tokens/s, verdict, kept, gain, band, category, change, link) and the
    frontier: the runs that moved the trunk, as the loop decided (its ledger's ``keep``). A move's height is the
    trunk's tokens/s times the gain the loop judged it by (in interleaved rounds against that trunk): runs measured
    alone and in pairs are not comparable by their raw tokens/s, which stay on the points (``measured``).
    A run without an ``iteration`` key takes the one before it (the baseline: 0); with none at all, its position.
    ``url(page)`` gives a run's link from the plot page."""
    numbered = any(_iteration(p) is not None for p in runs)
    points, frontier, last = [], [], 0
    for i, p in enumerate(runs):
        last = _iteration(p) if _iteration(p) is not None else (last if numbered else i)
        m, meta = p.meta.get("metrics") or {}, p.meta
        verdict = meta.get("role") if meta.get("role") in ("baseline", "calibration") else \
            str(meta.get("verdict") or "inconclusive")
        kept = bool(meta.get("kept")) if isinstance(meta.get("kept"), bool) else meta.get("ledger_status") == "keep"
        pt = {"iteration": last, "exp_id": str(meta.get("exp_id") or loop_name(p)),
              "tps": _num(m.get("tokens_per_s")), "mfu": _num(m.get("mfu_percent", m.get("mfu_causal_percent"))),
              "verdict": verdict, "kept": kept and verdict != "crash", "gain": _num(meta.get("gain_pct")),
              "band": _num(meta.get("noise_band_pct")), "category": str(meta.get("category") or ""),
              "change": str(meta.get("description") or meta.get("hypothesis") or ""), "url": url(p)}
        points.append(pt)
        if not pt["kept"]:
            continue
        height = pt["tps"]
        if frontier and pt["gain"] is not None:  # the judged gain over the trunk it was measured against
            height = round(frontier[-1]["tps"] * (1 + pt["gain"] / 100), 1)
        if height is not None:
            frontier.append({"iteration": pt["iteration"], "tps": height, "measured": pt["tps"],
                             "exp_id": pt["exp_id"]})
    m = loop.meta  # frontmatter as YAML gave it (a date, a date as a key): as JSON can carry it
    return {"loop": loop_name(loop), **{k: plain(m.get(k)) for k in ("model", "lane", "variant", "status", "best")},
            "points": points, "frontier": frontier}


def staircase_html(data: dict, plotly_src: str) -> str:
    return plotly_page("staircase", f"{data['loop']}: frontier staircase", plotly_src, data)


def loop_files(pages: list[SitePage], directory_urls: bool = True, warnings: list[str] | None = None) -> dict[str, str]:
    """Docs-relative files: explore/loops/index.md, and per loop index.md + staircase.html + staircase.json."""
    loops = loop_pages(pages)
    out: dict[str, str] = {}
    lines = ["---", "title: Loops", "---", "", "# Loops", ""]
    good = []
    for lp in loops:
        if NAME.fullmatch(loop_name(lp)):
            good.append(lp)
        elif warnings is not None:
            warnings.append(f"wiki/{lp.rel}: a loop page's file name must be letters, digits, '.', '_' or '-'; "
                            "no staircase for it")
    if not good:
        out["explore/loops/index.md"] = "\n".join(lines + ["No loops yet: no `type: loop` pages under `wiki/loops/`.", ""])
        return out
    lines += ["One frontier staircase per autoresearch loop: every run as a point coloured by its verdict, the"
              " frontier as a step line; a click opens the run's experiment page.", "",
              "| Loop | Model | Lane | Status | Runs | Best tokens/s |", "|---|---|---|---|---:|---:|"]
    owner: dict[str, SitePage] = {}  # loop name -> the page whose staircase has the plain folder
    for lp in sorted(good, key=lambda p: (loop_name(p), p.rel.count("/"), p.rel)):
        name = folder = loop_name(lp)
        if name in owner:  # loops/my-loop.md and loops/sub/my-loop.md: one folder each, never one over the other
            folder = f"{name}-{hashlib.sha1(lp.rel.encode()).hexdigest()[:6]}"
            if warnings is not None:
                warnings.append(f"wiki/{lp.rel}: wiki/{owner[name].rel} is a loop named {name} too; its staircase "
                                f"is explore/loops/{folder}/, and its runs and embedded plot are shared by name: "
                                "rename one")
        owner.setdefault(name, lp)
        base = f"explore/loops/{folder}/"
        html_url = page_url(base + "staircase.html", directory_urls)

        def url(p: SitePage, _from=html_url) -> str:
            return href(rel_url(_from, page_url("wiki/" + p.rel, directory_urls)))

        try:  # one hand-edited page never stops the build: it is named in a warning, the rest builds
            data = finite(staircase_data(lp, loop_runs(lp, pages), url))  # NaN is no JSON: `| jq` refused it
            staircase_json = json.dumps(data, sort_keys=True, indent=1, default=str, allow_nan=False)
        except (TypeError, ValueError) as e:
            if warnings is not None:
                warnings.append(f"wiki/{lp.rel}: no staircase ({e})")
            continue
        out[base + "staircase.json"] = staircase_json
        out[base + "staircase.html"] = staircase_html(data, rel_url(html_url, PLOTLY_ASSET))
        best = max((f["tps"] for f in data["frontier"]), default=None)
        title = mdtext.escape(name)  # frontmatter is other people's text: markdown-escaped where markdown reads it
        out[base + "index.md"] = "\n".join([
            "---", f"title: {json_str('Loop: ' + name)}", "---", "", f"# Loop: {title}", "",
            f"{len(data['points'])} runs, {max(len(data['frontier']) - 1, 0)} frontier moves. "
            f"Loop page: {mdtext.link(title, mdtext.file_target(f'../../../wiki/{lp.rel}'))}. "
            "Data: [staircase.json](staircase.json).", "",
            f'<iframe class="arw-frame arw-loop-frame" src="staircase.html" title="{mdtext.attr(name)} frontier '
            'staircase" loading="lazy" style="width:100%;height:520px;border:0"></iframe>', ""])
        cells = [mdtext.escape(str(lp.meta.get(k) or "—")) for k in ("model", "lane", "status")]
        lines.append(f"| {mdtext.link(title, mdtext.file_target(f'{folder}/index.md'))} | {' | '.join(cells)} | "
                     f"{len(data['points'])} | {'—' if best is None else f'{best:,.1f}'} |")
    out["explore/loops/index.md"] = "\n".join(lines + [""])
    if len(good) > 6:  # the sidebar lists the loops only while they are few
        out["explore/loops/.nav.yml"] = "nav:\n  - index.md\n"
    js = plotly_js()
    if js:
        out[PLOTLY_ASSET] = js
    return out


