"""Concept graph at scale in headless Chromium: time to first draw, search, hover, with the vendored
sigma.js 4 + graphology renderer, on a synthetic 4,000-page wiki (~17,000 edges).

    python bench/site_graph.py [--pages 4000] [--repeat 3]

Optional comparison: --vis DIR, where DIR/node_modules/vis-network/standalone/umd/vis-network.min.js
exists (npm install vis-network into /tmp), draws the same data with vis-network (positions given,
physics off). Prints a card, then one JSON line.
"""

from __future__ import annotations

import argparse
import functools
import http.server
import json
import shutil
import statistics
import tempfile
import threading
import time
from pathlib import Path

PAGES = 4000
CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
        "--disable-component-update", "--disable-sync"]

VIS_PAGE = """<!doctype html><html><head><meta charset="utf-8"><link rel="icon" href="data:,">
<script src="vis-network.min.js"></script></head><body style="margin:0">
<div id="g" style="width:1280px;height:800px"></div><script>
const t0 = performance.now();
fetch("graph.json").then(r => r.json()).then(d => {
  const nodes = d.nodes.map((n, i) => ({id: i, label: n.label, x: n.x * 40, y: n.y * 40, size: n.size}));
  const edges = d.edges.map(e => ({from: e[0], to: e[1]}));
  const net = new vis.Network(document.getElementById("g"), {nodes, edges},
    {physics: false, layout: {improvedLayout: false}, nodes: {shape: "dot"}, interaction: {hideEdgesOnDrag: true}});
  net.once("afterDrawing", () => { window.drawMs = Math.round(performance.now() - t0); });
});
</script></body></html>"""


def serve(folder: Path):
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(folder))
    handler.log_message = lambda *a: None
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd, f"http://127.0.0.1:{httpd.server_address[1]}/"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pages", type=int, default=PAGES)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--vis", type=Path, default=None)
    args = ap.parse_args()

    from playwright.sync_api import sync_playwright

    from tools.sitegen.generate import generate
    from tools.sitegen.synthetic import synthetic_wiki, write_wiki

    tmp = Path(tempfile.mkdtemp(prefix="graph-bench-"))
    write_wiki(tmp / "wiki", synthetic_wiki(args.pages))
    t = time.perf_counter()
    gen = generate(tmp / "wiki")
    t_gen = time.perf_counter() - t
    site = tmp / "site"
    for rel, content in gen.files.items():
        if rel.startswith(("explore/graph", "assets/autoresearch/")):
            p = site / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(content if isinstance(content, bytes) else content.encode())
    if args.vis:
        shutil.copy(args.vis / "node_modules/vis-network/standalone/umd/vis-network.min.js", site / "explore/graph")
        (site / "explore/graph/vis.html").write_text(VIS_PAGE)
    httpd, base = serve(site)
    res = {"pages": args.pages, "nodes": gen.stats["nodes"], "edges": gen.stats["edges"],
           "generate_s": round(t_gen, 2), "graph_layout_s": gen.stats["graph_s"],
           "graph_json_kb": round(len(gen.files["explore/graph/graph.json"]) / 1e3)}
    draws, searches, hovers, vis = [], [], [], []
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        for _ in range(args.repeat):
            pg = b.new_page(viewport={"width": 1280, "height": 800})
            pg.goto(base + "explore/graph/view.html")
            pg.wait_for_function("window.graphView && window.graphView.ready", timeout=120000)
            draws.append(pg.evaluate("window.graphView.drawMs"))
            searches.append(pg.evaluate("""() => { const t = performance.now(); window.graphView.search('attention');
                return performance.now() - t; }"""))
            pg.evaluate("window.graphView.search('')")
            hub = max(gen.files and json.loads(gen.files["explore/graph/graph.json"])["nodes"], key=lambda n: n["degree"])
            pos = pg.evaluate(f"window.graphView.nodeViewport({json.dumps(hub['id'])})")
            t = time.perf_counter()
            pg.mouse.move(pos["x"], pos["y"])
            pg.wait_for_function("!!window.graphView.hovered")  # the hub, or a node drawn over it
            hovers.append(pg.evaluate("window.graphView.hoverMs"))  # in-page cost of the hover update
            t_hover_roundtrip = (time.perf_counter() - t) * 1000
            pg.screenshot(path=str(tmp / "graph-4000.png"))
            pg.close()
            if args.vis:
                pg = b.new_page(viewport={"width": 1280, "height": 800})
                pg.goto(base + "explore/graph/vis.html")
                pg.wait_for_function("window.drawMs", timeout=300000)
                vis.append(pg.evaluate("window.drawMs"))
                pg.close()
        b.close()
    httpd.shutdown()
    res.update(sigma_draw_ms=statistics.median(draws), sigma_search_ms=round(statistics.median(searches), 1),
               sigma_hover_ms=round(statistics.median(hovers), 1),
               hover_roundtrip_ms=round(t_hover_roundtrip))
    if vis:
        res["vis_network_draw_ms"] = statistics.median(vis)
    shots = Path("/tmp/site-shots")
    shots.mkdir(exist_ok=True)
    shutil.copy(tmp / "graph-4000.png", shots / "graph-4000.png")
    print(f"Concept graph, {res['nodes']} nodes / {res['edges']} edges, headless Chromium (--disable-gpu)")
    print(f"  build side: generate {res['generate_s']} s (graph + layout {res['graph_layout_s']} s), "
          f"graph.json {res['graph_json_kb']} KB")
    print(f"  sigma.js 4 + graphology: first draw {res['sigma_draw_ms']} ms, search {res['sigma_search_ms']} ms, "
          f"hover {res['sigma_hover_ms']} ms in page ({res['hover_roundtrip_ms']} ms with the driver round trip; "
          f"median of {args.repeat})")
    if vis:
        print(f"  vis-network (positions, physics off): first draw {res['vis_network_draw_ms']} ms")
    print(json.dumps(res))
    shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
