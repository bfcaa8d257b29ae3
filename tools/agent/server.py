"""`tools mcp`: the registry's operations as MCP tools (the official SDK's ``MCPServer``), pages as resources.

stdio by default; ``--http`` serves streamable HTTP on 127.0.0.1 only. Each tool's input schema comes from the
operation's pydantic input model and its output schema from the output model (structured content). Operations
that write pages are offered only with ``allow_write``, those that run experiments (``runs=True``) only with
``allow_run``. Pages are also resources: ``wiki://{+path}``.
"""

from __future__ import annotations

import inspect
import json
import types
import typing

from ..project import Project
from ..errors import ToolsError
from .registry import Op, call, load

READ_PART = 100_000          # characters of one wiki.read
RESOURCE_CHARS = 200_000     # a resource carries a page up to this much, then says where to read on (a client
                             # puts it whole into an agent's context: 4 MB, as before, crowded out the rest)


def _tool(project: Project, o: Op):
    """A function whose keyword parameters are the input model's fields: the SDK reads its signature."""
    from mcp.server.mcpserver.exceptions import ToolError

    def tool(**kwargs):
        try:
            return o.output.model_validate(call(project, o.name, kwargs))
        except ToolsError as e:  # a clear message to the client, not a traceback
            raise ToolError(str(e)) from None

    params = [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=f.annotation,
                                default=inspect.Parameter.empty if f.is_required() else f.get_default(call_default_factory=True))
              for name, f in o.input.model_fields.items()]
    tool.__signature__ = inspect.Signature(params, return_annotation=o.output)
    tool.__annotations__ = {**{p.name: p.annotation for p in params}, "return": o.output}
    tool.__name__ = o.tool_name
    tool.__doc__ = o.doc
    return tool


def _refuse_unknown_arguments(server, name: str) -> None:
    """The SDK's argument model drops keys it does not know, so `wiki_list {"typ": ...}` answered every page, where
    the CLI refuses the misspelt filter: the model forbids them, and the schema says so to the client. (The tool is
    reached through the SDK's tool manager: its metadata fields are read at each call.)"""
    from pydantic import ConfigDict

    tool = server._tool_manager.get_tool(name)
    loose = tool.fn_metadata.arg_model
    tool.fn_metadata.arg_model = type(loose.__name__, (loose,),
                                      {"model_config": ConfigDict(**loose.model_config, extra="forbid")})
    tool.parameters = {**tool.parameters, "additionalProperties": False}
    # The SDK also reads a text argument as JSON when its field is not exactly `str`: `status: "null"` became None
    # (every hypothesis) and `type: "[1]"` a list, where the CLI takes both as the text given. A field that takes
    # text keeps the text.
    texts = {k for k, f in tool.fn_metadata.arg_model.model_fields.items() if f.annotation is not str
             and typing.get_origin(f.annotation) in (typing.Union, types.UnionType)
             and set(typing.get_args(f.annotation)) <= {str, type(None)}}  # `str | None`; never a list or mapping
    parse = tool.fn_metadata.pre_parse_json

    def pre_parse_json(data: dict) -> dict:
        return {**parse(data), **{k: v for k, v in data.items() if k in texts and isinstance(v, str)}}
    object.__setattr__(tool.fn_metadata, "pre_parse_json", pre_parse_json)


def build(project: Project, allow_write: bool = False, allow_run: bool = False):
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ResourceError
    from mcp.types import ToolAnnotations

    server = MCPServer("autoresearch-wiki", instructions=(
        "Tools over one performance knowledge base: read the wiki and the kernel catalog before proposing, look "
        "at a lane's history (exp_history) to see what was tried, file hypotheses for the loop's queue. Never "
        "report a speed-up the verdict did not give."))
    for o in load().values():
        if (o.runs and not allow_run) or (o.writes and not o.runs and not allow_write):
            continue
        server.add_tool(_tool(project, o), name=o.tool_name, description=o.doc, structured_output=True,
                        annotations=ToolAnnotations(readOnlyHint=not o.writes, destructiveHint=o.destructive,
                                                    openWorldHint=o.open_world))
        _refuse_unknown_arguments(server, o.tool_name)

    @server.resource("wiki://{+path}", name="wiki-page", mime_type="text/markdown",
                     description="A wiki page (frontmatter and body) by its wiki-relative path")
    def page(path: str) -> str:
        """The whole page (a long one read in parts, as `wiki_read` gives them), never silently cut."""
        try:
            d = call(project, "wiki.read", {"path": path, "limit": READ_PART})
            parts, nxt = [d["body"]], d.get("next_offset")
            while nxt is not None and (left := RESOURCE_CHARS - sum(map(len, parts))) >= 200:
                more = call(project, "wiki.read", {"path": path, "limit": min(READ_PART, left), "offset": nxt})
                parts.append(more["body"])
                nxt = more.get("next_offset")
        except ToolsError as e:  # its message reaches the client (any other error became "Error creating resource")
            raise ResourceError(str(e)) from None
        if nxt is not None:
            parts.append(f"\n\n[cut at {nxt:,} characters: the tool wiki_read with path={path} offset={nxt} reads "
                         "on]\n")
        return "---\n" + json.dumps(d["meta"], default=str) + "\n---\n" + "".join(parts)

    return server


def serve(project: Project, http: bool = False, port: int = 8765, allow_write: bool = False,
          allow_run: bool = False) -> None:
    server = build(project, allow_write, allow_run)
    if http:
        server.run("streamable-http", host="127.0.0.1", port=port)
    else:
        server.run("stdio")
