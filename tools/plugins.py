"""Implementations chosen by name from a plain table of ``"module:Class"`` strings (LLM providers, runners,
proposers): the module is imported only when its name is asked for, so a heavy client costs nothing until used."""

from __future__ import annotations

import importlib
from typing import Any

from .errors import ToolsError


def load(table: dict[str, str], name: str, what: str, options: dict[str, Any] | None = None,
         error: type[ToolsError] = ToolsError) -> Any:
    """An instance of ``table[name]`` made with ``options``; ``error`` naming the choices when there is no such
    name (``what`` says what kind of thing was asked for: "runner", "LLM provider")."""
    if name not in table:
        raise error(f"unknown {what} {name!r} (expected one of {', '.join(table)})")
    module, cls = table[name].split(":")
    try:
        return getattr(importlib.import_module(module), cls)(**(options or {}))
    except (TypeError, ValueError) as e:  # an option it does not take, or of the wrong kind
        raise error(f"{what} {name!r}: options {options or {}} not taken ({e})") from None
