"""A source page's notes survive what happens to its file short of removal: a copy saved under a shorter name, and
a file that stops being readable (a truncated download)."""

from __future__ import annotations

from pathlib import Path

import pytest

from .cli import tools
from .makepdf import pdf


NOTE = "\n## My notes\n\nKeep this: measured again on our v5e, 11,900 tokens/s.\n"


def _kb(tmp_path: Path) -> Path:
    root = tmp_path / "kb"
    assert tools(root, "init", str(root)).returncode == 0
    return root


def test_a_copy_under_a_shorter_name_never_takes_the_page_and_its_notes(tmp_path):
    """A copy `p.md` of `papers/perf.md` took the page (the shortest name keeps it): the original's page went with
    the notes on it, and the ingest said "raw/sources/papers/perf.md is gone" of a file that was there."""
    root = _kb(tmp_path)
    (root / "raw/sources/papers").mkdir()
    (root / "raw/sources/papers/perf.md").write_text("# R\n\nWe measured 12,345 tokens/s on v5e-8.\n")
    assert tools(root, "ingest", "raw/sources").returncode == 0
    page = root / "wiki/sources/papers-perf.md"
    page.write_text(page.read_text() + NOTE)
    (root / "raw/sources/p.md").write_bytes((root / "raw/sources/papers/perf.md").read_bytes())
    r = tools(root, "ingest", "raw/sources")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "is gone" not in r.stdout, r.stdout
    assert "p.md: the same bytes as papers/perf.md" in r.stdout, r.stdout
    assert "Keep this" in page.read_text()
    assert not (root / "wiki/sources/p.md").exists()
    again = tools(root, "ingest", "raw/sources")  # a rerun converges
    assert again.returncode == 0 and "Keep this" in page.read_text()
    assert sorted(p.name for p in (root / "wiki/sources").glob("*.md")) == ["index.md", "papers-perf.md"]


def test_a_file_that_stops_being_readable_keeps_its_page_and_notes(tmp_path):
    pytest.importorskip("pypdfium2")
    root = _kb(tmp_path)
    f = root / "raw/sources/paper.pdf"
    f.write_bytes(pdf([["Fast remat", "Full remat cost 27 % of step time on v5e."]], title="Fast remat"))
    assert tools(root, "ingest", "raw/sources").returncode == 0
    page = root / "wiki/sources/paper.md"
    page.write_text(page.read_text() + NOTE)
    f.write_bytes(f.read_bytes()[:300])  # a download cut short
    r = tools(root, "ingest", "raw/sources")
    assert r.returncode != 0  # a document not read is a skip
    assert "is gone" not in r.stdout, r.stdout
    assert "skipped paper.pdf" in r.stdout and "is kept" in r.stdout, r.stdout
    assert page.is_file() and "Keep this" in page.read_text()
    assert "27 % of step time" in page.read_text()
    assert "paper.pdf" in (root / "wiki/sources/index.md").read_text()
