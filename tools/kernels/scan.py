"""Join per-file facts into kernel launch sites: wrappers, callers, names, backends, categories.

``facts.analyze_file`` is the pure per-file pass; ``resolve`` is the cross-file pass over the facts of one
repository; ``scan_paths`` reads trees from disk (``treewalk``, the ingest's walker). Vendored copies are marked by
``vendored``.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from .. import pysource, safeio, treewalk
from . import rules
from . import callgraph
from .callgraph import Index
from .facts import analyze_file
from .site import KernelSite
from .vendored import mark_vendored

SCANNED_SUFFIXES = (".py", ".ipynb", ".md", ".markdown")
MIN_VENDOR_LINES = 10  # functions shorter than this are too generic to call vendored




def _name_site(idx: Index, facts: dict, chain: list[str], kind: str) -> tuple[str, str | None, str | None, str]:
    """(kernel, impl, qualified function of the kernel, qualified name of the kernel) for a launch in ``chain``."""
    mod = facts["module"]
    if not chain:
        return (Path(facts["path"]).stem, None, None, mod)
    funcs = facts["functions"]
    classes = facts.get("classes", {})
    impl = ".".join(chain) if (len(chain) > 1 or chain[0].startswith("_")) else None
    top = chain[0]
    if top in classes and not top.startswith("_"):
        if kind == "test" and len(chain) > 1:
            return (f"{top}.{chain[1]}", ".".join(chain) if len(chain) > 2 else None,
                    f"{mod}.{top}.{chain[1]}", f"{mod}.{top}.{chain[1]}")
        # methods of a public class: the class is what users see
        method = f"{top}.{chain[1]}" if len(chain) > 1 else top
        return (top, ".".join(chain) if len(chain) > 1 else None, f"{mod}.{method}", f"{mod}.{top}")
    if not top.startswith("_"):
        return (top, impl, f"{mod}.{top}", f"{mod}.{top}")
    start_qual = top if top in funcs else (f"{top}.{chain[1]}" if len(chain) > 1 else top)
    start = f"{facts['module']}.{start_qual}"
    found, root = callgraph.public_caller(idx, start, facts, kind)
    if found:
        f2, q = found
        return (q.split(".")[0], impl or top, f"{f2['module']}.{q}", f"{f2['module']}.{q.split('.')[0]}")
    # no public caller: the outermost private function reached (often a custom_vjp object)
    name = root.rsplit(".", 1)[-1]
    return (name, impl or top, start, root)


def _backend(entry: str, hints: list[str | None], interpret: bool, later: list[str | None]) -> str:
    for h in hints:
        if h:
            return h
    if interpret:
        return "interpret"
    for h in later:
        if h:
            return h
    if entry == "plgpu.kernel":
        return "gpu-mosaic"
    return "unknown"


def _site(idx: Index, facts: dict, raw: dict, entry: str, wrapper_backend: str | None = None) -> KernelSite:
    chain = raw.get("chain") or ([] if not raw.get("scope") else raw["scope"].split("."))
    kind = facts["kind"]
    kernel, impl, kqual, qualname = _name_site(idx, facts, chain, kind)
    top_fn = None
    for i in range(len(chain), 0, -1):
        top_fn = facts["functions"].get(".".join(chain[:i]))
        if top_fn and not top_fn.get("nested"):
            break
        top_fn = None
    body_fn = None
    if raw.get("body"):
        body_fn = facts["functions"].get(raw["body"].split(".")[-1])
    kfn = idx.functions.get(kqual or "", (None, None))[1]
    imports = facts.get("import_backends") or []
    backend = _backend(entry, [raw.get("hints")], raw.get("interpret", False), [
        top_fn.get("hints") if top_fn else None,
        body_fn.get("hints") if body_fn else None,
        wrapper_backend,
        imports[0] if len(imports) == 1 else None,
        rules.path_backend(facts["path"]),
    ])
    stem = facts["path"].rsplit(".", 1)[0]
    names = " ".join(x for x in (kernel, impl, raw.get("body")) if x)
    docs = " ".join(x for x in ((kfn or {}).get("doc"), (top_fn or {}).get("doc"), facts.get("module_doc")) if x)
    category = rules.category_of(names, stem, docs)
    deprecated = bool(facts.get("deprecated") or (kfn or {}).get("deprecated") or (top_fn or {}).get("deprecated"))
    summary = (kfn or {}).get("doc") or (top_fn or {}).get("doc") or facts.get("module_doc")
    callers = callgraph.callers(idx, [q for q in (kqual, qualname) if q])
    launcher = f"{facts['module']}.{'.'.join(chain)}" if chain else None
    reached_by, owners = callgraph.reached_by(idx, [q for q in (kqual, qualname, launcher) if q])
    body_function, body_at = _body_at(idx, facts, raw.get("body_def"))
    block_sources = _block_sources(facts, raw.get("feeds") or {})
    fp = top_fn.get("fingerprint") if top_fn and (top_fn.get("size") or 0) >= MIN_VENDOR_LINES else None
    return KernelSite(
        path=facts["path"], line=raw["line"], kernel=kernel, impl=impl, backend=backend,
        category=category, kind=kind, entry=entry, grid=raw.get("grid"),
        block_shapes=list(raw.get("block_shapes") or []), dimension_semantics=raw.get("dimension_semantics"),
        summary=summary, stability=rules.stability_of(facts["path"], deprecated, summary),
        signature=(kfn or top_fn or {}).get("signature"), callers=callers, body=raw.get("body"), fingerprint=fp,
        shingles=list(top_fn.get("shingles") or []) if fp else [],
        qualname=qualname, backend_note=raw.get("backend_note"),
        body_function=body_function, body_at=body_at, branches=raw.get("branches") or {},
        provenance=facts.get("provenance"),
        block_sources=block_sources, reached_by=reached_by, owners=owners,
        collectives=[[name, f"{facts['path']}:{line}"] for name, line in raw.get("collectives") or []],
    )


_BLOCK_CLASS = re.compile(r"Block_?Sizes?|Tiling|Block_?Config|Tile_?Config|Block_?Spec_?Config", re.I)


def _block_sources(facts: dict, feeds: dict[str, dict]) -> list[list[str]]:
    """[name, where its value comes from, file:line] for each name in the block shapes: its assignment in the
    launching function, or, for a parameter, what the file's callers of that function pass (``block_q`` of
    ``_flash_attention_impl`` is ``block_sizes.block_q`` in ``_flash_attention``); then the block-size classes
    the file defines (``BlockSizes``)."""
    out = []
    for name, feed in feeds.items():
        if "value" in feed:
            out.append([name, feed["value"], ""])
            continue
        owner, param = feed["param"], feed.get("via", name)
        params = (facts["functions"].get(owner) or {}).get("params") or []
        given = []
        for c in facts["calls"]:
            if c.get("target") != f"{facts['module']}.{owner}" or "args" not in c:
                continue
            text = c["kwargs"].get(param)
            if text is None and param in params and params.index(param) < len(c["args"]):
                text = c["args"][params.index(param)]
            if text and text != param:
                given.append((text, f"{facts['path']}:{c['line']}"))
        if given:
            out += [[name, text, at] for text, at in dict.fromkeys(given)][:3]
        else:
            said = f"parameter of {owner}" if param == name else f"parameter {param} of {owner}"
            default = ((facts["functions"].get(owner) or {}).get("defaults") or {}).get(param)
            out.append([name, said + (f", default {default}" if default else ""), ""])
    for cls, info in facts.get("classes", {}).items():
        if _BLOCK_CLASS.search(cls.rsplit(".", 1)[-1]):
            out.append([cls, "block-size class", f"{facts['path']}:{info['line']}"])
    return out[:16]


def _body_at(idx: Index, facts: dict, found: dict | None) -> tuple[str | None, str | None]:
    """The kernel body's def and where it is: in the launching file, or followed into the repository file its
    import names."""
    if not found:
        return None, None
    if found.get("line"):
        return found["name"], f"{facts['path']}:{found['line']}"
    target = idx.lookup(found.get("target"))
    if target in idx.functions:
        f, fn = idx.functions[target]
        return target.rsplit(".", 1)[-1], f"{f['path']}:{fn['line']}"
    return found["name"], None


def resolve(facts_by_path: dict[str, dict]) -> list[KernelSite]:
    """Kernel launch sites of one repository, from the facts of all its files."""
    idx = Index(facts_by_path)
    wrappers: dict[str, str | None] = {}  # qualified wrapper -> backend of its own launch
    for f in facts_by_path.values():
        for l in f["launches"]:
            if l.get("wrapper"):
                wrappers[f"{f['module']}.{l['wrapper']}"] = l.get("hints") or (
                    f["functions"].get(l["wrapper"], {}).get("hints"))
    resolved_calls: list[tuple[dict, dict, str]] = []
    for f in facts_by_path.values():
        for c in f["calls"]:
            t = idx.lookup(c["target"])
            if t is None and c["target"] and (c["target"].endswith(".pallas_call")) \
                    and not c["target"].startswith("jax") and c["target"] != c["callee"]:
                t = "external:" + c["target"]
            if t:
                resolved_calls.append((f, c, t))
    changed = True
    while changed:  # wrappers of wrappers
        changed = False
        for f, c, t in resolved_calls:
            if c.get("forwards") and (t in wrappers or t.startswith("external:")):
                w = f"{f['module']}.{c['forwards']}"
                if w not in wrappers:
                    wrappers[w] = c.get("hints") or wrappers.get(t)
                    changed = True
    sites = []
    for path in sorted(facts_by_path):
        f = facts_by_path[path]
        for l in f["launches"]:
            if l.get("wrapper"):
                continue
            sites.append(_site(idx, f, l, l["entry"]))
        for c in f["calls"]:
            if c.get("forwards"):
                continue
            t = idx.lookup(c["target"])
            if t in wrappers:
                entry = t.rsplit(".", 1)[-1]
                sites.append(_site(idx, f, {**c, "chain": c["scope"].split(".") if c["scope"] else []},
                                   entry, wrappers[t]))
            elif t is None and c["target"] and c["target"].endswith(".pallas_call") \
                    and not c["target"].startswith("jax") and c["target"] != c["callee"]:
                sites.append(_site(idx, f, {**c, "chain": c["scope"].split(".") if c["scope"] else []},
                                   c["callee"]))
    mark_vendored(sites)
    sites.sort(key=lambda s: (s.path, s.line))
    return sites


def iter_files(root: Path):
    """(relative posix path, absolute path) of scannable files under root (``treewalk``: no symlinks followed)."""
    if root.is_file():
        yield root.name, root
        return
    entries, _, _ = treewalk.walk(root)
    for e in entries:
        if e.rel.endswith(SCANNED_SUFFIXES) and not e.rel.rsplit("/", 1)[-1].startswith("."):
            yield e.rel, root / e.rel


def root_package(root: Path) -> str:
    """The root's import name when it is a package (it holds ``__init__.py``), climbing while its parents are
    packages too: the top of its module names (``.../jax/experimental/pallas`` -> ``jax.experimental.pallas``)."""
    names = []
    while root.is_dir() and (root / "__init__.py").is_file() and root.name.isidentifier():
        names.insert(0, root.name)
        root = root.parent
    return ".".join(names)


def _analyze_path(args: tuple[str, str, str]) -> tuple[str, dict]:
    rel, full, package = args
    try:
        data = safeio.read_bytes(full, pysource.limit_for(rel))
    except OSError as e:
        return rel, {**analyze_file(rel, b"", package), "error": f"unreadable: {e}"}
    try:
        return rel, analyze_file(rel, data, package)
    except Exception as e:  # noqa: BLE001 - one file never stops a scan; the reason is kept
        return rel, {**analyze_file(rel, b"", package), "error": f"reader error: {type(e).__name__}: {e}"[:300]}


PARALLEL_MIN_FILES = 300  # below this, worker start-up costs more than it saves


def scan_facts(root: Path, jobs: int = 1) -> dict[str, dict]:
    """Facts of every scannable file under root. ``jobs``: worker processes (1: in this process,
    0: one per core when the tree is big). On a busy 2-core machine one process was as fast."""
    package = root_package(root)
    work = [(rel, str(full), package) for rel, full in iter_files(root)]
    jobs = jobs or (min(os.cpu_count() or 1, 8) if len(work) >= PARALLEL_MIN_FILES else 1)
    if jobs <= 1:
        return dict(map(_analyze_path, work))
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(max_workers=jobs, initializer=safeio.die_with_parent,
                             initargs=safeio.pool_parent()) as pool:
        return dict(pool.map(_analyze_path, work, chunksize=32))


def scan_paths(paths: list[Path], jobs: int = 1, problems: list[tuple[str, str]] | None = None) -> list[KernelSite]:
    """Every kernel launch site under the given files or folders (paths relative to each root). ``problems`` gets
    (path, reason) for each file not read ("not read: ...") or read only in part, around lines that stopped the
    parser ("read in part: ..."), so a caller can say which kernels it may have missed."""
    sites: list[KernelSite] = []
    for p in paths:
        facts = scan_facts(Path(p), jobs)
        if problems is not None:
            root = Path(p) if Path(p).is_dir() else Path(p).parent
            for rel, f in sorted(facts.items()):
                where = (root / rel).as_posix()
                if f.get("error"):
                    problems.append((where, f"not read: {f['error']}"))
                elif f.get("warnings") or f.get("repaired_lines"):
                    lines = f.get("repaired_lines") or []
                    why = "; ".join(f.get("warnings") or ()) or \
                        f"line{'s' * (len(lines) != 1)} {', '.join(map(str, lines[:10]))} set aside (a syntax error)"
                    problems.append((where, f"read in part: {why}"))
        sites.extend(resolve(facts))
    return sites
