"""`tools remove` and the log in a hand-kept wiki: a codebase folder that is a link out of the knowledge base, a
concept page that is a link or a FIFO, and a log that is a FIFO."""

from __future__ import annotations

import os
import subprocess
import sys

from tools import scaffold

import messy_repo


def tools(kb, *args, timeout=120):
    return subprocess.run([sys.executable, "-m", "tools", "--root", str(kb), *args], capture_output=True, text=True,
                          timeout=timeout)


def test_a_codebase_folder_linked_out_of_the_wiki_is_refused_and_nothing_there_is_touched(tmp_path):
    """`wiki/codebases/evil` linked to a tree elsewhere: remove walked the link, read the pages there and removed
    that tree's empty folders, then said "removed 0 files" and exited 0."""
    kb = tmp_path / "kb"
    scaffold.init(kb, site_name="kb")
    out = tmp_path / "elsewhere"
    (out / "a/b").mkdir(parents=True)
    (out / "c").mkdir()
    (out / "note.md").write_text("---\ntitle: x\ntype: codebase\nrepo: evil\n---\n# x\n")
    os.symlink(out, kb / "wiki/codebases/evil")
    r = tools(kb, "remove", "evil")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "wiki/codebases/evil" in r.stderr and "a link to" in r.stderr and "nothing removed" in r.stderr
    assert (out / "a/b").is_dir() and (out / "c").is_dir() and (out / "note.md").is_file()
    assert (kb / "wiki/codebases/evil").is_symlink()


def test_a_concept_page_that_is_a_link_or_a_fifo_never_leaves_a_remove_half_done(tmp_path):
    """A link to /etc/hostname among the concept pages gave a traceback, a FIFO an error, after the codebase's pages
    were removed: the index still linked them, and a rerun failed the same way."""
    kb = tmp_path / "kb"
    scaffold.init(kb, site_name="kb")
    messy_repo.write(kb / "raw/code/tiny")
    assert tools(kb, "ingest", "raw/code/tiny", "-q", timeout=300).returncode in (0, 3)
    outside = tmp_path / "hostname"
    outside.write_text("box\n")
    os.symlink(outside, kb / "wiki/concepts/host.md")
    os.mkfifo(kb / "wiki/concepts/zz.md")
    r = tools(kb, "remove", "tiny")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Traceback" not in r.stderr
    assert "wiki/concepts/zz.md: not a regular file" in r.stderr, r.stderr
    assert not (kb / "wiki/codebases/tiny").exists()
    assert "codebases/tiny" not in (kb / "wiki/index.md").read_text()
    assert not any("appears-tiny" in p.read_text() for p in (kb / "wiki/concepts").glob("*.md")
                   if p.is_file() and not p.is_symlink())
    assert outside.read_text() == "box\n" and (kb / "wiki/concepts/host.md").is_symlink()
    assert "] remove | tiny" in (kb / "wiki/log.md").read_text()


def test_a_log_that_is_a_fifo_is_left_alone_and_nothing_waits_on_it(tmp_path):
    """`wiki/log.md` a FIFO: `tools index` (and every command that logs) waited forever on it."""
    kb = tmp_path / "kb"
    scaffold.init(kb, site_name="kb")
    (kb / "wiki/concepts/a.md").write_text("---\ntitle: A\ntype: concept\n---\n# A\n")
    (kb / "wiki/log.md").unlink()
    os.mkfifo(kb / "wiki/log.md")
    r = tools(kb, "index", timeout=60)  # the timeout is the hang guard
    assert r.returncode == 0, r.stdout + r.stderr
    assert "wiki/log.md: FIFO (not read); left untouched" in r.stderr, r.stderr
    assert "concepts/a.md" in (kb / "wiki/index.md").read_text()
