"""One launch's details: which JAX launcher an expression names (``launcher_entry``), its grid, block shapes,
dimension semantics and backend hints, and when the compiler parameters are only known at run time. A mixin of the
visitor in ``facts`` (it needs ``NameResolution`` for the assignments and parameters in scope)."""

from __future__ import annotations

import ast
import re
from typing import Any

from .. import pysource
from . import rules
from .names import short

_IDENT = re.compile(r"(?<![\w.])[A-Za-z_]\w*\b(?!\s*[(=])")  # a bare name, not an attribute, call or keyword
_COLLECTIVES = {"ppermute", "all_gather", "psum", "psum_scatter", "all_to_all", "pmax", "pmin", "pmean",
                "ragged_all_to_all", "make_async_remote_copy", "async_remote_copy", "semaphore_signal"}
_NOT_A_FEED = {"None", "True", "False", "if", "else", "and", "or", "not", "is", "in", "for", "lambda", "len", "min",
               "max", "int", "range", "tuple", "list", "memory_space"}
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


class LaunchDetails:
    f: dict
    lines: list[str]
    imports: dict[str, str]
    _hint_rx: re.Pattern | None
    _matcher: rules.BackendMatcher | None

    def collectives(self) -> None:
        """The collectives in each launch's function and in its kernel body (a ``ppermute`` ring, a remote DMA):
        [name, line] on the launch."""
        tops = [(n.lineno, getattr(n, "end_lineno", n.lineno), n) for n in self.fn_nodes.values()]
        memo: dict[int, list[list]] = {}
        for l in self.f["launches"]:
            found: list[list] = []
            lines = [l["line"]] + ([l["body_def"]["line"]] if (l.get("body_def") or {}).get("line") else [])
            for line in lines:
                for a, b, node in tops:
                    if self.line(a) <= line <= self.line(b):
                        if id(node) not in memo:
                            memo[id(node)] = self._collective_calls(node)
                        found += [c for c in memo[id(node)] if c not in found]
            if found:
                l["collectives"] = found[:12]

    def _collective_calls(self, node: ast.AST) -> list[list]:
        out = []
        for sub in ast.walk(node):
            if isinstance(sub, ast.Call):
                name = self.resolve(pysource.dotted_name(sub.func)) or ""
                last = name.rsplit(".", 1)[-1]
                if last in _COLLECTIVES and (name.startswith(("jax", "lax.")) or "pallas" in name):
                    out.append([last, self.line(sub.lineno)])
        return out

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
        out: dict[str, Any] = {"grid": None, "block_shapes": [], "dimension_semantics": None, "branches": {}}
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
        branches = {}
        given = next((k.value for k in call.keywords if k.arg == "grid"), None)
        if given is None and isinstance(spec, ast.Call):  # grid_spec=PrefetchScalarGridSpec(grid=grid, ...)
            given = next((k.value for k in spec.keywords if k.arg == "grid"), None)
        if isinstance(given, ast.Name) and len(alts := self.alternatives(given.id)) > 1:
            branches["grid"] = alts
            out["grid"] = alts[0][0]
        shapes = self.block_shapes(call, spec)
        out["block_shapes"] = list(dict.fromkeys(shape for shape, _ in shapes))[:24]
        if any(when for _, when in shapes):
            branches["block_shapes"] = [[shape, when or ""] for shape, when in shapes][:32]
        if params is not None:
            for sub in ast.walk(params):
                if isinstance(sub, ast.keyword) and sub.arg == "dimension_semantics":
                    out["dimension_semantics"] = short(sub.value)
                    if isinstance(sub.value, ast.Name):
                        alts = self.alternatives(sub.value.id)
                        if alts:
                            out["dimension_semantics"] = alts[0][0]
                        if len(alts) > 1:
                            branches["dimension_semantics"] = alts
                    break
        out["branches"] = branches
        out["feeds"] = self.feeds(out["block_shapes"])
        interp = self._kw(call, "interpret")
        out["interpret"] = isinstance(interp, ast.Constant) and interp.value is True
        out["backend_note"] = self._run_time_params(call, params)
        if out["backend_note"]:  # the launch names no backend that holds for every run: the rest of the code may
            out["hints"] = None
            return out
        hint = self.bk(short(params) or "") if params is not None else None
        out["hints"] = hint or self.bk("\n".join(texts))
        return out

    def alternatives(self, name: str) -> list[list[str]]:
        """[[value, condition], ...] of every assignment of ``name`` in scope (condition "" when unconditional);
        an unconditional value overridden under a condition reads as the default ("otherwise")."""
        seen = self.find_branches(name)
        last = max((i for i, (when, _) in enumerate(seen) if not when), default=0)
        out = []
        for when, value in seen[last:]:  # an unconditional assignment replaces what came before it
            text = short(value)
            if text and [text, when or ""] not in out:
                out.append([text, when or ""])
        if len(out) > 1:
            out = [[v, w or "otherwise"] for v, w in out]
        return out

    def feeds(self, texts: list[str]) -> dict[str, dict]:
        """Where each name in the block shapes gets its value: {"value": text} when assigned in scope
        (``tm, tk, tn = tiling`` gives ``tiling``), {"param": function} when the launching function takes it (the
        scan follows that function's callers in the file)."""
        out: dict[str, dict] = {}
        for name in dict.fromkeys(_IDENT.findall(" ".join(texts))):
            if name in _NOT_A_FEED or name in self.imports or len(out) >= 12:
                continue
            bound = self.find_branches(name)
            if bound:
                text = short(bound[-1][1])
                value = bound[-1][1]
                if isinstance(value, ast.Name) and value.id != name and \
                        (owner := self._param_owner(value.id, reassigned=True)):  # tm, tk, tn = tiling
                    out[name] = {"param": owner, "via": value.id}
                elif text and text != name and ".shape" not in text:  # an operand's own size is no knob
                    out[name] = {"value": text}
                continue
            owner = self._param_owner(name)
            if owner:
                out[name] = {"param": owner}
        return out

    def block_shapes(self, call: ast.Call, spec: ast.AST | None) -> list[tuple[str, str | None]]:
        """(block shape, condition) of every ``BlockSpec`` the launch is given: written inline, in ``in_specs`` /
        ``out_specs`` lists built above the call (each branch of an if/else that builds them, labelled), named
        specs, ``BlockSpec`` subclasses and spec-building helpers of the module. A spec without a shape says its
        memory space (the whole array, unblocked)."""
        roots = [k.value for k in call.keywords if k.arg in ("in_specs", "out_specs")]
        grid_spec = next((k.value for k in call.keywords if k.arg == "grid_spec"), None)
        for gs in (grid_spec, spec):
            if isinstance(gs, ast.Call):
                roots += [k.value for k in gs.keywords if k.arg in ("in_specs", "out_specs")]
        out: list[tuple[str, str | None]] = []
        for root in roots:
            self._specs(root, None, out, set(), 0)
        if not out:  # specs written elsewhere in the call (an unusual keyword, a positional GridSpec)
            for sub in ast.walk(call):
                if isinstance(sub, ast.Call) and self._is_block_spec(sub):
                    self._spec_shape(sub, None, out)
        return out

    def _is_block_spec(self, node: ast.Call) -> bool:
        name = pysource.dotted_name(node.func) or ""
        return name.endswith("BlockSpec") or name.rsplit(".", 1)[-1] in getattr(self, "spec_classes", ())

    def _spec_shape(self, node: ast.Call, when: str | None, out: list) -> None:
        shape = node.args[0] if node.args else next((k.value for k in node.keywords if k.arg == "block_shape"), None)
        text = short(shape)
        if text is None:
            space = next((k.value for k in node.keywords if k.arg == "memory_space"), None)
            text = f"memory_space={short(space)}" if space is not None else None
        if text and (text, when) not in out:
            out.append((text, when))

    def _specs(self, node: ast.AST | None, when: str | None, out: list, seen: set, depth: int) -> None:
        if node is None or depth > 6 or len(out) >= 48:
            return
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            for e in node.elts:
                self._specs(e, when, out, seen, depth + 1)
        elif isinstance(node, ast.Starred):
            self._specs(node.value, when, out, seen, depth + 1)
        elif isinstance(node, ast.IfExp):
            cond = short(node.test)
            self._specs(node.body, cond, out, seen, depth + 1)
            self._specs(node.orelse, f"not ({cond})", out, seen, depth + 1)
        elif isinstance(node, ast.BinOp):  # in_specs = common + [extra]
            self._specs(node.left, when, out, seen, depth + 1)
            self._specs(node.right, when, out, seen, depth + 1)
        elif isinstance(node, ast.Name):
            for cond, value in self.find_branches(node.id) + self.find_extended(node.id):
                if (node.id, id(value)) in seen:  # out_specs = [*out_specs, ...]: each value read once
                    continue
                seen.add((node.id, id(value)))
                self._specs(value, cond or when, out, seen, depth + 1)  # the condition nearest the shape
        elif isinstance(node, ast.Call):
            if self._is_block_spec(node):
                self._spec_shape(node, when, out)
                return
            name = pysource.dotted_name(node.func) or ""
            helper = self.find_def(name) if "." not in name else None
            if helper is not None:  # a spec-building helper of this module
                for sub in ast.walk(helper):
                    if isinstance(sub, ast.Call) and self._is_block_spec(sub):
                        self._spec_shape(sub, when, out)
                return
            for arg in list(node.args) + [k.value for k in node.keywords]:  # tuple(specs), list(...)
                if isinstance(arg, (ast.Name, ast.List, ast.Tuple, ast.Starred)):
                    self._specs(arg, when, out, seen, depth + 1)
        elif isinstance(node, ast.ListComp):
            self._specs(node.elt, when, out, seen, depth + 1)

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
        body_def = self.body_def(decorated if decorated is not None else body)
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
            "wrapper": wrapper, "body_def": body_def, **d,
        })

    def body_def(self, node: ast.AST | None, depth: int = 0) -> dict | None:
        """The function the kernel body is: {"name", "line"} when it is defined in this file (a local def, a
        module function, the def a decorator launches), {"name", "target"} when imported (the scan finds its
        file). Followed through ``partial(f, ...)``, ``kernel = f`` and ``kernel = partial(f, ...)``; None when
        the body is a caller's parameter or an expression."""
        if node is None or depth > 3:
            return None
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return {"name": node.name, "line": self.line(node.lineno)}
        if isinstance(node, ast.Call) and pysource.dotted_name(node.func) in ("functools.partial", "partial") \
                and node.args:
            return self.body_def(node.args[0], depth + 1)
        if isinstance(node, ast.Name):
            local = self.find_def(node.id)
            if local is not None:
                return {"name": node.id, "line": self.line(local.lineno)}
            bound = [(c, v) for c, v in self.find_branches(node.id)
                     if not (isinstance(v, ast.Name) and v.id == node.id)]
            if len(bound) > 1 and all(c for c, _ in bound):  # chosen by a condition: the first, and the others
                found = [(c, self.body_def(v, depth + 1)) for c, v in bound]
                first = next((f for _, f in found if f), None)
                if first is not None:
                    others = [{**f, "when": c} for c, f in found if f and f is not first]
                    return {**first, "when": bound[0][0], **({"others": others} if others else {})}
            if bound:  # the last binding in scope
                return self.body_def(bound[-1][1], depth + 1)
            if node.id in self.imports:
                return {"name": node.id, "target": self.resolve(node.id)}
            return None
        if isinstance(node, ast.Attribute):
            dotted = pysource.dotted_name(node)
            target = self.resolve(dotted) if dotted else None
            return {"name": dotted, "target": target} if target else None
        return None
