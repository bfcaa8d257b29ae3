"""The README's and the docs' demo figures come from a real run's report (docs/data/demo-report.json) through
scripts/figures.py: a stale region fails here, and the filler writes what the report says."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / "scripts" / "figures.py"


def _figures():
    spec = importlib.util.spec_from_file_location("figures", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_every_figures_region_matches_the_committed_report():
    r = subprocess.run([sys.executable, str(SCRIPT), "--check"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    readme = (REPO / "README.md").read_text()
    assert "<!-- figures:demo-time -->" in readme and "(docs/demo.md)" in readme


def test_a_region_is_written_from_the_report():
    fig = _figures()
    report = json.loads((REPO / "docs/data/demo-report.json").read_text())
    text = "x <!-- figures:demo-pages -->old<!-- /figures:demo-pages --> y <!-- figures:unknown -->keep<!-- /figures:unknown -->"
    out = fig.fill(text, report)
    assert f"{report['pages']} pages, {report['ingest']['kernels']} Pallas kernels" in out and "old" not in out
    assert "keep" in out
    report["pages"] += 1
    assert fig.fill(out, report) != out
    run = fig.fill("<!-- figures:demo-run --><!-- /figures:demo-run -->", report)
    assert all(v in run for v in report["loop"]["verdicts"]) and report["date"] in run
