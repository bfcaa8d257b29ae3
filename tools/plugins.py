"""Implementations chosen by name from a plain table of ``"module:Class"`` strings (LLM providers, runners,
proposers): the module is imported only when its name is asked for, so a heavy client costs nothing until used."""

from __future__ import annotations

import importlib
import inspect
from typing import Any

from .errors import ToolsError


def load(table: dict[str, str], name: str, what: str, options: dict[str, Any] | None = None,
         error: type[ToolsError] = ToolsError) -> Any:
    """An instance of ``table[name]`` made with ``options``; ``error`` naming the choices when there is no such
    name (``what`` says what kind of thing was asked for: "runner", "LLM provider")."""
    if name not in table:
        raise error(f"unknown {what} {name!r} (expected one of {', '.join(table)})")
    module, cls = table[name].split(":")
    impl = getattr(importlib.import_module(module), cls)
    try:  # an option it does not take is the caller's mistake; an error inside the constructor is its own
        inspect.signature(impl).bind(**(options or {}))
    except TypeError as e:
        raise error(f"{what} {name!r}: options {options or {}} not taken ({e})") from None
    try:
        return impl(**(options or {}))
    except (TypeError, ValueError, AttributeError) as e:  # `hang_s: 5m`, `env: [A=1]`: an option of the wrong type
        raise error(f"{what} {name!r}: an option is not of the type it takes ({type(e).__name__}: {e})") from None
