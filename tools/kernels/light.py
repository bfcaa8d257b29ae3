"""Regex-only facts for files that launch no Pallas kernel (most of a repository).

What the cross-file pass needs from them: imports (for re-exports), which of the repository's
names each top-level function uses (to follow callers), ``defvjp``/``custom_vjp`` links, and
calls of imported names (a repository-local wrapper may be called from here). No parse: cheap.
"""

from __future__ import annotations

import bisect
import re

_IMPORT_RE = re.compile(r"^\s*(?:from\s+(\.*[\w.]*)\s+import\s+(?:\(([^)]*)\)|([^#\n]+))"
                        r"|import\s+([\w.]+)(?:\s+as\s+(\w+))?)", re.MULTILINE)
_TOPDEF_RE = re.compile(r"^(?:async\s+)?(?:def|class)\s+(\w+)", re.MULTILINE)
_SELF_CALL = re.compile(r"\b(?:self|cls)\.(\w+)\s*\(")
_METHOD_RE = re.compile(r"^([ \t]+)(?:async\s+)?def\s+(\w+)", re.MULTILINE)
_LIGHT_LINK_RE = re.compile(r"^(\w+)\.def(?:vjp|jvp)\(([^)]*)\)|^(\w+)\s*=\s*(?:jax\.)?custom_[vj]jp\(([^)]*)\)",
                            re.MULTILINE)


def light_facts(facts: dict, text: str) -> dict:
    """Regex-only facts for files that never mention Pallas: imports and cross-file references."""
    module = facts["module"]
    package = module.split(".") if facts["is_pkg"] else module.split(".")[:-1]
    imports: dict[str, str] = {}
    for m in _IMPORT_RE.finditer(text):
        if m.group(4):
            imports[m.group(5) or m.group(4).split(".")[0]] = m.group(4) if m.group(5) else m.group(4).split(".")[0]
            continue
        base = m.group(1)
        level = len(base) - len(base.lstrip("."))
        base = base.lstrip(".")
        if level:
            up = package[: len(package) - (level - 1)] if level - 1 <= len(package) else []
            base = ".".join(up + ([base] if base else []))
        for item in (m.group(2) or m.group(3) or "").split(","):
            bits = item.split("#")[0].split()
            if bits and bits[0].isidentifier():
                imports[bits[-1] if len(bits) == 3 and bits[1] == "as" else bits[0]] = f"{base}.{bits[0]}"
    facts["imports"] = imports
    defs = list(_TOPDEF_RE.finditer(text))
    if not defs:
        return facts
    units = _units(defs, text)  # top-level functions, and each class's own methods (``Class.method``)
    starts = [u[0] for u in units]
    refs: list[set[str]] = [set() for _ in units]
    own = module.split(".")[0]
    # the repository's own imports; a tree ingested from inside its package (modules _src.ops.x) imports
    # tokamax._src.ops.x
    targets = {n: t for n, t in imports.items() if n.isidentifier() and own in t.split(".")[:2]}
    imported = set(targets)
    # the file's own private helpers (public -> private chains inside the file)
    targets.update({m.group(1): f"{module}.{m.group(1)}" for m in defs if m.group(1).startswith("_")})
    rx = re.compile(r"(?<![\w.])(" + "|".join(sorted(map(re.escape, targets), key=len, reverse=True))
                    + r")(?:\.(\w+))?\b") if targets else None
    line, pos = 1, 0
    for m in rx.finditer(text) if rx else ():
        i = bisect.bisect_right(starts, m.start()) - 1
        target = targets[m.group(1)] + (f".{m.group(2)}" if m.group(2) else "")
        if i >= 0 and units[i][2] is not None:  # a class's own lines outside its methods: no function's
            refs[i].add(target)
        if m.group(1) in imported and text.startswith("(", m.end()):
            # a call of an imported name: maybe a repository-local wrapper (resolve decides)
            line += text.count("\n", pos, m.start())
            pos = m.start()
            col_line = text[text.rfind("\n", 0, m.start()) + 1:m.start()]
            if col_line.lstrip().startswith(("def ", "class ", "#", "import ", "from ")):
                continue
            facts["calls"].append({"line": line, "callee": m.group(0), "target": target,
                                   "scope": units[i][2] if i >= 0 and col_line[:1] in (" ", "\t") else None,
                                   "forwards": None, "hints": None, "interpret": False})
    for i, (start, end, qual, cls) in enumerate(units):  # a method's own class's methods it calls (self.decode)
        if qual is not None and cls is not None:
            refs[i].update(f"{module}.{cls}.{name}" for name in _SELF_CALL.findall(text, start, end)
                           if f"{cls}.{name}" != qual)
    # x.defvjp(fwd, bwd) and x = jax.custom_vjp(f) at module level: the rules belong to x
    for m in _LIGHT_LINK_RE.finditer(text):
        owner, args = m.group(1) or m.group(3), m.group(2) or m.group(4)
        for name in re.findall(r"(?:\b\w+\s*=\s*)?\b([A-Za-z_]\w*)\b", args):
            if name in targets and owner in targets:
                facts["links"].append([targets[name], targets[owner]])
    line, at = 1, 0
    for i, (start, end, qual, cls) in enumerate(units):
        line += text.count("\n", at, start)
        at = start
        if qual is None:  # the class itself
            facts["classes"][cls] = {"line": line, "doc": None}
            continue
        facts["functions"][qual] = {
            "line": line, "end": line + text.count("\n", start, end),
            "public": not any(p.startswith("_") for p in qual.split(".")), "nested": False, "class": cls,
            "doc": None, "signature": None, "decorators": [], "deprecated": False, "refs": sorted(refs[i])[:400]}
    return facts


def _units(defs: list[re.Match], text: str) -> list[tuple[int, int, str | None, str | None]]:
    """(start, end, qualified name, class) of each top-level function, each class (name None: its own lines) and
    each method at its class's first indent, in order. A class's refs were its methods' all at once: a class whose
    ``decode`` alone launched a kernel was a caller of it wherever one was made (``AttentionOp(config)(x)``)."""
    out = []
    for i, m in enumerate(defs):
        end = defs[i + 1].start() if i + 1 < len(defs) else len(text)
        name = m.group(1)
        if not m.group(0).startswith("class"):
            out.append((m.start(), end, name, None))
            continue
        out.append((m.start(), end, None, name))
        methods = list(_METHOD_RE.finditer(text, m.end(), end))
        methods = [x for x in methods if methods and x.group(1) == methods[0].group(1)]
        for k, x in enumerate(methods):
            out.append((x.start(), methods[k + 1].start() if k + 1 < len(methods) else end, f"{name}.{x.group(2)}",
                        name))
    return out
