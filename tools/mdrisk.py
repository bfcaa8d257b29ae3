"""Markdown that would stall or abort a markdown engine, found in one linear pass (``problem``).

Measured with Python-Markdown and this site's extensions (tests/hostile/adversarial.py): a paragraph of 5,000 ``[``
takes 2.4 s and the time grows with its square (20,000 took minutes); 5,000 ``![`` 1.2 s; a 3,000-level blockquote
aborts the build (recursion); a paragraph of 10,000 ``---`` lines (rules, setext underlines) 1.2 s, growing with the
square of their number. ``tools lint`` names such a page; the site publishes it as text (``sitegen.neutralise``).
"""

from __future__ import annotations

import re

MAX_QUOTE_DEPTH = 40
MAX_LIST_INDENT = 160           # columns of leading spaces (40 nested levels of 4)
MAX_BRACKETS_PER_BLOCK = 400    # "[" in one paragraph: ~(400/5000)^2 of 2.4 s
MAX_TAGS_PER_BLOCK = 2000       # "<" in one paragraph
MAX_RULES_PER_BLOCK = 200       # "---" / "===" / "***" lines with no blank line between
MAX_LINE_CHARS = 2_000_000

_ITEM = re.compile(r"(?:[-*+]|\d{1,9}[.)])\s|\|")
_QUOTE = re.compile(r"[ \t]*(?:>[ \t]?)+")
_RULE = re.compile(r" {0,3}([-*_=])(?:[ \t]*\1)*[ \t]*$")


def _clearly_safe(text: str) -> bool:
    """Whole-text counts under every per-line or per-paragraph limit: no line can break one (most pages; C-speed)."""
    return (len(text) <= MAX_LINE_CHARS and text.count("[") <= MAX_BRACKETS_PER_BLOCK
            and text.count("<") <= MAX_TAGS_PER_BLOCK and text.count(">") <= MAX_QUOTE_DEPTH
            and text.count("\n") < MAX_RULES_PER_BLOCK and " " * MAX_LIST_INDENT not in text)


def problem(text: str) -> str | None:
    """Why ``text`` would be unsafe to hand to the markdown engine, or None."""
    if _clearly_safe(text):
        return None
    brackets = tags = rules = 0
    fence = ""
    for n, line in enumerate(text.split("\n"), 1):
        if len(line) > MAX_LINE_CHARS:
            return f"line {n} is {len(line):,} characters long"
        stripped = line.lstrip()
        if fence:
            if stripped.startswith(fence):
                fence = ""
            continue
        if stripped.startswith(("```", "~~~")):
            fence = stripped[:3]
            continue
        if not stripped or _ITEM.match(stripped):  # a list item or a table row is parsed on its own
            brackets = tags = rules = 0
            if not stripped:
                continue
        m = _QUOTE.match(line)
        if m and (depth := m.group(0).count(">")) > MAX_QUOTE_DEPTH:
            return f"line {n}: blockquote nested {depth} levels (more than {MAX_QUOTE_DEPTH})"
        indent = len(line) - len(stripped)
        if indent > MAX_LIST_INDENT and stripped[:2] in ("- ", "* ", "+ "):
            return f"line {n}: list nested {indent} columns deep"
        if len(stripped) <= 200 and _RULE.match(line):
            rules += 1
            if rules > MAX_RULES_PER_BLOCK:
                return f"line {n}: more than {MAX_RULES_PER_BLOCK} rule lines in one paragraph"
        brackets += line.count("[")
        tags += line.count("<")
        if brackets > MAX_BRACKETS_PER_BLOCK:
            return f"line {n}: more than {MAX_BRACKETS_PER_BLOCK} '[' in one paragraph"
        if tags > MAX_TAGS_PER_BLOCK:
            return f"line {n}: more than {MAX_TAGS_PER_BLOCK} '<' in one paragraph"
    return None
