"""Python 3.12+ syntax rewritten, line for line, into what every supported Python parses.

The readers build their facts from ``ast`` trees, and ``ast`` parses only the grammar of the running interpreter:
under 3.11 a file with a PEP 695 ``type`` statement or a PEP 701 f-string was skipped whole, so the wiki's facts
depended on which Python ran the ingest. Here tree-sitter-python (a grammar through 3.13, independent of the
interpreter) finds those constructs and they are rewritten the same way on every Python, so 3.11 and 3.13 give
the same trees, the same facts and the same pages:

- ``type Name[T] = value`` becomes ``Name = value`` (an alias is a module-level name, as a 3.11 alias is);
- type parameter lists on ``def``/``class`` (``def f[T](x: T)``) are dropped; one spread over several lines leaves
  its line breaks inside the brackets that follow;
- an f-string 3.11 might refuse (a replacement field holding a quote, a backslash, a comment, a newline in a
  single-quoted string, or fields nested two deep) becomes an empty string of the same line count: its text is
  lost (the facts never came from f-string text), the file is kept.

Line numbers never move (every rewrite keeps the newlines it replaces), so file:line links stay true. Measured
against ``ast.parse`` on the jax package (bench/parse_bench.py): tree-sitter adds well under the parse itself.
"""

from __future__ import annotations

import functools
import re

# A cheap test first: most files hold none of the three, and skip tree-sitter entirely.
_MAYBE = re.compile(rb"^[ \t]*type[ \t]+\w|^[ \t]*(?:async[ \t]+)?(?:def|class)[ \t]+\w+[ \t]*\[|[fF][rR]?['\"]|[rR][fF]['\"]",
                    re.M)


@functools.lru_cache(maxsize=1)
def _parser():
    try:
        import tree_sitter
        import tree_sitter_python
    except ImportError:
        return None
    return tree_sitter.Parser(tree_sitter.Language(tree_sitter_python.language()))


def available() -> bool:
    return _parser() is not None


def _blank_keeping_lines(src: bytes, start: int, end: int, replacement: bytes) -> bytes:
    return replacement + b"\n" * src.count(b"\n", start, end)


def _fstring_needs_312(node, src: bytes) -> bool:
    start = next((c for c in node.children if c.type == "string_start"), None)
    if start is None:
        return False
    prefix = src[start.start_byte:start.end_byte]
    if b"f" not in prefix.lower():
        return False
    triple = len(prefix.lstrip(b"fFrRbBuU")) == 3
    for child in node.children:
        if child.type != "interpolation":
            continue
        text = src[child.start_byte:child.end_byte]
        # Conservative on purpose: the rule must not depend on the interpreter, so any field 3.11 might refuse
        # (a quote of either kind, a backslash, a comment, a newline, fields nested two deep) is rewritten.
        if b"'" in text or b'"' in text or b"\\" in text or b"#" in text or (not triple and b"\n" in text):
            return True
        if re.search(rb"![rsa]\s", text):  # whitespace after a conversion
            return True
        if any(n.type == "format_expression" and any(m.type == "format_expression" for m in _walk(n) if m is not n)
               for n in _walk(child)):
            return True
    return False


def rewrite(source: str) -> str:
    """``source`` with 3.12+ constructs rewritten (see the module docstring); unchanged when there are none or
    tree-sitter is not installed."""
    src = source.encode("utf-8")
    parser = _parser()
    if parser is None or not _MAYBE.search(src):
        return source
    tree = parser.parse(src)
    edits: list[tuple[int, int, bytes]] = []
    stack = [tree.root_node]
    while stack:
        node = stack.pop()
        t = node.type
        if t == "type_alias_statement":
            left, right = node.child_by_field_name("left"), node.child_by_field_name("right")
            name = next((c for c in _walk(left) if c.type == "identifier"), None) if left else None
            if name is not None and right is not None:
                ident = src[name.start_byte:name.end_byte]
                edits.append((node.start_byte, right.start_byte,
                              _blank_keeping_lines(src, node.start_byte, right.start_byte, ident + b" = ")))
            stack.extend(c for c in node.children if right is not None and c.start_byte >= right.start_byte)
            continue
        if t in ("function_definition", "class_definition"):
            params = node.child_by_field_name("type_parameters")
            if params is not None:
                edits += _drop_type_parameters(node, params, src)
        if t == "string" and _fstring_needs_312(node, src):
            n = src.count(b"\n", node.start_byte, node.end_byte)
            edits.append((node.start_byte, node.end_byte, b'""' if n == 0 else b'"""' + b"\n" * n + b'"""'))
            continue
        stack.extend(node.children)
    if not edits:
        return source
    out, last = [], 0
    for start, end, new in sorted(edits):
        if start < last:  # nested in an edit already made
            continue
        out += [src[last:start], new]
        last = end
    out.append(src[last:])
    return b"".join(out).decode("utf-8")


def _drop_type_parameters(node, params, src: bytes) -> list[tuple[int, int, bytes]]:
    """Edits removing a ``[T, ...]`` list. One that spans lines (``def f[\n Q: (A, B),\n](q: Q)``) leaves its
    newlines inside the brackets that follow (the parameters, or the bases; ``()`` when a class has none), where
    a line break is legal, so every later line keeps its number."""
    n = src.count(b"\n", params.start_byte, params.end_byte)
    if not n:
        return [(params.start_byte, params.end_byte, b"")]
    after = node.child_by_field_name("parameters" if node.type == "function_definition" else "superclasses")
    if after is None:  # a class without bases
        return [(params.start_byte, params.end_byte, b"(" + b"\n" * n + b")")]
    return [(params.start_byte, params.end_byte, b""), (after.start_byte + 1, after.start_byte + 1, b"\n" * n)]


def _walk(node):
    stack = [node]
    while stack:
        n = stack.pop(0)
        yield n
        stack.extend(n.children)
