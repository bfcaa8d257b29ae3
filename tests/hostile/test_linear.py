"""No regex in the engine is super-linear: the index summariser, the link extractor, the README reader, the search
index's text and snippets (a page of "[a](" repeated took 77 s at 200 KB) and the site's pathology check on 1 MB
adversarial pages, in a subprocess with a hang guard (a quadratic pattern on 1 MB
runs for hours; linear ones take well under a second each). Timings go to bench/hostile_inputs.py."""

from __future__ import annotations

import pytest

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
from tools import search
for name, pattern in PATTERNS.items():
    text = page(pattern, 1_000_000)
    p = parse_page("a.md", text)
    search.split_paths(text)  # what the search index and its snippets read of a page
    search.snippet(search.readable(text), ["first"])
    wikiindex.summary(p)
    wikiindex.one_line(text)
    readme_summary(text[:256 * 1024])
    problem(text)
    print(name, len(p.links), flush=True)
"""


@pytest.mark.slow
def test_text_functions_finish_on_1mb_adversarial_pages():
    r = subprocess.run([sys.executable, "-c", SCRIPT.format(repo=str(REPO))], capture_output=True, text=True,
                       timeout=240)
    assert r.returncode == 0, r.stderr
    from .adversarial import PATTERNS
    assert len(r.stdout.splitlines()) == len(PATTERNS)


def _finishes(code: str) -> None:
    """``code`` (ending in ``print('ok')``) runs to its end in a process of its own; the timeout is a hang guard."""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=str(REPO))
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-2000:]


def test_heading_and_html_id_scans_finish_on_crafted_lines():
    """A heading line of 5,000 spaces took a lazy pattern minutes (7.5 s at 2,000: cubic), and 100,000 `<a ` as
    many (5.7 s at 20,000: quadratic); a page's anchors are read from every page lint checks. The timeout is the
    hang guard only."""
    code = ("from tools import mdscan\n"
            "hs, ids = mdscan.headings('# a' + ' ' * 5000 + 'b')\n"
            "assert [h.text for h in hs] == ['a' + ' ' * 5000 + 'b']\n"
            "assert mdscan.headings('<a ' * 100000 + '<a id=\"x\">')[1] == {'x'}\n"
            "print('ok')\n")
    _finishes(code)


def test_a_link_opened_and_never_closed_over_a_run_of_spaces_is_linear():
    """`[x](` then 1,000 spaces and no `)` took the link pattern 2.6 s (cubic: three parts of it could take the same
    spaces; 2,000: 21.7 s). The timeout is the hang guard only."""
    code = ("from tools import mdscan\n"
            "assert mdscan.extract_links('[x](' + ' ' * 20000) == []\n"
            "assert list(mdscan.md_link_spans(('[x](' + ' ' * 300 + '\\n') * 2000)) == []\n"
            "assert [l.target for l in mdscan.extract_links('[a](my page.md \"t\")')] == ['my page.md']\n"
            "print('ok')\n")
    _finishes(code)
