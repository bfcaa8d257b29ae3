"""Fixtures for the wiki tests: a real knowledge base made by `tools init` in tmp_path."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from tools import scaffold
from tools.cli import cli
from tools.project import Project

TODAY = "2026-11-29"


def write(root: Path, rel: str, text: str | bytes) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def page(title: str, type_: str, body: str = "", **keys) -> str:
    lines = ["---", f"title: {title}", f"type: {type_}"]
    lines += [f"{k}: {v}" for k, v in keys.items()]
    return "\n".join(lines) + "\n---\n\n" + (body or f"# {title}\n\nAbout {title}.\n")


@pytest.fixture
def kb(tmp_path: Path) -> Project:
    """An empty knowledge base laid out by tools init."""
    scaffold.init(tmp_path / "kb", site_name="test kb", today=TODAY)
    return Project(tmp_path / "kb")


@pytest.fixture
def invoke():
    runner = CliRunner()

    def run(*args: str, root: Path | None = None):
        argv = (["--root", str(root)] if root else []) + [str(a) for a in args]
        return runner.invoke(cli, argv, catch_exceptions=False)

    return run
