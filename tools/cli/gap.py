"""`tools gap OURS REF`: why is the reference faster? (the registry's gap.analyze, which also takes folders here)."""

from __future__ import annotations

import json

import click

from .common import pass_project, printable


@click.command(name="gap")
@click.argument("ours")
@click.argument("ref")
@click.option("--loop", "loop_name", default=None, help="Map the items to this loop's knobs (loops/<name>.yml).")
@click.option("--no-file", is_flag=True, help="Only print: write no analysis or hypothesis page.")
@click.option("--ref-codebase", default=None, metavar="SLUG",
              help="The ingested codebase (raw/code/SLUG) the reference runs: its knob defaults join the evidence "
                   "(found from the run's command or folder when not given).")
@click.option("--ours-codebase", default=None, metavar="SLUG", help="The same for our run.")
@click.option("--json", "as_json", is_flag=True, help="Print the analysis as JSON (the gap.analyze output).")
@pass_project
def gap(project, ours, ref, loop_name, no_file, ref_codebase, ours_codebase, as_json) -> None:
    """Compare OURS with the reference REF (experiment ids, or profile/HLO folders) on evidence: step time and time
    per token by op category, and from the HLO the matmul dtypes, accumulation and layer loops, batch shape, remat,
    fusions, kernels (looked up in the kernel catalog) and collectives; flags and environment as a separate
    source. Each difference becomes a gap item ranked by the share of our step it accounts for, mapped to a knob
    of --loop when one produces it, and filed as an open hypothesis page (author `tools gap`) beside the analysis
    page wiki/analyses/gap-OURS-vs-REF.md. A reference that is not faster files nothing. Exits 1 when no gap could
    be measured (a side has no tokens/s: its trace unreadable, or a folder without one)."""
    from ..agent.ops_gap import analyze
    from ..agent.registry import AgentError

    try:
        out = analyze(project, ours, ref, loop_name, not no_file, folders=True, ref_codebase=ref_codebase,
                      ours_codebase=ours_codebase)
    except AgentError as e:
        raise click.ClickException(str(e)) from None
    if as_json:  # the shape the registry's gap.analyze answers (its output model), as over MCP
        from ..agent.ops_gap import GapOut

        click.echo(json.dumps(GapOut.model_validate(out).model_dump(mode="json"), indent=1, default=str))
    else:
        _print(out)
    if out["gap_pct"] is None:  # a side without tokens/s (its trace unreadable, no record): nothing was compared
        raise SystemExit(1)


def _print(out: dict) -> None:
    click.echo(printable(out["verdict"]))
    for it in out["items"]:
        change = ", ".join(f"{k}={v}" for k, v in (it.get("knobs") or {}).items()) or "code change"
        share = f"{it['share_pct']:.1f} %" if it.get("share_pct") is not None else "—"
        click.echo(printable(f"  {it['rank']}. {it['what']}  [{it['basis']}; {share} of our step] → {change}"))
    est = out["estimate"]
    if est.get("unexplained_us_per_token") is not None and out["items"]:
        click.echo(f"  unexplained: {est['unexplained_us_per_token']:.4f} of {est['gap_us_per_token']:.4f} µs/token")
    for role, cb in (out.get("codebases") or {}).items():
        shown = ", ".join(f"{s['key']}={s['value']}" for s in cb["settings"][:8])
        click.echo(printable(f"  {role} codebase {cb['codebase']}: {shown or 'no performance settings listed'}"))
    for why in out["not_filed"]:
        click.echo(printable(f"  not filed: {why}"))
    for rel in out.get("retired") or []:
        click.echo(printable(f"  abandoned wiki/{rel}: this analysis no longer lists it"))
    if out["page"]:
        click.echo(f"page wiki/{out['page']} ({len(out['hypotheses'])} hypothesis pages)")
