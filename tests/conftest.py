"""Shared fixtures: every test works inside tmp_path, with no ambient project root."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


FIRST = ("tests/test_readme.py",)  # the longest tests start at once, so the other workers take the rest around them


def pytest_collection_modifyitems(items):
    items.sort(key=lambda item: not item.nodeid.startswith(FIRST))


@pytest.fixture(scope="session", autouse=True)
def _jax_compile_cache(tmp_path_factory):
    """One JAX persistent compile cache for every process the session starts, as a user's machine keeps one: the
    suites run the same tiny programs hundreds of times. Where the product turns the cache off (a profiled run, which
    must compile to dump its HLO) it still does. The product keeps a cache the environment names, so its own
    `.tools-cache/jax-compile` is checked where this is unset: tests/experiments/test_compile_cache.py and the
    README's main job in a fresh clone (tests/test_readme.py)."""
    from _shared import shared_once

    folder = shared_once(tmp_path_factory, "jax-compile-cache", lambda f: None)
    os.environ.update(JAX_COMPILATION_CACHE_DIR=str(folder), JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0",
                      JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES="0")


@pytest.fixture(autouse=True)
def _isolate(monkeypatch, tmp_path):
    monkeypatch.delenv("AUTORESEARCH_ROOT", raising=False)
    monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", "3")
    monkeypatch.setenv("NO_MKDOCS_2_WARNING", "1")
    monkeypatch.chdir(tmp_path)


@pytest.fixture
def kb(tmp_path) -> Path:
    """An empty knowledge base: wiki/ and raw/code/ under tmp_path/kb."""
    root = tmp_path / "kb"
    (root / "wiki").mkdir(parents=True)
    (root / "raw" / "code").mkdir(parents=True)
    return root


@pytest.fixture
def jax_pallas() -> Path:
    """The installed jax package's Pallas folder: real kernel code shipped by the install."""
    jax = pytest.importorskip("jax")
    path = Path(jax.__file__).parent / "experimental" / "pallas"
    assert (path / "ops").is_dir(), path
    return path


@pytest.fixture(scope="session")
def profiled_llama(tmp_path_factory) -> tuple[Path, list[str]]:
    """A `tools init` knowledge base holding two profiled runs of the reference model at tiny size on CPU (12
    steps) through `tools exp run`: the baseline and `--remat full`. Made once per test session and shared by every
    worker (a file lock; the first to come makes it): the suites that read real profiles read these."""
    from _shared import shared_once

    def make(folder: Path) -> None:
        root = folder / "kb"
        shutil.rmtree(root, ignore_errors=True)  # a worker that failed half-way left it
        _tools(folder, "init", str(root))
        ids = []
        for flags, extra in ((["--baseline", "-m", "baseline"], []),
                             (["-m", "remat full", "--hypothesis", "full remat slows a compute-bound step"],
                              ["--remat", "full"])):
            out = _tools(root, "--root", str(root), "exp", "run", "--model", "llama", "--lane", "cpu",
                         "--variant", "tiny/cpu", "-q", "--profile", "--json", *flags, "--", sys.executable,
                         str(REPO / "experiments" / "llama_train.py"), "--preset", "tiny", "--steps", "12", *extra)
            ids.append(json.loads(out.strip().splitlines()[-1])["exp_id"])
        (folder / "exp_ids.json").write_text(json.dumps(ids))

    folder = shared_once(tmp_path_factory, "profiled-llama", make)
    return folder / "kb", json.loads((folder / "exp_ids.json").read_text())


def _tools(cwd: Path, *args: str) -> str:
    env = {k: v for k, v in os.environ.items() if k != "AUTORESEARCH_ROOT"} | {"TF_CPP_MIN_LOG_LEVEL": "3"}
    r = subprocess.run([sys.executable, "-m", "tools", *args], cwd=cwd, env=env, capture_output=True, text=True,
                       timeout=900)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return r.stdout
