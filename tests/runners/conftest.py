"""Fixtures for the runner tests: stub executables on PATH (fakecluster.py) and arms of the fake training script."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).parent
STUBS = ("sbatch", "squeue", "scancel", "xpk", "kubectl", "gsutil")


@pytest.fixture
def fake_state(tmp_path, monkeypatch) -> Path:
    """tmp_path/bin first on PATH with every stub; the fake cluster's state in tmp_path/state."""
    bin_dir, state = tmp_path / "bin", tmp_path / "state"
    bin_dir.mkdir()
    state.mkdir()
    for name in STUBS:
        p = bin_dir / name
        p.write_text(f'#!/bin/sh\nexec {sys.executable} {HERE / "fakecluster.py"} {name} "$@"\n')
        p.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_STATE", str(state))
    for knob in ("FAKE_SUBMIT_FAIL", "FAKE_PENDING", "FAKE_CRASH_ON"):
        monkeypatch.delenv(knob, raising=False)
    return state

