"""Which setting or registry entry chooses which kernel in one codebase: ``kernels.selection`` returns the map the
ingest wrote (``wiki/codebases/<slug>/selection.json``, ``ingest/selection.py``), optionally only the choices
that reach a named kernel. Read from the knowledge base only."""

from __future__ import annotations

import json

from pydantic import BaseModel, Field

from .. import safeio
from ..project import Project
from .ops_wiki import confined
from .registry import AgentError, op


class SelectionIn(BaseModel):
    codebase: str = Field(description="the codebase slug, e.g. maxtext")
    kernel: str | None = Field(None, description="only choices that reach a kernel whose name holds this")


class Reached(BaseModel):
    kernel: str
    repo: str
    page: str = Field(description="the kernel page, under wiki/")


class Choice(BaseModel):
    selector: str = Field(description="the setting compared, e.g. attention_kernel")
    values: list[str] = Field(description="the values of that branch (true/false for a boolean setting)")
    where: str = Field(description="path:line of the if, in the codebase")
    calls: list[str] = Field(description="kernel-like calls of the branch, one call into the same file followed")
    kernels: list[Reached]


class RegistryEntry(BaseModel):
    registry: str
    key: str
    target: str
    where: str
    kernels: list[Reached]


class SelectionOut(BaseModel):
    codebase: str
    choices: list[Choice]
    registries: list[RegistryEntry]


@op("kernels.selection", SelectionIn, SelectionOut)
def kernels_selection(project: Project, a: SelectionIn) -> dict:
    """A codebase's kernel selection map: each setting value and registry entry, the calls it makes and the kernel
    pages (this codebase's or one ingested before it) those calls reach."""
    slug = confined(project.wiki / "codebases", a.codebase, "codebases").split("/")[0]
    path = project.wiki / "codebases" / slug / "selection.json"
    try:
        data = json.loads(safeio.read_bytes(path, 32 * 1024 * 1024, within=project.wiki))
    except FileNotFoundError:
        raise AgentError(f"wiki/codebases/{slug}/selection.json: no such file (ingest the codebase first)") from None
    except (ValueError, safeio.Refused) as e:
        raise AgentError(f"wiki/codebases/{slug}/selection.json: {e}; re-ingest the codebase") from None
    try:  # a file of another version, or edited by hand: its shape is checked, never a KeyError
        choices, registries = data.get("choices", []), data.get("registries", [])
        if a.kernel:
            want = a.kernel.lower()
            choices = [c for c in choices if any(want in k["kernel"].lower() for k in c["kernels"])]
            registries = [r for r in registries if any(want in k["kernel"].lower() for k in r["kernels"])]
        return SelectionOut.model_validate({"codebase": slug, "choices": choices,
                                            "registries": registries}).model_dump()
    except (AttributeError, KeyError, TypeError, ValueError) as e:
        why = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise AgentError(f"wiki/codebases/{slug}/selection.json: not the shape ingest writes ({why}); re-ingest "
                         "the codebase") from None
