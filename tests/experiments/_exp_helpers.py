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


def exp_run(project, *args, command, code=0, model="m", lane="l", variant="s/tpu", trust: bool | None = None) -> str:
    """``tools exp run`` in-process, asserting its exit code; the output. fake_train makes its step times up (a
    simulation): its runs are told so (``--trust-step-times``; ``trust`` for a copy of it)."""
    from click.testing import CliRunner

    from tools.cli import cli

    res = CliRunner().invoke(cli, ["--root", str(project.root), "exp", "run", "--model", model, "--lane", lane,
                                   "--variant", variant, "-q", *args,
                                   *(["--trust-step-times"] if (FAKE in command if trust is None else trust) else []), "--", *command])
    assert res.exit_code == code, res.output + repr(res.exception)
    return res.output
