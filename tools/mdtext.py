"""Small helpers for writing markdown safely from text that came from ingested sources."""

from __future__ import annotations

import html
import re

_MD_SPECIAL = re.compile(r"([\\`*_\[\]|])")


def escape(text: str) -> str:
    """Inline text from a source: HTML escaped (a `<script>` shows as text), markdown specials neutralised."""
    text = " ".join(str(text).split())
    return _MD_SPECIAL.sub(r"\\\1", html.escape(text, quote=False))


def code(text: str) -> str:
    """Inline code span that survives backticks and pipes inside table cells."""
    text = " ".join(str(text).split()).replace("|", "\\|")
    fence = "``" if "`" in text else "`"
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def link(label: str, target: str) -> str:
    return f"[{label}]({target.replace(' ', '%20').replace(')', '%29')})"


def slugify(text: str) -> str:
    s = re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-.").lower()
    return s or "page"


def table(headers: list[str], rows: list[list[str]]) -> str:
    if not rows:
        return ""
    out = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out) + "\n"
