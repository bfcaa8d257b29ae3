"""Standalone plotly pages (the experiment explorer, a loop's frontier staircase) from HTML assets in
``tools/data/html/``: one shared head (title, base style, the plotly script) and one body per page."""

from __future__ import annotations

import html
from importlib import resources


def _asset(name: str) -> str:
    return resources.files("tools").joinpath(f"data/html/{name}").read_text(encoding="utf-8")


def plotly_page(body: str, title: str, plotly_src: str, data: str, **parts: str) -> str:
    """The page ``body`` (``data/html/<body>.html``) under the shared head. ``data`` (JSON with ``</`` escaped)
    replaces ``__DATA__`` last, so nothing in it is read as a placeholder; ``parts`` are trusted HTML."""
    text = _asset("plotly-head.html").replace("__TITLE__", html.escape(title)) \
        .replace("__PLOTLY__", html.escape(plotly_src, quote=True)) + _asset(f"{body}.html")
    for key, value in parts.items():
        text = text.replace(f"__{key.upper()}__", value)
    return text.replace("__DATA__", data)
