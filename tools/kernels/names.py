"""Names in one scanned file: its module name, its scopes (module, classes, functions with their parameters, local
definitions, assignments and launcher aliases), its imports, and what a dotted name in a scope refers to. Also the
kernel bodies a wrapper is handed by its caller (``forwarded_body``, ``closure_body``), and every value a name is
given under which ``if`` condition (``visit_If``, ``find_branches``; lists grown by ``+=``/``append``:
``find_extended``). A mixin of the visitor in ``facts``: it reads ``self.stack``, ``self.imports``,
``self.top_defs`` and ``self.module``."""

from __future__ import annotations

import ast

from .. import pysource

_BODY_PARAMS = {"kernel", "body", "f", "fn", "fun", "func", "kernel_fn", "kernel_body", "kernel_func",
                "body_fn", "kernel_function", "user_kernel", "inner_kernel"}


MAX_TEXT = 160


def short(node: ast.AST | None) -> str | None:
    if node is None:
        return None
    try:
        text = ast.unparse(node)
    except Exception:  # noqa: BLE001 - ast.unparse on repaired trees; a missing extra is fine
        return None
    text = " ".join(text.split())
    return text if len(text) <= MAX_TEXT else text[: MAX_TEXT - 1] + "…"


def module_name(relpath: str) -> str:
    p = relpath.replace("\\", "/")
    for suffix in (".py", ".ipynb", ".md", ".markdown"):
        if p.endswith(suffix):
            p = p[: -len(suffix)]
            break
    parts = [x for x in p.split("/") if x]
    if parts and parts[0] in ("src", "lib"):
        parts = parts[1:]
    if parts and parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def params_of(fn: ast.AST) -> list[str]:
    a = fn.args
    names = [x.arg for x in a.posonlyargs + a.args + a.kwonlyargs]
    if a.vararg:
        names.append(a.vararg.arg)
    if a.kwarg:
        names.append(a.kwarg.arg)
    return names


def defaults_of(fn: ast.AST) -> dict[str, str]:
    """Each parameter's default as written (``tiling`` -> ``(128, 128, 128)``)."""
    a = fn.args
    positional = a.posonlyargs + a.args
    pairs = list(zip(positional[len(positional) - len(a.defaults):], a.defaults))
    pairs += [(x, d) for x, d in zip(a.kwonlyargs, a.kw_defaults) if d is not None]
    out = {}
    for arg, d in pairs:
        try:
            text = " ".join(ast.unparse(d).split())
        except Exception:  # noqa: BLE001 - a repaired tree
            continue
        out[arg.arg] = text if len(text) <= 80 else text[:79] + "…"
    return out


class Scope:
    def __init__(self, name: str, node: ast.AST | None, kind: str, qual: str | None):
        self.name, self.node, self.kind, self.qual = name, node, kind, qual
        self.params = set(params_of(node)) if kind == "def" else set()
        self.aliases: dict[str, dict] = {}
        self.assigns: dict[str, ast.AST] = {}
        # Every assignment of a name in this scope with the condition it sits under ("if x", "not (x)"; None when
        # unconditional), in source order: a grid or a block spec chosen in an if/else has one per branch.
        self.branches: dict[str, list[tuple[str | None, ast.AST]]] = {}
        self.conds: list[str] = []  # the conditions of the if statements being visited in this scope
        self.extended: dict[str, list[tuple[str | None, ast.AST]]] = {}  # in_specs += [...], in_specs.append(x)
        self.local_defs: dict[str, ast.AST] = {}
        if node is not None and kind in ("def", "module"):
            todo = list(ast.iter_child_nodes(node))
            while todo:  # defs directly in this scope (nested scopes collect their own)
                sub = todo.pop()
                if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    self.local_defs.setdefault(sub.name, sub)
                elif isinstance(sub, (ast.stmt, ast.excepthandler, ast.match_case)) \
                        and not isinstance(sub, ast.ClassDef):
                    todo.extend(x for x in ast.iter_child_nodes(sub) if isinstance(x, (ast.stmt, ast.excepthandler, ast.match_case)))


def top_statements(tree: ast.Module):
    todo = list(tree.body)
    while todo:
        st = todo.pop(0)
        yield st
        if isinstance(st, (ast.If, ast.Try, ast.With)) or type(st).__name__ == "TryStar":
            for name in ("body", "orelse", "finalbody"):
                todo.extend(getattr(st, name, []) or [])
            for h in getattr(st, "handlers", []) or []:
                todo.extend(h.body)


def imports_of(nodes, module: str, is_pkg: bool, out: dict[str, str] | None = None) -> dict[str, str]:
    out = {} if out is None else out
    package = module.split(".") if is_pkg else module.split(".")[:-1]
    for node in nodes:
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.asname:
                    out[a.asname] = a.name
                else:
                    out[a.name.split(".")[0]] = a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package[: len(package) - (node.level - 1)] if node.level - 1 <= len(package) else []
                base = ".".join(up + ([base] if base else []))
            for a in node.names:
                if a.name != "*":
                    out[a.asname or a.name] = f"{base}.{a.name}" if base else a.name
    return out


class NameResolution:
    stack: list[Scope]
    imports: dict[str, str]
    top_defs: set[str]
    module: str

    def line(self, n: int) -> int:
        return self.p.file_line(n)

    def resolve(self, dotted: str | None) -> str | None:
        if not dotted:
            return None
        root, _, rest = dotted.partition(".")
        if root in ("self", "cls"):
            cls = next((s.name for s in reversed(self.stack) if s.kind == "class"), None)
            return f"{self.module}.{cls}.{rest}" if cls and rest else None
        for s in reversed(self.stack):
            if root in s.local_defs and s.kind == "def":
                return None  # a nested local function
        if root in self.top_defs:
            return f"{self.module}.{dotted}"
        if root in self.imports:
            target = self.imports[root]
            return f"{target}.{rest}" if rest else target
        return dotted

    def scope_qual(self) -> str | None:
        quals = [s for s in self.stack if s.kind in ("def", "class")]
        return ".".join(s.name for s in quals) if quals else None

    def def_chain(self) -> list[Scope]:
        return [s for s in self.stack if s.kind == "def"]

    def find_alias(self, name: str) -> dict | None:
        for s in reversed(self.stack):
            if name in s.aliases:
                return s.aliases[name]
        return None

    def find_assign(self, name: str) -> ast.AST | None:
        for s in reversed(self.stack):
            if name in s.assigns:
                return s.assigns[name]
        return None

    def find_branches(self, name: str) -> list[tuple[str | None, ast.AST]]:
        """Every value assigned to ``name`` in the nearest scope that assigns it, each with its condition."""
        for s in reversed(self.stack):
            if name in s.branches:
                return s.branches[name]
        return []

    def find_extended(self, name: str) -> list[tuple[str | None, ast.AST]]:
        """What was added to the list ``name`` after it was made (``+=``, ``.append``, ``.extend``, ``.insert``),
        each with its condition."""
        for s in reversed(self.stack):
            if name in s.extended:
                return s.extended[name]
        return []

    def find_def(self, name: str) -> ast.AST | None:
        """The function ``name`` defined in an enclosing scope or at module level (a spec-building helper)."""
        for s in reversed(self.stack):
            if name in s.local_defs:
                return s.local_defs[name]
        return None

    def _param_owner(self, name: str, reassigned: bool = False) -> str | None:
        """Outermost enclosing function that takes ``name`` as a parameter (qualname); unless ``reassigned``, one
        that assigns it a new value does not count."""
        chain = self.def_chain()
        for i, s in enumerate(chain):
            if name in s.params and (reassigned or not any(name in t.assigns for t in chain[i:])):
                return ".".join(x.name for x in self.stack[1:self.stack.index(s) + 1])
        return None

    def closure_body(self, owner: str, name: str) -> str | None:
        """``owner`` is a function defined inside another (``call_kernel`` in ``flash_fwd``): only its enclosing
        function can call it, so it is no wrapper. The kernel body it is given there (``call_kernel(kernel=
        partial(_fwd, ...))``), by name; None when it is not a closure."""
        bits = owner.split(".")
        scopes = self.stack[1:len(bits) + 1]
        if len(scopes) < 2 or [x.name for x in scopes] != bits or scopes[-1].kind != "def" \
                or not any(x.kind == "def" for x in scopes[:-1]):
            return None
        inner, outer = scopes[-1].node, next(x for x in reversed(scopes[:-1]) if x.kind == "def").node
        params = params_of(inner)
        position = params.index(name) if name in params else None
        for sub in ast.walk(outer):
            if not (isinstance(sub, ast.Call) and isinstance(sub.func, ast.Name) and sub.func.id == bits[-1]):
                continue
            arg = next((k.value for k in sub.keywords if k.arg == name), None)
            if arg is None and position is not None and position < len(sub.args):
                arg = sub.args[position]
            if isinstance(arg, ast.Call) and pysource.dotted_name(arg.func) in ("functools.partial", "partial") \
                    and arg.args:
                arg = arg.args[0]
            if isinstance(arg, (ast.Name, ast.Attribute)):
                return pysource.dotted_name(arg)
        return ""

    def _calls_param(self, node: ast.AST) -> str | None:
        """A caller-supplied kernel body called from ``node`` (by its conventional names)."""
        for sub in ast.walk(node):
            if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Name) and sub.func.id in _BODY_PARAMS:
                owner = self._param_owner(sub.func.id)
                if owner:
                    return owner
        return None

    def forwarded_body(self, body: ast.AST | None, _depth: int = 2) -> str | None:
        """If the kernel body is a caller-supplied callable, the wrapper function that takes it."""
        if body is None:
            return None
        if isinstance(body, ast.Starred):
            body = body.value
        if isinstance(body, ast.Call) and pysource.dotted_name(body.func) in ("functools.partial", "partial") and body.args:
            body = body.args[0]
        if isinstance(body, ast.Name):
            owner = self._param_owner(body.id)
            if owner:
                return owner
            assigned = self.find_assign(body.id)
            if _depth > 0 and isinstance(assigned, (ast.Name, ast.Call, ast.Lambda)) \
                    and not (isinstance(assigned, ast.Name) and assigned.id == body.id):
                owner = self.forwarded_body(assigned, _depth - 1)  # fwd_kernel = partial(kernel, ...)
                if owner:
                    return owner
            for s in reversed(self.stack):
                if body.id in s.local_defs and s.kind == "def":
                    return self._calls_param(s.local_defs[body.id])
            return None
        if isinstance(body, ast.Lambda):
            return self._calls_param(body.body)
        return None

    def visit_If(self, node: ast.If, chain: int = 0) -> None:
        """The branches' assignments carry their condition: ``if c`` gives ``c``, its else ``not (c)``, the else
        of an if/elif chain ``otherwise``."""
        self.visit(node.test)
        conds = self.stack[-1].conds
        cond = short(node.test) or "…"
        conds.append(cond)
        for st in node.body:
            self.visit(st)
        conds.pop()
        if len(node.orelse) == 1 and isinstance(node.orelse[0], ast.If):
            self.visit_If(node.orelse[0], chain + 1)
        elif node.orelse:
            conds.append("otherwise" if chain else f"not ({cond})")
            for st in node.orelse:
                self.visit(st)
            conds.pop()

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        """``x: T = v`` is an assignment; ``x: T`` alone binds nothing (a later assignment gives the value)."""
        if node.value is not None and isinstance(node.target, ast.Name):
            self.visit_Assign(ast.copy_location(ast.Assign(targets=[node.target], value=node.value), node))
        elif node.value is not None:
            self.visit(node.value)

    _MAX_BRANCHES = 12

    def _extend(self, name: str, value: ast.AST) -> None:
        scope = next((s for s in reversed(self.stack) if name in s.branches), self.stack[-1])
        added = scope.extended.setdefault(name, [])
        if len(added) < 3 * self._MAX_BRANCHES:
            added.append((self.stack[-1].conds[-1] if self.stack[-1].conds else None, value))

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        if isinstance(node.target, ast.Name) and isinstance(node.op, ast.Add):
            self._extend(node.target.id, node.value)
        self.generic_visit(node)
