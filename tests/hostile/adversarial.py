"""Adversarial markdown: pages built to make a backtracking regex or a recursive parser take super-linear time."""

from __future__ import annotations

PATTERNS = {
    "brackets": "[",
    "double-brackets": "[[",
    "link-openers": "](",
    "links-unclosed": "[a](",
    "image-openers": "![",
    "backticks": "`",
    "backtick-pairs": "`` ",
    "emphasis": "*_",
    "underscores": "_a",
    "comments": "<!--",
    "braces": "{",
    "attr-lists": "{#",
    "html-open": "<a ",
    "angle-links": "<x:",
    "headings": "# #",
    "quotes": ">",
    "list-nesting": "- ",
    "dashes": "-",
    "spaces": " ",
    "pipes": "|",
    "frontmatter-dashes": "---\n",
}


def page(pattern: str, size: int) -> str:
    """``size`` characters of ``pattern`` repeated, on one line, after a heading and a real first paragraph."""
    head = "# Adversarial\n\nA first paragraph with a [link](x.md) and `code`.\n\n"
    return head + (pattern * (size // len(pattern) + 1))[:size] + "\n"


def plain(size: int) -> str:
    """A page of ordinary prose of the same size: paragraphs of ~600 characters, a link and a code span in each."""
    para = ("The quick brown fox jumps over the lazy dog while the compiler fuses the matmul into its epilogue; "
            * 6)[:560] + " See [the note](x.md) and `jax.jit`.\n\n"
    body = (para * (size // len(para) + 1))[:size]
    return "# Plain\n\nA first paragraph with a [link](x.md) and `code`.\n\n" + body + "\n"
