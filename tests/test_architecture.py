"""The house rules of docs/architecture.md, read from the source: every import (lazy ones inside functions too)
goes to a package on the same floor or a lower one, and no two modules import each other, directly or round a
circle. A new package must be given a floor here and in the document."""

from __future__ import annotations

import ast
import re
from pathlib import Path

TOOLS = Path(__file__).resolve().parents[1] / "tools"
DOC = TOOLS.parent / "docs" / "architecture.md"

# lowest first; a package may import its own floor's packages and any lower floor's, never a higher one
FLOORS = [
    ["errors", "safeio", "redact", "mdtext", "mdraw", "mdrisk", "downlevel", "pysource", "regions", "pages", "project",
     "gitinfo", "gitindex", "gitrun", "writer", "mdscan", "wikiscan", "mdsections", "wikiindex", "concepts",
     "treewalk", "plugins", "htmlpage", "jsonvalues", "fulltext"],
    ["kernels", "llm", "search", "runners"],
    ["sources", "query", "lint", "profiling"],
    ["ingest"],
    ["experiments", "gap"],
    ["loop"],
    ["sitegen"],
    ["scaffold", "answer"],
    ["demo"],
    ["agent"],
    ["cli", "mkdocs_plugin", "__main__"],
]
ASSETS = {"templates", "data"}  # files the tools copy or read, never import (the reference model is run, not imported)
FLOOR = {pkg: n for n, names in enumerate(FLOORS) for pkg in names}


def _modules() -> dict[str, Path]:
    out = {}
    for f in TOOLS.rglob("*.py"):
        if f.relative_to(TOOLS).parts[0] in ASSETS:
            continue
        parts = list(f.relative_to(TOOLS.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = f
    return out


def _targets(mod: str, is_pkg: bool, node: ast.AST, known: dict) -> list[str]:
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    elif isinstance(node, ast.ImportFrom):
        if node.level:
            base = mod.split(".")[: len(mod.split(".")) - (node.level - 1) - (0 if is_pkg else 1)]
            name = ".".join(base + ([node.module] if node.module else []))
        else:
            name = node.module or ""
        names = [f"{name}.{a.name}" if f"{name}.{a.name}" in known else name for a in node.names]
    else:
        return []
    out = []
    for n in names:
        while n not in known and "." in n:
            n = n.rsplit(".", 1)[0]
        if n in known and n != mod:
            out.append(n)
    return out


def import_graph() -> dict[str, set[str]]:
    known = _modules()
    graph: dict[str, set[str]] = {m: set() for m in known}
    for mod, path in known.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            graph[mod].update(_targets(mod, path.name == "__init__.py", node, known))
    return graph


def package(mod: str) -> str:
    parts = mod.split(".")
    return parts[1] if len(parts) > 1 else "tools"


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_every_package_has_a_floor():
    packages = {package(m) for m in _modules()} - {"tools"}
    assert packages - FLOOR.keys() == set(), "give the new package a floor here and in docs/architecture.md"


def test_imports_only_go_down():
    up = sorted(f"{a} -> {b}" for a, targets in import_graph().items() for b in targets
                if package(a) != "tools" and package(b) != "tools" and FLOOR[package(b)] > FLOOR[package(a)])
    assert up == []


def test_no_circles():
    assert cycles(import_graph()) == []


def test_the_checks_can_fail():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert package("tools.experiments.runner") == "experiments" and FLOOR["runners"] < FLOOR["experiments"]


def test_the_document_lists_the_same_floors():
    text = DOC.read_text(encoding="utf-8")
    table = re.search(r"<!-- floors -->(.*?)<!-- /floors -->", text, re.S).group(1)
    rows = [r for r in table.splitlines() if r.startswith("| ") and not r.startswith("| Floor")]
    listed = [re.findall(r"`([\w_]+)`", r.split("|")[2]) for r in rows]
    assert list(reversed(listed)) == FLOORS


def test_no_module_is_past_the_size_the_document_allows():
    text = DOC.read_text(encoding="utf-8")
    allowed = set(re.findall(r"^- `tools/([\w/]+\.py)` \(\d+ lines\)", text, re.M))
    big = sorted(str(p.relative_to(TOOLS)) for p in TOOLS.rglob("*.py")
                 if len(p.read_text(encoding="utf-8").splitlines()) > 420)
    assert [b for b in big if b not in allowed] == []
