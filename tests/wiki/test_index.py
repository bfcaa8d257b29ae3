"""tools index: wiki/index.md from frontmatter."""

from __future__ import annotations

import os
from pathlib import Path

from tools import wikiindex
from tools.wikiscan import scan
from tools.writer import Writer

from .conftest import TODAY, page, write

GOLDEN = Path(__file__).parent / "golden" / "index.md"


def small_wiki(wiki: Path) -> None:
    write(wiki, "concepts/remat.md", page("Rematerialization", "concept",
                                          "# Remat\n\nTrade compute for memory by recomputing [activations](x.md).\n"))
    write(wiki, "concepts/flash.md", page("Flash attention", "concept", summary="Tiled attention in SRAM."))
    write(wiki, "kernels/jax-matmul.md", page("matmul", "kernel", "## Code\n\n```\ncode\n```\n\n" + "word " * 60))
    write(wiki, "experiments/llama/v001-base.md", page("Baseline [v001]", "experiment", description="The baseline."))
    write(wiki, "notes/loose.md", "# A loose note\n\nWritten by hand, no frontmatter.\n")
    write(wiki, "notes/broken.md", "---\ntitle: [oops\n---\nbody\n")
    write(wiki, "notes/odd.md", page("Odd", "recipe"))


def build(wiki: Path) -> str:
    wikiindex.rebuild(wiki, Writer(wiki, today=TODAY))
    return (wiki / "index.md").read_text()


def test_index_matches_golden_file(kb):
    small_wiki(kb.wiki)
    text = build(kb.wiki)
    if os.environ.get("UPDATE_GOLDEN"):
        GOLDEN.write_text(text)
    assert text == GOLDEN.read_text()


def test_counts_are_true_and_every_page_is_listed(kb):
    small_wiki(kb.wiki)
    wiki = scan(kb.wiki)
    counts = wikiindex.expected_counts(wiki)
    assert counts["Concepts"] == 2 and counts["Kernels"] == 1 and counts["Experiments"] == 1
    assert counts[wikiindex.NO_FRONTMATTER] == 2 and counts[wikiindex.OTHER] == 1
    assert counts["Hypotheses"] == 0
    text = build(kb.wiki)
    assert wikiindex.recorded_counts(text.split("---\n", 2)[2]) == counts
    for p in wiki.pages:
        if p.rel not in ("index.md", "log.md"):
            assert f"]({p.rel})" in text


def test_rebuild_is_idempotent_and_logs_only_changes(kb):
    small_wiki(kb.wiki)
    index, log = kb.wiki / "index.md", kb.wiki / "log.md"
    assert wikiindex.rebuild(kb.wiki).status == "updated"
    before = (index.read_bytes(), index.stat().st_mtime_ns, log.read_bytes())
    assert wikiindex.rebuild(kb.wiki).status == "unchanged"
    assert (index.read_bytes(), index.stat().st_mtime_ns, log.read_bytes()) == before
    assert log.read_text().count("] index | wiki/index.md") == 1


def test_hand_written_text_survives(kb):
    index = kb.wiki / "index.md"
    text = index.read_text().replace("# Index\n", "# Index\n\nMy own words about this wiki.\n")
    index.write_text(text + "\nA footer I wrote.\n")
    small_wiki(kb.wiki)
    out = build(kb.wiki)
    assert "My own words about this wiki." in out and out.rstrip().endswith("A footer I wrote.")
    assert "## Concepts (2)" in out


def test_index_without_region_gets_one_appended(kb):
    write(kb.wiki, "index.md", "# My hand index\n\n- [remat](concepts/remat.md)\n")
    small_wiki(kb.wiki)
    out = build(kb.wiki)
    assert out.index("# My hand index") < out.index("<!-- tools:begin index -->")
    assert "title: Index" in out


def test_summaries():
    assert wikiindex.first_paragraph("# T\n\n<!-- c -->\n- list\n\nFirst para\nline two.\n\nSecond.") == \
        "First para line two."
    assert wikiindex.first_paragraph("```\ncode\n```\n| a | b |\n\nText") == "Text"
    assert wikiindex.one_line("See [the **docs**](x.md) and [[y|why]].") == "See the docs and why."
    assert wikiindex.one_line("`jax.nn.dot_product_attention` and _em_") == "jax.nn.dot_product_attention and em"
    long = wikiindex.one_line("word " * 100)
    assert len(long) <= wikiindex.SUMMARY_CHARS and long.endswith("…")


def test_index_command(kb, invoke, tmp_path):
    r = invoke("index", root=kb.root)
    assert r.exit_code == 0 and r.output == "wiki/index.md: unchanged (0 pages: no pages)\n"
    small_wiki(kb.wiki)
    r = invoke("index", "--json", root=kb.root)
    assert r.exit_code == 0
    assert '"status": "updated", "pages": 7' in r.output and '"Concepts": 2' in r.output
    missing = invoke("index", root=tmp_path / "nowhere")
    assert missing.exit_code == 1 and "no wiki/ folder" in missing.output
