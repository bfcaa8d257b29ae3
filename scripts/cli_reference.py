"""Write docs/cli.md: every `tools` command's --help, generated so it never drifts.

    python scripts/cli_reference.py > docs/cli.md
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's tools, whatever is installed

from tools.cli import cli  # noqa: E402


def _walk(cmd: click.Command, path: list[str]):
    yield path, cmd
    if isinstance(cmd, click.Group):
        for name in sorted(cmd.commands):
            yield from _walk(cmd.commands[name], [*path, name])


def reference() -> str:
    out = ["# CLI reference", "",
           "Generated from the commands' own help (`python scripts/cli_reference.py > docs/cli.md`); "
           "a test keeps it in step with the code.", ""]
    for path, cmd in _walk(cli, ["tools"]):
        ctx = click.Context(cmd, info_name=" ".join(path), max_content_width=100, terminal_width=100,
                            help_option_names=["-h", "--help"])  # as the `tools` group sets them
        out += [f"## `{' '.join(path)}`", "", "```text", cmd.get_help(ctx).rstrip(), "```", ""]
    return "\n".join(out)


if __name__ == "__main__":
    print(reference(), end="")
