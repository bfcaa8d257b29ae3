"""Shared fixtures: every test works inside tmp_path, with no ambient project root."""

from __future__ import annotations

from pathlib import Path

import pytest


FIRST = ("tests/test_readme.py",)  # the longest tests start at once, so the other workers take the rest around them


def pytest_collection_modifyitems(items):
    items.sort(key=lambda item: not item.nodeid.startswith(FIRST))


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
