"""Reading the knowledge base's immutable inputs: ``raw.read`` returns a bounded range of one file under ``raw/``
(a code tree's source, a config, a document's text), by line and context or by a Python symbol's definition, so an
agent can check what a page says against the code itself. Never outside ``raw/``; never a binary; never executed
(a symbol is found by parsing, and by its ``def``/``class`` line when the file does not parse)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from pydantic import BaseModel, Field

from .. import safeio
from ..project import Project
from .ops_wiki import confined
from .registry import AgentError, op

MAX_FILE_BYTES = 8 * 1024 * 1024
MAX_LINES = 1000
MAX_CHARS = 40_000  # of text an answer returns (a minified bundle is one line of megabytes); a line past it is cut


class RawReadIn(BaseModel):
    path: str = Field(description="a file under raw/, e.g. code/maxtext/src/maxtext/configs/base.yml "
                                  "(a leading raw/ is allowed)")
    line: int | None = Field(None, ge=1, description="centre the range on this line (with `context`)")
    context: int = Field(20, ge=0, le=500, description="lines on each side of `line`")
    symbol: str | None = Field(None, description="a Python function or class (`name` or `Class.method`): its "
                                                 "whole definition, decorators included")
    start: int | None = Field(None, ge=1, description="first line of the range (the `next_line` of a previous "
                                                      "answer); without line, symbol or start: from line 1")
    lines: int = Field(200, ge=1, le=MAX_LINES, description="lines returned at most")


class RawReadOut(BaseModel):
    path: str = Field(description="raw-relative path of the file read")
    start: int = Field(description="file line of the first line returned")
    end: int = Field(description="file line of the last line returned")
    total_lines: int
    text: str = Field(description="the lines start..end as written")
    next_line: int | None = Field(None, description="where the range goes on (null: the file, or the symbol, ends "
                                                     "here)")
    symbol: str | None = Field(None, description="the definition found, as Class.method")
    matches: list[str] = Field(default_factory=list, description="every definition of that name, as qualname:line")
    cut: int | None = Field(None, description="a line longer than an answer holds: this line, cut (its first "
                                              f"{MAX_CHARS:,} characters returned)")


def raw_path(project: Project, rel: str) -> tuple[str, Path]:
    """A raw-relative path an agent may read (``ops_wiki.confined``), and the file; a folder is refused."""
    rel = confined(project.raw, rel, "raw")
    path = project.raw / rel
    if path.is_dir():
        raise AgentError(f"raw/{rel}: a folder; give a file in it")
    return rel, path


def _text(project: Project, rel: str, path) -> str:
    try:
        data = safeio.read_bytes(path, MAX_FILE_BYTES, within=project.raw)
    except FileNotFoundError:
        raise AgentError(f"raw/{rel}: no such file") from None
    except safeio.Refused as e:
        raise AgentError(f"raw/{rel}: {e.reason}") from None
    except OSError as e:
        raise AgentError(f"raw/{rel}: {e}") from None
    if b"\0" in data[:8192]:
        raise AgentError(f"raw/{rel}: a binary file (not read)")
    return data.decode("utf-8", errors="replace").removeprefix("\ufeff")


def definitions(text: str) -> list[tuple[str, int, int]]:
    """(qualname, first line with decorators, last line) of every function and class in Python ``text``; from the
    ``def``/``class`` lines and their indentation when the file does not parse (newer syntax, a fragment)."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError):
        return _by_indent(text)
    out: list[tuple[str, int, int]] = []

    def walk(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                first = min([child.lineno] + [d.lineno for d in child.decorator_list])
                name = f"{prefix}{child.name}"
                out.append((name, first, child.end_lineno or child.lineno))
                walk(child, name + ".")
            elif not isinstance(child, ast.expr):
                walk(child, prefix)
    walk(tree, "")
    return out


_DEF = re.compile(r"^(\s*)(?:async\s+)?(?:def|class)\s+(\w+)")


def _by_indent(text: str) -> list[tuple[str, int, int]]:
    lines = text.split("\n")
    out, stack = [], []  # stack: (indent, qualname)
    for n, ln in enumerate(lines, 1):
        m = _DEF.match(ln)
        if not m:
            continue
        indent = len(m.group(1))
        while stack and stack[-1][0] >= indent:
            stack.pop()
        name = ".".join([q for _, q in stack][-1:] + [m.group(2)]) if stack else m.group(2)
        end = n
        for k in range(n, len(lines)):
            s = lines[k]
            if s.strip() and len(s) - len(s.lstrip()) <= indent and not s.lstrip().startswith((")", "]", "#")):
                break
            if s.strip():
                end = k + 1
        out.append((name, n, end))
        stack.append((indent, name))
    return out


@op("raw.read", RawReadIn, RawReadOut)
def raw_read(project: Project, a: RawReadIn) -> dict:
    """A bounded range of one file under raw/ (code trees, configs, documents): around a ``line``, a Python
    ``symbol``'s whole definition, or from ``start``; at most ``lines`` lines, with ``next_line`` to go on. Never
    reads outside raw/ or a binary file."""
    rel, path = raw_path(project, a.path)
    text = _text(project, rel, path)
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    total = len(lines)
    found, matches, stop = None, [], total
    if a.symbol:
        want = a.symbol.strip()
        defs = definitions(text)
        hits = [d for d in defs if d[0] == want or d[0].endswith("." + want)]
        matches = [f"{q}:{first}" for q, first, _ in hits]
        if not hits:
            raise AgentError(f"raw/{rel}: no function or class {want!r} defined here")
        found, first, stop = hits[0]
        begin = first
    elif a.line is not None:
        if a.line > total:
            raise AgentError(f"raw/{rel}: line {a.line} is past the end ({total} lines)")
        begin, stop = max(1, a.line - a.context), min(total, a.line + a.context)
    else:
        begin = a.start or 1
        if begin > max(total, 1):
            raise AgentError(f"raw/{rel}: line {begin} is past the end ({total} lines)")
    if a.start and (a.symbol or a.line is not None):
        begin = max(begin, a.start)  # going on within a symbol or a range
        if begin > stop:
            what = f"{found}'s definition" if a.symbol else "the range"
            raise AgentError(f"raw/{rel}: start {a.start} is past the end of {what} (line {stop})")
    end = min(stop, begin + a.lines - 1, total)
    size, cut = 0, None
    for n in range(begin, end + 1):  # at most MAX_CHARS: the lines that fit, or the first one cut
        size += len(lines[n - 1]) + 1
        if size > MAX_CHARS + 1:  # each line's newline, the last one's too, beside MAX_CHARS of the file's text
            end, cut = (n - 1, None) if n > begin else (n, n)
            break
    text = "\n".join(lines[begin - 1:end]) + ("\n" if end >= begin else "")
    return {"path": rel, "start": begin, "end": end, "total_lines": total, "cut": cut,
            "text": text[:MAX_CHARS] + f"\n[line {cut} cut at {MAX_CHARS:,} of {len(lines[cut - 1]):,} characters]\n"
            if cut else text, "next_line": end + 1 if end < stop else None, "symbol": found, "matches": matches}
