"""Every command over the hostile corpus completes, names each skipped input once, and leaves raw/ as it was."""

from __future__ import annotations

import csv
import json
import re

from . import corpus


def test_raw_is_byte_identical(hostile_kb):
    assert hostile_kb["raw_after"] == hostile_kb["raw_before"]


def test_ingest_completes_with_skips_and_refuses_bad_trees(hostile_kb):
    r = hostile_kb["runs"]["ingest"]
    # Two trees refused (a symlink out of raw/code and a name carrying HTML): the command says so and fails.
    assert r.returncode == 1, r.stdout + r.stderr
    assert "etc-link" in r.stderr and "symlink" in r.stderr
    assert "is not a plain name" in r.stderr
    assert "evil:" in r.stdout and "fifo:" in r.stdout  # both good trees were ingested all the same
    dd = hostile_kb["runs"]["ingest-dotdot"]
    assert dd.returncode == 1 and "'..'" in dd.stderr
    js = hostile_kb["runs"]["ingest-json"]
    assert js.returncode == 3, js.stderr  # completed with skips
    report = json.loads(js.stdout)
    assert report["files_analyzed"] + (report["files_scanned"] - report["files_analyzed"]) >= 5


def _skipped(root):
    with open(root / "wiki/codebases/evil/skipped.tsv", newline="") as f:
        rows = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    assert rows[0] == ["path", "reason"]
    assert all(len(r) == 2 for r in rows), rows  # no name forged a column or a row
    return {r[0]: r[1] for r in rows[1:]}


def test_every_bad_file_is_listed_once_with_its_reason(hostile_kb):
    skipped = _skipped(hostile_kb["root"])
    assert "too large" in skipped["evilpkg/enormous.py"]
    assert "not a regular file" in skipped["evilpkg/pipe.py"] or "FIFO" in skipped["evilpkg/pipe.py"]
    assert "symlink" in skipped["evilpkg/passwd.py"]
    assert "symlink" in skipped["evilpkg/etc_dir"]
    assert "cells" in skipped["nb/not_cells.ipynb"]
    assert "FIFO" in skipped[".git/HEAD"]  # read from .git without hanging, and said
    assert "evilpkg/tab\\tname.py" not in skipped and "evilpkg/tab\tname.py" not in skipped  # read, not skipped
    tsv = (hostile_kb["root"] / "wiki/codebases/evil/skipped.tsv").read_text()
    assert "\x1b" not in tsv


def test_messy_files_are_read_not_dropped(hostile_kb):
    symbols = (hostile_kb["root"] / "wiki/codebases/evil/symbols.tsv").read_text()
    rows = [ln.split("\t") for ln in symbols.splitlines()]
    assert all(len(r) == 6 for r in rows)
    paths = {r[3] for r in rows[1:]}
    assert "nb/huge_outputs.ipynb" not in _skipped(hostile_kb["root"])  # 2.6 MB of outputs, one code cell read
    assert "evilpkg/utf16.py" not in _skipped(hostile_kb["root"])  # UTF-16 is text, not binary
    assert "nb/bad_source.ipynb" not in _skipped(hostile_kb["root"])  # the string cells are code
    assert any(p.startswith("evilpkg/") for p in paths)
    long_pages = [p for p in (hostile_kb["root"] / "wiki").rglob("*.md") if len(p.name.encode()) > 200]
    assert not long_pages


def test_terminal_escapes_are_not_printed_raw(hostile_kb):
    r = hostile_kb["runs"]["ingest"]
    assert "\x1b" not in r.stdout + r.stderr


def test_no_page_holds_system_files_or_raw_payload_html(hostile_kb):
    wiki = hostile_kb["root"] / "wiki"
    index = (wiki / "index.md").read_text()
    assert "root:x:0:0" not in index
    for page in wiki.rglob("*.md"):
        if page.is_symlink() or page.relative_to(wiki).as_posix() in hostile_kb["pages"]:
            continue
        text = page.read_text(encoding="utf-8", errors="replace").split("\n---\n", 1)[-1]  # the body: frontmatter is YAML data
        assert not re.search(r"(?<!\\)\]\(javascript:", text), page  # an escaped "\]" is text, not a link


def test_lint_reports_hostile_pages_and_fix_completes(hostile_kb):
    r = hostile_kb["runs"]["lint"]
    report = json.loads(r.stdout)
    by_code = {}
    for p in report["problems"]:
        by_code.setdefault(p["code"], set()).add(p["path"])
    assert "wiki/notes/passwd.md" in by_code["not-followed"]
    assert {"wiki/notes/deep/er/blockquote.md", "wiki/notes/deep/er/brackets.md"} <= by_code["pathological"]
    assert "wiki/notes/latin1.md" in by_code["unreadable"]
    fix = hostile_kb["runs"]["lint-fix"]
    assert "Traceback" not in fix.stderr, fix.stderr
    assert (hostile_kb["root"] / "wiki/notes/latin1.md").read_bytes().startswith(b"---\ntitle: caf\xe9")  # untouched


def test_site_builds_and_shows_bad_pages_as_text(hostile_kb):
    r = hostile_kb["runs"]["site"]
    assert r.returncode == 0, r.stdout + r.stderr
    site = hostile_kb["root"] / "site"
    deep = (site / "wiki/notes/deep/er/blockquote/index.html").read_text()
    assert "Shown as text" in deep
    latin = (site / "wiki/notes/latin1/index.html").read_text()
    assert "Shown as text" in latin and "not UTF-8" in latin
    assert not (site / "wiki/notes/passwd").exists() and "root:x:0:0" not in "".join(
        p.read_text(errors="replace") for p in site.rglob("*.html"))
    assert corpus.MARK  # the payload marker the browser test looks for


def test_a_log_that_is_not_utf8_is_left_untouched(hostile_kb):
    assert (hostile_kb["root"] / "wiki/log.md").read_bytes() == hostile_kb["log"]
    for name in ("ingest", "index", "lint-fix"):
        assert "Traceback" not in hostile_kb["runs"][name].stderr, hostile_kb["runs"][name].stderr
    assert "wiki/log.md: not UTF-8" in hostile_kb["runs"]["index"].stderr + hostile_kb["runs"]["ingest"].stderr


def test_a_kernel_too_deep_to_analyse_is_listed_not_dropped(hostile_kb):
    out = json.loads(hostile_kb["runs"]["ingest-json"].stdout)
    listed = dict(map(tuple, out["partial"])) | dict(map(tuple, out["skipped"]))
    assert "evilpkg/deep_kernel.py" in listed, listed
