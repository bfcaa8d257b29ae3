"""One registry of operations over a knowledge base, each a typed function: a pydantic input model in, a pydantic
output model out. The CLI (`tools <group> <op> --json`) and the MCP server (`tools mcp`) are two faces of it, so
what a person sees and what an agent gets never disagree.

Operations are read-only unless marked ``writes=True`` (they write pages) or ``runs=True`` (they start commands
that run experiments); the MCP server offers those only when started with ``--allow-write`` or ``--allow-run``.
Every path an operation takes is checked to stay inside the knowledge base.
"""

from __future__ import annotations

import importlib
import os
from dataclasses import dataclass
from typing import Any, Callable

from ..errors import InputError, ToolsError
from ..project import Project

OP_MODULES = ("tools.agent.ops_wiki", "tools.agent.ops_runs", "tools.agent.ops_profiles", "tools.agent.ops_loop",
              "tools.agent.ops_gap", "tools.agent.ops_raw", "tools.agent.ops_selection")


class AgentError(ToolsError):
    """An operation refused its input or found nothing; the message says which and why, in at most
    ``MAX_MESSAGE`` characters (one quoting a 10 MB argument whole put all of it in the agent's context)."""

    MAX_MESSAGE = 2_000

    def __init__(self, message: str):
        if len(message) > self.MAX_MESSAGE:
            cut = len(message) - self.MAX_MESSAGE
            message = f"{message[:1_500]} … [{cut:,} characters left out] … {message[-400:]}"
        super().__init__(message)


@dataclass(frozen=True)
class Op:
    name: str                 # "group.op"
    fn: Callable[[Project, Any], Any]
    input: type               # pydantic model
    output: type              # pydantic model
    writes: bool
    doc: str
    runs: bool = False        # starts experiment-running commands: offered only with --allow-run
    destructive: bool = False  # may replace or end what is there (a loop's state, branches, open hypotheses)
    open_world: bool = False   # may reach beyond this machine (a git remote, GitHub)

    @property
    def group(self) -> str:
        return self.name.split(".", 1)[0]

    @property
    def command(self) -> str:
        return self.name.split(".", 1)[1].replace("_", "-")

    @property
    def tool_name(self) -> str:
        return self.name.replace(".", "_")


REGISTRY: dict[str, Op] = {}


def op(name: str, input: type, output: type, writes: bool = False, runs: bool = False, destructive: bool = False,
       open_world: bool = False):
    """Register ``fn(project, args) -> output`` as operation ``name``. ``destructive`` and ``open_world`` become the
    MCP tool's hints, which clients read to decide what to run without asking."""
    def deco(fn):
        REGISTRY[name] = Op(name, fn, input, output, writes or runs, (fn.__doc__ or "").strip(), runs, destructive,
                            open_world)
        return fn
    return deco


def load() -> dict[str, Op]:
    for m in OP_MODULES:
        importlib.import_module(m)
    return REGISTRY


KB_FOLDERS = ("wiki", "raw", "loops", ".tools-cache")  # what operations read, each checked under its own top


def _folders_inside(project: Project) -> None:
    """A knowledge base whose ``wiki/`` or ``raw/`` is a link out of it (a cloned one can ship ``raw -> /``) is
    refused: every check of a path against its folder would pass for any file that folder reaches."""
    top = os.path.realpath(project.root)
    for name in KB_FOLDERS:
        folder = project.root / name
        if folder.is_symlink() and not (real := os.path.realpath(folder)).startswith(top.rstrip(os.sep) + os.sep):
            raise InputError(folder, f"links outside the knowledge base (to {real}): no operation reads there; "
                                     f"make {name}/ a folder of the knowledge base")


def call(project: Project, name: str, args: dict | None = None) -> dict:
    """Validate ``args``, run the operation, return its output as JSON-ready data."""
    from pydantic import ValidationError

    ops = load()
    if name not in ops:
        raise AgentError(f"no operation {name!r}; there are: {', '.join(sorted(ops))}")
    o = ops[name]
    if not project.wiki.is_dir():  # every operation reads or files pages: a folder without wiki/ is no knowledge base
        raise AgentError(f"{project.root}: no wiki/ folder here (not a knowledge base: run `tools init`, or pass "
                         "--root)")
    _folders_inside(project)
    unknown = sorted(set(args or {}) - set(o.input.model_fields))
    if unknown:  # a misspelt filter would be dropped, and the answer be the unfiltered one
        raise AgentError(f"{name}: unknown argument{'s' * (len(unknown) > 1)} {', '.join(unknown)} (it takes: "
                         f"{', '.join(o.input.model_fields) or 'none'})")
    try:
        parsed = o.input.model_validate(args or {})
    except ValidationError as e:
        raise AgentError(f"{name}: bad arguments: {e.errors(include_url=False, include_input=False)}") from None
    out = o.fn(project, parsed)
    try:
        return o.output.model_validate(out).model_dump(mode="json")
    except ValidationError as e:  # a hand-kept page's value no answer field takes: said, not a traceback
        where = "; ".join(f"{'.'.join(map(str, err['loc']))}: {err['msg']}" for err in e.errors()[:3])
        raise AgentError(f"{name}: a page's frontmatter gave a value its answer cannot hold ({where})") from None
