"""The CLI as a whole: help everywhere, light imports, every command documented."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from tools.cli import cli

REPO = Path(__file__).resolve().parents[2]
HEAVY = ("jax", "mkdocs", "plotly", "xprof", "networkx")


def commands(group: click.Group = cli, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    out = []
    for name, cmd in sorted(group.commands.items()):
        out.append((*prefix, name))
        if isinstance(cmd, click.Group):
            out += commands(cmd, (*prefix, name))
    return out


def test_top_level_help_lists_every_command():
    r = CliRunner().invoke(cli, ["--help"])
    assert r.exit_code == 0
    for name in cli.commands:
        assert name in r.output


@pytest.mark.parametrize("path", commands(), ids=" ".join)
def test_every_command_has_help(path):
    r = CliRunner().invoke(cli, [*path, "--help"])
    assert r.exit_code == 0, r.output
    assert f"Usage: cli {' '.join(path)}" in r.output or "Usage:" in r.output


def test_import_cli_leaves_heavy_modules_out():
    code = ("import sys, tools.cli; from tools.cli import cli; "
            f"print(','.join(m for m in {HEAVY!r} if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True)
    assert out.stdout.strip() == ""


def test_help_in_a_subprocess_is_light():
    code = ("import sys\nfrom tools.cli import cli\n"
            "try:\n    cli(['lint', '--help'], prog_name='tools')\nexcept SystemExit:\n    pass\n"
            f"print('HEAVY=' + ','.join(m for m in {HEAVY!r} if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True)
    assert out.stdout.strip().endswith("HEAVY=")


def docs_text() -> str:
    return "\n".join(p.read_text(encoding="utf-8") for p in sorted((REPO / "docs").glob("*.md")))


MINE = {("init",), ("index",), ("lint",)}


@pytest.mark.parametrize("path", commands(), ids=" ".join)
def test_every_command_is_documented(path):
    """sqlite-utils style: each command appears as `tools <command>` in docs/ and has help text."""
    cmd = cli
    for name in path:
        cmd = cmd.commands[name]
    if path not in MINE and "(not yet available)" in (cmd.help or ""):
        pytest.skip(f"`tools {' '.join(path)}` is still a placeholder")
    assert (cmd.help or cmd.short_help or "").strip(), f"`tools {' '.join(path)}` has no help text"
    assert f"tools {' '.join(path)}" in docs_text(), f"`tools {' '.join(path)}` is not mentioned in docs/*.md"


def _region(path: Path, name: str) -> str:
    from tools.pages import regions

    return regions(path.read_text(encoding="utf-8"))[name].rstrip("\n")


def test_docs_types_table_matches_the_page_model():
    from tools.scaffold import types_table

    assert _region(REPO / "docs" / "wiki-model.md", "types") == types_table()


def test_docs_lint_codes_match_the_code():
    from tools.lint import CODES

    table = _region(REPO / "docs" / "lint.md", "codes").splitlines()[2:]
    assert table == [f"| `{code}` | {sev} | {what} |" for code, (sev, what) in CODES.items()]


def test_questions_without_words_and_folders_without_a_wiki_fail_as_usage(tmp_path):
    """`tools query '*'` printed [] with exit 0 where `tools search '*'` failed; `-n 0` meant 5 and `-n -1` every
    passage; an agent operation on a folder without wiki/ answered `{"total": 0}`, exit 0."""
    (tmp_path / "kb" / "wiki").mkdir(parents=True)
    kb = str(tmp_path / "kb")
    for args in (["query", "*"], ["query", "-n", "0", "remat"], ["query", "-n", "-1", "remat"]):
        r = CliRunner().invoke(cli, ["--root", kb, *args])
        assert r.exit_code == 2, (args, r.output)
    assert "the question holds no words" in CliRunner().invoke(cli, ["--root", kb, "query", "*"]).output
    (tmp_path / "empty").mkdir()
    r = CliRunner().invoke(cli, ["--root", str(tmp_path / "empty"), "wiki", "list", "--json"])
    assert r.exit_code == 1 and "no wiki/ folder here" in r.output, r.output
