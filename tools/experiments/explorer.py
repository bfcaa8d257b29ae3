"""The explorer: one standalone HTML page per model plotting every experiment in order.

``explorer_html`` is pure (records in, HTML out). plotly.js is never inlined: ``plotly_src`` is a
relative URL to one shared copy that the site ships once. The page is meant for an iframe, so a
click opens the experiment page through ``window.top.location``.
"""

from __future__ import annotations

import html
from collections.abc import Callable
from pathlib import Path

from .. import pages
from ..htmlpage import plotly_page
from .metrics import finite
from .records import load_experiments


def _point(r: dict, page_url: Callable[[dict], str]) -> dict:
    m = r.get("metrics") or {}
    return {"lane": str(r.get("lane")), "version": int(r.get("version") or 0), "slug": r.get("slug") or r.get("exp_id"),
            "exp_id": r.get("exp_id"), "variant": r.get("variant"), "verdict": r.get("verdict") or r.get("status"),
            "role": r.get("role"), "keep": r.get("ledger_status") == "keep", "crash": r.get("verdict") == "crash",
            "gain": r.get("gain_pct"), "tps": m.get("tokens_per_s"), "mfu_causal": m.get("mfu_causal_percent"),
            "mfu_noncausal": m.get("mfu_noncausal_percent"), "url": page_url(r)}


def explorer_html(model: str, records: list[dict], references: list[dict], plotly_src: str,
                  page_url: Callable[[dict], str]) -> str:
    """A standalone HTML document: lanes toggle, tokens/s vs MFU, MFU basis, hide crashed runs,
    running-best staircase per lane, reference lines, hover (slug, verdict, delta), click to open."""
    recs = [r for r in records if r.get("model") == model and r.get("status") == "filed"]
    data = finite({"model": model, "points": [_point(r, page_url) for r in recs],
                   "references": [dict(x) for x in references]})  # a NaN would make the whole blob unreadable
    lanes = sorted({p["lane"] for p in data["points"]})
    lane_boxes = "".join(f'<label><input type="checkbox" class="lane" value="{html.escape(ln)}" checked> '
                         f'{html.escape(ln)}</label> ' for ln in lanes)
    return plotly_page("explorer", f"{model}: experiments", plotly_src, data, lanes=lane_boxes)


def load_references(wiki_dir: Path | str, model: str) -> list[dict]:
    """Reference lines from the model pages' ``references`` frontmatter (each tagged with its lane)."""
    out = []
    for p in sorted((Path(wiki_dir) / "models").glob(f"{model}-*.md")):
        meta, _ = pages.split(p.read_text(encoding="utf-8"))
        if not meta or meta.get("model") != model:
            continue
        for ref in meta.get("references") or []:
            if isinstance(ref, dict):
                out.append({"lane": meta.get("lane"), **ref})
    return out


def write_explorer(wiki_dir: Path, model: str, out: Path, plotly_src: str) -> int:
    """Write the explorer for ``model`` to ``out`` (links point at the wiki's markdown pages)."""
    from ..writer import atomic_write

    recs = [r for r in load_experiments(wiki_dir) if r.get("model") == model]
    wiki = Path(wiki_dir).resolve()
    base = Path(out).resolve().parent

    def url(r: dict) -> str:
        import os
        return Path(os.path.relpath(wiki / r["page"], base)).as_posix()

    atomic_write(Path(out), explorer_html(model, recs, load_references(wiki_dir, model), plotly_src, url))
    return len(recs)



