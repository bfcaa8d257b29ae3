"""`tools kernels`: the Pallas kernel catalog."""

from __future__ import annotations

import json
from pathlib import Path

import click

from .common import printable


@click.group(name="kernels")
def kernels() -> None:
    """Find, name and classify Pallas kernels in code trees."""


@kernels.command("scan")
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="One JSON object per launch site (JSON Lines).")
def scan(paths: tuple[Path, ...], as_json: bool) -> None:
    """List every kernel launch site under PATHS (paths are shown relative to each PATH). A file read in part (lines
    set aside around a syntax error) or not at all is named on stderr; one not read at all makes the exit code 3,
    as ingest's skipped files do."""
    from ..kernels.scan import scan_paths

    problems: list[tuple[str, str]] = []
    sites = scan_paths(list(paths), problems=problems)
    for path, why in problems:
        click.echo(f"warning: {printable(path)}: {printable(why)}", err=True)
    skipped = any(why.startswith("not read") for _, why in problems)
    if as_json:
        for s in sites:
            click.echo(json.dumps(s.to_dict(), sort_keys=False))
        raise SystemExit(3 if skipped else 0)
    rows = [(f"{s.path}:{s.line}", s.kernel, s.backend, s.category, s.kind, s.entry) for s in sites]
    head = ("SITE", "KERNEL", "BACKEND", "CATEGORY", "KIND", "ENTRY")
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    for r in [head, *rows]:
        click.echo("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
    n = len({(s.kernel, s.qualname) for s in sites})
    tail = f"; {len(problems)} file{'s' * (len(problems) != 1)} not read in full (named above)" if problems else ""
    click.echo(f"{len(sites)} launch site{'s' * (len(sites) != 1)}, {n} kernel{'s' * (n != 1)}{tail}")
    raise SystemExit(3 if skipped else 0)
