"""The runs comparison view in real headless Chromium, on runs filed by the real runner (the stand-in script):
the pinned baseline and signed deltas, sorting and filtering, 2 runs compared showing exactly the keys that
differ, the parallel-coordinates dimensions without constant columns, configurations grouped with mean ± interval,
and the CSV matching the lane's ledger."""

from __future__ import annotations

import csv
import functools
import http.server
import io
import threading

import pytest
from _exp_helpers import fake
from click.testing import CliRunner

from tools.cli import cli
from tools.experiments import ledger, records
from tools.experiments.compare_view import compare_html

ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
        "--disable-component-update", "--disable-sync"]


def _run(project, *args, command):
    r = CliRunner().invoke(cli, ["--root", str(project.root), "exp", "run", "--model", "m", "--lane", "l",
                                 "--variant", "s/tpu", "-q", "--repeats", "2", *args, "--", *command])
    assert r.exit_code == 0, r.output


def test_html_is_standalone_and_holds_only_the_lane():
    recs = [{"model": "m", "lane": "l", "status": "filed", "exp_id": "a", "version": 1, "page": "p.md",
             "metrics": {"tokens_per_s": 10.0}, "config": {"x": "</script>"}},
            {"model": "m", "lane": "other", "status": "filed", "exp_id": "b", "version": 1, "page": "q.md"}]
    page = compare_html("m", "l", recs, "../plotly.js", lambda r: r["page"])
    assert "<script src=\"../plotly.js\"></script>" in page and "&lt;/script&gt;" in page  # the data is inert
    assert page.count("</script>") == page.count("<script")
    assert '&quot;exp_id&quot;: &quot;a&quot;' in page and '&quot;exp_id&quot;: &quot;b&quot;' not in page


def test_a_run_offers_a_profile_diff_only_with_a_trace_and_is_named_without_a_slug():
    """The compare view offered `tools profile diff` for unprofiled and crashed runs (it then failed: no trace), and
    a hand-kept page without a slug was a blank, unclickable name."""
    from tools.experiments.compare_view import _run

    def rec(**kw):
        return {"exp_id": "2026-01-01-v001-x", "raw_dir": "raw/profiles/x", "verdict": "supported", **kw}
    traced = rec(integrity={"checks": {"trace": "ok"}})
    assert _run(traced, str)["has_trace"] is True
    assert _run(rec(integrity={"checks": {"trace": "unchecked: the run was not profiled"}}), str)["has_trace"] is False
    assert _run(dict(traced, verdict="crash"), str)["has_trace"] is False
    assert _run(rec(), str)["slug"] == "2026-01-01-v001-x" and _run(rec(slug="s"), str)["slug"] == "s"
    # the script's hash says what code ran; the repository's commit only without one (a commit of wiki pages in the
    # same repository split one configuration's runs into groups of one)
    assert _run(rec(commit="abc", script_sha256="s1", command="python t.py"), str)["code"] == {
        "script": "s1", "command": "python t.py"}
    assert _run(rec(commit="abc", command="python t.py"), str)["code"] == {"commit": "abc", "command": "python t.py"}


def test_a_runs_samples_keep_only_finite_numbers():
    """`runs_tokens_per_s: {variant: [12000, 12100, .nan]}` was 3 samples, the NaN counted as 0 (mean 8033)."""
    from tools.experiments.compare_view import _run
    for samples in ([12000, 12100, float("nan")], {"variant": [12000, True, 12100, float("inf"), "x", None]}):
        assert _run({"exp_id": "a", "runs_tokens_per_s": samples}, str)["samples"] == [12000, 12100]


@pytest.mark.slow
@pytest.mark.browser
def test_compare_view_in_chromium(project, tmp_path):
    playwright = pytest.importorskip("playwright.sync_api")
    plotly = pytest.importorskip("plotly.offline")
    base_cmd = fake("--step-ms", "20")
    _run(project, "--baseline", command=base_cmd)
    _run(project, command=fake("--step-ms", "10"))                       # another configuration: faster
    _run(project, "--env", "XLA_FLAGS=--fake_speedup=2", command=fake("--step-ms", "20"))  # same config, env
    _run(project, "-m", '=HYPERLINK("http://x.invalid")', command=fake("--step-ms", "40"))  # slower
    _run(project, command=fake("--step-ms", "20", "--steps", "8"))  # v1's settings, another command
    recs = records.lane_records(project.wiki, "m", "l")
    assert len(recs) == 5
    site = tmp_path / "site"
    (site / "assets").mkdir(parents=True)
    (site / "assets/plotly.js").write_text(plotly.get_plotlyjs())
    (site / "runs.html").write_text(compare_html("m", "l", recs, "assets/plotly.js", lambda r: "x/" + r["page"]))
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(site))
    handler.log_message = lambda *a: None
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        with playwright.sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path="/usr/bin/chromium", args=ARGS)
            page = browser.new_page(viewport={"width": 1200, "height": 900})
            page.goto(f"http://127.0.0.1:{srv.server_address[1]}/runs.html")
            page.wait_for_function("window.compareReady === true", timeout=20_000)
            cells = lambda col: page.eval_on_selector_all(  # noqa: E731
                "#runs tbody tr", f"rows => rows.map(r => r.children[{col}].textContent)")
            # the default pin is the baseline (v1): its own delta is +0.00 %, the others signed, coloured
            assert cells(1) == ["1", "2", "3", "4", "5"] and set(cells(3)) == {"s/tpu"}
            assert cells(6)[0] == "0.00 %" and cells(6)[1].startswith("+") and cells(6)[3].startswith("-")
            assert page.eval_on_selector("#runs tbody tr:nth-child(4) td:nth-child(7)", "e => e.className") == "down"
            # pin v2 instead: every delta is against it now
            page.select_option("#pin", recs[1]["exp_id"])
            assert cells(6)[1] == "0.00 %" and cells(6)[0].startswith("-")
            # sort by tokens/s (descending after two clicks), filter by verdict
            page.click("#runs th[data-k=tps]")
            page.click("#runs th[data-k=tps]")
            tps = [float(x) for x in cells(5)]
            assert tps == sorted(tps, reverse=True)
            page.select_option("#fverdict", recs[3]["verdict"])
            assert len(cells(1)) == sum(r["verdict"] == recs[3]["verdict"] for r in recs) >= 1
            page.select_option("#fverdict", "")
            # compare v1 and v3: the same config, another environment -> exactly env.XLA_FLAGS differs
            page.check(f"input.pick[value='{recs[0]['exp_id']}']")
            page.check(f"input.pick[value='{recs[2]['exp_id']}']")
            diff = page.eval_on_selector_all("#compare tr.diff", "rows => rows.map(r => r.dataset.key)")
            assert diff == ["env.XLA_FLAGS"]
            page.uncheck(f"input.pick[value='{recs[2]['exp_id']}']")
            page.check(f"input.pick[value='{recs[3]['exp_id']}']")
            diff = page.eval_on_selector_all("#compare tr.diff", "rows => rows.map(r => r.dataset.key)")
            assert diff == ["code.command", "config.step_ms"]
            # v1's settings run by another command: only the command differs (it said "same configuration")
            page.uncheck(f"input.pick[value='{recs[3]['exp_id']}']")
            page.check(f"input.pick[value='{recs[4]['exp_id']}']")
            diff = page.eval_on_selector_all("#compare tr.diff", "rows => rows.map(r => r.dataset.key)")
            assert diff == ["code.command"]
            # none of these runs was profiled: no `tools profile diff` to offer (it would fail: no trace)
            assert "tools profile diff" not in page.inner_text("#compare")
            # parallel coordinates: the knob that varies and the metric; groups: v1 and v3 share a configuration
            dims = page.evaluate("window.parcoordsDims")
            assert dims[0] == "step_ms" and "tokens/s" in dims
            assert page.evaluate("document.getElementById('pc').data[0].type") == "parcoords"
            groups = page.evaluate("window.groupRows.map(g => [JSON.parse(g.k), g.runs, g.n, g.half])")
            twenty = [g for g in groups if g[0]["config"] == {"step_ms": 20}]
            # v1 and v3 differ in XLA_FLAGS, v1 and v5 in their command: three configurations (v1 and v5 were pooled)
            assert len(twenty) == 3 and len(groups) == 5
            assert all(g[2] >= 2 and g[3] is not None for g in twenty)  # each run's own rounds pooled
            page.screenshot(path=str(tmp_path / "compare.png"), full_page=True)
            # the CSV is the ledger's runs: the same ids and tokens/s
            rows = list(csv.DictReader(io.StringIO(page.evaluate("window.compareCsv()"))))
            lane_dir = project.wiki / "experiments/m/l"
            book = ledger.read((lane_dir / "RESULTS.tsv").read_text())
            assert [r["description"] for r in rows if r["version"] == "4"] == ['\'=HYPERLINK("http://x.invalid")']
            assert {r["exp_id"]: float(r["tps"]) for r in rows} == \
                {b["exp_id"]: float(b["tokens_per_s"]) for b in book}
            browser.close()
    finally:
        srv.shutdown()


@pytest.mark.slow
def test_the_built_site_frames_the_runs_page_it_ships(tmp_path):
    """A default build (directory URLs): the lane's page frames runs.html, and that file is there."""
    import re
    import subprocess
    import sys

    kb = tmp_path / "kb"
    run = lambda *a: subprocess.run([sys.executable, "-m", "tools", "--root", str(kb), *a],  # noqa: E731
                                    capture_output=True, text=True, timeout=600)
    assert run("init", str(kb)).returncode == 0
    r = run("exp", "run", "--model", "m", "--lane", "l", "--variant", "s/cpu", "--baseline", "-q", "--", *fake())
    assert r.returncode == 0, r.stdout + r.stderr
    r = run("site", "build")
    assert r.returncode == 0, r.stdout + r.stderr
    page = kb / "site/explore/experiments/m/runs-l/index.html"
    src = re.search(r'<iframe class="arw-frame" src="([^"]+)"', page.read_text()).group(1)
    framed = (page.parent / src).resolve()
    assert framed.is_file() and "compare-data" in framed.read_text()
    assert "runs-l/index.md" in (kb / "site/explore/experiments/m/index.html").read_text() or \
        "runs-l/" in (kb / "site/explore/experiments/m/index.html").read_text()
