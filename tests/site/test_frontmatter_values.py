"""Hand-edited frontmatter values on loop, gap and experiment pages: the site still builds, its published data
is JSON, and what is left out is named in a warning (so `--strict` fails)."""

from __future__ import annotations

import json
from pathlib import Path

from tools import pages
from tools.sitegen.generate import generate


def _write(wiki: Path, rel: str, meta: dict, body: str = "x\n") -> None:
    p = wiki / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(pages.render(meta, body), encoding="utf-8")


def _raw(wiki: Path, rel: str, frontmatter: str) -> None:
    p = wiki / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(f"---\n{frontmatter}---\n\nx\n", encoding="utf-8")


def test_a_date_in_loop_or_gap_frontmatter_builds_and_publishes_it_as_text(tmp_path):
    """`status: 2026-01-01` (YAML reads a date) crashed every build: a date is not JSON."""
    wiki = tmp_path / "wiki"
    _raw(wiki, "loops/l1.md", "title: l1\ntype: loop\nmodel: m\nstatus: 2026-01-01\nlane: 2026-01-02\n"
                              "best: {x: 2026-01-01, 2026-01-03: y}\n")
    _raw(wiki, "analyses/gap-x.md", "title: g\ntype: analysis\nitems: 2026-01-01\n"
                                    "categories_us_per_token: [{category: a, ours: 1, ref: 2}]\n")
    gen = generate(wiki)
    loop = json.loads(gen.files["explore/loops/l1/staircase.json"])
    assert (loop["status"], loop["lane"], loop["best"]) == ("2026-01-01", "2026-01-02",
                                                           {"x": "2026-01-01", "2026-01-03": "y"})
    gap = json.loads(gen.files["explore/gaps/gap-x/chart.json"])
    assert gap["items"] == "2026-01-01" and gap["categories"] == [{"category": "a", "ours": 1.0, "ref": 2.0}]
    assert "2026-01-01" in gen.files["explore/gaps/index.md"]
