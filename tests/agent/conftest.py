"""A real knowledge base for the agent surface: tools init, an ingested code tree, two filed experiments."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from _shared import queue_loop

HERE = Path(__file__).parent
FAKE = str(HERE.parent / "experiments" / "fake_train.py")
sys.path.insert(0, str(HERE.parent / "ingest"))


def tools(root: Path, *args: str, timeout: int = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tools", "--root", str(root), *args], capture_output=True,
                          text=True, timeout=timeout)


@pytest.fixture(scope="session")
def kb(tmp_path_factory) -> Path:
    import messy_repo

    pytest.importorskip("mcp")
    root = tmp_path_factory.mktemp("agentkb") / "kb"
    assert tools(root, "init", str(root)).returncode == 0
    messy_repo.write(root / "raw/code/tiny")
    assert tools(root, "ingest", "raw/code/tiny", "-q").returncode in (0, 3)
    for label, ms in (("baseline", "10"), ("faster", "5")):
        r = tools(root, "exp", "run", "--model", "m", "--lane", "l", "--variant", "s/cpu", "-q", "-m", label,
                  *(["--baseline"] if label == "baseline" else ["--repeats", "2"]), "--trust-step-times", "--",
                  sys.executable, FAKE,
                  "--step-ms", ms)
        assert r.returncode == 0, r.stdout + r.stderr
    os.symlink("/etc/passwd", root / "wiki/concepts/passwd.md")
    queue_loop(root)
    return root
