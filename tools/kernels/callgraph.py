"""The call graph of one repository, from its files' facts: qualified names of functions, classes and modules
(re-exports followed), who calls whom, and the walks the catalog makes over it: the nearest public caller of a
launch (the kernel's name), the callers a page lists, and everything that reaches a kernel (for the selection
map)."""

from __future__ import annotations

import re
from collections import defaultdict, deque

_SELF_TEST = re.compile(r"^(?:test|bench|main$)|_tests?$|_bench(?:mark)?$")  # self-checks in library modules


class Index:
    """Qualified names of one repository: functions, modules, re-exports, callers."""

    def __init__(self, facts_by_path: dict[str, dict]):
        self.facts = facts_by_path
        self.modules: dict[str, dict] = {}
        for f in facts_by_path.values():
            self.modules.setdefault(f["module"], f)
        self.suffix: dict[str, str | None] = {}
        for m in self.modules:
            bits = m.split(".")
            for i in range(1, len(bits)):
                s = ".".join(bits[i:])
                self.suffix[s] = None if s in self.suffix and self.suffix[s] != m else m
        self.functions: dict[str, tuple[dict, dict]] = {}
        self.classes: set[str] = set()  # a class is called too: ``SplashAttentionKernel(...)`` in its factory
        for f in facts_by_path.values():
            for qual, fn in f["functions"].items():
                self.functions[f"{f['module']}.{qual}"] = (f, fn)
            self.classes.update(f"{f['module']}.{c}" for c in f.get("classes", {}))
        self.callers: dict[str, set[str]] = defaultdict(set)
        self._exported: dict[str, list[str]] | None = None
        # module-level names bound to an expression (``make_flash_mha = partial(_make_flash, ...)``): called too
        aliases = {dst for f in facts_by_path.values() for _, dst in f["links"]}
        for f in facts_by_path.values():
            for qual, fn in f["functions"].items():
                if fn.get("nested"):
                    continue
                me = f"{f['module']}.{qual}"
                for r in fn["refs"]:
                    t = self.lookup(r) or (r if r in aliases else None)
                    if t and t != me:
                        self.callers[t].add(me)
            for src, dst in f["links"]:
                a, b = self.lookup(src), self.lookup(dst) or dst
                if a and a != b:
                    self.callers[a].add(b)

    def exported(self, qualified: str) -> list[str]:
        """The other names ``qualified`` goes by: ``pkg.gmm`` where ``pkg/__init__.py`` imports ``gmm`` from
        ``pkg.ops`` (a call ``megablox.gmm(...)`` runs ``megablox.ops.gmm``)."""
        if self._exported is None:
            self._exported = defaultdict(list)
            for f in self.modules.values():
                for local, target in (f.get("imports") or {}).items():
                    if (hit := self.lookup(target)) and f"{f['module']}.{local}" != hit:
                        self._exported[hit].append(f"{f['module']}.{local}")
        return self._exported.get(qualified, [])

    def _module(self, name: str) -> str | None:
        if name in self.modules:
            return name
        if name in self.suffix:
            return self.suffix[name]
        # A tree ingested from inside its package (raw/code/tokamax holds _src/...): the imports name
        # tokamax._src.ops.x, the modules are _src.ops.x.
        bits = name.split(".")
        for i in range(1, len(bits) - 1):
            cand = ".".join(bits[i:])
            if cand in self.modules:
                return cand
        return None

    def lookup(self, qualified: str | None, hops: int = 8) -> str | None:
        """The repository function a qualified name ends at, following re-exports."""
        while qualified and hops > 0:
            hops -= 1
            if qualified in self.functions or qualified in self.classes:
                return qualified
            bits = qualified.split(".")
            for i in range(len(bits) - 1, 0, -1):
                mod = self._module(".".join(bits[:i]))
                if mod is None:
                    continue
                rest = bits[i:]
                f = self.modules[mod]
                cand = f"{mod}.{'.'.join(rest)}"
                if cand in self.functions or cand in self.classes:
                    return cand
                if rest[0] in f["imports"]:
                    nxt = ".".join([f["imports"][rest[0]]] + rest[1:])
                    if nxt == qualified:
                        return None
                    qualified = nxt
                    break
                return None
            else:
                return None
        return None


def public_caller(idx: Index, start: str, facts: dict, kind: str) -> tuple[tuple[dict, str] | None, str]:
    """(the nearest public caller as (facts, qualname), or None; the outermost private caller seen)."""
    seen = {start}
    frontier = deque([(start, 0)])
    root = start
    while frontier:
        level = []
        depth = frontier[0][1]
        while frontier and frontier[0][1] == depth:
            level.append(frontier.popleft()[0])
        cands = []
        for q in level:
            for c in sorted(idx.callers.get(q, ())):
                if c in seen:
                    continue
                seen.add(c)
                hit = idx.functions.get(c)
                if hit is None:
                    # a module-level name (custom_vjp object, alias): public if it looks public
                    mod_name, _, name = c.rpartition(".")
                    f2 = idx.modules.get(mod_name)
                    if f2 is not None and not name.startswith("_") and (f2["kind"] == kind or kind != "library"):
                        cands.append((0 if f2 is facts else 1, f2, name))
                    frontier.append((c, depth + 1))
                    continue
                f2, fn = hit
                if kind == "library" and f2["kind"] != "library":
                    continue
                qual = c[len(f2["module"]) + 1:]
                in_public_class = bool(fn.get("class")) and not qual.split(".")[0].startswith("_")
                if (fn.get("public") or in_public_class) and not _SELF_TEST.search(qual.split(".")[-1]):
                    cands.append((0 if f2 is facts else 1, f2, qual))
                else:
                    frontier.append((c, depth + 1))
        if cands:
            cands.sort(key=lambda t: (t[0], t[2]))
            return (cands[0][1], cands[0][2]), root
        if frontier:
            root = min(q for q, _ in frontier)
        if depth >= 6:
            break
    return None, root


def _notebook_variable(idx: Index, name: str) -> bool:
    """A module-level name of a notebook or a markdown file's code (not a function or class defined there)."""
    if name in idx.functions or name in idx.classes:
        return False
    f = idx.modules.get(name.rpartition(".")[0])
    return f is not None and f["path"].endswith((".ipynb", ".md", ".markdown"))


def callers(idx: Index, starts: list[str], limit: int = 12, depth: int = 3) -> list[str]:
    """Who calls the kernel: callers of its function and of its class, and, through a private factory or a
    module-level alias (``make_splash_mha = partial(_make_splash_attention, ...)`` returning a
    ``SplashAttentionKernel``), the callers of those too."""
    out: list[str] = []
    seen, frontier = set(starts), list(starts)
    own = tuple(q + "." for q in starts if q in idx.classes)  # a class's methods using it are not its callers
    for _ in range(depth):
        nxt = []
        for q in frontier:
            for c in sorted(idx.callers.get(q, ())):
                if c in seen or c.startswith(own):
                    continue
                seen.add(c)
                if _notebook_variable(idx, c):
                    continue  # `out = flash(q)` in a notebook cell uses the kernel; it calls nothing
                out.append(c)
                name = c.rsplit(".", 1)[-1]
                if name.startswith("_") or c not in idx.functions or "make" in name or "create" in name \
                        or name.startswith(("get_", "build")):
                    nxt.append(c)  # a factory or an alias: whoever calls it gets the kernel
        frontier = nxt
    return out[:limit]


ENTRY_METHODS = ("__init__", "__post_init__", "__call__", "__enter__", "forward", "apply")  # making or calling one


def reached_by(idx: Index, starts: list[str], depth: int = 4, limit: int = 300) -> tuple[list[str], list[str]]:
    """(everything in the repository that reaches the kernel through calls, up to ``depth`` hops, with the names
    packages re-export them by; the classes of the methods among them that no making or calling of the class runs):
    what a kernel selection map matches against. A class whose ``__call__`` reaches the kernel is reached by whoever
    makes and calls one; one whose ``decode`` alone does is not (MaxText's ``AttentionOp(config)`` reaches
    ``ragged_mqa`` only there): a registry naming the class (``PallasMosaicTpuFlashAttention``, whose ``_fwd``
    builds the kernel) is matched by the second list."""
    seen, frontier, out, owners = set(starts), list(starts), [], []
    for _ in range(depth):
        nxt, todo = [], list(frontier)
        while todo:
            q = todo.pop(0)
            for c in sorted(idx.callers.get(q, ())):
                if c not in seen and len(out) < limit:
                    seen.add(c)
                    out.append(c)
                    owner, _, method = c.rpartition(".")
                    # a method calling another of its own class (``self.permute``) is the same hop: one object
                    (todo if owner in idx.classes and q.rpartition(".")[0] == owner else nxt).append(c)
                    if owner in idx.classes and owner not in seen:
                        if method in ENTRY_METHODS:
                            seen.add(owner)
                            out.append(owner)
                            nxt.append(owner)
                        elif owner not in owners:
                            owners.append(owner)
        frontier = nxt
    reached = [*starts, *out]
    out += [a for q in reached for a in idx.exported(q) if a not in seen]
    return list(dict.fromkeys(out)), [o for o in owners if o not in seen]


