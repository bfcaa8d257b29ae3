"""Read Python out of real-world files without importing or running them.

Handles .py (including Python 2 and syntax newer than the running interpreter), .ipynb code cells
and ```python blocks in markdown. Every snippet keeps the line numbers of the file it came from.
"""

from __future__ import annotations

import ast
import json
import re
import warnings
from dataclasses import dataclass, field

from . import downlevel

MAX_BYTES = 2_000_000  # larger files are skipped as "huge"
MAX_NOTEBOOK_BYTES = 64_000_000  # a notebook's outputs can be large; only its code cells are read
MAX_REPAIRS = 25


@dataclass
class Snippet:
    """Python text found in a file. ``first_line`` is the file line of the snippet's line 1."""

    text: str
    first_line: int = 1
    origin: str = "python"  # python | notebook | markdown
    cell: int | None = None


@dataclass
class Parsed:
    tree: ast.Module | None
    snippet: Snippet
    error: str | None = None  # why it could not be parsed at all
    repaired_lines: list[int] = field(default_factory=list)  # file lines blanked to get a tree
    note: str | None = None  # the first syntax error, when lines were blanked

    def file_line(self, lineno: int) -> int:
        return self.snippet.first_line + lineno - 1


class Unreadable(ValueError):
    """The file holds no usable text (binary, huge, wrong encoding); the message is the reason."""


_UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")


def decode(data: bytes, limit: int = MAX_BYTES) -> str:
    if len(data) > limit:
        raise Unreadable(f"huge file ({len(data) // 1024} KiB > {limit // 1024} KiB)")
    if data.startswith(_UTF16_BOMS):  # UTF-16 text is full of NULs; its byte-order mark says what it is
        try:
            return data.decode("utf-16").lstrip("\ufeff")
        except UnicodeDecodeError:
            raise Unreadable("UTF-16 byte-order mark but not valid UTF-16") from None
    if b"\x00" in data[:8192]:
        raise Unreadable("binary file")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        m = re.search(rb"coding[:=]\s*([-\w.]+)", data[:200])
        try:
            text = data.decode(m.group(1).decode() if m else "latin-1")
        except (LookupError, UnicodeDecodeError):
            raise Unreadable("not valid UTF-8 and no usable coding declaration") from None
    return text.lstrip("\ufeff")


def notebook_snippets(text: str) -> list[Snippet]:
    """Code cells of a notebook. Outputs (tracebacks, HLO dumps) are never read.

    Line numbers count cells' lines one after another (cell i starts after cells 0..i-1), which
    is how people count lines in an exported notebook.
    """
    try:
        nb = json.loads(text)
    except json.JSONDecodeError as e:
        raise Unreadable(f"notebook is not valid JSON ({e.msg} at line {e.lineno})") from None
    cells = nb.get("cells") if isinstance(nb, dict) else None
    if not isinstance(cells, list):
        raise Unreadable("notebook has no cells list")
    out, line = [], 1
    for i, cell in enumerate(cells):
        if not isinstance(cell, dict):
            continue
        src = cell.get("source", "")
        # Sources are a string or a list of strings; anything else in them is not code.
        src = "".join(s for s in src if isinstance(s, str)) if isinstance(src, list) else src
        if not isinstance(src, str):
            continue
        if cell.get("cell_type") == "code":
            # IPython magics and shell escapes are not Python: a no-op at the same indentation keeps
            # the block they sit in (`if IN_COLAB:\n    !pip install ...`) parseable.
            src = "\n".join(ln[: len(ln) - len(ln.lstrip())] + "pass" if ln.lstrip().startswith(("%", "!")) else ln
                             for ln in src.split("\n"))
            out.append(Snippet(src, line, "notebook", i))
        line += src.count("\n") + 1
    return out


_FENCE = re.compile(r"^(?P<fence>```|~~~)[ \t]*(?:\{\s*\.?)?(?P<lang>python|py|python3|ipython|pycon)\b[^\n]*\n(?P<code>.*?)^(?P=fence)[ \t]*$",
                    re.S | re.M)


def markdown_snippets(text: str) -> list[Snippet]:
    out = []
    for m in _FENCE.finditer(text):
        code = m.group("code")
        if m.group("lang") == "pycon":
            code = "\n".join(ln[4:] if ln.startswith((">>> ", "... ")) else "" for ln in code.split("\n"))
        first = text.count("\n", 0, m.start("code")) + 1
        out.append(Snippet(code, first, "markdown"))
    return out


def snippets_for(path: str, text: str) -> list[Snippet]:
    """Python snippets in a file, by its extension."""
    if path.endswith(".ipynb"):
        return notebook_snippets(text)
    if path.endswith((".md", ".markdown", ".rst")):
        return markdown_snippets(text) if path.endswith((".md", ".markdown")) else []
    return [Snippet(text)]


_TYPE_PARAMS = re.compile(r"^(\s*(?:async\s+)?(?:def|class)\s+\w+)\s*\[[^\]]*\]")


def _blank(lines: list[str], idx: int) -> None:
    line = lines[idx]
    # PEP 695 generics on a def/class header: drop the type parameters, keep the definition.
    fixed = _TYPE_PARAMS.sub(r"\1", line)
    if fixed != line:
        lines[idx] = fixed
        return
    indent = re.match(r"[ \t]*", line).group(0)
    # A block opener keeps its body parseable; anything else becomes a no-op.
    stripped = line.split("#")[0].rstrip()
    lines[idx] = indent + ("if True:" if stripped.endswith(":") else "pass") if line.strip() else ""


_CONFLICT = re.compile(r"(?:<{7}|={7}|>{7}|\|{7})(?:\s|$)")  # a merge's conflict markers
_OPENER_LINE = re.compile(r"expected an indented block after .* on line (\d+)")
_PY2_EXCEPT = re.compile(r"^(\s*except\s+)(.+?)\s*,\s*([A-Za-z_]\w*)\s*:")
SMALL_FILE = 100_000  # a file this small may take more repairs (a Python 2 module's every print)


def _code_part(line: str) -> str:
    """A line without a trailing comment (a ``#`` outside quotes; good enough for a block opener)."""
    quote = ""
    for i, c in enumerate(line):
        if quote:
            quote = "" if c == quote else quote
        elif c in "'\"":
            quote = c
        elif c == "#":
            return line[:i].rstrip()
    return line.rstrip()


def _repair(lines: list[str], e: SyntaxError) -> int | None:
    """Change the fewest lines that get past ``e``; the (0-based) line changed, None when nothing more can be
    done. By the error: a block opener whose body is all comments gets ``pass`` as its body; ``except X, e:``
    (Python 2) becomes ``except X as e:``; tabs mixed with spaces are expanded as Python 2 read them; a line
    dedented to no outer level is put at the level above it; a merge's conflict marker is emptied; any other
    blamed line is blanked (``_blank``)."""
    ln = (e.lineno or 0) - 1
    if not 0 <= ln < len(lines):
        return None
    m = _OPENER_LINE.search(e.msg or "")
    if m and 0 < int(m.group(1)) <= len(lines):
        opener = int(m.group(1)) - 1
        code = _code_part(lines[opener])
        if code.endswith(":") and not code.endswith(": pass"):
            lines[opener] = code + " pass"
            return opener
    if isinstance(e, TabError) and any("\t" in x for x in lines):
        lines[:] = [x.expandtabs(8) for x in lines]
        return ln
    line = lines[ln]
    if _CONFLICT.match(line.lstrip()):
        lines[ln] = ""
        return ln
    py2 = _PY2_EXCEPT.match(line)
    if py2 and "parenthesized" in (e.msg or ""):
        lines[ln] = _PY2_EXCEPT.sub(lambda x: f"{x.group(1)}{x.group(2)} as {x.group(3)}:", line, count=1)
        return ln
    if "unindent does not match" in (e.msg or ""):
        width = len(line) - len(line.lstrip())
        levels = {len(x) - len(x.lstrip()) for x in lines[:ln] if x.strip()}
        above = max((w for w in levels if w < width), default=0)
        lines[ln] = " " * above + line.lstrip()
        return ln
    _blank(lines, ln)
    return ln


def parse(snippet: Snippet) -> Parsed:
    """An AST even for imperfect files: what stops the parser is repaired a line at a time (``_repair``).

    This keeps the rest of a file usable when one statement uses syntax this Python does not
    know (PEP 695 ``type X = ...`` under 3.11) or is Python 2 (``print x``, ``except X, e``), a block's body was
    commented out, or a merge left its markers. ``repaired_lines`` says which lines were changed; ``error`` is set
    only if no tree could be had.
    """
    text = downlevel.rewrite(snippet.text)  # 3.12+ syntax read the same way on every Python
    lines = text.split("\n")
    repaired: list[int] = []
    first_error = None
    for _ in range((MAX_REPAIRS if len(text) > SMALL_FILE else 4 * MAX_REPAIRS) + 1):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                tree = ast.parse("\n".join(lines))
            return Parsed(tree, snippet, None, [snippet.first_line + r - 1 for r in sorted(set(repaired))],
                          f"syntax error: {first_error}" if repaired else None)
        except SyntaxError as e:
            msg = f"{e.msg} (line {snippet.first_line + (e.lineno or 1) - 1})"
            first_error = first_error or msg
            if (e.lineno or 0) in repaired[-3:] and repaired.count(e.lineno or 0) >= 2:
                break  # the parser blames a line already repaired twice (an unclosed block); give up
            changed = _repair(lines, e)
            if changed is None:
                break
            repaired.append(changed + 1)
        except (ValueError, RecursionError, MemoryError) as e:
            first_error = first_error or f"{type(e).__name__}: {e}"
            break
    return Parsed(None, snippet, f"syntax error: {first_error}", [])


def dotted_name(node: ast.AST) -> str | None:
    """``a.b.c`` for a Name/Attribute chain, None for anything else (calls, subscripts...)."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def parse_file(path: str, data: bytes) -> list[Parsed]:
    """Decode and parse every Python snippet in a file. Raises Unreadable with the reason."""
    return [parse(s) for s in snippets_for(path, decode(data, limit_for(path)))]


def limit_for(path: str) -> int:
    return MAX_NOTEBOOK_BYTES if path.endswith(".ipynb") else MAX_BYTES
