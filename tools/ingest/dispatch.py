"""Where a codebase chooses between implementations, from one file's AST: ``if config.attention == "flash": ...``
branches (a selector compared with string values, and the kernel-like calls each branch makes, one hop into
the file's own methods and functions), and registries (a module-level dict or ``NAME["key"] = ...`` mapping
names to implementations). Pure: the tree and its import aliases in, JSON-ready facts out. The codebase's kernel
selection map (``ingest/selection.py``) joins them to the kernel catalog."""

from __future__ import annotations

import ast
import re

from .. import pysource

# A call worth showing on the map: it names a kernel, an attention or matmul implementation, or a kernel library.
KERNELISH = re.compile(r"pallas|splash|flash|kernel|megablox|gmm|ragged|paged|mosaic|triton|tokamax|cudnn|"
                       r"attention|attn|matmul|ragged_dot|rms_?norm|moe|collective", re.I)
# Calls that check or describe rather than compute: not shown.
NOISE = re.compile(r"^_?(?:validate|is_|check|assert|with_|log|warn|raise|get_\w*size|generate_\w*mask)", re.I)
_CONFIG = re.compile(r"(?:^|\.)(?:config|cfg|conf|args|flags|options|settings|hparams|params)$", re.I)
MAX_BRANCHES = 80
MAX_CALLS = 24


def _full(node: ast.AST, aliases: dict[str, str], cls: str | None, module: str,
          local: frozenset[str] = frozenset()) -> str | None:
    """A called name as the codebase knows it: imports resolved, ``self.x`` as ``module.Class.x``, a function or
    class of this file as ``module.name``."""
    dotted = pysource.dotted_name(node)
    if not dotted:
        return None
    head, _, rest = dotted.partition(".")
    if head in ("self", "cls") and cls and rest:
        return f"{module}.{cls}.{rest}" if module else f"{cls}.{rest}"
    base = aliases.get(head)
    if base is None and head in local:
        base = f"{module}.{head}" if module else head
    if base is None:
        return None
    return f"{base}.{rest}" if rest else base


def _selector(test: ast.AST) -> tuple[str, list[str]] | None:
    """``x.attention_kernel == "flash"`` / ``attention in ("a", "b")`` / ``self.config.megablox`` (a boolean of a
    config object, ``true`` or, under ``not``, ``false``): (the selector's last name, the values)."""
    if isinstance(test, ast.BoolOp):  # a == "x" or (a == "y" and ...): the first comparison decides the label
        for v in test.values:
            got = _selector(v)
            if got:
                return got
        return None
    flag = test.operand if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not) else test
    if isinstance(flag, ast.Attribute):  # if self.config.megablox: a boolean setting of a config object
        dotted = pysource.dotted_name(flag) or ""
        if _CONFIG.search(dotted.rsplit(".", 1)[0]):
            return dotted.rsplit(".", 1)[-1], ["false" if flag is not test else "true"]
        return None
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], (ast.Eq, ast.In))):
        return None
    left, right = test.left, test.comparators[0]
    if isinstance(left, ast.Constant) and isinstance(test.ops[0], ast.Eq):  # "flash" == x; never `'dcp' in mesh.shape`
        left, right = right, left
    name = pysource.dotted_name(left)
    if not name or name.rsplit(".", 1)[-1].startswith("__"):  # `__name__ == "__main__"`: a script guard, no setting
        return None
    if isinstance(right, ast.Constant) and isinstance(right.value, str):
        values = [right.value]
    elif isinstance(right, (ast.Tuple, ast.List, ast.Set)) and right.elts and \
            all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in right.elts):
        values = [e.value for e in right.elts]
    else:
        return None
    return name.rsplit(".", 1)[-1], values


def dispatch_facts(tree: ast.Module, aliases: dict[str, str], module: str, line_of) -> dict:
    """{"branches": [[selector, values, line, calls]], "registries": [[registry, key, target, line]]}."""
    methods: dict[str, ast.AST] = {}  # "Class.method" and "function" -> node, for one hop into the file
    owner: dict[int, str | None] = {}  # id(If node) -> the class it is in
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            methods[node.name] = node
        elif isinstance(node, ast.ClassDef):
            for sub in node.body:
                if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    methods[f"{node.name}.{sub.name}"] = sub
                    for x in ast.walk(sub):
                        if isinstance(x, ast.If):
                            owner[id(x)] = node.name
    local = frozenset(n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                                   ast.ClassDef)))
    branches: list[list] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.If) or len(branches) >= MAX_BRANCHES:
            continue
        sel = _selector(node.test)
        if sel is None:
            continue
        cls = owner.get(id(node))
        others: list[str] = []
        calls = _calls(node.body, aliases, cls, module, methods, local=local, chosen=sel, others=others)
        if calls or others:  # the calls whose names say kernel, then the rest: one may reach a catalogued kernel
            branches.append([sel[0], sel[1], line_of(node.lineno), calls, others])
    return {"branches": branches, "registries": _registries(tree, aliases, module, line_of)}


def _walk(body: list[ast.stmt], chosen: tuple[str, list[str]] | None):
    """Every node under ``body``, leaving out the branches that choose another value of the setting ``chosen``
    names (``apply_attention``'s ``if attention == "flash"`` is not reached from ``attention == "dot_product"``)."""
    todo = list(reversed(body))  # a stack, read in source order
    while todo:
        node = todo.pop()
        if chosen and isinstance(node, ast.If):
            sel = _selector(node.test)
            if sel and sel[0] == chosen[0] and not set(sel[1]) & set(chosen[1]):
                todo.extend(reversed(node.orelse))
                continue
        yield node
        todo.extend(reversed(list(ast.iter_child_nodes(node))))


def _calls(body: list[ast.stmt], aliases, cls, module, methods, hop: bool = True,
           local: frozenset[str] = frozenset(), chosen: tuple[str, list[str]] | None = None,
           others: list[str] | None = None) -> list[str]:
    """The calls under ``body`` whose names say kernel (into the file's own functions, one hop); the other calls go
    to ``others`` (``ln.layer_norm`` says no kernel, yet may launch a catalogued one)."""
    out: list[str] = []
    rest = others if others is not None else []
    for x in _walk(body, chosen):
        if not isinstance(x, ast.Call):
            continue
        full = _full(x.func, aliases, cls, module, local)
        if not full or NOISE.match(full.rsplit(".", 1)[-1]):
            continue
        mine = full[len(module) + 1:] if module and full.startswith(module + ".") else full
        if hop and mine in methods:  # the file's own method or function: what it calls
            inner = _calls(methods[mine].body, aliases, mine.split(".")[0] if "." in mine else None,
                           module, methods, hop=False, local=local, chosen=chosen, others=rest)
            if inner and KERNELISH.search(mine):
                out.append(full)
            out += [c for c in inner if c not in out]
        elif full not in out and KERNELISH.search(mine if mine != full else ".".join(full.split(".")[-2:])):
            out.append(full)  # a name of this file by itself; an import with its module (splash_attention_kernel.x)
        elif full not in out and full not in rest and len(rest) < MAX_CALLS:
            rest.append(full)
        if len(out) >= MAX_CALLS:
            return out
    return out


def _registries(tree: ast.Module, aliases, module, line_of) -> list[list]:
    """Module-level ``NAME = {"key": impl, ...}`` / ``dict(key=impl)`` / ``NAME["key"] = impl`` (also inside a
    module-level ``if``/``try``), keeping entries whose implementation names a kernel-like thing."""
    out: list[list] = []

    def value_name(v: ast.AST) -> str | None:
        target = v.func if isinstance(v, ast.Call) else v
        if isinstance(v, ast.Call) and pysource.dotted_name(v.func) in ("functools.partial", "partial") and v.args:
            target = v.args[0]
        full = _full(target, aliases, None, module)
        if full is None and isinstance(target, ast.Name):
            full = f"{module}.{target.id}" if module else target.id
        return full

    def add(reg: str, key: str, v: ast.AST, line: int) -> None:
        name = value_name(v)
        if name and KERNELISH.search(name) and len(out) < 200:
            out.append([reg, key, name, line_of(line)])

    todo = list(tree.body)
    while todo:
        st = todo.pop(0)
        if isinstance(st, (ast.If, ast.Try)):
            todo[:0] = [*st.body, *getattr(st, "orelse", []), *[s for h in getattr(st, "handlers", []) for s in h.body]]
            continue
        if isinstance(st, ast.Assign) and len(st.targets) == 1:
            t, v = st.targets[0], st.value
            if isinstance(t, ast.Name) and isinstance(v, ast.Dict):
                for k, item in zip(v.keys, v.values):
                    if isinstance(k, ast.Constant) and isinstance(k.value, str):
                        add(t.id, k.value, item, item.lineno)
            elif isinstance(t, ast.Name) and isinstance(v, ast.Call) and pysource.dotted_name(v.func) == "dict":
                for kw in v.keywords:
                    if kw.arg:
                        add(t.id, kw.arg, kw.value, kw.value.lineno)
            elif isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name) and \
                    isinstance(t.slice, ast.Constant) and isinstance(t.slice.value, str):
                add(t.value.id, t.slice.value, v, st.lineno)
    return out
