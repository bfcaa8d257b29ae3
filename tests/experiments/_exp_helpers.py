"""Paths and command builders shared by the experiment tests (a unique module name: tests/ has no packages)."""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).parent
REPO = HERE.parents[1]
FAKE = str(HERE / "fake_train.py")
LLAMA = str(REPO / "experiments" / "llama_train.py")
PY = sys.executable


def fake(*args: str) -> list[str]:
    return [PY, FAKE, *args]
