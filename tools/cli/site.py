"""`tools site`: stage the site as plain files, build it, report graph figures."""

from __future__ import annotations

import json

import click

from ..errors import ToolsError
from .common import pass_project


@click.group(name="site")
def site() -> None:
    """Build the static site (MkDocs + our plugin, or plain files for any engine)."""


@site.command(name="stage")
@click.option("--out", type=click.Path(file_okay=False), default="build/site-src", show_default=True,
              help="Folder to write (mkdocs.yml + docs/); relative to the project root.")
@click.option("--raw-url", default=None, help="Base URL where raw/ is browsable; else raw/ links show as paths.")
@pass_project
def stage_cmd(project, out: str, raw_url: str | None) -> None:
    """Write docs/, wiki/ and every generated page (graph, kernel directory, explorers, landing pages,
    .nav.yml) into OUT, buildable by `zensical build` or plain `mkdocs build` with no plugin."""
    from ..sitegen.generate import stage

    target = (project.root / out).resolve()
    try:
        gen = stage(project.root, target, wiki_dir=project.wiki, docs_dir=project.docs,
                    config=project.root / "mkdocs.yml", raw_url=raw_url)
    except (NotADirectoryError, FileExistsError, PermissionError, IsADirectoryError) as e:
        raise ToolsError(f"{e.filename or target}: cannot write the staged site there ({e.strerror or e})") from None
    for w in gen.warnings:
        click.echo(f"warning: {w}", err=True)
    click.echo(f"staged {gen.stats['pages']} wiki pages + {len(gen.files)} generated files in {target}")
    click.echo(f"build it: cd {target} && zensical build   (or: mkdocs build -f {target}/mkdocs.yml)")


@site.command(name="build")
@click.option("--strict", is_flag=True, help="Fail on warnings (broken links, pages without frontmatter).")
@click.option("--site-dir", type=click.Path(file_okay=False), default=None, help="Output folder (default: site/).")
@pass_project
def build_cmd(project, strict: bool, site_dir: str | None) -> None:
    """Build the site with MkDocs and the autoresearch-wiki plugin (same as `mkdocs build`)."""
    from ..sitegen.build import build_site

    out = build_site(project.root, strict=strict, site_dir=site_dir, on_warning=lambda t: click.echo(t, err=True))
    click.echo(f"built {out}")


@site.command(name="graph")
@click.option("--json", "as_json", is_flag=True, help="Print the whole graph data as JSON.")
@pass_project
def graph_cmd(project, as_json: bool) -> None:
    """Figures of the concept graph: nodes, edges, components (networkx)."""
    from ..sitegen.generate import GRAPH_JSON, generate

    gen = generate(project.wiki, project.docs)
    if as_json:
        click.echo(gen.files[GRAPH_JSON])
        return
    click.echo(json.dumps(gen.stats, indent=2))


