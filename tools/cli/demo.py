"""`tools demo`: the main job on a built-in default."""

from __future__ import annotations

import click


@click.command()
@click.argument("directory", default="autoresearch-kb", type=click.Path(file_okay=False))
def demo(directory: str) -> None:
    """Build a knowledge base in DIRECTORY from the jax package this install brings.

    Scaffolds the layout, snapshots the installed jax source into raw/code/jax, ingests it
    (codebase overview, Pallas kernel catalog, concept pages), rebuilds the index and lints.
    """
    from pathlib import Path

    from ..demo import run_demo

    r = run_demo(Path(directory))
    ing = r.ingest
    click.echo(f"knowledge base: {r.root}")
    click.echo(f"ingested raw/code/jax: {ing.files_scanned} files, {ing.kernels} Pallas kernels at "
               f"{ing.launch_sites} launch sites; pages {ing.created} created, {ing.updated} updated, "
               f"{ing.unchanged} unchanged in {ing.seconds:.1f} s")
    click.echo(f"lint: {r.lint.errors} errors, {r.lint.warnings} warnings")
    wiki = r.root / "wiki"
    for rel in ("index.md", "codebases/jax/overview.md", "kernels/index.md", "concepts/sharding.md"):
        if (wiki / rel).exists():
            click.echo(f"  {wiki / rel}")
    click.echo(f"browse: cd {r.root} && mkdocs serve")
