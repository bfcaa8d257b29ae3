"""What index.md and codebase pages say about pages with awkward text: a summary written with markdown escapes or
entities is shown as the words it renders (not escaped twice), and a file whose name holds `%` is linked to itself."""

from __future__ import annotations

import subprocess
import sys

import markdown

from tools import lint, scaffold, wikiindex
from tools.project import Project
from tools.writer import Writer


def test_a_summary_is_escaped_once(tmp_path):
    root = tmp_path / "kb"
    scaffold.init(root, site_name="text")
    (root / "wiki/concepts/k.md").write_text("---\ntitle: K\ntype: concept\n---\n# K\n\n"
                                             "Calls pallas\\_call on x\\[i\\] and a\\_b, never &lt;script&gt;.\n")
    wikiindex.rebuild(root / "wiki", Writer(root / "wiki"), log=False)
    html = markdown.markdown((root / "wiki/index.md").read_text())
    assert "Calls pallas_call on x[i] and a_b, never &lt;script&gt;." in html, html


def test_a_file_named_with_a_percent_is_linked_to_itself(tmp_path):
    root = tmp_path / "kb"
    scaffold.init(root, site_name="percent")
    tree = root / "raw/code/p"
    tree.mkdir(parents=True)
    (tree / "kern%20x.py").write_text("from jax.experimental import pallas as pl\n\n\ndef k(x_ref, o_ref):\n"
                                      "    o_ref[:] = x_ref[:]\n\n\ndef entry(x):\n"
                                      "    return pl.pallas_call(k, out_shape=x)(x)\n")
    r = subprocess.run([sys.executable, "-m", "tools", "--root", str(root), "ingest", "raw/code/p", "-q"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode in (0, 3), r.stdout + r.stderr
    broken = [i for i in lint.run(Project(root)).issues if i.code == "broken-link"]
    assert broken == [], broken
