"""The explorer page in real headless Chromium: data, switches, hover data and click-through."""

from __future__ import annotations

import functools
import http.server
import threading

import pytest

from tools.experiments.explorer import explorer_html
from tools.htmlpage import plotly_page
from tools.sitegen.loops import staircase_html

ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
        "--disable-component-update", "--disable-sync"]


def rec(lane, v, verdict, tps, mfu=None, keep=False, role="variant", gain=None):
    return {"model": "llama", "lane": lane, "version": v, "status": "filed", "verdict": verdict, "slug": f"s{v}",
            "exp_id": f"2026-01-01-v{v:03d}-s{v}", "page": f"experiments/llama/{lane}/2026-01-01-v{v:03d}-s{v}.md",
            "ledger_status": "keep" if keep else ("crash" if verdict == "crash" else "discard"), "role": role,
            "gain_pct": gain, "variant": "tiny/cpu",
            "metrics": {} if verdict == "crash" else {"tokens_per_s": tps, "mfu_causal_percent": mfu,
                                                      "mfu_noncausal_percent": mfu and mfu * 1.1}}


RECORDS = [rec("cpu", 1, "inconclusive", 100.0, 10.0, keep=True, role="baseline"),
           rec("cpu", 2, "supported", 150.0, 15.0, keep=True, gain=50.0),
           rec("cpu", 3, "crash", None),
           rec("cpu", 4, "refuted", 90.0, 9.0, gain=-10.0),
           rec("tpu", 1, "inconclusive", 1000.0, 40.0, keep=True, role="baseline"),
           {"model": "other", "lane": "cpu", "status": "filed", "page": "x.md"}]
REFS = [{"label": "maxtext published", "tokens_per_s": 1200.0, "lane": "tpu"},
        {"label": "paper MFU", "mfu_percent": 45.0, "basis": "causal"}]


def test_explorer_html_is_standalone_and_never_inlines_plotly():
    html = explorer_html("llama", RECORDS, REFS, "../assets/plotly.min.js", lambda r: "../" + r["page"])
    assert '<script src="../assets/plotly.min.js"></script>' in html
    assert len(html) < 50_000 and "window.top.location" in html
    assert '"other"' not in html and "x.md" not in html  # other models are left out


@pytest.mark.slow
@pytest.mark.browser
def test_explorer_in_chromium(tmp_path):
    playwright = pytest.importorskip("playwright.sync_api")
    plotly = pytest.importorskip("plotly.offline")
    (tmp_path / "assets").mkdir()
    (tmp_path / "assets/plotly.js").write_text(plotly.get_plotlyjs())
    (tmp_path / "models").mkdir()
    (tmp_path / "models/llama.html").write_text(
        explorer_html("llama", RECORDS, REFS, "../assets/plotly.js", lambda r: "../" + r["page"].replace(".md", ".html")))
    (tmp_path / "host.html").write_text('<iframe src="models/llama.html" style="width:1000px;height:560px"></iframe>')
    for r in RECORDS[:5]:
        p = tmp_path / r["page"].replace(".md", ".html")
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(f"<h1>{r['exp_id']}</h1>")
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(tmp_path))
    handler.log_message = lambda *a: None
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{srv.server_address[1]}"
    external = []
    try:
        with playwright.sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path="/usr/bin/chromium", args=ARGS)
            page = browser.new_page(viewport={"width": 1040, "height": 620})
            page.on("request", lambda req: None if req.url.startswith(base) else external.append(req.url))
            page.goto(f"{base}/host.html")
            frame = page.frame_locator("iframe")
            inner = page.frames[1]
            inner.wait_for_function("window.explorerReady === true", timeout=20_000)
            data = lambda: inner.evaluate(
                "() => document.getElementById('plot').data.map(t => [t.name, t.x, t.y])")
            d = data()
            names = [t[0] for t in d]
            assert names == ["cpu", "cpu running best", "cpu crashed", "tpu", "tpu running best"]
            assert d[0][2] == [100.0, 150.0, 90.0]
            assert d[1][2] == [100.0, 150.0, 150.0, 150.0]  # running best: a staircase over kept runs
            shapes = inner.evaluate("() => document.getElementById('plot').layout.shapes.map(s => s.y0)")
            assert shapes == [1200.0]
            assert "every experiment in order" in inner.evaluate("() => document.querySelector('.gtitle').textContent")
            page.screenshot(path=str(tmp_path / "explorer-tps.png"))
            # switches: MFU on the non-causal basis, crashed runs hidden, tpu lane off
            frame.locator("#metric").select_option("mfu")
            frame.locator("#basis").select_option("noncausal")
            frame.locator("#hidecrash").check()
            frame.locator("input.lane[value=tpu]").uncheck()
            d = data()
            assert [t[0] for t in d] == ["cpu", "cpu running best"]
            assert d[0][2] == pytest.approx([11.0, 16.5, 9.9])
            assert inner.evaluate("() => document.getElementById('plot').layout.shapes.length") == 0  # causal ref
            frame.locator("#basis").select_option("causal")
            assert inner.evaluate("() => document.getElementById('plot').layout.shapes.map(s => s.y0)") == [45.0]
            page.screenshot(path=str(tmp_path / "explorer-mfu.png"))
            # hover data and click-through to the experiment page, in the top window
            hover = inner.evaluate("() => document.getElementById('plot').data[0].customdata[1]")
            assert hover[1:4] == ["s2", "supported", "+50.00 %"]
            inner.evaluate("() => document.getElementById('plot').emit('plotly_click', "
                           "{points: [{customdata: document.getElementById('plot').data[0].customdata[1]}]})")
            page.wait_for_url("**/experiments/llama/cpu/2026-01-01-v002-s2.html", timeout=10_000)
            assert "v002" in page.content()
            # a real mouse click on a marker also navigates
            page.goto(f"{base}/host.html")
            inner = page.frames[1]
            inner.wait_for_function("window.explorerReady === true", timeout=20_000)
            xy = inner.evaluate("""() => { const g = document.getElementById('plot'), fl = g._fullLayout;
                const r = g.getBoundingClientRect();
                return [r.left + fl._size.l + fl.xaxis.l2p(1), r.top + fl._size.t + fl.yaxis.l2p(100)]; }""")
            origin = page.evaluate("""() => { const f = document.querySelector('iframe').getBoundingClientRect();
                const cs = getComputedStyle(document.querySelector('iframe'));
                return [f.left + parseFloat(cs.borderLeftWidth), f.top + parseFloat(cs.borderTopWidth)]; }""")
            page.mouse.move(origin[0] + xy[0], origin[1] + xy[1])
            page.mouse.click(origin[0] + xy[0], origin[1] + xy[1])
            page.wait_for_url("**/2026-01-01-v001-s1.html", timeout=10_000)
            _frontmatter_is_text_in_every_chart(tmp_path, base, browser)
            _long_loop_staircase_has_readable_ticks(tmp_path, base, browser)
            browser.close()
    finally:
        srv.shutdown()
    assert external == []


EVIL = '<a href="https://evil.example/">CLICK</a>'


def _frontmatter_is_text_in_every_chart(tmp_path, base, browser):
    """A model, lane, loop or category name holding markup was drawn by plotly as a real SVG link."""
    evil_recs = [dict(r, model=EVIL, lane=EVIL, variant=EVIL, slug=EVIL) for r in RECORDS[:3]]
    (tmp_path / "models/evil.html").write_text(explorer_html(EVIL, evil_recs, [{"label": EVIL, "tokens_per_s": 5.0}],
                                                             "../assets/plotly.js", lambda r: "x"))
    point = {"iteration": 0, "exp_id": EVIL, "tps": 10.0, "mfu": None, "verdict": EVIL, "kept": True, "gain": None,
             "band": None, "category": EVIL, "change": EVIL, "url": "x"}
    (tmp_path / "stair.html").write_text(staircase_html(
        {"loop": "l", "model": EVIL, "lane": EVIL, "points": [point], "frontier": [{"iteration": 0, "tps": 10.0}]},
        "assets/plotly.js"))
    (tmp_path / "gap.html").write_text(plotly_page("gapbars", "g", "assets/plotly.js", {
        "ours": EVIL, "ref": EVIL, "gap_pct": 3.0, "categories": [{"category": EVIL, "ours": 1.0, "ref": 2.0}]}))
    page = browser.new_page(viewport={"width": 1040, "height": 620})
    for url, ready in (("models/evil.html", "explorerReady"), ("stair.html", "staircaseReady"),
                       ("gap.html", "gapReady")):
        page.goto(f"{base}/{url}")
        page.wait_for_function(f"window.{ready} === true", timeout=20_000)
        page.wait_for_selector(".main-svg .gtitle")
        # hover a point, so hover text is drawn too
        page.evaluate("() => Plotly.Fx.hover('plot', [{curveNumber: 0, pointNumber: 0}])")
        assert page.evaluate("() => document.querySelectorAll('svg a').length") == 0, url
        assert "CLICK</a>" in page.evaluate("() => document.querySelector('.gtitle').textContent"), url
        texts = page.evaluate("() => [...document.querySelectorAll('svg text')].map(t => t.textContent).join(' ')")
        assert '<a href="https://evil.example/">' in texts.replace("\n", ""), url
    page.close()


def _stair_point(i: int, verdict: str = "supported", tps: float | None = 100.0) -> dict:
    return {"iteration": i, "exp_id": f"r{i}", "tps": tps, "mfu": None, "verdict": verdict, "kept": False,
            "gain": None, "band": None, "category": "", "change": "", "url": "x"}


def _long_loop_staircase_has_readable_ticks(tmp_path, base, browser):
    """`dtick: 1` drew a label per iteration: 300 iterations gave 347 overlapping labels (and 4.5 s to draw).
    And every run is a point: an invalid run without tokens/s was left out (a crash sat at 0)."""
    page = browser.new_page(viewport={"width": 1040, "height": 620})
    for n, most_ticks in ((12, 12), (300, 30)):
        points = [_stair_point(i) for i in range(n - 2)] + [_stair_point(n - 2, "invalid", None),
                                                            _stair_point(n - 1, "crash", None)]
        (tmp_path / f"stair-{n}.html").write_text(staircase_html(
            {"loop": "l", "model": "m", "lane": "l", "points": points, "frontier": []}, "assets/plotly.js"))
        page.goto(f"{base}/stair-{n}.html")
        page.wait_for_function("window.staircaseReady === true", timeout=20_000)
        ticks = page.evaluate("() => [...document.querySelectorAll('.xtick text')].map(t => t.textContent)")
        assert len(ticks) <= most_ticks and all(t.isdigit() for t in ticks), (n, ticks)
        if n == 12:
            assert ticks == [str(i) for i in range(12)]  # few: every iteration named
            traces = page.evaluate("() => document.getElementById('plot').data.map(t => [t.name, t.x, t.y])")
            assert traces[1:] == [["invalid", [10], [0]], ["crash", [11], [0]]]
    page.close()
