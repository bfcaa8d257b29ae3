"""The registry's operations on the command line (`tools <group> <op> key=value ... --json`) and `tools mcp`.

The commands are declared here by name only, so `tools --help` never imports pydantic or the MCP SDK; the
operation (its input model, its checks) is loaded when a command runs. Arguments are ``key=value`` pairs (a value
that parses as JSON is taken as JSON: ``limit=5``, ``where={"backend":"tpu"}``) or one ``--args '{...}'``.
"""

from __future__ import annotations

import json
import sys
from importlib import resources

import click

from .common import pass_project

# group -> operation -> help: generated from the registry (`python scripts/ops_index.py`; a test keeps it current)
OPS: dict[str, dict[str, dict]] = json.loads(resources.files("tools").joinpath("cli/ops.json").read_text(encoding="utf-8"))


def parse_pairs(pairs: tuple[str, ...], args_json: str | None, text_fields: frozenset[str] = frozenset(),
                nullable: frozenset[str] = frozenset()) -> dict:
    """The arguments: ``--args`` JSON, then each ``key=value``, its value read as JSON unless the operation takes
    text there (``text_fields``: ``lane=2`` is the lane named "2", not the number 2); ``null`` for a text field that
    may be null (``nullable``) is null, as it is over MCP (``status=null``: every status, not one named "null")."""
    try:
        out = json.loads(args_json) if args_json else {}
    except ValueError as e:
        raise click.BadParameter(f"--args is not JSON ({e})") from None
    if not isinstance(out, dict):
        raise click.BadParameter("--args must be a JSON object")
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"{pair!r}: expected key=value")
        key = key.replace("-", "_")
        if key in text_fields:
            out[key] = None if value == "null" and key in nullable else value
            continue
        try:
            out[key] = json.loads(value)
        except ValueError:
            out[key] = value
    return out


def text_fields(model, nullable: bool = False) -> frozenset[str]:
    """The fields of a pydantic input model that hold text only (``str``, ``str | None``); with ``nullable``, those
    of them that may be null."""
    import types
    import typing

    out = set()
    for name, f in model.model_fields.items():
        ann = f.annotation
        kinds = set(typing.get_args(ann)) if typing.get_origin(ann) in (typing.Union, types.UnionType) else {ann}
        if str in kinds and kinds <= {str, type(None)} and (not nullable or type(None) in kinds):
            out.add(name)
    return frozenset(out)


def op_command(group: str, name: str, help_text: str, args: list[str] = ()) -> click.Command:
    listed = " ".join(f"{a}=..." if not a.startswith("[") else f"[{a[1:-1]}=...]" for a in args)
    @click.command(name=name, help=help_text + f"\n\nArguments as key=value pairs: {listed or 'none'} "
                                              "(their types: `tools mcp --list`).")
    @click.argument("pairs", nargs=-1)
    @click.option("--args", "args_json", default=None, help="All arguments as one JSON object.")
    @click.option("--json", "as_json", is_flag=True, help="Print the result as JSON (the MCP tool's structured result).")
    @pass_project
    def command(project, pairs, args_json, as_json):
        from ..agent.registry import call, load

        op_name = f"{group}.{name.replace('-', '_')}"
        known = load().get(op_name)
        fields = text_fields(known.input) if known is not None else frozenset()
        nullable = text_fields(known.input, nullable=True) if known is not None else frozenset()
        result = call(project, op_name, parse_pairs(pairs, args_json, fields, nullable))
        from ..jsonvalues import finite

        click.echo(json.dumps(finite(result), indent=None if as_json else 2, ensure_ascii=False, default=str))
    return command


def attach(cli: click.Group) -> None:
    """Add the operations to their groups (creating `tools wiki` and `tools hypotheses`)."""
    for group, ops in OPS.items():
        target = cli.commands.get(group)
        if target is not None and not isinstance(target, click.Group):
            continue  # a face of its own (`tools gap OURS REF` calls gap.analyze)
        if target is None:
            target = click.Group(name=group, help=f"{group.capitalize()} operations of the agent registry "
                                                  "(also MCP tools: `tools mcp`).")
            cli.add_command(target)
        for name, about in ops.items():
            if name not in target.commands:  # `tools loop start` runs in the foreground; the registry's starts a driver
                target.add_command(op_command(group, name, about["help"], about["args"]))


@click.command(name="mcp")
@click.option("--http", is_flag=True, help="Serve streamable HTTP on 127.0.0.1 (default: stdio).")
@click.option("--port", type=click.IntRange(1, 65535), default=8765, show_default=True)
@click.option("--allow-write", is_flag=True, help="Also offer the operations that write pages (hypotheses_file, "
                                                  "loop_stop, gap_analyze).")
@click.option("--allow-run", is_flag=True, help="Also offer the operations that run experiments or move branches "
                                                "(loop_start, loop_resume: detached `tools loop` drivers; "
                                                "loop_finalize, exp_export).")
@click.option("--list", "list_", is_flag=True, help="Print the operations and their input schemas, then exit.")
@pass_project
def mcp(project, http, port, allow_write, allow_run, list_):
    """Serve the registry's operations as MCP tools (and wiki pages as `wiki://{+path}` resources).

    Read-only unless --allow-write (pages) or --allow-run (loops). Never reads outside the knowledge base.
    """
    from ..agent.registry import load

    if list_:
        root = click.get_current_context().find_root().command
        for o in load().values():
            face = root.commands.get(o.group) if isinstance(root, click.Group) else None
            # a group that is one command of its own (`tools gap OURS REF` is gap.analyze) has no subcommand
            cli = f"tools {o.group}" if face is not None and not isinstance(face, click.Group) else \
                f"tools {o.group} {o.command}"
            cmd = face.commands.get(o.command) if isinstance(face, click.Group) else face
            # how it is called: `tools loop status [OPTIONS] NAME` takes its name as it is, not `name=...`
            pieces = cmd.collect_usage_pieces(click.Context(cmd, info_name=cli)) if cmd is not None else []
            click.echo(json.dumps({"tool": o.tool_name, "cli": cli, "usage": " ".join([cli, *pieces]),
                                   "writes": o.writes,
                                   "runs": o.runs, "input": o.input.model_json_schema()}, ensure_ascii=False))
        return
    project.require_wiki()
    from ..scaffold import mcp_missing

    if why := mcp_missing():
        raise click.ClickException(why)
    from ..agent.server import serve

    print(f"autoresearch-wiki MCP server on {'http://127.0.0.1:%d/mcp' % port if http else 'stdio'}"
          f"{' (writes allowed)' if allow_write else ''}{' (runs allowed)' if allow_run else ''}", file=sys.stderr)
    serve(project, http=http, port=port, allow_write=allow_write, allow_run=allow_run)


@click.group(name="agents")
def agents():
    """Set up agent harnesses (Claude Code, Codex, Gemini CLI) for this knowledge base."""


@agents.command(name="install")
@click.option("--force", is_flag=True, help="Also replace an autoresearch-wiki entry of the MCP configs that points "
                                            "elsewhere (other entries and AGENTS.md are kept).")
@pass_project
def agents_install(project, force):
    """Write AGENTS.md, .mcp.json, .gemini/settings.json and .codex/config.toml (existing files are kept).

    Each config starts this install's `tools` by its absolute path with --root set to the knowledge base, so a
    harness started from another folder, or outside the virtual environment, still connects.
    """
    from ..scaffold import install_agents, mcp_missing

    project.require_wiki()  # the configs name this folder as a knowledge base: it must be one (`tools init` makes it)
    r = install_agents(project.root, force=force)
    for rel in r.created:
        click.echo(f"created {rel}")
    for rel in r.updated:
        click.echo(f"updated {rel}")
    for rel in r.kept:
        click.echo(f"kept {rel}: {r.why.get(rel, 'exists')}")
    if why := mcp_missing():
        click.echo(f"note: `tools mcp` will not start until {why.replace('the MCP SDK is not installed: ', '')} "
                   "(the MCP SDK is not installed)", err=True)
