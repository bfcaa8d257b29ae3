"""`tools remove <slug>` and `tools ingest --all` after a tree vanished: lint is clean after, nothing else moves."""

from __future__ import annotations

import json
import shutil

from click.testing import CliRunner

from tools import scaffold
from tools.cli import cli
from tools.project import Project

import messy_repo


def run(kb, *args):
    return CliRunner().invoke(cli, ["--root", str(kb), *args], catch_exceptions=False)


def two_repo_kb(tmp_path):
    kb = tmp_path / "kb"
    scaffold.init(kb, site_name="kb")
    messy_repo.write(kb / "raw/code/tiny")
    messy_repo.write(kb / "raw/code/other")
    assert run(kb, "ingest", "--all", "-q").exit_code in (0, 3)
    return kb


def concept_text(kb):
    return {p.name: p.read_text() for p in (kb / "wiki/concepts").glob("*.md")}


def test_remove_takes_out_pages_regions_and_cache_and_lint_is_clean(tmp_path):
    kb = two_repo_kb(tmp_path)
    assert any("appears-tiny" in t for t in concept_text(kb).values())
    assert (kb / "wiki/kernels/tiny").is_dir()
    before_other = sorted(p.relative_to(kb) for p in (kb / "wiki/codebases/other").rglob("*"))
    r = run(kb, "remove", "tiny", "--json")
    assert r.exit_code == 0, r.output
    report = json.loads(r.output)
    assert report["failed"] == [] and len(report["removed"]) == 1
    report = report["removed"][0]
    assert "codebases/tiny/overview.md" in report["removed"] and report["regions"]
    assert not (kb / "wiki/codebases/tiny").exists() and not (kb / "wiki/kernels/tiny").exists()
    texts = concept_text(kb)
    assert not any("appears-tiny" in t for t in texts.values())
    assert any("appears-other" in t for t in texts.values())  # the other repo keeps its regions
    assert sorted(p.relative_to(kb) for p in (kb / "wiki/codebases/other").rglob("*")) == before_other
    assert (kb / "raw/code/tiny").is_dir()  # raw/ is never touched
    assert "tiny" not in (kb / "wiki/index.md").read_text().split("## ")[1]
    lint = run(kb, "lint")
    assert lint.exit_code == 0 and "0 errors, 0 warnings" in lint.output, lint.output
    assert "tiny" not in lint.output, lint.output
    assert "] remove | tiny" in (kb / "wiki/log.md").read_text()
    again = run(kb, "remove", "tiny")
    assert again.exit_code == 1 and "no such codebase" in again.output
    # the same JSON shape for one slug or many, removed or not: an agent reads one report
    both = run(kb, "remove", "tiny", "other", "--json")
    assert both.exit_code == 1
    out = json.loads(both.stdout)
    assert [r["slug"] for r in out["removed"]] == ["other"] and [f["slug"] for f in out["failed"]] == ["tiny"]
    assert "no such codebase" in out["failed"][0]["error"]


def test_ingest_all_notices_a_vanished_tree(tmp_path):
    kb = two_repo_kb(tmp_path)
    shutil.rmtree(kb / "raw/code/tiny")
    r = run(kb, "ingest", "--all", "-q")
    assert "raw/code/tiny is gone" in r.output
    assert not (kb / "wiki/codebases/tiny").exists()
    assert not any("appears-tiny" in t for t in concept_text(kb).values())
    lint = run(kb, "lint")
    assert "tiny" not in lint.output, lint.output
    assert Project(kb).raw_code.joinpath("other").is_dir()



def test_remove_keeps_notes_written_by_hand_and_trees_differing_in_case_are_refused(tmp_path):
    """`tools remove` took every file of the codebase's folders, hand-written notes included; and `Pops` beside
    `pops` shared `wiki/kernels/pops/`, so removing one took the other's kernel pages."""
    kb = two_repo_kb(tmp_path)
    note = kb / "wiki/codebases/tiny/my-notes.md"
    note.write_text("---\ntitle: My notes\ntype: analysis\n---\n\n# My notes\n\nfindings\n")
    hand = kb / "wiki/kernels/tiny/hand.md"
    hand.write_text("---\ntitle: custom\ntype: analysis\n---\n\n# custom\n")
    # hand-kept files that are not pages went too (a table, a diagram); a link there removed the file it pointed to
    # (a source page's table elsewhere in wiki/), and a link out of wiki/ stopped the remove half-way, for good
    table, diagram = kb / "wiki/codebases/tiny/perf-table.tsv", kb / "wiki/codebases/tiny/diagram.png"
    table.write_text("a\tb\n")
    diagram.write_bytes(b"\x89PNG")
    elsewhere = kb / "wiki/sources/perf-table.tsv"
    elsewhere.parent.mkdir(exist_ok=True)
    elsewhere.write_text("x\n")
    (kb / "wiki/codebases/tiny/linked.tsv").symlink_to("../../sources/perf-table.tsv")
    (kb / "wiki/codebases/tiny/symbols-copy.tsv").symlink_to(kb / "raw/code/tiny" / next(
        p.name for p in (kb / "raw/code/tiny").iterdir() if p.is_file()))
    r = run(kb, "remove", "tiny", "--json")
    assert r.exit_code == 0, r.output
    removed = json.loads(r.output)["removed"][0]["removed"]
    assert "codebases/tiny/overview.md" in removed and "codebases/tiny/my-notes.md" not in removed
    assert "codebases/tiny/symbols.tsv" in removed and not (kb / "wiki/codebases/tiny/symbols.tsv").exists()
    assert note.is_file() and hand.is_file() and table.is_file() and diagram.is_file() and elsewhere.is_file()
    assert "tiny" not in (kb / "wiki/index.md").read_text().split("## ")[1]  # finished: the index rebuilt
    messy_repo.write(kb / "raw/code/Other")
    r = run(kb, "ingest", "raw/code/Other", "-q")
    assert r.exit_code == 1 and "share wiki/kernels/other/ with raw/code/other" in r.output, r.output
    assert not (kb / "wiki/codebases/Other").exists()


def test_a_remove_killed_before_the_index_is_rebuilt_runs_again(tmp_path):
    """The ingest cache (what says a codebase is here) went first: a remove killed before the index was rebuilt
    left index.md linking the deleted pages, and every re-run refused "no such codebase". The kill is placed there
    by a SIGKILL in place of the index rebuild."""
    import os
    import signal
    import subprocess
    import sys

    kb = two_repo_kb(tmp_path)
    kill = ("import os, signal, sys\nimport tools.ingest.run as r\n"
            "r.rebuild_index = lambda *a, **k: os.kill(os.getpid(), signal.SIGKILL)\n"
            "from tools.cli import cli\ncli(sys.argv[1:])\n")
    p = subprocess.run([sys.executable, "-c", kill, "--root", str(kb), "remove", "tiny"], capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == -signal.SIGKILL, p.stdout + p.stderr
    assert not (kb / "wiki/codebases/tiny").exists()
    again = run(kb, "remove", "tiny")
    assert again.exit_code == 0, again.output
    assert "codebases/tiny" not in (kb / "wiki/index.md").read_text()
    lint = run(kb, "lint")
    assert lint.exit_code == 0 and "0 errors" in lint.output, lint.output
    assert not [p for p in os.listdir(kb / ".tools-cache" / "ingest") if p.startswith("tiny")]
