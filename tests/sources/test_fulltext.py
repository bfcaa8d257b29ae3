"""A source's whole text answers searches and questions: a source page holds the document's title, outline, opening
and claims, so a question answered in a paragraph further in ("hardware limits of VMEM on v6e", in MaxText's guide)
found nothing. Tried on a real document: the README of the installed jax, as its package metadata carries it."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path


def tools(root: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tools", "--root", str(root), *args], capture_output=True, text=True,
                          timeout=300)


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
    kept = root / ".tools-cache/sources-text/jax-readme.json"
    kept.unlink()  # a cache lost (a fresh clone's): the next ingest makes the text again
    assert tools(root, "ingest", "raw/sources").returncode == 0 and kept.is_file()
    (root / "raw/sources/jax-readme.md").unlink()
    assert tools(root, "ingest", "raw/sources").returncode == 0
    assert not kept.exists()
    assert json.loads(tools(root, "search", word, "--json").stdout)["hits"] == []
