"""`tools init [DIR]`: scaffold a knowledge base."""

from __future__ import annotations

import json
from pathlib import Path

import click


@click.command(name="init")
@click.argument("directory", required=False, type=click.Path(file_okay=False))
@click.option("--name", "site_name", help="Site name for mkdocs.yml and AGENTS.md (default: the folder name).")
@click.option("--json", "as_json", is_flag=True, help="Print what was created and kept as JSON.")
@click.option("--ci", type=click.Choice(["github"]), default=None,
              help="Also write .github/workflows/perf-gate.yml: the performance gate on pull requests.")
@click.option("--ci-command", default="python experiments/llama_train.py --preset tiny", show_default=True,
              help="With --ci: the training command the gate measures.")
@click.option("--ci-runner", default="tpu", show_default=True,
              help="With --ci: the label of the self-hosted runner that has the accelerator.")
@click.option("--ci-tools", default=None,
              help="With --ci: where the runner installs the tools from (a git URL pinned at a commit, or a path); "
                   "the workflow's TOOLS_SPEC.")
@click.pass_context
def init(ctx: click.Context, directory: str | None, site_name: str | None, as_json: bool, ci: str | None,
         ci_command: str, ci_runner: str, ci_tools: str | None) -> None:
    """Create a knowledge base in DIRECTORY (default: --root, else the current folder).

    Writes mkdocs.yml, AGENTS.md, .gitignore, raw/, wiki/ (index and log), docs/ and experiments/.
    Existing files are kept as they are; running it again changes nothing.
    """
    from ..scaffold import init as scaffold

    given = directory or (ctx.parent.params.get("root") if ctx.parent else None)
    target = Path(given) if given else Path.cwd()
    from ..errors import InputError
    from ..scaffold import ci_workflow

    ci_args = {"command": ci_command, "runner": ci_runner} if ci else None
    if ci_args and ci_tools:
        ci_args["tools_spec"] = ci_tools
    if ci_args:
        try:  # a bad label or command is a usage error, before anything is written
            ci_workflow(**ci_args)
        except (InputError, ValueError) as e:
            raise click.UsageError(str(e)) from None
    result = scaffold(target, site_name=site_name, subject=given or ".", ci=ci_args)
    if as_json:
        click.echo(json.dumps({"root": str(result.root), "created": result.created, "updated": result.updated,
                               "kept": result.kept, "why": result.why}))
        return
    for rel in result.created:
        click.echo(f"created {rel}")
    for rel in result.updated:
        click.echo(f"updated {rel} (" + ("the knowledge base's rules it lacked appended" if rel == ".gitignore" else
                                        "the autoresearch-wiki MCP server added") + ", the rest kept)")
    for rel in result.kept:
        click.echo(f"kept    {rel}" + (f": {result.why[rel]}" if rel in result.why else ""))
    click.echo(f"{result.root}: {len(result.created)} created, {len(result.kept)} kept. "
               f"Next: clone a repo into raw/code/<slug>, then `tools ingest raw/code/<slug>`.")
    if ci_args and not ci_tools:  # the job would fail at its install step
        click.echo("note: the workflow's TOOLS_SPEC is a placeholder (OWNER, COMMIT): pin where the runner installs "
                   "the tools from (--ci-tools, or edit TOOLS_SPEC at its top)", err=True)
    from ..scaffold import mcp_missing

    if why := mcp_missing():
        click.echo(f"note: the agent configs (.mcp.json, .gemini/, .codex/) start `tools mcp`, and {why}", err=True)
