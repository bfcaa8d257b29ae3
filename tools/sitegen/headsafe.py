"""One escaping rule for what a page's frontmatter puts into the theme's templates, in both build paths.

MkDocs themes print ``page.meta`` values into ``<head>`` and the header unescaped (Material: ``<meta
name="description" content="{{ page.meta.description }}">``, ``<title>{{ page.meta.title }}</title>``, the author,
a redirect ``location``). So every string the frontmatter carries is HTML-escaped, quotes included, before a theme
sees it: by the plugin in ``on_page_markdown`` and by ``tools site stage`` in the staged copy's frontmatter. Keys
that make a theme pick a template or navigate (``template``, ``location``, ``redirect``) are dropped from wiki
pages: content from others never chooses how the site behaves.
"""

from __future__ import annotations

import html
from typing import Any

CONTROL_KEYS = ("template", "location", "redirect", "redirect_url")
KEEP_RAW = ("hide", "search")  # read by the theme as switches (tags are escaped: its search results print them raw)


def _escape(value: Any) -> Any:
    """Every string inside ``value`` escaped, in lists and mappings too (a theme prints a mapping as its repr:
    ``description: {x: '"><script>'}`` reached ``<head>`` whole); keys as well as values."""
    if isinstance(value, str):
        return html.escape(value, quote=True)
    if isinstance(value, (list, tuple, set)):
        return [_escape(v) for v in value]
    if isinstance(value, dict):
        return {_escape(k): _escape(v) for k, v in value.items()}
    return value


def title(text: str) -> str:
    """A page title the theme prints raw (``<title>``, the sidebar) from a heading or a file name: escaped."""
    return html.escape(text, quote=True)


def file_title(name: str) -> str:
    """The title MkDocs makes of a file name without its suffix (``my_page`` -> ``My page``)."""
    text = name.replace("-", " ").replace("_", " ")
    return text.capitalize() if text.lower() == text else text


def theme_safe(meta: dict, wiki: bool = True) -> dict:
    """``meta`` as a theme may print it: every string (and list of strings) escaped, control keys dropped from
    wiki pages. Idempotent for text without ``&`` (escaping twice shows ``&amp;amp;`` and is avoided by callers
    escaping once per build)."""
    out = {}
    for k, v in meta.items():
        if wiki and k in CONTROL_KEYS:
            continue
        out[k] = v if k in KEEP_RAW else _escape(v)
    return out


def needs_change(meta: dict, wiki: bool = True) -> bool:
    return theme_safe(meta, wiki) != meta
