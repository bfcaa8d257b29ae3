"""The `tools` command: a thin face over the library. Heavy imports stay inside command bodies."""

from __future__ import annotations

import sys

import click

from ..errors import Stop, ToolsError
from ..project import load_project

class _Group(click.Group):
    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except ToolsError as e:  # typed library errors become a clean message and exit 1
            raise click.ClickException(str(e)) from None
        except Stop as e:  # SIGTERM outside a run (waiting for a lock): nothing was filed
            click.echo(f"stopped by {e.how}: nothing was run or filed", err=True)
            raise SystemExit(143 if e.how == "SIGTERM" else 130) from None
        except KeyboardInterrupt:  # a Ctrl-C held back until a filing was done, raised after it: 130, not click's 1
            click.echo("stopped by Ctrl-C", err=True)
            raise SystemExit(130) from None


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--root", type=click.Path(file_okay=False), envvar="AUTORESEARCH_ROOT",
              help="Knowledge-base root (default: nearest folder upward with wiki/ or mkdocs.yml).")
@click.version_option(package_name="autoresearch-wiki")
@click.pass_context
def cli(ctx: click.Context, root: str | None) -> None:
    """Build and keep an LLM wiki for ML performance work: ingest code, catalog kernels,
    run experiments, lint, and publish the site."""
    ctx.obj = load_project(root)


def main() -> None:
    cli(prog_name="tools")


from . import agent, demo, exp, gap, ingest, init, kernels, lint, loop, profile, query, remove, search, site, wiki  # noqa: E402

cli.add_command(demo.demo)
cli.add_command(init.init)
cli.add_command(ingest.ingest)
cli.add_command(remove.remove)
cli.add_command(wiki.index)
cli.add_command(lint.lint)
cli.add_command(kernels.kernels)
cli.add_command(exp.exp)
cli.add_command(loop.loop)
cli.add_command(profile.profile)
cli.add_command(gap.gap)
cli.add_command(site.site)
cli.add_command(search.search)
cli.add_command(query.query)
cli.add_command(agent.mcp)
cli.add_command(agent.agents)
agent.attach(cli)

if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
