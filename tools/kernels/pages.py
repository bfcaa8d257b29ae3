"""Kernel catalog pages: one page per kernel, and the directory ``kernels/index.md``.

Everything generated sits inside ``tools.pages.region`` blocks; text from scanned sources goes
through ``tools.mdtext`` so a ``<script>`` in a docstring shows as text and pipes stay in cells.
"""

from __future__ import annotations

import posixpath
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable

from .. import mdtext
from ..pages import KERNEL_CATEGORIES, Page, region

DIRECTORY = "kernels/index.md"
_KIND_ORDER = {"library": 0, "example": 1, "benchmark": 2, "test": 3}


def _get(site, key):
    return site.get(key) if isinstance(site, dict) else getattr(site, key, None)


def _group(sites: Iterable) -> dict[tuple[str, str], list]:
    """Sites of one kernel: same public name and same defining function (or, failing that, file)."""
    groups: dict[tuple[str, str], list] = defaultdict(list)
    for s in sites:
        groups[(_get(s, "kernel"), _get(s, "qualname") or _get(s, "path"))].append(s)
    for g in groups.values():
        g.sort(key=lambda s: (_KIND_ORDER.get(_get(s, "kind"), 9), _get(s, "path"), _get(s, "line")))
    return dict(sorted(groups.items()))


def _slugs(keys: list[tuple[str, str]]) -> dict[tuple[str, str], str]:
    """File names for kernels; a name shared by several kernels gets the shortest end of its module path (at least
    two parts) that no other kernel of that name shares: `rpa--decode-non_sliding_window-schedule`. A name never
    depends on the order of the others (numbered, a kernel added or removed beside it moved every later one's page,
    and the notes a person wrote on it, to another kernel). Left: a kernel added whose module path ends as an
    existing one's (`b.decode.sched` beside `a.decode.sched`) lengthens that one's name, and one removed may
    shorten the others': a page then moves, and notes written on it do not follow (never onto another kernel)."""
    def parts(where: str) -> tuple[list[str], list[str]]:  # "pkg.module.kernel" or a path: (module, all)
        module, _, fn = where.rpartition(".") if "/" not in where else (where.rsplit(".", 1)[0], "", "")
        mod = module.replace("/", ".").split(".") if module else []
        return mod or [fn], [*mod, *([fn] if fn else [])]

    by_name: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for k in keys:
        by_name[mdtext.slugify(k[0])].append(k)
    out: dict[tuple[str, str], str] = {}
    for slug, group in by_name.items():
        if len(group) == 1:
            out[group[0]] = slug
            continue
        split = {k: parts(k[1]) for k in group}
        for k in group:
            (mod, full), others = split[k], [split[o] for o in group if o != k]
            # the module's end first; with the function too where modules tie (two kernels of one file)
            ends = [mod[-n:] for n in range(min(2, len(mod)), len(mod) + 1)] + [full[-len(mod) - 1:]]
            mine = next((e for e in ends if all(om[-len(e):] != e and of[-len(e):] != e for om, of in others)),
                        ends[-1])
            out[k] = mdtext.slugify(f"{k[0]}--{'-'.join(mine)}")
    used: dict[str, int] = Counter(out.values())  # the same path twice (two launches of one name in one function)
    for k in sorted(out, key=lambda k: k[1]):
        if used[out[k]] > 1:
            used[out[k]] -= 1
            out[k] = f"{out[k]}-{used[out[k]] + 1}"
    return out


def _majority(values: list, order: tuple = ()) -> str | None:
    vals = [v for v in values if v]
    if not vals:
        return None
    c = Counter(vals)
    return max(c, key=lambda v: (c[v], -order.index(v) if v in order else 0))


def _code_block(text: str) -> str:
    fence = "```"
    while fence in text:
        fence += "`"
    return f"{fence}python\n{text}\n{fence}\n"


def _site_row(s, link: Callable[[str, int], str]) -> list[str]:
    where = f"{_get(s, 'path')}:{_get(s, 'line')}"
    return [
        mdtext.link(mdtext.escape(where), link(_get(s, "path"), _get(s, "line"))),
        mdtext.code(_get(s, "impl")) if _get(s, "impl") else "",
        mdtext.code(_get(s, "entry")),
        _get(s, "backend"),
        _get(s, "kind"),
    ]


SITE_HEADERS = ["Source", "Helper", "Entry", "Backend", "Kind"]


def _sites_table(rows: list[list[str]]) -> str:
    """The launch sites; a column after Helper that holds one value for every site is said once below the table
    instead (a narrow table keeps file:line readable)."""
    same = [i for i in range(2, len(SITE_HEADERS)) if len({r[i] for r in rows}) == 1]
    keep = [i for i in range(len(SITE_HEADERS)) if i not in same]
    table = mdtext.table([SITE_HEADERS[i] for i in keep], [[r[i] for i in keep] for r in rows])
    if not same or not rows:
        return table
    said = ", ".join(f"{SITE_HEADERS[i].lower()} {rows[0][i] or '—'}" for i in same)
    return table + f"\n{'Every site' if len(rows) > 1 else 'The site'}: {said}.\n"


def _when(value: str, condition: str) -> str:
    if not condition:
        return mdtext.code(value)
    if condition == "otherwise":
        return f"{mdtext.code(value)} otherwise"
    return f"{mdtext.code(value)} if {mdtext.code(condition)}"


def _cell(s, key: str) -> str:
    """A grid or dimension-semantics cell: the one value, or every branch labelled by its condition."""
    alts = (_get(s, "branches") or {}).get(key)
    if alts:
        return "<br>".join(_when(v, c) for v, c in alts)
    return mdtext.code(_get(s, key)) if _get(s, key) else ""


def _shapes_cell(s) -> str:
    """Each block shape once; a shape used only under a condition says which."""
    alts = (_get(s, "branches") or {}).get("block_shapes")
    if not alts:
        return "<br>".join(mdtext.code(b) for b in (_get(s, "block_shapes") or [])[:8])
    conds: dict[str, list[str]] = {}
    for v, c in alts:
        conds.setdefault(v, []).append(c)
    cells = []
    for v, cs in list(conds.items())[:10]:
        cs = list(dict.fromkeys(cs))
        if "" in cs or len(cs) == 1:
            cells.append(_when(v, "" if "" in cs else cs[0]))
            continue
        shown = " / ".join(c if c == "otherwise" else mdtext.code(c) for c in cs[:3])
        cells.append(f"{mdtext.code(v)} (if {shown}{' / …' if len(cs) > 3 else ''})")
    return "<br>".join(cells)


def _params_rows(sites: list) -> list[list[str]]:
    rows = []
    for s in sites:
        if not (_get(s, "grid") or _get(s, "block_shapes") or _get(s, "dimension_semantics")):
            continue
        rows.append([f"{mdtext.escape(_get(s, 'path'))}:{_get(s, 'line')}",
                     _cell(s, "grid"), _shapes_cell(s), _cell(s, "dimension_semantics")])
    return rows


def _sources(sites: list, link: Callable[[str, int], str], knobs: dict[str, str]) -> str:
    """Where the names in the block shapes get their values, across the kernel's sites; a configuration knob of
    the codebase named in a value is linked to its row on the overview."""
    seen, out = set(), []
    for s in sites:
        for name, source, at in _get(s, "block_sources") or []:
            if (name, source, at) in seen:
                continue
            seen.add((name, source, at))
            where = ""
            if at:
                path, _, line = at.rpartition(":")
                where = " at " + mdtext.link(mdtext.escape(at), link(path, int(line)))
            said = mdtext.escape(source) if source.startswith(("parameter ", "block-size class")) \
                else mdtext.code(source)
            named = [k for k in dict.fromkeys(re.findall(r"\w+", source)) if k in knobs]
            more = "".join(f" (knob {mdtext.link(mdtext.code(k), knobs[k])})" for k in named[:2])
            out.append(f"- {mdtext.code(name)}: {said}{where}{more}")
    return "\n".join(out[:24]) + "\n" if out else ""


def _bodies(sites: list, link: Callable[[str, int], str]) -> str:
    """The kernel body function of each launch, with a link to its def."""
    out, seen = [], set()
    for s in sites:
        name, at = _get(s, "body_function") or _get(s, "body"), _get(s, "body_at")
        if not name or (name, at) in seen:
            continue
        seen.add((name, at))
        if at:
            path, _, line = at.rpartition(":")
            out.append(f"- {mdtext.code(name)} at {mdtext.link(mdtext.escape(at), link(path, int(line)))}")
        else:
            out.append(f"- {mdtext.code(name)} (defined outside the repository or passed in by the caller)")
    return "\n".join(out[:12]) + "\n" if out else "_The body is passed in at run time._\n"


PARAM_HEADERS = ["Site", "Grid", "Block shapes", "Dimension semantics"]


def _params_table(rows: list[list[str]]) -> str:
    """The parameters table without the columns no site fills (an empty column reads as missing data), each
    empty cell a dash, and a line saying what was not visible."""
    if not rows:
        return "_Not statically visible at the launch sites._\n"
    keep = [0] + [i for i in range(1, len(PARAM_HEADERS)) if any(r[i] for r in rows)]
    table = mdtext.table([PARAM_HEADERS[i] for i in keep], [[r[i] or "—" for i in keep] for r in rows])
    missing = [PARAM_HEADERS[i].lower() for i in range(1, len(PARAM_HEADERS)) if i not in keep]
    return table + (f"\n_Not written at the launch sites: {', '.join(missing)}._\n" if missing else "")


def _body(kernel: str, sites: list, meta: dict, link: Callable[[str, int], str],
          knobs: dict[str, str] | None = None, chosen: list[str] | None = None) -> str:
    first = sites[0]
    summary = next((_get(s, "summary") for s in sites if _get(s, "summary")), None)
    what = [mdtext.escape(summary) if summary else "_No docstring found; read the source._", ""]
    what.append(f"{len(sites)} launch site{'s' if len(sites) != 1 else ''} in {mdtext.code(meta['repo'])}; "
                f"backend **{meta['backend']}**, category **{mdtext.escape(meta['category'])}**, "
                f"kind **{meta['kind']}**, stability **{meta.get('stability', 'stable')}**.")
    notes = sorted({_get(s, "backend_note") for s in sites if _get(s, "backend_note")})
    if notes:  # the backend above is the rest of the code's evidence, not the launch's own
        what += ["", "Backend not fixed by the launch: " + "; ".join(mdtext.escape(n) for n in notes) + "."]
    collectives = list(dict.fromkeys((n, at) for s in sites for n, at in (_get(s, "collectives") or [])))
    if collectives:  # a ring of ppermutes, remote DMAs: communication inside or around the kernel
        what += ["", "Collectives in the kernel and its launching function: " + ", ".join(
            f"{mdtext.code(n)} at {mdtext.link(mdtext.escape(at), link(at.rpartition(':')[0], int(at.rpartition(':')[2])))}"
            for n, at in collectives[:10]) + "."]
    declared = next((_get(s, "provenance") for s in sites if _get(s, "provenance")), None)
    if declared:
        what += ["", f"The file says it was adapted from {mdtext.code(declared)}."]
    elif meta.get("vendored_from"):
        what += ["", f"Same normalized source as {mdtext.code(meta['vendored_from'])} (vendored or forked)."]
    out = ["## What it does\n", region("summary", "\n".join(what))]
    out += ["\n## Launch sites\n", region("launch-sites", _sites_table([_site_row(s, link) for s in sites]))]
    sig = _get(first, "signature")
    out += ["\n## Signature\n", region("signature", _code_block(f"def {sig}" if sig else f"{kernel}(...)"))]
    out += ["\n## Kernel body\n", region("body", _bodies(sites, link))]
    params = _params_table(_params_rows(sites))
    sources = _sources(sites, link, knobs or {})
    if sources:
        params += "\nWhere the names in the block shapes get their values:\n\n" + sources
    out += ["\n## Block and grid parameters\n", region("parameters", params)]
    callers = sorted({c for s in sites for c in (_get(s, "callers") or [])})
    text = "\n".join(f"- {mdtext.code(c)}" for c in callers[:30]) + "\n" if callers else \
        "_No callers found inside the repository._\n"
    if chosen:  # the settings and registries that pick this kernel (the codebase's selection map)
        text += "\nChosen by:\n\n" + "\n".join(f"- {line}" for line in chosen[:12]) + "\n"
    out += ["\n## Callers\n", region("callers", text)]
    return "\n".join(out)


def page_paths(sites: list, repo: str) -> dict[tuple[str, int], str]:
    """``(path, line)`` of every launch site -> the page ``kernel_pages`` writes it on."""
    groups = _group(sites)
    slugs = _slugs(list(groups))
    folder = f"kernels/{mdtext.slugify(repo)}"
    return {(_get(s, "path"), _get(s, "line")): f"{folder}/{slugs[key]}.md" for key, g in groups.items() for s in g}


def kernel_pages(sites: list, repo: str, commit: str | None, link: Callable[[str, int], str],
                 knobs: dict[str, str] | None = None, chosen_by: dict[str, list[str]] | None = None) -> list[Page]:
    """One page per kernel at ``kernels/<repo>/<kernel-slug>.md``; ``knobs``: the codebase's configuration knob
    names, each with the link to its row (a block size that reads one links it); ``chosen_by``: page -> the lines
    naming the settings and registry entries that choose the kernel."""
    groups = _group(sites)
    slugs = _slugs(list(groups))
    folder = f"kernels/{mdtext.slugify(repo)}"
    out = []
    for key, group in groups.items():
        kernel = key[0]
        first = group[0]
        backend = _majority([_get(s, "backend") for s in group if _get(s, "backend") != "unknown"]) or "unknown"
        meta = {
            "type": "kernel", "title": kernel,
            "tags": ["kernel", backend, mdtext.slugify(_get(first, "category"))],
            "repo": repo, "commit": commit, "path": _get(first, "path"), "line": int(_get(first, "line")),
            "backend": backend, "category": _majority([_get(s, "category") for s in group], KERNEL_CATEGORIES),
            "kind": min((_get(s, "kind") for s in group), key=lambda k: _KIND_ORDER.get(k, 9)),
            "stability": _get(first, "stability") or "stable",
            "vendored_from": next((_get(s, "vendored_from") for s in group if _get(s, "vendored_from")), None),
            "kernel": kernel,
        }
        owned = tuple(meta)  # every key above is the catalog's: one that no longer holds is dropped from the page
        meta = {k: v for k, v in meta.items() if v is not None}
        path = f"{folder}/{slugs[key]}.md"
        out.append(Page(path, meta, _body(kernel, group, meta, link, knobs, (chosen_by or {}).get(path)),
                        owned_meta=owned))
    return out


def _directory_rows(records: list[dict]) -> list[list[str]]:
    rows = []
    for r in sorted(records, key=lambda r: (str(r.get("title")), str(r.get("repo")))):
        target = posixpath.relpath(r["page"], posixpath.dirname(DIRECTORY)) if r.get("page") else None
        name = mdtext.escape(r.get("title") or "?")
        rows.append([mdtext.link(name, target) if target else name, mdtext.escape(r.get("repo") or ""),
                     str(r.get("backend") or ""), str(r.get("kind") or ""), str(r.get("stability") or ""),
                     mdtext.code(r["vendored_from"]) if r.get("vendored_from") else ""])
    return rows


_HEADERS = ["Kernel", "Repository", "Backend", "Kind", "Stability", "Vendored from"]


def directory_page(records: list[dict]) -> Page:
    """``kernels/index.md``: library kernels grouped by category with counts by repository and backend;
    kernels found in tests, benchmarks and examples listed after them."""
    main = [r for r in records if r.get("kind", "library") == "library"]
    rest = [r for r in records if r.get("kind", "library") != "library"]
    by_cat: dict[str, list[dict]] = defaultdict(list)
    for r in main:
        by_cat[r.get("category") or "crypto/fhe/other"].append(r)
    order = [c for c in KERNEL_CATEGORIES if c in by_cat] + sorted(c for c in by_cat if c not in KERNEL_CATEGORIES)
    repos = Counter(r.get("repo") for r in records)
    head = [f"{len(main)} library kernel{'' if len(main) == 1 else 's'} from {len(repos)} "
            f"{'repository' if len(repos) == 1 else 'repositories'}"
            + (f", and {len(rest)} more in tests, benchmarks and examples." if rest else "."), ""]
    head.append(mdtext.table(["Category", "Kernels", "Repositories", "Backends"], [
        [mdtext.escape(c), str(len(by_cat[c])),
         ", ".join(f"{mdtext.escape(k)} {v}" for k, v in sorted(Counter(r.get("repo") for r in by_cat[c]).items())),
         ", ".join(f"{k} {v}" for k, v in sorted(Counter(r.get("backend") for r in by_cat[c]).items()))]
        for c in order]) or "_No kernels cataloged yet: run `tools ingest` on a code tree._\n")
    sections = [f"## {mdtext.escape(c)}\n\n" + mdtext.table(_HEADERS, _directory_rows(by_cat[c])) for c in order]
    if rest:
        sections.append("## In tests, benchmarks and examples\n\n" + mdtext.table(_HEADERS, _directory_rows(rest)))
    body = region("directory", "\n".join(head) + "\n" + "\n".join(sections))
    meta = {"type": "index", "title": "Kernel directory", "tags": ["kernels"]}
    return Page(DIRECTORY, meta, "# Kernel directory\n\n" + body)
