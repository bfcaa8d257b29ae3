"""Claims a user found wrong: sentences that name no measurement taken for one, figures cut short or lost, and
measured figures missed, each read through the real extractor and claim finder."""

from __future__ import annotations

from pathlib import Path

import pytest

from tools.sources.claims import claims
from tools.sources.extract import extract

from .cli import tools


def _claims(text: str, name: str = "doc.md") -> dict[str, list[str]]:
    return {c.quote: c.numbers for c in claims(extract(Path(name), data=text.encode()))}


def test_settings_plans_and_hypotheticals_are_no_claims():
    text = "\n\n".join([
        "# Setup", "Dropout is set to 10% of the units.", "We scale the learning rate by 2x in the warmup.",
        "We want to achieve 60% MFU.", "Our aim is to reach 50% MFU on every slice.",
        "If EP = 64 the all-to-all is 3x slower.", "The accelerator is loaded to 45% of its capacity.",
        "The fused kernel is 1.8x faster than the baseline."])
    assert list(_claims(text)) == ["The fused kernel is 1.8x faster than the baseline."]


def test_figures_with_an_error_or_spaced_thousands_stay_whole_and_examples_are_claims():
    text = "\n\n".join([
        "# Results", "Latency was 3.4 ± 0.2 ms per token.", "The server sustained 12 345 tokens/s on one host.",
        "The replica sustained 23\u202f456 tokens/s on one host.",
        "The router sustained 34\u00a0567 tokens/s at peak load.",
        "For example, public benchmarks show Llama2-70B achieving 65% MFU.",
        "The model utilized approximately 20GiB HBM during training.", "The run achieved 45% MFU, as expected."])
    found = _claims(text)
    numbers = {n for ns in found.values() for n in ns}
    assert any("3.4 ± 0.2 ms" in n for n in numbers) and not any(n.startswith("±") for n in numbers), found
    digits = {"".join(ch for ch in n if ch.isdigit()) for n in numbers if "tokens/s" in n}
    assert {"12345", "23456", "34567"} <= digits, found  # the space between thousands may be kept or dropped
    assert any("65%" in n for n in numbers), found
    assert any("20GiB" in n for n in numbers), found
    assert any("45%" in n for n in numbers), found


def test_a_table_row_s_years_versions_sections_and_counts_are_no_figures():
    text = ("# Results\n\n| Kernel | MFU | JAX version | Date | Chips | Section | Step time (ms) | Ref |\n"
            "|---|---|---|---|---|---|---|---|\n| splash | 48.5% | 0.4.35 | 2025 | 256 | 3.2 | 412 | [12] |\n")
    found = _claims(text)
    assert list(found.values()) == [["48.5%", "412 ms"]], found


def test_indented_code_and_rst_literal_blocks_are_never_read_but_a_list_s_paragraph_is():
    md = "\n".join([
        "# Results", "", "The fused kernel is 1.8x faster than the baseline.", "", "The training log reads:", "",
        "    step 5: 2222 tokens/s, MFU 40.1%", "    step 6: 2230 tokens/s, MFU 40.3%", "",
        "- Remat on the MLP:", "", "    With remat the step time fell by 12% on v5e.", ""])
    assert set(_claims(md)) == {"The fused kernel is 1.8x faster than the baseline.",
                                "With remat the step time fell by 12% on v5e."}, _claims(md)
    rst = "\n".join([
        "Results", "=======", "", "The fused kernel is 1.8x faster than the baseline.", "", "The log reads::", "",
        "    step 5: 2222 tokens/s, MFU 40.1%", "", ".. code-block:: text", "", "    step 6: 2230 tokens/s, MFU 40.3%",
        "", ".. code:: text", "", "   step 7: 2240 tokens/s, MFU 40.5%", "", ".. literalinclude:: run.log",
        "   :lines: 1-3", "", "   step 8: 2250 tokens/s, MFU 40.7%", "", "Scan is 1.3x faster than the loop.", ""])
    assert set(_claims(rst, "doc.rst")) == {"The fused kernel is 1.8x faster than the baseline.",
                                            "Scan is 1.3x faster than the loop."}, _claims(rst, "doc.rst")


def test_an_html_heading_that_is_a_link_or_holds_an_anchor_link_cites_its_own_claims():
    page = ("<html><head><title>Tuning guide</title></head><body><article>"
            '<h1 id="tuning">Tuning guide <a class="headerlink" href="#tuning">#</a></h1>'
            "<p>This guide explains how block sizes change the speed of splash attention kernels on TPU.</p>"
            '<h2 id="speed">Speed<a href="#speed">¶</a></h2><p>Raising block_q from 128 to 512 gave a 1.35x speedup '
            "on a v5e chip for 8k sequences in our runs.</p>"
            '<h2 id="mem"><a href="#mem">Memory</a></h2><p>With remat the peak memory use fell by 12% on the v5e '
            "chip for every sequence length we tried.</p>"
            '<h2 id="sig">Signal events<a href="#sig">\u200b</a></h2><p>Fused kernels cut the step time by 20% '
            "on v5e chips in the runs we made here.</p></article></body></html>")
    doc = extract(Path("guide.html"), data=page.encode())
    wheres = [s.where for s in doc.sections]
    assert wheres == ["§ Tuning guide", "§ Speed", "§ Memory", "§ Signal events"], doc.sections
    wheres = {c.quote.split()[0]: c.where for c in claims(doc)}
    assert wheres == {"Raising": "§ Speed", "With": "§ Memory", "Fused": "§ Signal events"}, wheres


def test_a_concept_page_lists_a_few_claims_of_each_document_and_counts_the_rest(tmp_path):
    root = tmp_path / "kb"
    assert tools(root, "init", str(root)).returncode == 0
    src = root / "raw/sources"
    src.mkdir(parents=True, exist_ok=True)
    for d in range(12):
        lines = [f"# Flash attention notes {d:02d}", ""] + [
            f"Flash attention made the step {k + 1}.{d}x faster than the baseline on run {k}." for k in range(5)]
        (src / f"doc{d:02d}.md").write_text("\n\n".join(lines) + "\n")
    done = tools(root, "ingest", "raw/sources")
    assert done.returncode == 0, done.stderr
    page = (root / "wiki/concepts/flash-attention.md").read_text()
    listed = [ln for ln in page.splitlines() if ln.startswith("- [Flash attention notes")]
    per_doc = {ln.split("]")[0] for ln in listed}
    assert len(listed) <= 25 and len(per_doc) >= 8, listed
    assert all(sum(ln.startswith(d + "]") for ln in listed) <= 3 for d in per_doc), listed
    assert f"and {60 - len(listed)} more claims in" in page and "../sources/index.md" in page, page


@pytest.fixture()
def small_kb(tmp_path):
    root = tmp_path / "kb"
    assert tools(root, "init", str(root)).returncode == 0
    (root / "raw/sources").mkdir(parents=True, exist_ok=True)
    (root / "raw/sources/guide.md").write_text(
        "# Benchmarking & tuning guide\n\nThe fused kernel is 1.8x faster than the baseline on v5e.\n\n"
        "Scan is 1.3x faster than the Python loop on v5e.\n")
    first = tools(root, "ingest", "raw/sources")
    assert first.returncode == 0 and "2 claims with numbers" in first.stdout, first.stdout
    return root


def test_an_ingest_with_nothing_new_counts_the_claims_the_knowledge_base_holds(small_kb):
    again = tools(small_kb, "ingest", "raw/sources")
    assert "2 claims with numbers (0 from documents read now)" in again.stdout, again.stdout


def test_an_empty_search_is_a_usage_error_and_a_passage_shows_an_ampersand_as_written(small_kb):
    empty = tools(small_kb, "search", "")
    assert empty.returncode == 2 and "the query holds no words" in empty.stderr, empty.stderr
    assert "string_too_short" not in empty.stderr + empty.stdout
    asked = tools(small_kb, "query", "benchmarking tuning guide")
    assert "Benchmarking & tuning guide" in asked.stdout and "&amp;" not in asked.stdout, asked.stdout
    cited = tools(small_kb, "wiki", "read", "path=sources/guide.md", "section=Benchmarking & tuning guide")
    assert cited.returncode == 0 and "1.8x faster" in cited.stdout, cited.stdout + cited.stderr


def test_a_column_that_names_a_measurement_per_chip_is_still_a_figure():
    text = ("# Results\n\n| Kernel | MFU | Tokens/s per chip | Memory per device (GB) | Chips |\n"
            "|---|---|---|---|---|\n"
            "| splash | 48.5% | 2,950 | 31 | 256 |\n")
    assert list(_claims(text).values()) == [["48.5%", "2,950", "31 GB"]], _claims(text)


def test_an_xhtml_page_s_linked_heading_is_its_own_section_too():
    page = ('<?xml version="1.0" encoding="utf-8"?>\n<html xmlns="http://www.w3.org/1999/xhtml"><head><title>Guide'
            "</title></head><body><article><h1>Guide</h1><p>This guide explains how block sizes change the speed of "
            'splash attention kernels on TPU.</p><h2 id="mem"><a href="#mem">Memory</a></h2><p>With remat the peak '
            "memory use fell by 12% on the v5e chip for every sequence length we tried.</p></article></body></html>")
    found = [c.where for c in claims(extract(Path("guide.xhtml.html"), data=page.encode()))]
    assert found == ["§ Memory"], found


def test_the_narrow_lines_of_a_two_column_pdf_are_one_sentence():
    """A line of 8 words or fewer without closing punctuation was a heading: a two-column paper's lines are that
    short, so "the step time dropped from 412 ms to" was a claim whose figure had lost its 377 ms, and "with remat
    enabled the same run" was cut from the figure it explains."""
    pytest.importorskip("pypdfium2")
    import tempfile

    from .makepdf import pdf

    lines = ["Serving results", "",
             "With the new scheduler the server", "lowered the median latency from 48 ms",
             "to 31 ms per token on v5e-8, and", "the step time dropped from 412 ms to",
             "377 ms once remat was enabled in", "the decoder layers of the model.", "",
             "Training throughput", "",
             "The baseline ran at 1,200 tokens/s, and", "with remat enabled the same run",
             "reached 1,450 tokens/s on one host."]
    with tempfile.TemporaryDirectory() as d:
        f = Path(d) / "narrow.pdf"
        f.write_bytes(pdf([lines], title="Narrow"))
        found = claims(extract(f))
    quotes = [c.quote for c in found]
    assert quotes == [
        "With the new scheduler the server lowered the median latency from 48 ms to 31 ms per token on v5e-8, and "
        "the step time dropped from 412 ms to 377 ms once remat was enabled in the decoder layers of the model.",
        "The baseline ran at 1,200 tokens/s, and with remat enabled the same run reached 1,450 tokens/s on one host."]
    assert "step time dropped from 412 ms to 377 ms" in found[0].numbers
