"""One hostile knowledge base per session: the crafted repositories ingested, the hand-kept pages added, the
site built; each CLI command's exit code and output kept for the tests."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from . import corpus

os.environ.setdefault("NO_MKDOCS_2_WARNING", "1")


def tools(root: Path, *args: str, timeout: int = 300) -> subprocess.CompletedProcess:
    """``tools`` as a user runs it; ``timeout`` is a hang guard, not a speed check."""
    return subprocess.run([sys.executable, "-m", "tools", "--root", str(root), *args], capture_output=True,
                          text=True, timeout=timeout, errors="replace")


def tree_digest(root: Path) -> dict[str, str]:
    """Path -> what it is (file content hash, link target, FIFO, sparse size): a raw/ fingerprint."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in sorted(dirnames + filenames):
            p = Path(dirpath, name)
            st = p.lstat()
            rel = str(p.relative_to(root))
            if p.is_symlink():
                out[rel] = "link:" + os.readlink(p)
            elif p.is_fifo():
                out[rel] = "fifo"
            elif p.is_dir():
                out[rel] = "dir"
            elif st.st_size > 1 << 26:
                out[rel] = f"big:{st.st_size}:{st.st_mtime_ns}"
            else:
                out[rel] = hashlib.sha1(p.read_bytes()).hexdigest()
    return out


@pytest.fixture(scope="session")
def hostile_kb(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("hostile")
    r = tools(root, "init", str(root))
    assert r.returncode == 0, r.stderr
    corpus.write_repo(root / "raw/code/evil")
    corpus.write_fifo_config_repo(root / "raw/code/fifo")
    os.symlink("/etc", root / "raw/code/etc-link")
    (root / "raw/code" / corpus.SLUG_PAYLOAD).mkdir()
    log = root / "wiki/log.md"  # someone else's log, in Latin-1: never crashes a command, never rewritten
    log.write_bytes(log.read_bytes() + "\n## [2026-01-01] note | caf\xe9\n".encode("latin-1"))
    before = tree_digest(root / "raw")
    runs = {"ingest": tools(root, "ingest", "--all", "-q"),
            "ingest-dotdot": tools(root, "ingest", "raw/code/.."),
            "ingest-json": tools(root, "ingest", "raw/code/evil", "--json")}
    made = corpus.write_wiki_pages(root / "wiki")
    runs["index"] = tools(root, "index")
    runs["lint"] = tools(root, "lint", "--json")
    runs["lint-fix"] = tools(root, "lint", "--fix")
    runs["site"] = tools(root, "site", "build")
    return {"root": root, "runs": runs, "log": log.read_bytes(), "raw_before": before, "raw_after": tree_digest(root / "raw"),
            "pages": made}
