"""Standalone plotly pages (the experiment explorer, a loop's frontier staircase) from HTML assets in
``tools/data/html/``: one shared head (title, base style, the plotly script) and one body per page."""

from __future__ import annotations

import html
import json
import re
from importlib import resources

from .jsonvalues import finite

_PLACEHOLDER = re.compile(r"__([A-Z]+)__")
_UNSAFE_IN_SCRIPT = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026"}


def _asset(name: str) -> str:
    return resources.files("tools").joinpath(f"data/html/{name}").read_text(encoding="utf-8")


def script_json(data) -> str:
    """``data`` as JSON to sit inside a ``<script type="application/json">``: no ``<``, ``>`` or ``&`` at all (as
    ``\\u003c``... inside its strings), so no text of anyone's can close the element or read as markup."""
    text = json.dumps(finite(data), sort_keys=True, default=str)
    return re.sub(r"[<>&]", lambda m: _UNSAFE_IN_SCRIPT[m.group()], text)


def plotly_page(body: str, title: str, plotly_src: str, data, **parts: str) -> str:
    """The page ``body`` (``data/html/<body>.html``) under the shared head, ``data`` (JSON-able) in its data element.
    ``parts`` are trusted HTML. Placeholders are filled in one pass over the template: a value that holds
    ``__DATA__`` (a lane's name) is never read as one."""
    values = {"TITLE": html.escape(title), "PLOTLY": html.escape(plotly_src, quote=True), "DATA": script_json(data),
              **{k.upper(): v for k, v in parts.items()}}
    template = _asset("plotly-head.html") + _asset(f"{body}.html")
    return _PLACEHOLDER.sub(lambda m: values.get(m.group(1), m.group()), template)
