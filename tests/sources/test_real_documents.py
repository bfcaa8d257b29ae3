"""Source ingest on real documents from the registry: pypdf 5.1.0's test PDFs (63 files: forms, CAD drawings, OCR
scans, a 137-page report, outlines with broken destinations, encryption of revisions 2 to 6) and trafilatura 2.3.1's
HTML test pages, in the folder layout they ship with. Checked facts, not only "it ran"."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import registry_docs  # noqa: E402

pytest.importorskip("pypdfium2")
pytest.importorskip("readability")


def tools(root: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tools", "--root", str(root), *args], capture_output=True, text=True,
                          timeout=600)


@pytest.fixture(scope="module")
def kb(tmp_path_factory):
    try:
        pdfs = registry_docs.members(registry_docs.PYPDF, (".pdf",))
        html = registry_docs.members(registry_docs.TRAFILATURA, (".html", ".htm"))
    except registry_docs.Unavailable as e:
        if os.environ.get("CI"):
            raise
        pytest.skip(str(e))
    root = tmp_path_factory.mktemp("real") / "kb"
    assert tools(root, "init", str(root)).returncode == 0
    src = root / "raw/sources"
    for folder, files in (("pypdf", pdfs), ("trafilatura", html)):
        for name, data in files:
            (src / folder / name).parent.mkdir(parents=True, exist_ok=True)
            (src / folder / name).write_bytes(data)
    digest = lambda: {p: hashlib.sha1(p.read_bytes()).hexdigest() for p in src.rglob("*") if p.is_file()}  # noqa: E731
    before = digest()
    first = tools(root, "ingest", "--all", "--json")
    assert first.returncode == 3, first.stderr[-2000:]  # completed, with documents that cannot be read
    return {"root": root, "report": json.loads(first.stdout), "raw_same": before == digest(),
            "pdfs": len(pdfs), "html": len(html)}


def page(kb, rel: str) -> str:
    from tools.sources.run import page_path

    return (kb["root"] / "wiki" / page_path(rel)).read_text()


def test_every_document_is_read_or_reported_with_its_reason(kb):
    r = kb["report"]
    assert r["documents"] == kb["pdfs"] + kb["html"] > 70
    assert len(r["ingested"]) + len(r["skipped"]) + len(r["copies"]) == r["documents"]
    for rel, twin in r["copies"]:  # pypdf ships some test files twice: read once, the copy named in the catalog
        assert (kb["root"] / "raw/sources" / rel).read_bytes() == (kb["root"] / "raw/sources" / twin).read_bytes()
    why = dict(r["skipped"])
    # user-password files need the password; empty-password and owner-only (permissions) files open, as in a viewer
    for name in ("r2-user-password", "r4-aes-user-password", "r6-both-passwords"):
        assert why[f"pypdf/resources/encryption/{name}.pdf"].startswith("encrypted PDF")
    for name in ("r2-empty-password", "r5-owner-password", "r6-empty-password", "unencrypted"):
        assert f"pypdf/resources/encryption/{name}.pdf" in r["ingested"]
    assert why["pypdf/resources/imagemagick-lzw.pdf"].startswith("no text layer")  # an image only: OCR first
    assert kb["raw_same"]
    catalog = (kb["root"] / "wiki/sources/index.md").read_text()
    assert "## Not read" in catalog and "`pypdf/resources/encryption/r2-user-password.pdf`: encrypted PDF" in catalog
    assert catalog.count("](pypdf-resources-") >= 40 and "(trafilatura-tests-resources-utf8.md)" in catalog


def test_pdf_facts_metadata_outline_and_text(kb):
    meta = page(kb, "pypdf/resources/metadata.pdf")
    assert "title: The Title" in meta and "- Martin Thoma" in meta and "year: 2022" in meta
    big = page(kb, "pypdf/resources/issue-604.pdf")
    assert "(pdf, 137 pages)" in big and "- Nodule Evaluation (THYR-1) (p. 8)" in big
    outline = page(kb, "pypdf/resources/pdflatex-outline.pdf")
    assert "- Foo (p. 2)" in outline and "- Bar (p. 4)" in outline
    assert "(untitled entry) (p. 2)" in page(kb, "pypdf/resources/outline-without-title.pdf")
    assert "Here" in page(kb, "pypdf/resources/crazyones.pdf") and "crazy ones" in page(kb, "pypdf/resources/crazyones.pdf")
    # what word processors put in /Title is not a title; pdfium's soft-hyphen marks and glyph codes are not text
    assert "title: Test Orient PDF" in page(kb, "pypdf/resources/test Orient.pdf")
    assert "\\x00" not in page(kb, "pypdf/resources/imagemagick-images.pdf") and \
        "title: imagemagick-images\n" in page(kb, "pypdf/resources/imagemagick-images.pdf")
    assert "dangerous for use" in page(kb, "pypdf/resources/Seige_of_Vicksburg_Sample_OCR.pdf")
    for p in (kb["root"] / "wiki/sources").glob("*.md"):
        text = p.read_text()
        assert not any(ch in text for ch in "\ufffe\x02\x17\x00"), p


def test_html_pages_title_origin_and_text(kb):
    moz = page(kb, "trafilatura/tests/resources/mozilla.org.firefox.developer.html")
    assert "title: Welcome to Firefox Developer Edition" in moz
    assert "url: https://www.mozilla.org/en-US/firefox/39.0a2/firstrun/" in moz
    assert "Important: Sync your new profile" in moz
    utf8 = page(kb, "trafilatura/tests/resources/utf8.html")
    assert "title: Unicode Demo" in utf8 and "ISO 10646-1" in utf8


def test_lint_is_clean_and_a_rerun_changes_nothing(kb):
    root = kb["root"]
    lint = json.loads(tools(root, "lint", "--json").stdout)
    assert not lint["problems"], lint["problems"][:5]
    again = tools(root, "ingest", "raw/sources", "--json")
    r = json.loads(again.stdout)
    assert r["ingested"] == [] and len(r["unchanged"]) == len(kb["report"]["ingested"])
    (root / "raw/sources/pypdf/resources/crazyones.pdf").unlink()
    gone = json.loads(tools(root, "ingest", "--all", "--json").stdout)
    gone = gone if isinstance(gone, dict) else gone[-1]
    assert gone["removed"] == ["pypdf/resources/crazyones.pdf"]
    assert not (root / "wiki/sources/pypdf-resources-crazyones.md").exists()
    assert json.loads(tools(root, "lint", "--json").stdout)["problems"] == []
