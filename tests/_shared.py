"""Made once per test session, whichever xdist worker comes first: the others wait on a file lock and reuse it."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from filelock import FileLock


def shared_once(tmp_path_factory, name: str, make: Callable[[Path], None]) -> Path:
    """``folder`` under the session's base temp, made by ``make(folder)`` by the first worker to ask; a worker that
    fails to make it leaves no done-mark, so the next one tries again."""
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):  # each worker's base is a folder of the session's
        base = base.parent
    folder = base / name
    done = folder / ".made"
    with FileLock(str(folder) + ".lock"):
        if not done.exists():
            folder.mkdir(exist_ok=True)
            make(folder)
            done.touch()
    return folder


def queue_loop(root: Path) -> None:
    """``loops/m-l.yml``: a loop of model m, lane l whose queue takes the hypotheses the agent tests file."""
    (root / "loops").mkdir(exist_ok=True)
    (root / "loops" / "m-l.yml").write_text(
        "model: m\nlane: l\nvariant: s/cpu\ncommand: python fake_train.py\nbudget: {runs: 2}\nknobs:\n"
        "  compute_dtype: {flag: --compute-dtype, values: [float32, bfloat16], category: precision}\n"
        "  a: {flag: --a, values: [1, 3], category: shape}\n  b: {flag: --b, values: [2], category: shape}\n")
