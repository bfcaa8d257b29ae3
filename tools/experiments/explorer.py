"""The explorer: one standalone HTML page per model plotting every experiment in order.

``explorer_html`` is pure (records in, HTML out). plotly.js is never inlined: ``plotly_src`` is a
relative URL to one shared copy that the site ships once. The page is meant for an iframe, so a
click opens the experiment page through ``window.top.location``.
"""

from __future__ import annotations

import html
import json
from collections.abc import Callable
from pathlib import Path

from .. import pages
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
    blob = json.dumps(data, sort_keys=True, default=str).replace("</", "<\\/")
    lanes = sorted({p["lane"] for p in data["points"]})
    lane_boxes = "".join(f'<label><input type="checkbox" class="lane" value="{html.escape(ln)}" checked> '
                         f'{html.escape(ln)}</label> ' for ln in lanes)
    return _TEMPLATE.replace("__TITLE__", html.escape(f"{model}: experiments")) \
        .replace("__PLOTLY__", html.escape(plotly_src, quote=True)) \
        .replace("__LANES__", lane_boxes).replace("__DATA__", blob)


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


_TEMPLATE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>__TITLE__</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
 body{font:14px system-ui,sans-serif;margin:0;padding:8px;color:#222}
 #controls{display:flex;flex-wrap:wrap;gap:14px;align-items:center;margin-bottom:6px}
 #plot{width:100%;height:460px} .muted{color:#777}
</style>
<script src="__PLOTLY__"></script>
</head><body>
<div id="controls">
 <span>Lanes: __LANES__</span>
 <label>Metric <select id="metric"><option value="tps">tokens/s</option><option value="mfu">MFU %</option></select></label>
 <label>MFU basis <select id="basis"><option value="causal">causal</option><option value="noncausal">non-causal</option></select></label>
 <label><input type="checkbox" id="hidecrash"> hide crashed runs</label>
 <span class="muted">● supported ◆ inconclusive ▼ refuted ⊠ invalid ✕ crash; dotted: running best</span>
 <span id="note" class="muted"></span>
</div>
<div id="plot"></div>
<script id="explorer-data" type="application/json">__DATA__</script>
<script>
(function(){
 const D = JSON.parse(document.getElementById('explorer-data').textContent);
 const $ = id => document.getElementById(id);
 const colors = ['#1f77b4','#ff7f0e','#2ca02c','#d62728','#9467bd','#8c564b','#e377c2','#17becf'];
 const symbol = {supported:'circle', refuted:'triangle-down', inconclusive:'diamond', invalid:'square-x', crash:'x', baseline:'star', calibration:'hexagon'};
 function value(p, metric, basis){ return metric === 'tps' ? p.tps : p['mfu_' + basis]; }
 function fmtGain(g){ return (g === null || g === undefined) ? '—' : (g > 0 ? '+' : '') + g.toFixed(2) + ' %'; }
 function build(){
  const metric = $('metric').value, basis = $('basis').value, hide = $('hidecrash').checked;
  $('basis').disabled = metric !== 'mfu';
  const on = new Set([...document.querySelectorAll('input.lane')].filter(x => x.checked).map(x => x.value));
  const lanes = [...new Set(D.points.map(p => p.lane))].sort();
  const traces = [], shapes = [], notes = [];
  let missing = 0;
  lanes.forEach((lane, i) => {
   if (!on.has(lane)) return;
   const c = colors[i % colors.length];
   const pts = D.points.filter(p => p.lane === lane).sort((a, b) => a.version - b.version);
   const ok = pts.filter(p => !p.crash && value(p, metric, basis) !== null && value(p, metric, basis) !== undefined);
   missing += pts.filter(p => !p.crash).length - ok.length;
   const label = p => (p.role === 'baseline' ? 'baseline' : p.verdict);
   traces.push({type:'scatter', mode:'markers', name: lane, x: ok.map(p => p.version), y: ok.map(p => value(p, metric, basis)),
    marker:{color:c, size:10, symbol: ok.map(p => symbol[p.verdict] || 'circle')},
    customdata: ok.map(p => [p.url, p.slug, label(p), fmtGain(p.gain), p.variant]),
    hovertemplate: '<b>%{customdata[1]}</b><br>verdict: %{customdata[2]}<br>Δ vs baseline: %{customdata[3]}' +
                   '<br>variant: %{customdata[4]}<br>%{y}<extra>' + lane + '</extra>'});
   let best = null; const sx = [], sy = [];
   pts.forEach(p => { const v = value(p, metric, basis);
     if (p.keep && v !== null && v !== undefined && (best === null || v > best)) best = v;
     if (best !== null) { sx.push(p.version); sy.push(best); } });
   if (sx.length) traces.push({type:'scatter', mode:'lines', name: lane + ' running best', x: sx, y: sy,
     line:{shape:'hv', color:c, width:2, dash:'dot'}, hoverinfo:'skip'});
   const crashed = pts.filter(p => p.crash);
   if (crashed.length && !hide) traces.push({type:'scatter', mode:'markers', name: lane + ' crashed',
     x: crashed.map(p => p.version), y: crashed.map(() => 0), marker:{color:c, size:11, symbol:'x'},
     customdata: crashed.map(p => [p.url, p.slug, 'crash', '—', p.variant]),
     hovertemplate: '<b>%{customdata[1]}</b><br>verdict: crash<extra>' + lane + '</extra>'});
  });
  D.references.forEach(r => {
   if (r.lane && !on.has(String(r.lane))) return;
   let y = null;
   if (metric === 'tps') y = r.tokens_per_s;
   else if (r.mfu_percent !== undefined && (r.basis || 'causal') === basis) y = r.mfu_percent;
   if (y === null || y === undefined) return;
   shapes.push({type:'line', xref:'paper', x0:0, x1:1, y0:y, y1:y, line:{color:'#555', width:1, dash:'dash'}});
   notes.push({xref:'paper', x:1, y:y, xanchor:'right', yanchor:'bottom', showarrow:false, text:String(r.label || 'reference'),
               font:{size:11, color:'#555'}});
  });
  $('note').textContent = (metric === 'mfu' && missing) ? missing + ' run(s) have no MFU on this basis (no peak FLOP/s)' : '';
  const ytitle = metric === 'tps' ? 'tokens/s' : 'MFU % (' + (basis === 'causal' ? 'causal' : 'non-causal') + ' attention FLOPs)';
  Plotly.react('plot', traces, {title:{text: D.model + ': every experiment in order'}, hovermode:'closest',
   xaxis:{title:{text:'experiment (version in lane)'}, dtick:1}, yaxis:{title:{text: ytitle}, rangemode:'tozero'},
   shapes: shapes, annotations: notes, margin:{t:40, r:20}, legend:{orientation:'h', y:-0.25}},
   {displaylogo:false, responsive:true});
 }
 ['metric','basis','hidecrash'].forEach(id => $(id).addEventListener('change', build));
 document.querySelectorAll('input.lane').forEach(x => x.addEventListener('change', build));
 build();
 $('plot').on('plotly_click', ev => { const p = ev.points && ev.points[0];
   if (p && p.customdata && p.customdata[0]) window.top.location.href = p.customdata[0]; });
 window.explorerReady = true;
})();
</script>
</body></html>
"""
