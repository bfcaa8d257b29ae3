"""Per-file facts for the kernel catalog: pure, JSON-serializable, cacheable by content.

``analyze_file(relpath, data)`` never imports or runs the scanned code and never raises: a file
that cannot be read or parsed gives facts with an ``error`` reason. Files that do not mention
Pallas at all get a light, regex-only pass (imports and which imported names each top-level
function uses), which is enough to follow callers across files.
"""

from __future__ import annotations

import ast
import hashlib
import re
from typing import Any

from .. import pysource
from . import rules
from .light import light_facts

VERSION = 3  # bump when the shape of the facts changes (cache key)

_MENTIONS = re.compile(r"pallas|core_map|plgpu|pltpu")
_PALLAS_IMPORT = re.compile(r"^[ \t]*(?:from|import)[ \t]+[^\n]*(?:pallas|pltpu|plgpu|core_map|mosaic)", re.MULTILINE)
_LAUNCHY = re.compile(r"pallas_call|core_map|kernel\s*\(|\.kernel\b|_call\s*\(")
_MAX_TEXT = 160
_MAX_SIGNATURE = 2000  # signatures are shown whole; past this, parameter names only


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


_LAUNCHER_MODULES = re.compile(
    r"jax\.experimental\.pallas(?:\.(?:tpu|mosaic_gpu|gpu|triton|tpu_sc|fuser))?"
    r"|jax\._src\.pallas(?:\.(?:core|helpers|pallas_call|mosaic_gpu\.core|mosaic\.core|mosaic\.helpers))?")


def launcher_entry(qualified: str | None) -> str | None:
    """The entry name when ``qualified`` names a Pallas launcher from JAX itself, else None."""
    if not qualified or not qualified.startswith("jax"):
        return None
    module, _, last = qualified.rpartition(".")
    if not _LAUNCHER_MODULES.fullmatch(module):
        return None
    if last == "pallas_call":
        return "pallas_call"
    if last == "core_map":
        return "core_map"
    if last == "kernel":
        return "plgpu.kernel" if "mosaic_gpu" in qualified else "pl.kernel"
    return None


def _short(node: ast.AST | None) -> str | None:
    if node is None:
        return None
    try:
        text = ast.unparse(node)
    except Exception:  # noqa: BLE001 - ast.unparse on repaired trees; a missing extra is fine
        return None
    text = " ".join(text.split())
    return text if len(text) <= _MAX_TEXT else text[: _MAX_TEXT - 1] + "…"


def _summary(doc: str | None) -> str | None:
    if not doc:
        return None
    for para in doc.strip().split("\n\n"):
        line = " ".join(para.split())
        if line:
            return line[:300]
    return None


def _params(fn: ast.AST) -> list[str]:
    a = fn.args
    names = [x.arg for x in a.posonlyargs + a.args + a.kwonlyargs]
    if a.vararg:
        names.append(a.vararg.arg)
    if a.kwarg:
        names.append(a.kwarg.arg)
    return names


_TRAILING_COMMENT = re.compile(r"\s+#[^'\"]*$")


def _fingerprint(node: ast.AST, lines: list[str]) -> tuple[str, list[int]]:
    """Hash of a function's source with docstring, comments, blank lines and indentation removed,
    and the sorted 32-bit hashes of those normalized lines (for near-copy detection)."""
    skip = set()
    body = getattr(node, "body", [])
    if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant) \
            and isinstance(body[0].value.value, str):
        skip = set(range(body[0].lineno, (body[0].end_lineno or body[0].lineno) + 1))
    h = hashlib.sha1()
    shingles = set()
    for n in range(node.lineno, (node.end_lineno or node.lineno) + 1):
        if n in skip or n > len(lines):
            continue
        t = lines[n - 1].strip()
        if "#" in t:
            t = _TRAILING_COMMENT.sub("", t)
        if t and not t.startswith("#"):
            t = " ".join(t.split()).encode()
            h.update(t)
            h.update(b"\n")
            if len(t) > 3:
                shingles.add(int.from_bytes(hashlib.md5(t).digest()[:4], "little"))
    return h.hexdigest()[:16], sorted(shingles)[:600]


_BODY_PARAMS = {"kernel", "body", "f", "fn", "fun", "func", "kernel_fn", "kernel_body", "kernel_func",
                "body_fn", "kernel_function", "user_kernel", "inner_kernel"}
_SKIP_CALLS = ("jax.numpy.", "jax.lax.", "numpy.", "math.", "functools.", "typing.", "dataclasses.", "itertools.",
               "collections.", "re.", "os.", "logging.", "abc.", "enum.", "jax.tree_util.", "jax.tree.",
               "jax.random.", "jax.nn.", "jax.experimental.pallas.", "jax.ShapeDtypeStruct", "jax.jit",
               "jax.named_scope", "jax.custom_vjp", "jax.vmap", "builtins.", "absl.", "chex.", "einops.")
_HINT_KWARGS = {"compiler_params", "grid_spec", "mesh", "scratch_shapes", "in_specs", "out_specs", "backend"}
_DEPRECATED = re.compile(r"\bdeprecat", re.IGNORECASE)


class _Scope:
    def __init__(self, name: str, node: ast.AST | None, kind: str, qual: str | None):
        self.name, self.node, self.kind, self.qual = name, node, kind, qual
        self.params = set(_params(node)) if kind == "def" else set()
        self.aliases: dict[str, dict] = {}
        self.assigns: dict[str, ast.AST] = {}
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


class _Visitor(ast.NodeVisitor):
    def __init__(self, facts: dict, parsed: pysource.Parsed, lines: list[str]):
        self.f = facts
        self.p = parsed
        self.lines = lines
        self.module = facts["module"]
        self.imports: dict[str, str] = facts["imports"]
        self.top_defs: set[str] = set()
        self.top_bound: set[str] = set()  # module-level names bound to a call's result
        self.stack: list[_Scope] = [_Scope("", parsed.tree, "module", None)]
        self.handled: set[int] = set()
        self.body_names: set[str] = set()
        self.outer_body: dict[int, ast.AST] = {}
        self._hint_rx: re.Pattern | None = None
        self._matcher: rules.BackendMatcher | None = None
        self.fn_nodes: dict[str, ast.AST] = {}

    def _signature(self, node) -> str:
        """``name(params)`` from the source text of the def line(s): cheap, and keeps defaults as written."""
        end = node.body[0].lineno - 1 if node.body else node.lineno
        if node.body and hasattr(node.body[0], "decorator_list") and node.body[0].decorator_list:
            end = node.body[0].decorator_list[0].lineno - 1
        text = " ".join(ln.split("#")[0].strip() for ln in self.lines[node.lineno - 1:max(end, node.lineno)])
        m = re.search(r"def\s+\w+\s*(\(.*\))\s*(?:->.*)?:", text)
        sig = " ".join(m.group(1).split()) if m else "(...)"
        if len(sig) > _MAX_SIGNATURE:  # whole parameters only, so brackets stay balanced
            params = [a.arg for a in (*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs)]
            sig = "(" + ", ".join(params) + ")"
        return f"{node.name}{sig}"

    def finish(self) -> None:
        """Backend hints of the functions the resolver may fall back on (launches, bodies, wrapper calls)."""
        wanted = set()
        for l in self.f["launches"]:
            chain = l["chain"]
            wanted.update(".".join(chain[:i]) for i in range(1, len(chain) + 1))
            if l.get("body"):
                wanted.add(l["body"].split(".")[-1])
        for c in self.f["calls"]:
            callee = c["callee"].lower()
            if c["scope"] and ("call" in callee or "kernel" in callee or "pallas" in callee):
                chain = c["scope"].split(".")
                wanted.update(".".join(chain[:i]) for i in range(1, len(chain) + 1))
        for qual in wanted:
            node = self.fn_nodes.get(qual)
            fn = self.f["functions"].get(qual)
            if node is not None and fn is not None and "hints" not in fn:
                text = self._text(node)
                fn["hints"] = self.bk(text) if self.hinty(text) else None

    def bk(self, text: str) -> str | None:
        if self._matcher is None or self._matcher.size != len(self.imports):
            self._matcher = rules.BackendMatcher(self.imports)
        return self._matcher.hints(text)

    def hinty(self, text: str) -> bool:
        if self._hint_rx is None:
            aliases = [re.escape(a) for a, t in self.imports.items() if rules._backend_of_module(t)]
            self._hint_rx = re.compile(r"(?:\b(?:" + "|".join(aliases or ["$^"]) + r")\.)|mosaic|triton|Mesh|CompilerParams"
                                       r"|GridSpec")
        return bool(self._hint_rx.search(text))

    # ------------------------------------------------------------ names
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

    def def_chain(self) -> list[_Scope]:
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

    # ------------------------------------------------------------ wrappers
    def _param_owner(self, name: str) -> str | None:
        """Outermost enclosing function that takes ``name`` as a parameter (qualname)."""
        chain = self.def_chain()
        for i, s in enumerate(chain):
            if name in s.params and not any(name in t.assigns for t in chain[i:]):
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
        params = _params(inner)
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

    # ------------------------------------------------------------ launch details
    def _kw(self, call: ast.Call, name: str) -> ast.AST | None:
        for k in call.keywords:
            if k.arg == name:
                v = k.value
                if isinstance(v, ast.Name):
                    return self.find_assign(v.id) or v
                return v
        return None

    def _text(self, node: ast.AST) -> str:
        a, b = node.lineno - 1, (getattr(node, "end_lineno", None) or node.lineno)
        return "\n".join(self.lines[a:b])

    def details(self, call: ast.Call | None, style_node: ast.AST) -> dict:
        out: dict[str, Any] = {"grid": None, "block_shapes": [], "dimension_semantics": None}
        texts = [self._text(style_node)]
        if call is None:
            return {**out, "hints": self.bk(texts[0]), "interpret": False}
        grid = self._kw(call, "grid")
        spec = self._kw(call, "grid_spec")
        params = self._kw(call, "compiler_params")
        for extra in (spec, params, self._kw(call, "mesh"), self._kw(call, "scratch_shapes")):
            if extra is not None and extra not in call.keywords:
                texts.append(_short(extra) or "")
        if grid is None and isinstance(spec, ast.Call):
            grid = self._kw(spec, "grid")
        # A name no assignment in scope resolves (a parameter, a loop variable) is chosen at run time: say so
        # rather than print the bare name as if it were the grid.
        out["grid"] = f"{grid.id} (set at run time)" if isinstance(grid, ast.Name) else _short(grid)
        shapes = []
        for root in (call, spec):
            if not isinstance(root, ast.AST):
                continue
            for sub in ast.walk(root):
                if isinstance(sub, ast.Call) and (pysource.dotted_name(sub.func) or "").endswith("BlockSpec"):
                    shape = sub.args[0] if sub.args else next(
                        (k.value for k in sub.keywords if k.arg == "block_shape"), None)
                    s = _short(shape)
                    if s and s not in shapes:
                        shapes.append(s)
        out["block_shapes"] = shapes[:8]
        if params is not None:
            for sub in ast.walk(params):
                if isinstance(sub, ast.keyword) and sub.arg == "dimension_semantics":
                    out["dimension_semantics"] = _short(sub.value)
                    break
        interp = self._kw(call, "interpret")
        out["interpret"] = isinstance(interp, ast.Constant) and interp.value is True
        out["backend_note"] = self._run_time_params(call, params)
        if out["backend_note"]:  # the launch names no backend that holds for every run: the rest of the code may
            out["hints"] = None
            return out
        hint = self.bk(_short(params) or "") if params is not None else None
        out["hints"] = hint or self.bk("\n".join(texts))
        return out

    def _run_time_params(self, call: ast.Call, params: ast.AST | None) -> str | None:
        """Why the launch's ``compiler_params`` fix no backend: passed in by the caller, or chosen between
        backends by a condition. None when they are written out (or absent)."""
        given = next((k.value for k in call.keywords if k.arg == "compiler_params"), None)
        if isinstance(given, ast.Name) and params is given and any(given.id in x.params for x in self.def_chain()):
            return f"compiler_params come from the caller (parameter {given.id}, set at run time)"
        if isinstance(params, ast.IfExp):
            named = {self.bk(_short(x) or "") for x in (params.body, params.orelse)}
            named.discard(None)
            if len(named) > 1:
                return "compiler_params chosen at run time: " + " or ".join(sorted(named))
        return None

    def add_launch(self, node: ast.AST, entry: str, body: ast.AST | None, call: ast.Call | None,
                   style: str, decorated: ast.AST | None = None, extra_hint: str | None = None,
                   interpret: bool = False) -> None:
        chain_top = next((s.name for s in self.stack[1:]), None)
        if chain_top and launcher_entry(f"{self.module}.{chain_top}"):
            return  # the definition of a launcher itself (JAX's own sources)
        tok_line = getattr(node, "end_lineno", None) if isinstance(node, ast.Attribute) else None
        line = self.line(tok_line or node.lineno)
        body_name = None
        b = body
        if isinstance(b, ast.Call) and pysource.dotted_name(b.func) in ("functools.partial", "partial") and b.args:
            b = b.args[0]
        if isinstance(b, (ast.Name, ast.Attribute)):
            body_name = pysource.dotted_name(b)
        if decorated is not None:
            body_name = decorated.name
            wrapper = self._calls_param(decorated)
        else:
            wrapper = self.forwarded_body(body)
            if wrapper and isinstance(b, ast.Name):
                local = self.closure_body(wrapper, b.id)
                if local is not None:  # a closure taking the body: the launch is here, with the body it is given
                    wrapper, body_name = None, local or body_name
        if body_name:
            self.body_names.add(body_name.rsplit(".", 1)[-1])
        d = self.details(call, node if call is None else call)
        if extra_hint and not d["hints"]:
            d["hints"] = extra_hint
        d["interpret"] = d["interpret"] or interpret
        if entry == "plgpu.kernel" and not d["hints"]:
            d["hints"] = "gpu-mosaic"
        chain = [s.name for s in self.stack[1:] if s.kind in ("def", "class")]
        self.f["launches"].append({
            "line": line, "entry": entry, "scope": ".".join(chain) or None,
            "chain": [s.name for s in self.stack[1:]], "body": body_name, "style": style,
            "wrapper": wrapper, **d,
        })

    # ------------------------------------------------------------ visiting
    def visit_Module(self, node: ast.Module) -> None:
        for st in node.body:
            if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                self.top_defs.add(st.name)
            elif isinstance(st, ast.Assign) and len(st.targets) == 1 and isinstance(st.targets[0], ast.Name) \
                    and isinstance(st.value, ast.Call):  # make_mha = partial(_make, ...): a factory by another name
                self.top_bound.add(st.targets[0].id)
        self.generic_visit(node)

    def _enter_def(self, node, kind: str) -> None:
        qual = ".".join([s.name for s in self.stack[1:]] + [node.name])
        scope = _Scope(node.name, node, kind, qual)
        if kind == "def":
            doc = ast.get_docstring(node, clean=True)
            cls = self.stack[-1].name if self.stack[-1].kind == "class" else None
            decos = [pysource.dotted_name(d.func if isinstance(d, ast.Call) else d) or "" for d in node.decorator_list]
            self.f["functions"][qual] = {
                "line": self.line(node.lineno), "end": self.line(getattr(node, "end_lineno", node.lineno)),
                "public": not any(p.startswith("_") for p in qual.split(".")),
                "nested": any(s.kind == "def" for s in self.stack),
                "class": cls, "doc": _summary(doc), "signature": self._signature(node),
                "decorators": [d for d in decos if d],
                "deprecated": bool(doc and _DEPRECATED.search(doc.split("\n\n")[0]))
                or any("deprecat" in d.lower() for d in decos),
                "refs": [],
            }
            if any("custom_vjp" in d or "custom_jvp" in d for d in decos):
                self.f["functions"][qual]["custom_vjp"] = True
            self._decorator_launches(node)
        else:
            self.f["classes"][qual] = {"line": self.line(node.lineno),
                                      "doc": _summary(ast.get_docstring(node, clean=True))}
        self.stack.append(scope)
        for st in node.body:
            self.visit(st)
        self.stack.pop()
        if kind == "def" and not self.f["functions"][qual]["nested"]:
            fn = self.f["functions"][qual]
            self.fn_nodes[qual] = node
            if any(l["chain"][:len(qual.split("."))] == qual.split(".") for l in self.f["launches"]):
                fn["fingerprint"], fn["shingles"] = _fingerprint(node, self.lines)
                fn["size"] = fn["end"] - fn["line"] + 1
        # decorators' and defaults' own expressions
        for d in node.decorator_list:
            if id(d) not in self.handled:
                self.visit(d)

    def _decorator_launches(self, node) -> None:
        for d in node.decorator_list:
            if not isinstance(d, ast.Call):
                continue
            fn = pysource.dotted_name(d.func)
            if fn in ("functools.partial", "partial") and d.args:
                entry = launcher_entry(self.resolve(pysource.dotted_name(d.args[0])))
                if entry:
                    self.handled.add(id(d))
                    self.add_launch(d.args[0], entry, None, d, "decorator", decorated=node)
                continue
            entry = launcher_entry(self.resolve(fn))
            if entry:
                self.handled.add(id(d))
                if entry == "core_map" and (self._inside_kernel_body()
                                            or "WarpMesh" in (_short(d.args[0]) if d.args else "") or ""):
                    continue
                hint = None
                if entry == "core_map" and d.args:
                    hint = self.bk(_short(d.args[0]) or "")
                    if hint is None and isinstance(d.args[0], ast.Name):
                        hint = self.bk(_short(self.find_assign(d.args[0].id)) or "")
                self.add_launch(d.func, entry, None, d, "decorator", decorated=node, extra_hint=hint)

    def _inside_kernel_body(self) -> bool:
        return any(s.kind == "def" and s.name in self.body_names for s in self.stack)

    visit_FunctionDef = lambda self, node: self._enter_def(node, "def")
    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self._enter_def(node, "class")

    def _record_ref(self, target: str | None) -> None:
        qual = next((s.qual for s in reversed(self.stack) if s.kind == "def" and s.qual in self.f["functions"]
                     and not self.f["functions"][s.qual]["nested"]), None)
        if target and qual:
            refs = self.f["functions"][qual]["refs"]
            if target not in refs and len(refs) < 400:
                refs.append(target)

    def visit_Name(self, node: ast.Name) -> None:
        if isinstance(node.ctx, ast.Load) and (node.id in self.top_defs or node.id in self.imports):
            self._record_ref(self.resolve(node.id))
        elif isinstance(node.ctx, ast.Load) and node.id in self.top_bound and self.resolve(node.id) == node.id:
            self._record_ref(f"{self.module}.{node.id}")  # resolve() is None for a local name that shadows it

    def visit_Attribute(self, node: ast.Attribute) -> None:
        d = pysource.dotted_name(node)
        if d and isinstance(node.ctx, ast.Load):
            root = d.split(".")[0]
            if root in self.imports or root in ("self", "cls"):
                self._record_ref(self.resolve(d))
                return
        self.generic_visit(node)

    def visit_Import(self, node: ast.AST) -> None:
        if len(self.stack) > 1:
            _imports([node], self.module, self.f["is_pkg"], self.imports)

    visit_ImportFrom = visit_Import

    def visit_Assign(self, node: ast.Assign) -> None:
        value = node.value
        scope = self.stack[-1]
        if len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            name = node.targets[0].id
            scope.assigns[name] = value
            src = pysource.dotted_name(value)
            target = self.resolve(src) if src else None
            if src and launcher_entry(target):
                scope.aliases[name] = {"entry": launcher_entry(target), "call": None}
                return
            if isinstance(value, ast.Call) and pysource.dotted_name(value.func) in ("functools.partial", "partial") \
                    and value.args and launcher_entry(self.resolve(pysource.dotted_name(value.args[0]))):
                scope.aliases[name] = {"entry": launcher_entry(self.resolve(pysource.dotted_name(value.args[0]))),
                                       "call": value}
                for a in value.args[1:] + [k.value for k in value.keywords]:
                    self.visit(a)
                return
            if scope.kind == "module":
                if src and src.split(".")[0] in self.imports:
                    self.imports[name] = self.resolve(src)
                self._module_links(name, value)
        self.generic_visit(node)

    def _module_links(self, name: str, value: ast.AST) -> None:
        for sub in ast.walk(value):
            if isinstance(sub, ast.Name) and (sub.id in self.top_defs or sub.id in self.imports):
                tgt = self.resolve(sub.id)
                if tgt:
                    self.f["links"].append([tgt, f"{self.module}.{name}"])

    def visit_Call(self, node: ast.Call) -> None:
        if id(node) in self.handled:
            return
        if isinstance(node.func, ast.Call) and node.args:
            self.outer_body[id(node.func)] = node.args[0]
        fn = pysource.dotted_name(node.func)
        if fn is not None:
            # x.defvjp(fwd, bwd): the rules belong to x
            if fn.endswith((".defvjp", ".defjvp", ".def_fwd", ".def_bwd")):
                owner = self.resolve(fn.rsplit(".", 1)[0])
                for a in list(node.args) + [k.value for k in node.keywords]:
                    tgt = self.resolve(pysource.dotted_name(a)) if pysource.dotted_name(a) else None
                    if tgt and owner:
                        self.f["links"].append([tgt, owner])
            alias = self.find_alias(fn) if "." not in fn else None
            resolved = None if alias else self.resolve(fn)
            entry = alias["entry"] if alias else launcher_entry(resolved)
            body = node.args[0] if node.args else next(
                (k.value for k in node.keywords if k.arg in ("kernel", "body", "f", "kernel_body")), None)
            if entry:
                if entry == "core_map" and (self._inside_kernel_body()
                                            or "WarpMesh" in (_short(body) or "")):
                    pass
                else:
                    hint, interp = None, False
                    if alias and alias["call"] is not None:
                        ad = self.details(alias["call"], alias["call"])
                        hint, interp = ad["hints"], ad["interpret"]
                    if entry == "core_map" and body is not None:
                        mesh = self.find_assign(body.id) if isinstance(body, ast.Name) else body
                        hint = hint or self.bk(_short(mesh) or "")
                        body = self.outer_body.get(id(node))
                    self.add_launch(node.func, entry, body, node, "call", extra_hint=hint, interpret=interp)
            elif resolved and ("." in resolved or fn in self.top_defs) and not resolved.startswith(_SKIP_CALLS):
                hinted = any(k.arg in _HINT_KWARGS for k in node.keywords)
                shape = {}  # grid, block shapes and semantics passed to a wrapper or a foreign pallas_call
                if hinted or any(k.arg == "grid" for k in node.keywords):
                    d = self.details(node, node)
                    shape = {k: d[k] for k in ("grid", "block_shapes", "dimension_semantics") if d[k]}
                self.f["calls"].append({
                    "line": self.line(getattr(node.func, "end_lineno", None) or node.lineno),
                    "callee": fn, "target": resolved, "scope": self.scope_qual(),
                    "forwards": self.forwarded_body(body),
                    "hints": self.bk(self._text(node)) if hinted else None,
                    "interpret": any(k.arg == "interpret" and isinstance(k.value, ast.Constant)
                                     and k.value.value is True for k in node.keywords),
                    **shape,
                })
        self.generic_visit(node)


def _top_statements(tree: ast.Module):
    todo = list(tree.body)
    while todo:
        st = todo.pop(0)
        yield st
        if isinstance(st, (ast.If, ast.Try, ast.With)) or type(st).__name__ == "TryStar":
            for name in ("body", "orelse", "finalbody"):
                todo.extend(getattr(st, name, []) or [])
            for h in getattr(st, "handlers", []) or []:
                todo.extend(h.body)


def _imports(nodes, module: str, is_pkg: bool, out: dict[str, str] | None = None) -> dict[str, str]:
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


def analyze_file(relpath: str, data: bytes) -> dict:
    """Facts about one file. Pure and total: bad input gives facts with an ``error`` reason."""
    relpath = relpath.replace("\\", "/")
    module = module_name(relpath)
    facts: dict[str, Any] = {
        "version": VERSION, "path": relpath, "module": module,
        "is_pkg": relpath.endswith("__init__.py"), "kind": rules.kind_of(relpath),
        "error": None, "light": False, "imports": {}, "functions": {}, "classes": {},
        "launches": [], "calls": [], "links": [], "module_doc": None, "deprecated": False,
        "repaired_lines": [],
    }
    try:
        text = pysource.decode(data, pysource.limit_for(relpath))
    except pysource.Unreadable as e:
        facts["error"] = str(e)
        return facts
    is_py = relpath.endswith(".py")
    if not (_MENTIONS.search(text) and _LAUNCHY.search(text) and (_PALLAS_IMPORT.search(text) or not is_py)):
        if relpath.endswith(".py"):
            facts["light"] = True
            return light_facts(facts, text)
        return facts
    try:
        snippets = pysource.snippets_for(relpath, text)
    except pysource.Unreadable as e:
        facts["error"] = str(e)
        return facts
    if not relpath.endswith(".py"):
        facts["kind"] = "example" if snippets else facts["kind"]
    errors = []
    for snip in snippets:
        if not _MENTIONS.search(snip.text):
            continue
        parsed = pysource.parse(snip)
        if parsed.tree is None:
            errors.append(parsed.error)
            continue
        facts["repaired_lines"].extend(parsed.repaired_lines)
        imports = _imports(_top_statements(parsed.tree), module, facts["is_pkg"])
        facts["imports"].update(imports)
        if snip.origin == "python":
            doc = ast.get_docstring(parsed.tree, clean=True)
            facts["module_doc"] = _summary(doc)
            facts["deprecated"] = bool(doc and _DEPRECATED.search(doc.split("\n\n")[0]))
        visitor = _Visitor(facts, parsed, snip.text.split("\n"))
        try:
            visitor.visit(parsed.tree)
            visitor.finish()
        except (RecursionError, MemoryError) as e:  # absurdly nested generated code
            errors.append(f"too deeply nested to analyze ({type(e).__name__})")
    if errors and not facts["launches"] and not facts["functions"]:
        facts["error"] = errors[0]
    elif errors:
        facts["warnings"] = errors  # read in part: said on the ingest's partial list, not dropped silently
    facts["import_backends"] = rules.import_backends(facts["imports"])
    return facts
