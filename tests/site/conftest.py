"""A small real knowledge base (synthetic wiki + docs + mkdocs.yml), built once per session."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tools.sitegen.config import docs_index_md, mkdocs_yml
from tools.sitegen.synthetic import synthetic_wiki, write_wiki

N_PAGES = 150

os.environ.setdefault("NO_MKDOCS_2_WARNING", "1")


def make_project(root: Path, n_pages: int = N_PAGES, hostile: bool = False) -> Path:
    write_wiki(root / "wiki", synthetic_wiki(n_pages, seed=1, hostile=hostile))
    (root / "docs").mkdir(parents=True, exist_ok=True)
    (root / "docs/index.md").write_text(docs_index_md("Test KB"), encoding="utf-8")
    (root / "mkdocs.yml").write_text(mkdocs_yml("Test KB"), encoding="utf-8")
    return root


@pytest.fixture
def kb_factory():
    """make_project(root, n_pages, hostile) for tests that need their own knowledge base."""
    return make_project


@pytest.fixture(scope="session")
def built(tmp_path_factory) -> Path:
    """A real mkdocs build with strict=True of a clean generated wiki; returns the project root."""
    from tools.sitegen.build import build_site

    root = make_project(tmp_path_factory.mktemp("kb"))
    build_site(root, strict=True)
    return root
