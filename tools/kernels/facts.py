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
from .launch import HINT_KWARGS, LaunchDetails, launcher_entry
from .light import light_facts
from .names import NameResolution, Scope, defaults_of, imports_of, module_name, params_of, short, top_statements
from .vendored import provenance

VERSION = 5  # bump when the shape of the facts changes (cache key)

_MENTIONS = re.compile(r"pallas|core_map|plgpu|pltpu")
_PALLAS_IMPORT = re.compile(r"^[ \t]*(?:from|import)[ \t]+[^\n]*(?:pallas|pltpu|plgpu|core_map|mosaic)", re.MULTILINE)
_LAUNCHY = re.compile(r"pallas_call|core_map|kernel\s*\(|\.kernel\b|_call\s*\(")
_MAX_SIGNATURE = 2000  # signatures are shown whole; past this, parameter names only


def _summary(doc: str | None) -> str | None:
    if not doc:
        return None
    for para in doc.strip().split("\n\n"):
        line = " ".join(para.split())
        if line:
            return line[:300]
    return None


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


_SKIP_CALLS = ("jax.numpy.", "jax.lax.", "numpy.", "math.", "functools.", "typing.", "dataclasses.", "itertools.",
               "collections.", "re.", "os.", "logging.", "abc.", "enum.", "jax.tree_util.", "jax.tree.",
               "jax.random.", "jax.nn.", "jax.experimental.pallas.", "jax.ShapeDtypeStruct", "jax.jit",
               "jax.named_scope", "jax.custom_vjp", "jax.vmap", "builtins.", "absl.", "chex.", "einops.")
_DEPRECATED = re.compile(r"\bdeprecat", re.IGNORECASE)


class _Visitor(NameResolution, LaunchDetails, ast.NodeVisitor):
    def __init__(self, facts: dict, parsed: pysource.Parsed, lines: list[str]):
        self.f = facts
        self.p = parsed
        self.lines = lines
        self.module = facts["module"]
        # the scanned tree's own package (a copy of jax/): its calls are its own code, never a library's
        self.own = (facts["package"] + ".") if facts.get("package") else "\0"
        self.imports: dict[str, str] = facts["imports"]
        self.top_defs: set[str] = set()
        self.top_bound: set[str] = set()  # module-level names bound to a call's result
        self.stack: list[Scope] = [Scope("", parsed.tree, "module", None)]
        self.handled: set[int] = set()
        self.body_names: set[str] = set()
        self.outer_body: dict[int, ast.AST] = {}
        self._hint_rx: re.Pattern | None = None
        self._matcher: rules.BackendMatcher | None = None
        self.fn_nodes: dict[str, ast.AST] = {}
        self.spec_classes: set[str] = set()  # classes of this module that extend a BlockSpec

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

    # ------------------------------------------------------------ visiting
    def visit_Module(self, node: ast.Module) -> None:
        for st in node.body:
            if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                self.top_defs.add(st.name)
            if isinstance(st, ast.ClassDef) and any((pysource.dotted_name(b) or "").endswith("BlockSpec")
                                                    for b in st.bases):
                self.spec_classes.add(st.name)
            elif isinstance(st, ast.Assign) and len(st.targets) == 1 and isinstance(st.targets[0], ast.Name) \
                    and isinstance(st.value, ast.Call):  # make_mha = partial(_make, ...): a factory by another name
                self.top_bound.add(st.targets[0].id)
        self.generic_visit(node)

    def _enter_def(self, node, kind: str) -> None:
        qual = ".".join([s.name for s in self.stack[1:]] + [node.name])
        scope = Scope(node.name, node, kind, qual)
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
                "refs": [], "params": params_of(node), "defaults": defaults_of(node),
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
                                            or "WarpMesh" in (short(d.args[0]) if d.args else "") or ""):
                    continue
                hint = None
                if entry == "core_map" and d.args:
                    hint = self.bk(short(d.args[0]) or "")
                    if hint is None and isinstance(d.args[0], ast.Name):
                        hint = self.bk(short(self.find_assign(d.args[0].id)) or "")
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
            imports_of([node], self.module, self.f["is_pkg"], self.imports)

    visit_ImportFrom = visit_Import

    def visit_Assign(self, node: ast.Assign) -> None:
        value = node.value
        scope = self.stack[-1]
        for t in node.targets:  # tm, tk, tn = tiling: each name is bound to (a part of) the value
            names = [t] if isinstance(t, ast.Name) else t.elts if isinstance(t, (ast.Tuple, ast.List)) else []
            # bq, bkv = sizes.block_q, sizes.block_kv: each name its own part (both were shown as the whole tuple)
            parts = value.elts if isinstance(value, (ast.Tuple, ast.List)) and len(names) > 1 \
                and len(value.elts) == len(names) else [value] * len(names)
            for n, part in zip(names, parts):
                if isinstance(n, ast.Name):
                    seen = scope.branches.setdefault(n.id, [])
                    if len(seen) < self._MAX_BRANCHES:
                        seen.append((scope.conds[-1] if scope.conds else None, part))
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
        if isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name) and node.args \
                and node.func.attr in ("append", "extend", "insert"):
            self._extend(node.func.value.id, node.args[-1])
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
                                            or "WarpMesh" in (short(body) or "")):
                    pass
                else:
                    hint, interp = None, False
                    if alias and alias["call"] is not None:
                        ad = self.details(alias["call"], alias["call"])
                        hint, interp = ad["hints"], ad["interpret"]
                    if entry == "core_map" and body is not None:
                        mesh = self.find_assign(body.id) if isinstance(body, ast.Name) else body
                        hint = hint or self.bk(short(mesh) or "")
                        body = self.outer_body.get(id(node))
                    self.add_launch(node.func, entry, body, node, "call", extra_hint=hint, interpret=interp)
            elif resolved and ("." in resolved or fn in self.top_defs) and (
                    not resolved.startswith(_SKIP_CALLS) or resolved.startswith(self.own)):
                hinted = any(k.arg in HINT_KWARGS for k in node.keywords)
                shape = {}  # grid, block shapes and semantics passed to a wrapper or a foreign pallas_call
                if hinted or any(k.arg == "grid" for k in node.keywords):
                    d = self.details(node, node)
                    shape = {k: d[k] for k in ("grid", "block_shapes", "dimension_semantics", "branches", "feeds")
                             if d[k]}
                    if body is not None and (found := self.body_def(body)):  # a wrapper's launch: its body
                        shape["body_def"] = found
                bound = {}
                if resolved == f"{self.module}.{fn}":  # a call to this module's own function: what it is given
                    bound = {"args": [short(a) or "" for a in node.args[:12]],
                             "kwargs": {k.arg: short(k.value) or "" for k in node.keywords[:16] if k.arg}}
                self.f["calls"].append({
                    **bound,
                    "line": self.line(getattr(node.func, "end_lineno", None) or node.lineno),
                    "callee": fn, "target": resolved, "scope": self.scope_qual(),
                    "forwards": self.forwarded_body(body),
                    "hints": self.bk(self._text(node)) if hinted else None,
                    "interpret": any(k.arg == "interpret" and isinstance(k.value, ast.Constant)
                                     and k.value.value is True for k in node.keywords),
                    **shape,
                })
        self.generic_visit(node)


def analyze_file(relpath: str, data: bytes, package: str = "") -> dict:
    """Facts about one file. Pure and total: bad input gives facts with an ``error`` reason. ``package``: the
    scanned root's own name when the root is a package (a copy of ``jax/``): the top of every module name, as
    ingest's import names have it."""
    relpath = relpath.replace("\\", "/")
    module = ".".join(x for x in (package, module_name(relpath)) if x)
    facts: dict[str, Any] = {
        "version": VERSION, "path": relpath, "module": module, **({"package": package} if package else {}),
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
    facts["provenance"] = provenance(text)
    errors = []
    for snip in snippets:
        if not _MENTIONS.search(snip.text):
            continue
        parsed = pysource.parse(snip)
        if parsed.tree is None:
            errors.append(parsed.error)
            continue
        facts["repaired_lines"].extend(parsed.repaired_lines)
        imports = imports_of(top_statements(parsed.tree), module, facts["is_pkg"])
        facts["imports"].update(imports)
        if snip.origin == "python":
            doc = ast.get_docstring(parsed.tree, clean=True)
            facts["module_doc"] = _summary(doc)
            facts["deprecated"] = bool(doc and _DEPRECATED.search(doc.split("\n\n")[0]))
        visitor = _Visitor(facts, parsed, snip.text.split("\n"))
        try:
            visitor.visit(parsed.tree)
            visitor.finish()
            visitor.collectives()
        except (RecursionError, MemoryError) as e:  # absurdly nested generated code
            errors.append(f"too deeply nested to analyze ({type(e).__name__})")
    if errors and not facts["launches"] and not facts["functions"]:
        facts["error"] = errors[0]
    elif errors:
        facts["warnings"] = errors  # read in part: said on the ingest's partial list, not dropped silently
    facts["import_backends"] = rules.import_backends(facts["imports"])
    return facts
