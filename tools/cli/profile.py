"""`tools profile`: read jax.profiler traces and HLO dumps."""

from __future__ import annotations

import json

import click

from .common import pass_project


@click.group(name="profile")
def profile() -> None:
    """Summarize a captured profile, diff two, or diff their optimized HLO."""


@profile.command(name="summary")
@click.argument("target")
@click.option("--top", default=15, type=click.IntRange(1), show_default=True, help="How many ops to list.")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
@click.option("--no-xprof", is_flag=True, help="Skip the xprof converters; read the trace directly.")
@pass_project
def summary(project, target, top, as_json, no_xprof) -> None:
    """Step-time breakdown, top ops, op categories and source lines of a profile.

    TARGET is a folder holding a trace (and optionally an HLO dump), e.g. an experiment's
    raw/profiles/<date>-<exp>/, or an experiment id such as 2026-11-29-v001-baseline
    (MODEL/LANE/EXP_ID where two lanes have that id)."""
    from ..profiling import summary as s
    data = s.summarize(_folder(project, target), top=top, use_xprof=not no_xprof)
    click.echo(json.dumps(data, indent=1) if as_json else s.render_markdown(data))


@profile.command(name="diff")
@click.argument("a")
@click.argument("b")
@click.option("--top", default=15, type=click.IntRange(1), show_default=True, help="How many rows per table.")
@click.option("--json", "as_json", is_flag=True, help="Print the diff as JSON.")
@pass_project
def diff(project, a, b, top, as_json) -> None:
    """Per-step deltas from profile A to B (folders or experiment ids): by source line, by op (matched across
    compiles by line, category and fused-computation signature, not by generated name), by category."""
    from ..profiling import diff as d
    from ..profiling import summary as s
    sa, sb = (s.summarize(_folder(project, x), use_xprof=False) for x in (a, b))
    data = d.diff(sa, sb, top)
    click.echo(json.dumps(data, indent=1) if as_json else d.render_markdown(data))


@profile.command(name="hlo-diff")
@click.argument("a")
@click.argument("b")
@click.option("--json", "as_json", is_flag=True, help="Print the comparison as JSON.")
@pass_project
def hlo_diff(project, a, b, as_json) -> None:
    """Did a change reach the compiler? Compares the optimized HLO of A and B (folders or experiment ids) with
    ids and metadata stripped: identical or not, instructions added/removed by opcode, a diff excerpt."""
    from ..profiling import hlo_diff as h
    data = h.hlo_diff(_folder(project, a), _folder(project, b))
    click.echo(json.dumps(data, indent=1) if as_json else h.render_markdown(data))


def _folder(project, target: str):
    """A profile folder from a path or an experiment id (the wiki's experiment records are read only for an id)."""
    from pathlib import Path

    from ..experiments.records import load_experiments
    from ..profiling.locate import profile_folder

    known = load_experiments(project.wiki) if not Path(target).is_dir() and project.wiki.is_dir() else ()
    return profile_folder(project, target, known)
