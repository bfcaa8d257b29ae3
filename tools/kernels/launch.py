"""One launch's details: which JAX launcher an expression names (``launcher_entry``), its grid, block shapes,
dimension semantics and backend hints, and when the compiler parameters are only known at run time. A mixin of the
visitor in ``facts`` (it needs ``NameResolution`` for the assignments and parameters in scope)."""

from __future__ import annotations

import ast
import re
from typing import Any

from .. import pysource
from . import rules

MAX_TEXT = 160
HINT_KWARGS = {"compiler_params", "grid_spec", "mesh", "scratch_shapes", "in_specs", "out_specs", "backend"}
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


def short(node: ast.AST | None) -> str | None:
    if node is None:
        return None
    try:
        text = ast.unparse(node)
    except Exception:  # noqa: BLE001 - ast.unparse on repaired trees; a missing extra is fine
        return None
    text = " ".join(text.split())
    return text if len(text) <= MAX_TEXT else text[: MAX_TEXT - 1] + "…"


class LaunchDetails:
    f: dict
    lines: list[str]
    imports: dict[str, str]
    _hint_rx: re.Pattern | None
    _matcher: rules.BackendMatcher | None

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
                texts.append(short(extra) or "")
        if grid is None and isinstance(spec, ast.Call):
            grid = self._kw(spec, "grid")
        # A name no assignment in scope resolves (a parameter, a loop variable) is chosen at run time: say so
        # rather than print the bare name as if it were the grid.
        out["grid"] = f"{grid.id} (set at run time)" if isinstance(grid, ast.Name) else short(grid)
        shapes = []
        for root in (call, spec):
            if not isinstance(root, ast.AST):
                continue
            for sub in ast.walk(root):
                if isinstance(sub, ast.Call) and (pysource.dotted_name(sub.func) or "").endswith("BlockSpec"):
                    shape = sub.args[0] if sub.args else next(
                        (k.value for k in sub.keywords if k.arg == "block_shape"), None)
                    s = short(shape)
                    if s and s not in shapes:
                        shapes.append(s)
        out["block_shapes"] = shapes[:8]
        if params is not None:
            for sub in ast.walk(params):
                if isinstance(sub, ast.keyword) and sub.arg == "dimension_semantics":
                    out["dimension_semantics"] = short(sub.value)
                    break
        interp = self._kw(call, "interpret")
        out["interpret"] = isinstance(interp, ast.Constant) and interp.value is True
        out["backend_note"] = self._run_time_params(call, params)
        if out["backend_note"]:  # the launch names no backend that holds for every run: the rest of the code may
            out["hints"] = None
            return out
        hint = self.bk(short(params) or "") if params is not None else None
        out["hints"] = hint or self.bk("\n".join(texts))
        return out

    def _run_time_params(self, call: ast.Call, params: ast.AST | None) -> str | None:
        """Why the launch's ``compiler_params`` fix no backend: passed in by the caller, or chosen between
        backends by a condition. None when they are written out (or absent)."""
        given = next((k.value for k in call.keywords if k.arg == "compiler_params"), None)
        if isinstance(given, ast.Name) and params is given and any(given.id in x.params for x in self.def_chain()):
            return f"compiler_params come from the caller (parameter {given.id}, set at run time)"
        if isinstance(params, ast.IfExp):
            named = {self.bk(short(x) or "") for x in (params.body, params.orelse)}
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
