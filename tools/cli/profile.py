"""`tools profile`: read jax.profiler traces and HLO dumps."""

from __future__ import annotations

import json

import click

from . import pass_project


@click.group(name="profile")
def profile() -> None:
    """Summarize a captured profile, or diff two."""


@profile.command(name="summary")
@click.argument("target")
@click.option("--top", default=15, show_default=True, help="How many ops to list.")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
@click.option("--no-xprof", is_flag=True, help="Skip the xprof converters; read the trace directly.")
@pass_project
def summary(project, target, top, as_json, no_xprof) -> None:
    """Step-time breakdown, top ops, op categories and source lines of a profile.

    TARGET is a folder holding a trace (and optionally an HLO dump), e.g. an experiment's
    raw/profiles/<date>-<exp>/, or an experiment id such as 2026-11-29-v001-baseline."""
    from ..profiling import summary as s
    from ..profiling.locate import profile_folder

    data = s.summarize(profile_folder(project, target), top=top, use_xprof=not no_xprof)
    click.echo(json.dumps(data, indent=1) if as_json else s.render_markdown(data))


@profile.command(name="diff")
@click.argument("a")
@click.argument("b")
@click.option("--top", default=15, show_default=True, help="How many rows per table.")
@pass_project
def diff(project, a, b, top) -> None:
    """Op-by-op and source-line deltas (per step) from profile A to B (folders or experiment ids)."""
    from ..profiling import diff as d
    from ..profiling import summary as s
    from ..profiling.locate import profile_folder

    sa, sb = (s.summarize(profile_folder(project, x), use_xprof=False) for x in (a, b))
    click.echo(d.render_markdown(d.diff(sa, sb, top)))
