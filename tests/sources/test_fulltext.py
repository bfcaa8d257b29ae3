"""A source's whole text answers searches and questions: a source page holds the document's title, outline, opening
and claims, so a question answered in a paragraph further in ("hardware limits of VMEM on v6e", in MaxText's guide)
found nothing. Tried on a real document: the README of the installed jax, as its package metadata carries it."""

from __future__ import annotations

import json
import re
from importlib import metadata
from pathlib import Path

from .cli import tools


def _words(text: str) -> set[str]:
    return {w.lower() for w in re.findall(r"[A-Za-z]{7,}", text)}


def test_words_only_in_a_document_s_body_find_its_page_and_a_cited_passage(tmp_path):
    readme = metadata.metadata("jax").get_payload() or metadata.metadata("jax")["Description"]
    assert readme and len(readme) > 3000
    root = tmp_path / "kb"
    assert tools(root, "init", str(root)).returncode == 0
    (root / "raw/sources/jax-readme.md").write_text(readme)
    r = tools(root, "ingest", "raw/sources")
    assert r.returncode == 0, r.stdout + r.stderr
    page = (root / "wiki/sources/jax-readme.md").read_text()
    wiki = " ".join(p.read_text() for p in (root / "wiki").rglob("*.md"))
    # words of the document that no page of the wiki holds: before, no search or question could reach them
    only = sorted(w for w in _words(readme) - _words(wiki) if readme.lower().count(w) == 1)
    assert len(only) >= 5, only
    word = only[len(only) // 2]
    hits = json.loads(tools(root, "search", word, "--json").stdout)
    assert [h["path"] for h in hits["hits"]][:1] == ["sources/jax-readme.md"], (word, hits)
    assert word in hits["hits"][0]["snippet"].lower().replace("**", "")
    answer = json.loads(tools(root, "query", word, "--json").stdout)
    passages = answer["passages"] if isinstance(answer, dict) else answer
    cited = [p for p in passages if p["cite"].startswith("raw/sources/jax-readme.md §")]
    assert cited and word in cited[0]["text"].lower(), passages
    assert word not in page.lower()  # the page itself is as it was: the text is kept beside the index
    again = tools(root, "ingest", "raw/sources")  # unchanged: nothing read again
    assert again.returncode == 0 and "(0 read, 1 unchanged)" in again.stdout, again.stdout
    kept = root / ".tools-cache/sources-text/sources/jax-readme.md.json"
    kept.unlink()  # a cache lost (a fresh clone's): the next ingest makes the text again
    assert tools(root, "ingest", "raw/sources").returncode == 0 and kept.is_file()
    (root / "raw/sources/jax-readme.md").unlink()
    assert tools(root, "ingest", "raw/sources").returncode == 0
    assert not kept.exists()
    assert json.loads(tools(root, "search", word, "--json").stdout)["hits"] == []


GUIDE = "# Guide\n\nIntro.\n\n## Memory\n\nThe zorblax buffer holds 64M on v5e and 128M on v6e.\n"


def _guide_kb(tmp_path: Path) -> Path:
    root = tmp_path / "kb"
    assert tools(root, "init", str(root)).returncode == 0
    (root / "raw/sources/guide.md").write_text(GUIDE)
    assert tools(root, "ingest", "raw/sources").returncode == 0
    return root


def test_a_kept_text_that_is_broken_linked_out_or_another_page_s_is_never_read(tmp_path):
    """A corrupt kept text crashed search, query and ingest (a RecursionError); a `sources-text` linked out of the
    knowledge base was written through; a hand-written source page of the same name elsewhere read guide.md's."""
    import os

    root = _guide_kb(tmp_path)
    kept = root / ".tools-cache/sources-text/sources/guide.md.json"
    assert kept.is_file()
    notes = root / "wiki/sources/notes"
    notes.mkdir()
    (notes / "guide.md").write_text("---\ntitle: My guide notes\ntype: source\n---\n# My guide notes\n\nMine.\n")
    hits = json.loads(tools(root, "search", "zorblax", "--json").stdout)["hits"]
    assert [h["path"] for h in hits] == ["sources/guide.md"], hits
    kept.write_text("[" * 200_000)
    for args in (("search", "zorblax"), ("query", "zorblax"), ("wiki", "search", "query=zorblax"),
                 ("ingest", "raw/sources")):
        r = tools(root, *args)
        assert "Traceback" not in r.stderr and r.returncode in (0, 3), (args, r.stderr[-1500:])
    assert json.loads(kept.read_text())["sha"]  # the ingest made it again
    out = tmp_path / "elsewhere"
    out.mkdir()
    folder = root / ".tools-cache/sources-text"
    import shutil

    shutil.rmtree(folder)
    os.symlink(out, folder)
    (root / "raw/sources/guide.md").write_text(GUIDE + "\nMore.\n")
    first = tools(root, "ingest", "raw/sources")
    assert first.returncode == 0, first.stderr
    assert list(out.rglob("*")) == []  # nothing written through the link
    again = tools(root, "ingest", "raw/sources")
    assert "(0 read, 1 unchanged)" in again.stdout, again.stdout  # and the ingest converges without it


def test_a_copy_then_an_edit_of_the_original_settles_in_one_run(tmp_path):
    root = _guide_kb(tmp_path)
    (root / "raw/sources/guide (1).md").write_text(GUIDE)
    assert tools(root, "ingest", "raw/sources").returncode == 0
    (root / "raw/sources/guide.md").write_text(GUIDE.replace("64M", "96M"))
    r = tools(root, "ingest", "raw/sources")
    assert r.returncode == 0 and "the same bytes" not in r.stdout, r.stdout
    pages = sorted(p.name for p in (root / "wiki/sources").glob("*.md"))
    assert pages == ["guide-1.md", "guide.md", "index.md"], pages
    assert "(0 read, 2 unchanged)" in tools(root, "ingest", "raw/sources").stdout
