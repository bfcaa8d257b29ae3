"""`tools ingest raw/sources/...` on a generated PDF with known numbers on known pages, an HTML guide, and PDFs
that are encrypted, broken or without a text layer; then `tools search` finds the source first."""

from __future__ import annotations

import hashlib
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from .makepdf import pdf

GUIDE = """<!doctype html><html><head><title>Tuning splash attention | Guide</title>
<link rel="canonical" href="https://example.org/guides/splash"></head><body>
<nav>Home | Docs | Blog</nav><article><h1>Tuning splash attention</h1>
<p>This guide explains how block sizes change the speed of splash attention kernels on TPU for long sequences.</p>
<h2>Block sizes</h2><p>Raising block_q from 128 to 512 gave a 1.35x speedup on a v5e chip for 8k sequences.</p>
<ul><li>block_kv 1024 keeps the HBM traffic at 610 GB/s.</li></ul>
<figure><img src="blocks.png"><figcaption>Figure 1. Speed for each block_q and block_kv.</figcaption></figure>
<h2>Code</h2><pre><code>splash(q, k, v, block_q=512)</code></pre></article><footer>(c) 2026</footer></body></html>"""


def tools(root: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tools", "--root", str(root), *args], capture_output=True, text=True,
                          timeout=300)


@pytest.fixture(scope="module")
def kb(tmp_path_factory):
    pytest.importorskip("pypdfium2")
    pytest.importorskip("readability")
    pypdf = pytest.importorskip("pypdf")
    root = tmp_path_factory.mktemp("src") / "kb"
    assert tools(root, "init", str(root)).returncode == 0
    src = root / "raw/sources"
    (src / "papers").mkdir(parents=True)
    (src / "papers/fast.pdf").write_bytes(pdf(
        [["Fast Training of Large Models", "Abstract. We train large models quickly on many accelerators with "
          "little memory and report what each technique buys."],
         ["Results", "Splash attention reaches 512 TFLOP/s on one chip.", "With remat the step time is 410 ms per step."],
         ["Gradient checkpointing gives a 1.7x speedup over the baseline.", "Model FLOPs utilization was 58.2% MFU.",
          "Figure 2: Step time against batch size on v5e."]],
        title="Fast Training of Large Models", author="A. Author, B. Author",
        outline=[("Introduction", 1), ("Results", 2)]))
    (src / "guide.html").write_text(GUIDE)
    w = pypdf.PdfWriter()
    w.add_blank_page(612, 792)
    w.encrypt("secret")
    buf = io.BytesIO()
    w.write(buf)
    (src / "papers/locked.pdf").write_bytes(buf.getvalue())
    (src / "papers/broken.pdf").write_bytes(b"%PDF-1.4\n1 0 obj << garbage")
    w2 = pypdf.PdfWriter()
    w2.add_blank_page(612, 792)
    buf2 = io.BytesIO()
    w2.write(buf2)
    (src / "papers/scanned.pdf").write_bytes(buf2.getvalue())
    before = {p: hashlib.sha1(p.read_bytes()).hexdigest() for p in src.rglob("*") if p.is_file()}
    first = tools(root, "ingest", "--all")
    second = tools(root, "ingest", "raw/sources", "--json")
    after = {p: hashlib.sha1(p.read_bytes()).hexdigest() for p in src.rglob("*") if p.is_file()}
    return {"root": root, "first": first, "second": second, "raw_same": before == after}


def test_pdf_page_claims_outline_and_metadata(kb):
    root = kb["root"]
    assert kb["first"].returncode == 3, kb["first"].stdout + kb["first"].stderr  # completed with skips
    page = (root / "wiki/sources/papers-fast.md").read_text()
    assert "title: Fast Training of Large Models" in page and "year: 2024" in page and "- A. Author" in page
    assert "| Splash attention reaches 512 TFLOP/s on one chip. | p. 2 | `512 TFLOP/s` | [Splash attention]" in page
    assert "| Gradient checkpointing gives a 1.7x speedup over the baseline. | p. 3 |" in page
    assert "58.2% MFU" in page
    assert "- Introduction (p. 1)" in page and "- Results (p. 2)" in page
    assert "We train large models quickly" in page  # the abstract
    assert "- Figure 2: Step time against batch size on v5e. (p. 3)" in page and "figures: 1" in page


def test_html_guide_sections_origin_and_claims(kb):
    page = (kb["root"] / "wiki/sources/guide.md").read_text()
    assert "url: https://example.org/guides/splash" in page
    assert "1.35x speedup" in page and "§ Block sizes" in page
    assert "610 GB/s" in page
    assert "Home | Docs" not in page  # the navigation is not content
    assert "- Figure 1: Speed for each block\\_q and block\\_kv. (§ Block sizes)" in page, page


def test_concept_pages_link_to_the_claims(kb):
    concept = (kb["root"] / "wiki/concepts/splash-attention.md").read_text()
    assert "### Sources" in concept and "(../sources/papers-fast.md) (p. 2)" in concept
    assert "../sources/guide.md" in concept


def test_bad_pdfs_are_reported_and_raw_is_untouched(kb):
    out = kb["first"].stdout
    assert "skipped papers/locked.pdf: encrypted PDF" in out
    assert "skipped papers/broken.pdf: broken PDF" in out
    assert "skipped papers/scanned.pdf: no text layer" in out
    assert kb["raw_same"]
    again = json.loads(kb["second"].stdout)
    assert sorted(again["unchanged"]) == ["guide.html", "papers/fast.pdf"] and again["ingested"] == []


def test_lint_is_clean_and_search_finds_the_sources(kb):
    root = kb["root"]
    lint = tools(root, "lint", "--json")
    problems = [p for p in json.loads(lint.stdout)["problems"] if p["severity"] == "error"]
    assert not problems, problems
    hits = json.loads(tools(root, "search", "splash", "attention", "block", "sizes", "--json").stdout)["hits"]
    assert {h["path"] for h in hits[:3]} >= {"sources/guide.md"}, hits


@pytest.mark.slow
def test_llm_summary_cites_pages_and_is_made_once(tmp_path):
    """`--llm`: the real anthropic SDK over real HTTP to a local Messages stub. Kept sentences name the page they
    cite; an uncited one is dropped; an unchanged document is not summarized again; the key is never written."""
    pytest.importorskip("pypdfium2")
    pytest.importorskip("anthropic")
    sys.path.insert(0, str(Path(__file__).parents[1] / "loop"))
    from messages_stub import MESSAGES, Stub, error, tool_use

    key = "sk-test-sources-never-written"
    root = tmp_path / "kb"
    assert tools(root, "init", str(root)).returncode == 0
    (root / "raw/sources").mkdir(parents=True, exist_ok=True)
    (root / "raw/sources/fast.pdf").write_bytes(pdf(
        [["Fast Training", "Abstract. We train large models quickly."],
         ["Results", "Splash attention reaches 512 TFLOP/s on one chip."]], title="Fast Training"))
    (root / "raw/sources/other.md").write_text("# Other\n\nA note on remat with a 1.2x speedup on v5e.\n")
    reply = {"sentences": [{"text": "The paper trains large models quickly.", "cites": ["S1"]},
                           {"text": "Splash attention reaches 512 TFLOP/s on one chip.", "cites": ["S2"]},
                           {"text": "It is the fastest method ever.", "cites": []}]}
    run = lambda url, *a: subprocess.run(  # noqa: E731
        [sys.executable, "-m", "tools", "--root", str(root), "ingest", "raw/sources", "--llm", "--base-url", url,
         "--model", "claude-stub", *a], capture_output=True, text=True, timeout=300,
        env={**__import__("os").environ, "ANTHROPIC_API_KEY": key})
    with Stub() as stub:
        stub.push(MESSAGES, tool_use(reply, name="cited_sentences"))  # fast.pdf (sorted first)
        stub.push(MESSAGES, error("invalid_request_error", "refused"), 400)  # other.md: the page is still written
        first = run(stub.url)
        again = run(stub.url)  # fast.pdf is summarized already; other.md is retried (no reply left: fails again)
        every = subprocess.run(  # --all too: a summary that failed is exit 3 (it was 0 beside code trees)
            [sys.executable, "-m", "tools", "--root", str(root), "ingest", "--all", "--llm", "--base-url", stub.url,
             "--model", "claude-stub"], capture_output=True, text=True, timeout=300,
            env={**__import__("os").environ, "ANTHROPIC_API_KEY": key})
        bodies = stub.bodies()[:3]
    assert first.returncode == 3, first.stdout + first.stderr
    assert "summaries: 1 written, 1 failed" in first.stdout and "no summary for other.md" in first.stdout
    page = (root / "wiki/sources/fast.md").read_text()
    assert "The paper trains large models quickly. (p. 1)" in page
    assert "Splash attention reaches 512 TFLOP/s on one chip. (p. 2)" in page
    assert "fastest method ever" not in page and "1 uncited sentence(s) dropped" in page
    assert "## Opening" in page and (root / "wiki/sources/other.md").is_file()
    assert "[S2] (p. 2)" in next(b["text"] for b in bodies[0]["system"] if b.get("cache_control"))
    assert len(bodies) == 3 and "Other" in json.dumps(bodies[2])  # the second run asked only for other.md
    assert "summaries: 0 written, 1 failed" in again.stdout
    assert every.returncode == 3 and "completed without 1 summary (exit 3)" in every.stderr, every.stderr
    assert not [p for p in root.rglob("*") if p.is_file() and key.encode() in p.read_bytes()]


def test_a_page_that_cannot_be_written_is_reported_and_the_rest_go_on(tmp_path):
    root = tmp_path / "kb"
    assert tools(root, "init", str(root)).returncode == 0
    (root / "raw/sources").mkdir(parents=True, exist_ok=True)
    for name in ("a", "b"):
        (root / f"raw/sources/{name}.md").write_text(f"# Note {name}\n\nSplash attention reached 300 TFLOP/s.\n")
    (root / "wiki/sources").mkdir(parents=True, exist_ok=True)
    theirs = "---\ntitle: Caf\xe9\n---\n\nwritten by someone else in Latin-1\n".encode("latin-1")
    (root / "wiki/sources/a.md").write_bytes(theirs)
    r = tools(root, "ingest", "raw/sources")
    assert r.returncode == 3, r.stdout + r.stderr
    assert "skipped a.md: its page was not written" in r.stdout and "not UTF-8" in r.stdout
    assert (root / "wiki/sources/a.md").read_bytes() == theirs  # left as it was
    assert "300 TFLOP/s" in (root / "wiki/sources/b.md").read_text()
    assert "`a.md`: its page was not written" in (root / "wiki/sources/index.md").read_text()


def test_two_sources_of_one_page_name_keep_a_page_each(tmp_path):
    """`notes.md` and `notes.html` (or `my notes.md` and `my-notes.md`) were both written to one page: one
    document vanished from the wiki, and the catalog linked both to the other's page."""
    root = tmp_path / "kb"
    assert tools(root, "init", str(root)).returncode == 0
    src = root / "raw/sources/n"
    src.mkdir(parents=True)
    (src / "notes.md").write_text("# Notes A\n\nThe alpha kernel is 3.0x faster on v5p.\n")
    (src / "my notes.md").write_text("# Notes C\n\nThe gamma kernel is 2.0x faster on v5e.\n")
    (src / "my-notes.md").write_text("# Notes D\n\nThe delta kernel is 4.0x faster on v6e.\n")
    (src / "notes.html").write_text(
        "<html><head><title>Notes B</title></head><body><article><h1>Notes B</h1><p>The beta kernel took 7.5 ms "
        "per step in our long benchmark run on the cluster.</p></article></body></html>")
    r = tools(root, "ingest", "raw/sources")
    assert r.returncode == 0, r.stdout + r.stderr
    pages = {p.name: p.read_text() for p in (root / "wiki/sources").glob("n-*.md")}
    assert len(pages) == 4, sorted(pages)
    for word in ("alpha", "beta", "gamma", "delta"):
        assert sum(f"The {word} kernel" in t for t in pages.values()) == 1, word
    catalog = (root / "wiki/sources/index.md").read_text()
    linked = [line.split("](")[1].split(")")[0] for line in catalog.splitlines() if "`n/" in line]
    assert len(set(linked)) == 4, linked
    before = {p: (root / "wiki/sources" / p).read_bytes() for p in pages}
    assert tools(root, "ingest", "raw/sources").returncode == 0  # and again: nothing moves
    assert {p: (root / "wiki/sources" / p).read_bytes() for p in pages} == before
    (src / "notes.html").unlink()  # its twin takes the plain name, and leaves no second page of itself
    assert tools(root, "ingest", "raw/sources").returncode == 0
    alpha = [p.name for p in (root / "wiki/sources").glob("n-*.md") if "The alpha kernel" in p.read_text()]
    assert alpha == ["n-notes.md"], alpha


def test_numbers_memory_wording_tables_and_escapes_as_a_reader_wrote_them(tmp_path):
    """From a review: `1 250 000 tokens/s` (thin spaces) came out as `000 tokens/s`; `−3.2 %` (U+2212, what typeset
    documents print) and "reduced by 2.4 GB" were no claim; a table row that two chips' sections share was kept
    once; an HTML page's `block_q` read `block\\_q` and its image `![](x)`; a binary file named .md put control bytes
    into wiki/."""
    root = tmp_path / "kb"
    assert tools(root, "init", str(root)).returncode == 0
    src = root / "raw/sources"
    src.mkdir(parents=True, exist_ok=True)
    table = "| Block | Time (ms) | Speedup |\n|---|---|---|\n| 256 | 3.10 | 1.00x |\n| 512 | {} | {} |\n"
    (src / "report.md").write_text(
        "# Report\n\nThroughput reached 1\u2009250\u2009000 tokens/s on v5e-256 after the change.\n\n"
        "Throughput fell by \u22123.2 % with int8 weights.\n\nPeak memory was reduced by 2.4 GB with full remat.\n\n"
        "## TPU v5e\n\n" + table.format("2.30", "1.35x") + "\n## TPU v5p\n\n" + table.format("1.90", "1.63x"))
    (src / "guide.html").write_text(
        "<html><head><title>Guide</title></head><body><article><h1>Guide</h1><p>With block_q=512 the kernel runs at "
        "1.35x speedup over the default on a v5e chip for long sequences of text.</p><p><img src=\"x\"> Fused "
        "attention took 2.4 ms per step in the benchmark we ran on the cluster last week.</p></article></body></html>")
    (src / "binary.md").write_bytes(bytes(range(256)) * 10)
    (src / "escape.md").write_bytes(b"# Esc\n\n\x1b]0;PWNED\x07\x1b[2J Splash attention reached 300 TFLOP/s on v5p.\n")
    r = tools(root, "ingest", "raw/sources")
    assert r.returncode == 3 and "binary.md: binary, not text" in r.stdout, r.stdout + r.stderr
    report = (root / "wiki/sources/report.md").read_text()
    assert "`1250000 tokens/s`" in report and "`000 tokens/s`" not in report
    assert "fell by -3.2 %" in report and "reduced by 2.4 GB" in report
    assert report.count("256 — Time (ms): 3.10") == 2  # once under each chip's heading
    guide = (root / "wiki/sources/guide.md").read_text()
    assert "block\\\\\\_q" not in guide and "block\\_q=512" in guide and "![" not in guide.split("## Key claims")[1]
    assert not (root / "wiki/sources/binary.md").exists()
    assert "\x1b" not in (root / "wiki/sources/escape.md").read_text() and "300 TFLOP/s" in (
        root / "wiki/sources/escape.md").read_text()
    # what is text is still read: Windows-1252 quotes and dashes, a coloured log, a stray NUL
    from tools.sources.extract import _decode

    assert "“hello” — it’s" in _decode(("He said “hello” — it’s fine. " * 30).encode("cp1252"))
    assert _decode(b"".join(b"\x1b[32mstep %d ok\x1b[0m\n" % i for i in range(5))).startswith("step 0 ok")
    assert "x" in _decode(b"x" * 40_000 + b"\x00" + b"y")
    # a FLOP rate is a rate, and a clock time is a time (380 TFLOPs/s was read as a count; 1m23s was no figure)
    from tools.sources import claims as claims_mod

    assert claims_mod._measured("The kernel reaches 380 TFLOPs/s on v5p.") == ["380 TFLOPs/s"]
    assert claims_mod._measured("Training takes 1m23s per epoch on one chip.") == ["1m23s per epoch"]
    # a numbered heading is no part of the sentence before it ("...2.5x speedup. 3 Discussion" was the quote)
    assert claims_mod.sentences("It is 2.5x faster than the baseline.\n5 Conclusion\nWe showed the gain.") == \
        ["It is 2.5x faster than the baseline.", "5 Conclusion", "We showed the gain."]
    # UTF-8 with one stray byte stays UTF-8 (it was read as Windows-1252: "3Ã— faster", and no claim); Latin-1
    # accents, each malformed UTF-8, are still Latin-1
    stray = "The kernel is 3× faster at 350 µs per step.".encode() + b" \xff"
    assert "3× faster at 350 µs" in _decode(stray)
    assert _decode("café résumé naïve".encode("latin-1")) == "café résumé naïve"


def test_text_before_the_first_heading_is_not_cited_as_a_real_introduction():
    """Text above a file's headings was cited "§ Introduction", the same as the file's own `## Introduction`."""
    from tools.sources.extract import _markdown

    doc = _markdown("A 2.1x speed-up, said first.\n\n## Introduction\n\nThe real one.\n\n## Results\n\n3x.\n",
                    Path("notes.md"), "markdown")
    assert [s.where for s in doc.sections] == ["§ Introduction (before the first heading)", "§ Introduction",
                                               "§ Results"]
    plain = _markdown("Said first.\n\n## Results\n\n3x.\n", Path("notes.md"), "markdown")
    assert [s.where for s in plain.sections] == ["§ Introduction", "§ Results"]  # no real one: the name as before


def test_a_heading_that_holds_markup_or_a_region_marker_stays_text(tmp_path):
    """Section names went into the outline unescaped: `<img onerror>` landed in the page as HTML, and a heading
    holding `<!-- tools:end source -->` cut the generated region short, so an edited claim never reached the page."""
    root = tmp_path / "kb"
    assert tools(root, "init", str(root)).returncode == 0
    doc = root / "raw/sources/evil/heads.md"
    doc.parent.mkdir(parents=True)
    doc.write_text("# Evil headings\n\nAn introduction long enough to be read as the opening of the document.\n\n"
                   "## Results <!-- tools:end source --> after\n\nThe fused kernel is 3x faster than the baseline.\n\n"
                   "## Link <img src=x onerror=alert(1)>\n\nFigure 1: the caption.\n")
    assert tools(root, "ingest", "raw/sources/evil").returncode == 0
    page = next((root / "wiki/sources").glob("evil-*.md"))
    assert "<img" not in page.read_text() and page.read_text().count("<!-- tools:end") == 1
    doc.write_text(doc.read_text().replace("3x faster", "4x faster"))
    assert tools(root, "ingest", "raw/sources/evil").returncode == 0
    assert "4x faster" in page.read_text() and "3x faster" not in page.read_text()


def test_a_fresh_clone_keeps_every_source_page_and_its_summary(tmp_path):
    """What source ingest wrote was known from .tools-cache only, which a clone lacks: one named document re-ingested
    rewrote its page without its (paid) summary, the catalog and the concept pages lost every other document, and a
    source removed meanwhile kept its page."""
    import shutil

    root = tmp_path / "kb"
    assert tools(root, "init", str(root)).returncode == 0
    src = root / "raw/sources"
    for name, text in (("a.md", "The alpha kernel is 3.0x faster on v5p with flash attention."),
                       ("b.md", "The beta kernel took 7.5 ms per step with splash attention."),
                       ("c.md", "The gamma kernel is 2.0x faster with remat off.")):
        (src / name).write_text(f"# {name}\n\n{text}\n")
    assert tools(root, "ingest", "raw/sources").returncode == 0
    page_a = root / "wiki/sources/a.md"
    summarized = page_a.read_text().replace("## Summary\n", "## Summary\n\nWritten by a model: alpha wins.\n\n"
                                            "## Opening\n", 1)
    page_a.write_text(summarized)  # as an --llm run leaves it
    catalog = (root / "wiki/sources/index.md").read_text()
    mine = root / "wiki/sources/by-hand.md"  # a source page written by hand, its document not kept: never removed
    mine.write_text("---\ntitle: A paper\ntype: source\npath: raw/sources/paper.pdf\nsha256: abc\n---\n\n# A paper\n")
    shutil.rmtree(root / ".tools-cache")  # a fresh clone
    (src / "c.md").unlink()
    r = tools(root, "ingest", "raw/sources/a.md")
    assert r.returncode == 0, r.stdout + r.stderr
    assert page_a.read_text() == summarized
    assert not (root / "wiki/sources/c.md").exists() and mine.is_file()
    now = (root / "wiki/sources/index.md").read_text()
    assert "b.md" in now and "c.md" not in now and "a.md" in now and now != catalog
    assert tools(root, "ingest", "raw/sources").returncode == 0 and page_a.read_text() == summarized
    lint = tools(root, "lint")
    assert lint.returncode == 0, lint.stdout


def test_a_source_named_index_keeps_a_page_of_its_own(tmp_path):
    """raw/sources/index.md was written to sources/index.md, the catalog's page: the catalog took its place and
    its content appeared nowhere."""
    root = tmp_path / "kb"
    assert tools(root, "init", str(root)).returncode == 0
    (root / "raw/sources/index.md").write_text("# Our index\n\nThe alpha kernel is 3.0x faster on v5p.\n")
    assert tools(root, "ingest", "raw/sources").returncode == 0
    own = [p for p in (root / "wiki/sources").glob("index-*.md")]
    assert len(own) == 1 and "The alpha kernel" in own[0].read_text()
    catalog = (root / "wiki/sources/index.md").read_text()
    assert "type: index" in catalog and own[0].name in catalog


def test_a_comment_is_no_heading_and_an_html_heading_is_one():
    """MaxText's TPU READMEs open with a licence inside <!-- -->: its first line became the page's title and nine
    licence lines top-level sections; flashinfer's <h1> title was not read as one."""
    from tools.sources.extract import _markdown

    text = ("<!--\n # Licensed under the Apache License, Version 2.0 (the \"License\");\n # you may not use this\n-->\n"
            '<h1 align="center"><img src="logo.png"> FlashThing</h1>\n\nIntro text.\n\n## Results\n\n'
            "The kernel is 3x faster.\n")
    doc = _markdown(text, Path("README.md"), "markdown")
    assert doc.title == "FlashThing" and [t for t, _ in doc.outline] == ["FlashThing", "  Results"]
    assert not any("Licensed" in s.text for s in doc.sections)
    assert [s.where for s in doc.sections if "3x faster" in s.text] == ["§ Results"]


def test_a_page_saved_whole_keeps_its_text_after_a_large_inline_image():
    """A "save as single file" page: libxml2 cuts a text node at 10 MB, so everything after an 11 MB data: URI was
    lost without a word; a canonical URL kept its &amp;."""
    pytest.importorskip("readability")
    from tools.sources.extract import _html

    page = ('<html><head><title>Saved</title><link rel="canonical" href="https://example.com/s?a=1&amp;b=2">'
            '</head><body><article><h1>Saved</h1><p>The fused kernel is 3x faster than the baseline on v5p.</p>'
            f'<img src="data:image/png;base64,{"A" * 11_000_000}"><h2>Later</h2><p>Peak memory fell from 14 GB to '
            '9 GB with remat on every layer of the model.</p></article></body></html>')
    doc = _html(page, Path("saved.html"))
    text = " ".join(s.text for s in doc.sections)
    assert "Peak memory fell from 14 GB to 9 GB" in text and "§ Later" in [w for _, w in doc.outline]
    assert doc.url == "https://example.com/s?a=1&b=2"


def test_underlined_titles_of_real_rst_and_markdown_descriptions_are_sections():
    """reStructuredText titles (a line of punctuation under, sometimes over, the text) and markdown's setext ones
    (``=====``, ``-----``) were no sections at all: a whole README was one "Introduction", every claim cited there.
    Read on the long descriptions of installed packages: markdownify's and packaging's (rst), and a setext file."""
    import importlib.metadata as md

    from tools.sources.extract import _markdown

    rst = md.metadata("markdownify").get_payload()
    doc = _markdown(rst, Path("markdownify.rst"), "text")
    heads = [t for t, _ in doc.outline]
    assert heads[:3] == ["Installation", "Usage", "Options"] and doc.title == "Installation", heads
    usage = next(s for s in doc.sections if s.where == "§ Usage")
    assert "Convert some HTML to Markdown" in usage.text and "=====" not in usage.text
    # an rst title with a line over and under it, and levels in the order the styles first appear
    text = "=====\nGuide\n=====\n\nIntro.\n\nSpeed\n-----\n\nThe kernel is 3x faster.\n\nNotes\n~~~~~\n\nNone.\n"
    doc = _markdown(text, Path("guide.rst"), "text")
    assert [t for t, _ in doc.outline] == ["Guide", "  Speed", "    Notes"] and doc.title == "Guide"
    assert [s.where for s in doc.sections if "3x faster" in s.text] == ["§ Speed"]
    assert not any("=====" in s.text or "~~~~~" in s.text for s in doc.sections)

    # markdown: setext titles are sections; a front matter's closing ---, a paragraph's last line over a thematic
    # break, a list item and a --- inside a fence are not
    text = ("---\ntitle: x\n---\n\nFast kernels\n============\n\nIntro line one\nline two\n---\n\n- item\n---\n\n"
            "```yaml\nkey: 1\n---\n```\n\nResults\n-------\n\nThe kernel is 3x faster.\n")
    doc = _markdown(text, Path("README.md"), "markdown")
    assert [t for t, _ in doc.outline] == ["Fast kernels", "  Results"] and doc.title == "Fast kernels"
    assert [s.where for s in doc.sections if "3x faster" in s.text] == ["§ Results"]
    assert any("line two" in s.text for s in doc.sections if s.where == "§ Fast kernels")


def test_a_sentence_over_a_page_break_is_one_claim_cited_where_it_starts():
    """pdfium gives a PDF's text page by page: a sentence that ran over a page break was two fragments, one with
    the figure and one with its unit, and neither was a claim. A page number at the foot does not stop the join;
    a page that starts a new sentence (a capital) is not joined."""
    pytest.importorskip("pypdfium2")
    pytest.importorskip("pypdf")
    from tools.sources.claims import claims
    from tools.sources.extract import extract

    data = pdf([["Results", "With the fused kernel the training step of the 8B model ran 2.3x", "7"],
                ["faster than the unfused baseline on v5e. Remat cost 27 % of step time.",
                 "The int8 path ran 1.4x faster on v6e"],
                ["Appendix", "Nothing measured here."]])
    doc = extract(Path("paper.pdf"), data=data)
    got = {(c.where, c.quote) for c in claims(doc)}
    assert ("p. 1", "With the fused kernel the training step of the 8B model ran 2.3x faster than the unfused "
                    "baseline on v5e.") in got, got
    assert ("p. 2", "Remat cost 27 % of step time.") in got and ("p. 2", "The int8 path ran 1.4x faster on v6e") in got
    assert not any("faster than the unfused" in q for w, q in got if w == "p. 2")


def test_the_same_document_twice_is_one_page_and_a_renamed_one_keeps_its_summary(tmp_path):
    """The same PDF saved twice (`paper.pdf`, `paper (1).pdf`) made two pages, and every concept page listed its
    claims twice; a summary, paid for, was cached by file name: renaming the file bought it again."""
    pytest.importorskip("pypdfium2")
    root = tmp_path / "kb"
    assert tools(root, "init", str(root)).returncode == 0
    src = root / "raw/sources"
    data = pdf([["Fast remat", "Full remat cost 27 % of step time on v5e."]], title="Fast remat")
    (src / "paper.pdf").write_bytes(data)
    (src / "paper (1).pdf").write_bytes(data)
    r = tools(root, "ingest", "raw/sources")
    assert r.returncode == 0, r.stdout + r.stderr
    pages_ = sorted(p.name for p in (root / "wiki/sources").glob("*.md"))
    assert pages_ == ["index.md", "paper.md"], pages_
    catalog = (root / "wiki/sources/index.md").read_text()
    assert "## Copies" in catalog and "a copy of `paper.pdf`" in catalog
    assert (root / "wiki/concepts/rematerialization.md").read_text().count("27 % of step time") == 1
    assert tools(root, "ingest", "raw/sources").returncode == 0  # a rerun converges
    assert sorted(p.name for p in (root / "wiki/sources").glob("*.md")) == pages_
    import json

    cache = root / ".tools-cache/sources.json"
    c = json.loads(cache.read_text())
    paid = {"sentences": [{"text": "Remat costs a quarter of the step.", "where": ["p. 1"]}], "dropped": 0,
            "model": "m", "input_tokens": 10, "output_tokens": 5}
    c["docs"]["paper.pdf"]["summary"] = paid  # as a --llm run left it
    cache.write_text(json.dumps(c))
    (src / "paper.pdf").rename(src / "renamed.pdf")
    (src / "paper (1).pdf").unlink()
    assert tools(root, "ingest", "raw/sources").returncode == 0
    c = json.loads(cache.read_text())
    assert c["docs"]["renamed.pdf"].get("summary") == paid, c["docs"]
    assert "Remat costs a quarter of the step." in (root / "wiki/sources/renamed.md").read_text()


def test_claims_of_maxtext_s_docs_as_their_writers_meant_them():
    """Shapes from MaxText's and xprof's docs (labelled facts): a bullet's `- ` read as a minus (`- 94.54%`), a
    blockquote's `>` inside quotes, "capacity factor" taking a real MFU for a hardware spec, `peak 946,700 GFLOP/s`,
    "achieving 100% is not practical" and "from 3x to 4x of the model dimension" filed as measurements, and two
    figures cited "§ Gold" where each chip has a Gold tier."""
    from tools.sources.claims import claims
    from tools.sources.extract import _markdown

    text = "\n".join([
        "# Tiering", "", "## Trillium (v6e)", "", "### Gold", "", "Llama 2 70B reached 43.8% MFU on this tier.", "",
        "## v5p", "", "### Gold", "", "Llama 2 70B reached 65.4% MFU on this tier.", "",
        "## Notes", "", "- 94.54% of the FLOPs are matmuls, and step time fell by 12% after the change.", "",
        "> Tracing with the profiler increases the measured step time of this model", "> by 20% at the default "
        "sampling frequency.", "",
        "The MoE model reached 43.1% MFU with a 1.0 capacity factor.", "",
        "The chip has peak 946,700 GFLOP/s and peak HBM 1525.5 GiB/s.", "",
        "Note that achieving 100% is not practical in real training.", "",
        "We increased the MLP dimension from 3x to 4x of the model dimension.", ""])
    found = {c.quote: c for c in claims(_markdown(text, Path("tiering.md"), "markdown"))}
    wheres = {c.where for q, c in found.items() if "Llama 2 70B" in q}
    assert wheres == {"§ Trillium (v6e) › Gold", "§ v5p › Gold"}, found
    bullet = next(q for q in found if "94.54%" in q)
    assert bullet.startswith("94.54%") and "-94.54" not in " ".join(found[bullet].numbers), found[bullet]
    quoted = next(q for q in found if "Tracing" in q)
    assert ">" not in quoted and "&gt;" not in quoted and "by 20%" in quoted, quoted
    assert any("43.1% MFU" in q for q in found), found
    assert not any(s in q for q in found for s in ("946,700", "not practical", "from 3x to 4x")), list(found)


def test_a_table_whose_rows_name_the_measurement_gives_its_figures():
    """MaxText's custom_model.md tabulates `| **MFU (1 pod Trillium)** | 43.1% | 49.8% |` with the models as columns:
    no claim came of it (0 of its 5 MFU figures); a row of the devices' memory stays no measurement."""
    from tools.sources.claims import claims
    from tools.sources.extract import _markdown

    text = ("# Results\n\n| | Llama 2 70B | Mixtral |\n|---|---|---|\n| **MFU (1 pod Trillium)** | 43.1% | 49.8% |\n"
            "| **Tokens/s/chip** | 1,200 | 980 |\n| Memory (GB) | 16 | 32 |\n| Chips | 256 | 256 |\n")
    found = [(c.quote, c.numbers) for c in claims(_markdown(text, Path("t.md"), "markdown"))]
    assert found == [("MFU (1 pod Trillium) — Llama 2 70B: 43.1%; Mixtral: 49.8%", ["43.1%", "49.8%"]),
                     ("Tokens/s/chip — Llama 2 70B: 1,200; Mixtral: 980", ["1,200", "980"])], found
