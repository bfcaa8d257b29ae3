"""What a document's reading must not depend on: the hash seed of the process reading it, and (hang-guarded) how many
headings it has."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PAGE = """<html><head><title>What is rustdoc? - The rustdoc book</title></head><body>
<nav><h1 class="menu-title">The rustdoc book</h1></nav>
<main><h1>What is rustdoc?</h1><p>The standard Rust distribution ships with a tool called rustdoc. Its job is to
generate documentation for Rust projects. On a v5e chip it has nothing to do with 1,200 tokens/s.</p>
<p>Rustdoc takes as input a crate root or a Markdown file and produces HTML, CSS and JavaScript.</p></main>
</body></html>"""


def test_an_html_title_is_the_same_whatever_the_hash_seed(tmp_path):
    """readability picks the short title among a set's equal-length candidates: the same file was titled "What is
    rustdoc?" or "The rustdoc book" as PYTHONHASHSEED fell, and the catalog changed on each fresh ingest."""
    pytest.importorskip("readability")
    f = tmp_path / "what-is-rustdoc.html"
    f.write_text(PAGE)
    code = f"from pathlib import Path\nfrom tools.sources.extract import extract\nprint(extract(Path({str(f)!r})).title)"
    titles = set()
    for seed in ("1", "2", "3", "4", "5", "6"):
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=str(REPO),
                           env={**os.environ, "PYTHONHASHSEED": seed})
        assert r.returncode == 0, r.stderr[-2000:]
        titles.add(r.stdout.strip())
    assert titles == {"What is rustdoc?"}  # the page's own name, which its <title> puts first


def test_a_document_of_forty_thousand_headings_is_read(tmp_path):
    """Where a claim is cited counted, for each heading, the headings sharing each end of its path: 53 s for 10,000
    headings, quadratic. The timeout is the hang guard only."""
    f = tmp_path / "many.md"
    f.write_text("# Guide\n\n" + "".join(f"## Part {i % 97}\n\n### Step {i}\n\nText {i}.\n\n" for i in range(40_000)))
    code = (f"from pathlib import Path\nfrom tools.sources.extract import extract\n"
            f"d = extract(Path({str(f)!r}))\nprint(len(d.sections), d.sections[-1].where)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=150, cwd=str(REPO))
    assert r.returncode == 0, r.stderr[-2000:]
    n, where = r.stdout.split(" ", 1)
    assert int(n) >= 40_000 and where.strip() == "§ Step 39999", r.stdout
