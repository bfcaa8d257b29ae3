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


def test_nan_and_infinity_are_left_out_of_published_json_and_the_gaps_table(tmp_path):
    """`.nan` / `.inf` in frontmatter made staircase.json and chart.json invalid JSON and the table say "+nan %"."""
    wiki = tmp_path / "wiki"
    _raw(wiki, "loops/l1.md", "title: l1\ntype: loop\nmodel: m\nlane: l\nbest: {tps: .nan}\n")
    _raw(wiki, "experiments/m/l/2026-01-01-v001-r.md",
         "title: r\ntype: experiment\nexp_id: r\nmodel: m\nlane: l\nloop: l1\nstatus: filed\nverdict: supported\n"
         "ledger_status: keep\nmetrics: {tokens_per_s: .inf, mfu_percent: .nan}\ngain_pct: .nan\n")
    _raw(wiki, "analyses/gap-x.md", "title: g\ntype: analysis\ngap_pct: .nan\n"
                                    "categories_us_per_token: [{category: a, ours: .nan, ref: .inf},"
                                    f" {{category: b, ours: 1{'0' * 400}, ref: 1}}]\n")
    gen = generate(wiki)

    def strict_json(text):
        return json.loads(text, parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))
    loop = strict_json(gen.files["explore/loops/l1/staircase.json"])
    assert loop["best"] == {"tps": None} and (loop["points"][0]["tps"], loop["points"][0]["mfu"]) == (None, None)
    assert loop["frontier"] == []  # no figure, no step
    gap = strict_json(gen.files["explore/gaps/gap-x/chart.json"])
    assert gap["gap_pct"] is None and gap["categories"] == [{"category": "a", "ours": 0.0, "ref": 0.0},
                                                            {"category": "b", "ours": 0.0, "ref": 1.0}]
    assert "nan" not in gen.files["explore/gaps/index.md"].lower()


def test_an_experiment_page_left_out_of_the_explorers_is_a_warning(tmp_path):
    """`metrics: {tokens_per_s: "12,000"}` (a hand edit) dropped the run from the explorers with a log line only:
    no build warning, so `--strict` passed."""
    wiki = tmp_path / "wiki"
    _write(wiki, "models/m.md", {"title": "m", "type": "model", "model": "m"})
    run = {"title": "r", "type": "experiment", "model": "m", "lane": "l", "status": "filed", "verdict": "supported"}
    _write(wiki, "experiments/m/l/2026-01-01-v001-good.md", dict(run, exp_id="good", metrics={"tokens_per_s": 1.0}))
    _write(wiki, "experiments/m/l/2026-01-01-v002-bad.md", dict(run, exp_id="bad", metrics={"tokens_per_s": "12,000"}))
    _write(wiki, "experiments/notes.md", {"title": "notes", "type": "experiment"})  # a written note, never a run
    gen = generate(wiki)
    assert "wiki/experiments/m/l/2026-01-01-v002-bad.md: left out (`metrics.tokens_per_s` is '12,000', not a number)" \
        in gen.warnings
    assert not any("v001-good" in w or "notes.md" in w for w in gen.warnings)
    assert "1 experiments" in gen.files["explore/experiments/m/index.md"]


def test_two_loop_pages_of_one_name_get_a_folder_each_and_a_warning(tmp_path):
    """wiki/loops/my-loop.md and wiki/loops/sub/my-loop.md wrote the same explorer folder, one over the other."""
    wiki = tmp_path / "wiki"
    _write(wiki, "loops/my-loop.md", {"title": "top", "type": "loop", "model": "top-model", "lane": "l"})
    _write(wiki, "loops/sub/my-loop.md", {"title": "sub", "type": "loop", "model": "sub-model", "lane": "l"})
    gen = generate(wiki)
    staircases = sorted((k for k in gen.files if k.endswith("/staircase.json")), key=len)
    assert len(staircases) == 2 and staircases[0] == "explore/loops/my-loop/staircase.json"  # the top page keeps it
    assert json.loads(gen.files[staircases[0]])["model"] == "top-model"
    assert json.loads(gen.files[staircases[1]])["model"] == "sub-model"
    listing = gen.files["explore/loops/index.md"]
    assert all(f"({k.split('/')[2]}/index.md)" in listing for k in staircases)
    assert any(w.startswith("wiki/loops/sub/my-loop.md: wiki/loops/my-loop.md is a loop named my-loop too")
               for w in gen.warnings)


def test_a_page_without_a_title_is_named_as_mkdocs_names_it(tmp_path):
    """A heading after the first paragraph named the page in the graph and landing tables while MkDocs (which only
    takes a first-block heading) showed the file name; a page whose frontmatter failed was named by its body."""
    from tools.sitegen.generate import GRAPH_JSON
    wiki = tmp_path / "wiki"
    (wiki / "concepts").mkdir(parents=True)
    (wiki / "concepts/late-heading.md").write_text("---\ntype: concept\n---\n\nIntro first.\n\n# Real Title\n")
    (wiki / "concepts/first-block.md").write_text("---\ntype: concept\n---\n\n# First Block\n\ntext\n")
    (wiki / "concepts/broken.md").write_text("---\ntype: [concept\n---\n\n# Not read\n")
    gen = generate(wiki)
    labels = {n["label"] for n in json.loads(gen.files[GRAPH_JSON])["nodes"]}
    assert {"First Block", "Late heading", "Broken"} <= labels and not labels & {"Real Title", "Not read"}
    landing = gen.files["wiki/concepts/index.md"]
    assert "late heading" in landing.lower() and "Real Title" not in landing
