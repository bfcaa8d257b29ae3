"""`tools demo`: the main job on a built-in default."""

from __future__ import annotations

import click


@click.command()
@click.argument("directory", default="autoresearch-kb", type=click.Path(file_okay=False))
@click.option("--loop-runs", default=3, show_default=True, type=click.IntRange(0),
              help="Experiments of the short loop on the reference model (0: no loop).")
def demo(directory: str, loop_runs: int) -> None:
    """Build a knowledge base in DIRECTORY from the jax package this install brings, and run a short loop.

    Scaffolds the layout, snapshots the installed jax source into raw/code/jax, ingests it
    (codebase overview, Pallas kernel catalog, concept pages), rebuilds the index, runs a short
    offline autoresearch loop on the reference model (loops/llama-cpu.yml, the sweep proposer,
    a few minutes on a laptop CPU) and lints.
    """
    from pathlib import Path

    import shlex

    from ..demo import run_demo
    from ..loop.pending import LoopInterrupted

    try:
        r = run_demo(Path(directory), loop_runs=loop_runs, say=click.echo)
    except LoopInterrupted as e:  # as a stopped process exits (130 / 143), saying how a demo goes on
        click.echo(f"interrupted by {e.how}: run `tools demo {shlex.quote(directory)}` again to go on (the run in "
                   "flight was filed as a crash; the loop resumes where it stopped)", err=True)
        raise SystemExit(e.exit_code) from None
    ing = r.ingest
    click.echo(f"knowledge base: {r.root}")
    click.echo(f"ingested raw/code/jax: {ing.files_scanned} files, {ing.kernels} Pallas kernels at "
               f"{ing.launch_sites} launch sites; pages {ing.created} created, {ing.updated} updated, "
               f"{ing.unchanged} unchanged in {ing.seconds:.1f} s")
    if r.loop:
        t = r.loop.get("trunk") or {}
        h = r.loop.get("history") or []
        click.echo(f"loop llama-cpu: {len(h)} experiments, {sum(x['kept'] for x in h)} kept, "
                   f"{sum(not x['kept'] for x in h)} discarded; trunk {t.get('exp_id')} at {t.get('tokens_per_s')} "
                   f"tokens/s ({r.loop.get('stop_reason')})")
    click.echo(f"lint: {r.lint.errors} errors, {r.lint.warnings} warnings")
    click.echo(f"done in {r.seconds / 60:.1f} min" + ("" if r.loop_ran_before else
                                                       f"; figures in {r.root / 'demo-report.json'}"))
    wiki = r.root / "wiki"
    for rel in ("index.md", "codebases/jax/overview.md", "kernels/index.md", "concepts/sharding.md",
                "loops/llama-cpu.md"):
        if (wiki / rel).exists():
            click.echo(f"  {wiki / rel}")
    click.echo(f"browse: cd {r.root} && mkdocs serve")
