"""`tools profile`: read jax.profiler traces and HLO dumps."""

from __future__ import annotations

import json

import click


@click.group(name="profile")
def profile() -> None:
    """Summarize a captured profile, or diff two."""


@profile.command(name="summary")
@click.argument("folder", type=click.Path(exists=True, file_okay=False))
@click.option("--top", default=15, show_default=True, help="How many ops to list.")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
@click.option("--no-xprof", is_flag=True, help="Skip the xprof converters; read the trace directly.")
def summary(folder, top, as_json, no_xprof) -> None:
    """Step-time breakdown, top ops, op categories and source lines of the profile in FOLDER
    (an experiment's raw/profiles/<date>-<exp>/ folder, or any folder holding a trace and HLO dump)."""
    from ..profiling import summary as s

    data = s.summarize(folder, top=top, use_xprof=not no_xprof)
    click.echo(json.dumps(data, indent=1) if as_json else s.render_markdown(data))


@profile.command(name="diff")
@click.argument("a", type=click.Path(exists=True, file_okay=False))
@click.argument("b", type=click.Path(exists=True, file_okay=False))
@click.option("--top", default=15, show_default=True, help="How many rows per table.")
def diff(a, b, top) -> None:
    """Op-by-op and source-line deltas (per step) from profile folder A to B."""
    from ..profiling import diff as d
    from ..profiling import summary as s

    click.echo(d.render_markdown(d.diff(s.summarize(a, use_xprof=False), s.summarize(b, use_xprof=False), top)))
