"""A command that cannot start is a usage error: exit 2, nothing run or filed, no version number used."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def tools(root: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tools", "--root", str(root), *args], capture_output=True, text=True,
                          timeout=300)


def test_a_command_that_cannot_start_files_nothing(tmp_path):
    root = tmp_path / "kb"
    assert tools(root, "init", str(root)).returncode == 0
    before = sorted(p.relative_to(root) for p in root.rglob("*") if ".tools-cache" not in p.parts)
    args = ("exp", "run", "--model", "m", "--lane", "cpu", "--variant", "tiny/cpu", "--baseline", "--")
    missing = tools(root, *args, "no-such-program-xyz", "--flag")
    assert missing.returncode == 2, missing.stdout + missing.stderr
    assert "cannot start 'no-such-program-xyz': no program 'no-such-program-xyz' on PATH; nothing was run or filed" in missing.stderr
    (tmp_path / "notes.txt").write_text("not a program")
    assert tools(root, *args, str(tmp_path / "notes.txt")).returncode == 2  # a file, but not executable
    assert tools(root, *args[:-1]).returncode == 2  # no command at all
    after = sorted(p.relative_to(root) for p in root.rglob("*") if ".tools-cache" not in p.parts)
    assert after == before  # no page, no ledger row, no raw/profiles folder
    ok = tools(root, *args, sys.executable, "-c", "print('{}')")
    assert "v001" in ok.stdout, ok.stdout + ok.stderr  # the first run that starts gets the first number
