"""No regex in the engine is super-linear: the index summariser, the link extractor, the README reader and the
site's pathology check on 1 MB adversarial pages, in a subprocess with a hang guard (a quadratic pattern on 1 MB
runs for hours; linear ones take well under a second each). Timings go to bench/hostile_inputs.py."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SCRIPT = """
import sys
sys.path.insert(0, {repo!r})
from tests.hostile.adversarial import PATTERNS, page
from tools import wikiindex
from tools.ingest.metadata import readme_summary
from tools.mdrisk import problem
from tools.wikiscan import parse_page
for name, pattern in PATTERNS.items():
    text = page(pattern, 1_000_000)
    p = parse_page("a.md", text)
    wikiindex.summary(p)
    wikiindex.one_line(text)
    readme_summary(text[:256 * 1024])
    problem(text)
    print(name, len(p.links), flush=True)
"""


def test_text_functions_finish_on_1mb_adversarial_pages():
    r = subprocess.run([sys.executable, "-c", SCRIPT.format(repo=str(REPO))], capture_output=True, text=True,
                       timeout=240)
    assert r.returncode == 0, r.stderr
    from .adversarial import PATTERNS
    assert len(r.stdout.splitlines()) == len(PATTERNS)
