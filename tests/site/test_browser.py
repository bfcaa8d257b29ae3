"""The built site in real headless Chromium (Debian /usr/bin/chromium driven by playwright).

Checks the graph draws its nodes, search dims and zooms, hover and click, the light/dark toggle,
the kernel table filters and sorts, instant navigation, and that no request leaves 127.0.0.1.
Screenshots go to tmp_path and /tmp/site-shots/.
"""

from __future__ import annotations

import functools
import http.server
import json
import shutil
import subprocess
import threading
from pathlib import Path
from urllib.parse import urlparse

import pytest

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
        "--disable-component-update", "--disable-sync"]
SHOTS = Path("/tmp/site-shots")

pytestmark = pytest.mark.browser


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *a):
        pass


def _serve(folder: Path):
    handler = functools.partial(_Quiet, directory=str(folder))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd, f"http://127.0.0.1:{httpd.server_address[1]}/"


@pytest.fixture(scope="module")
def server(built):
    httpd, url = _serve(built / "site")
    yield url
    httpd.shutdown()


@pytest.fixture(scope="module")
def zensical_server(built, tmp_path_factory):
    """The same project staged by `tools site stage` and built by `zensical build`."""
    if not shutil.which("zensical"):
        pytest.skip("zensical not installed")
    from tools.sitegen.generate import stage
    out = tmp_path_factory.mktemp("zensical")
    stage(built, out)
    subprocess.run(["zensical", "build"], cwd=out, check=True, capture_output=True, timeout=120)
    httpd, url = _serve(out / "site")
    yield url
    httpd.shutdown()


@pytest.fixture(scope="module")
def browser():
    if not Path(CHROMIUM).exists():
        pytest.skip("Debian chromium not installed (apt-get install -y chromium)")
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


@pytest.fixture
def page(browser, server, tmp_path):
    ctx = browser.new_context(viewport={"width": 1280, "height": 900})
    pg = ctx.new_page()
    hosts: list[str] = []
    pg.on("request", lambda r: hosts.append(urlparse(r.url).hostname or r.url))
    pg.hosts = hosts
    pg.shot = lambda name: _shot(pg, tmp_path, name)
    yield pg
    ctx.close()
    assert set(hosts) <= {"127.0.0.1"}, f"requests to other hosts: {sorted(set(hosts))}"


def _shot(pg, tmp_path, name):
    path = tmp_path / f"{name}.png"
    pg.screenshot(path=str(path))
    SHOTS.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(path, SHOTS / path.name)


def graph_frame(pg):
    pg.wait_for_selector("iframe.arw-graph-frame")
    # after instant navigation the iframe element can be in the page before its frame has navigated (seen in CI)
    for _ in range(200):
        frame = next((f for f in pg.frames if f.url.endswith("graph/view.html")), None)
        if frame is not None:
            break
        pg.wait_for_timeout(100)
    assert frame is not None, f"the graph frame never loaded: {[f.url for f in pg.frames]}"
    frame.wait_for_function("window.graphView && (window.graphView.ready || window.graphView.error)", timeout=20000)
    assert frame.evaluate("window.graphView.error") is None
    return frame


PAINTED = """() => {  // count painted pixels of sigma's WebGL node layer
  const s = window.graphView.sigma; s.refresh();
  const c = document.querySelector('#graph canvas'), t = document.createElement('canvas');
  t.width = c.width; t.height = c.height;
  const g = t.getContext('2d'); g.drawImage(c, 0, 0);
  const d = g.getImageData(0, 0, t.width, t.height).data; let n = 0;
  for (let i = 3; i < d.length; i += 4) if (d[i] > 0) n++;
  return n;
}"""


def _no_overlap(boxes):
    for i, a in enumerate(boxes):
        for b in boxes[i + 1:]:
            assert not (a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]), ("titles overlap", a, b)


def test_graph_draws_searches_hovers_and_click_navigates(page, server, built):
    data = json.loads((built / "site/explore/graph/graph.json").read_text())
    page.goto(server + "explore/graph/")
    frame = graph_frame(page)
    assert frame.evaluate("window.graphView.graph.order") == len(data["nodes"])
    assert frame.evaluate("window.graphView.graph.size") == len(data["edges"])
    assert frame.evaluate(PAINTED) > 2000, "no nodes painted on the WebGL canvas"
    assert frame.locator("#legend input").count() == len(data["categories"])
    # the landmarks (concepts, codebases, models, the busiest pages) are titled before any zoom or hover
    forced = {n["id"] for n in data["nodes"] if n.get("forceLabel")}
    assert {n["id"] for n in data["nodes"] if n["type"] == "concept"} <= forced
    shown = set(frame.evaluate("Array.from(window.graphView.sigma.getNodeDisplayedLabels())"))
    assert shown == set(frame.evaluate("window.graphView.placed")), "sigma draws exactly the placed titles"
    _no_overlap(frame.evaluate("window.graphView.labelBoxes"))
    first = len(shown & forced)
    assert first >= min(15, len(forced)), (len(shown), len(forced))
    # zooming in makes room: more landmarks titled, still none overlapping
    hidden = [n["id"] for n in sorted(data["nodes"], key=lambda n: -n["degree"]) if n["id"] in forced - shown]
    if hidden:  # zoom onto the busiest landmark left untitled: landmarks there get their titles
        frame.evaluate(f"""(() => {{ const v = window.graphView, d = v.sigma.getNodeDisplayData({json.dumps(hidden[0])});
            v.sigma.getCamera().setState({{x: d.x, y: d.y, ratio: 0.2, angle: 0}}); }})()""")
        frame.wait_for_timeout(600)
        _no_overlap(frame.evaluate("window.graphView.labelBoxes"))
        zoomed = set(frame.evaluate("window.graphView.placed"))
        assert len(zoomed & forced - shown) >= 1, "zooming in titles landmarks that had no room"
    frame.evaluate("window.graphView.sigma.getCamera().setState({x: 0.5, y: 0.5, ratio: 1, angle: 0})")
    frame.wait_for_timeout(400)
    print(f"graph draw time in chromium: {frame.evaluate('window.graphView.drawMs')} ms "
          f"({len(data['nodes'])} nodes, {len(data['edges'])} edges)")
    page.shot("graph")

    # search dims the rest; Enter zooms in
    target = max(data["nodes"], key=lambda n: n["degree"])
    frame.fill("#search", target["label"])
    matches = frame.evaluate("window.graphView.matches")
    assert target["id"] in matches and len(matches) < len(data["nodes"])
    assert frame.evaluate(f"window.graphView.sigma.getNodeDisplayData({json.dumps(data['nodes'][0]['id'])}).color") \
        != data["categories"][0]["color"] or data["nodes"][0]["id"] in matches
    frame.press("#search", "Enter")
    frame.wait_for_function("window.graphView.sigma.getCamera().ratio < 0.9")
    page.shot("graph-search")

    # legend toggles a category off
    cat = data["categories"][0]["name"]
    frame.locator(f'#legend input[data-category="{cat}"]').uncheck()
    some = next(n["id"] for n in data["nodes"] if n["category"] == cat)
    assert frame.evaluate(f"window.graphView.sigma.getNodeDisplayData({json.dumps(some)}).visibility") == "hidden"
    frame.locator(f'#legend input[data-category="{cat}"]').check()
    frame.fill("#search", "")
    frame.evaluate("window.graphView.sigma.getCamera().setState({x: 0.5, y: 0.5, ratio: 1, angle: 0})")

    # hover lights up neighbours, click opens the page (real mouse events on the canvas)
    box = page.locator("iframe.arw-graph-frame").bounding_box()
    frame.wait_for_timeout(100)
    pos = frame.evaluate(f"window.graphView.nodeViewport({json.dumps(target['id'])})")
    x, y = box["x"] + pos["x"], box["y"] + pos["y"]
    page.mouse.move(x, y)
    frame.wait_for_function(f"window.graphView.hovered === {json.dumps(target['id'])}")
    page.shot("graph-hover")
    page.mouse.click(x, y)
    page.wait_for_url(server + target["url"])
    assert target["label"].split()[0] in page.title()


def test_instant_navigation_and_dark_mode(page, server):
    page.goto(server)
    page.click("article a[href$='explore/graph/']")  # Material instant navigation (site_url is set)
    frame = graph_frame(page)
    assert frame.evaluate("window.graphView.graph.order") > 0
    assert frame.evaluate("document.documentElement.classList.contains('dark')") is False
    page.click("form[data-md-component=palette] label:not([hidden])")
    frame.wait_for_function("document.documentElement.classList.contains('dark')")
    frame.wait_for_timeout(200)
    page.shot("graph-dark")


def test_kernel_table_filters_and_sorts(page, server, built):
    page.goto(server + "explore/kernels/")
    rows = page.locator("#arw-kernels tbody tr")
    total = rows.count()
    assert total > 5
    visible = lambda: page.locator("#arw-kernels tbody tr:not([hidden])").count()  # noqa: E731
    page.wait_for_selector(".arw-count:not(:empty)")
    first_title = rows.nth(0).locator("td a").first.inner_text()
    assert ".py:" in rows.nth(0).locator(".arw-src").inner_text(), "file:line under the kernel name"
    page.fill(".arw-filter-text", first_title)
    assert 1 <= visible() < total
    page.fill(".arw-filter-text", "")
    backend = page.locator("select[data-arw-col=backend] option").nth(1).get_attribute("value")
    page.select_option("select[data-arw-col=backend]", backend)
    n = visible()
    assert 0 < n < total
    for i in range(total):
        r = rows.nth(i)
        if r.is_visible():
            assert r.get_attribute("data-backend") == backend
    page.select_option("select[data-arw-col=backend]", "")
    page.click("#arw-kernels th:nth-child(3)")  # sort by backend
    vals = page.eval_on_selector_all("#arw-kernels tbody tr td:nth-child(3)", "tds => tds.map(t => t.textContent)")
    assert vals == sorted(vals, key=str.lower)
    page.shot("kernels")
    link = rows.nth(0).locator("td a").first
    title = link.inner_text()
    link.click()
    page.wait_for_url("**/wiki/kernels/**")
    # instant navigation changes the URL before the title: wait for the title
    page.wait_for_function("t => document.title.includes(t)", arg=title, timeout=10_000)


def test_zensical_site_graph_and_kernel_links_work(page, zensical_server):
    page.goto(zensical_server + "explore/graph/")
    frame = graph_frame(page)
    assert frame.evaluate("window.graphView.graph.order") > 100
    assert frame.evaluate(PAINTED) > 2000
    page.shot("zensical-graph")
    page.goto(zensical_server + "explore/kernels/")
    page.wait_for_selector(".arw-count:not(:empty)")  # tables.js ran under Zensical
    page.fill(".arw-filter-text", "zzz-no-such-kernel")
    assert page.locator("#arw-kernels tbody tr:not([hidden])").count() == 0
    page.fill(".arw-filter-text", "")
    link = page.locator("#arw-kernels tbody tr td a").first
    title = link.inner_text()
    link.click()
    page.wait_for_url("**/wiki/kernels/**")
    # instant navigation changes the URL before the title: wait for the title
    page.wait_for_function("t => document.title.includes(t)", arg=title, timeout=10_000)


def test_experiment_explorer_draws_with_the_shared_plotly(page, server, built):
    pytest.importorskip("tools.experiments.explorer")
    model = sorted((built / "site/explore/experiments").glob("*/explorer.html"))[0].parent.name
    page.goto(server + f"explore/experiments/{model}/")
    page.wait_for_selector("iframe.arw-frame")
    frame = next(f for f in page.frames if f.url.endswith("explorer.html"))
    frame.wait_for_function("window.Plotly && document.querySelector('.js-plotly-plot .main-svg')", timeout=20000)
    assert any(h == "127.0.0.1" for h in page.hosts)
    page.shot("explorer")
