"""Real profiles of the reference model on CPU, made once per session (the runner's own env and flags)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from _prof_helpers import LLAMA, REPO
from _shared import shared_once

TINY = ["--preset", "tiny", "--steps", "6"]
RUNS = {  # name -> extra flags
    "fp32": [],
    "fp32_again": [],
    "fp32_lr": ["--lr", "2e-3"],
    "fp32_remat": ["--remat", "full"],
    "bf16": ["--compute-dtype", "bfloat16"],
    "bf16_ga2": ["--compute-dtype", "bfloat16", "--grad-accum", "2"],
}


def _env(folder: Path) -> dict:
    flags = f"--xla_dump_to={folder / 'hlo'} --xla_dump_hlo_as_text --xla_dump_hlo_module_re=.*train_step.*"
    return dict(os.environ, AUTORESEARCH_PROFILE_DIR=str(folder / "trace"), XLA_FLAGS=flags,
                TF_CPP_MIN_LOG_LEVEL="3", JAX_ENABLE_COMPILATION_CACHE="false")  # a cache hit would dump nothing


def _prune(folder: Path) -> None:
    """Keep the HLO text only, as the runner does (the CPU backend also dumps LLVM IR and objects)."""
    for p in (folder / "hlo").rglob("*"):
        if p.is_file() and not p.name.endswith(("after_optimizations.txt", "before_optimizations.txt")):
            p.unlink()


@pytest.fixture(scope="session")
def profiles(tmp_path_factory) -> dict[str, Path]:
    """Made once per session, shared by the workers (``_shared.shared_once``)."""
    def make(root: Path) -> None:
        for name, extra in RUNS.items():  # one at a time: a run sharing the cores with another traces its waits
            folder = root / name
            shutil.rmtree(folder, ignore_errors=True)  # a worker that failed half-way left it
            folder.mkdir()
            res = subprocess.run([sys.executable, str(LLAMA), *TINY, *extra], env=_env(folder), cwd=REPO,
                                 capture_output=True, text=True, timeout=600)
            assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
            _prune(folder)

    root = shared_once(tmp_path_factory, "profiles", make)
    return {name: root / name for name in RUNS}


@pytest.fixture(scope="session")
def summaries(profiles) -> dict[str, dict]:
    from tools.profiling import summary

    return {name: summary.summarize(folder, use_xprof=False) for name, folder in profiles.items()}
