"""`python -m tools --root ROOT ...` as a user runs it, output captured: the sources tests' one way to run the CLI."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def tools(root: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tools", "--root", str(root), *args], capture_output=True, text=True,
                          timeout=300)
