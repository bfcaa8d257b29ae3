"""The home page's dashboard: what the knowledge base holds now, from the pages' frontmatter.

``docs/index.md`` carries the marker ``<!-- tools:dashboard -->`` (``tools init`` writes it); the site replaces it
with: codebases with their pinned commits and kernel counts, kernels by category and backend, each model lane's
current best (the fastest run with a ``supported`` verdict, else its baseline), the latest experiments with
verdicts, and the lint status. Everything shown is escaped (``tools.mdtext``).
"""

from __future__ import annotations

import posixpath
from collections import Counter, defaultdict

from .. import mdtext
from .pages_view import SitePage

MARKER = "<!-- tools:dashboard -->"
LATEST = 10


def _link(p: SitePage, from_dir: str = "") -> str:
    return mdtext.link(mdtext.escape(p.title), posixpath.join(from_dir, "wiki", p.rel))


def _tps(p: SitePage) -> float | None:
    m = p.meta.get("metrics")
    v = m.get("tokens_per_s") if isinstance(m, dict) else None
    return float(v) if isinstance(v, (int, float)) else None


SUBPAGES = {"module": "module page", "xla-flags": "flags page"}  # codebase pages that are parts of an overview


def kind_of(p: SitePage) -> str:
    """What a page counts as on the home page: a codebase's module and flags pages are not codebases."""
    if p.type == "codebase":
        tags = set(p.meta.get("tags") or [])
        return next((word for tag, word in SUBPAGES.items() if tag in tags), "codebase")
    return p.type


_PLURAL = {"analysis": "analyses", "hypothesis": "hypotheses", "index": "indexes"}


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {_PLURAL.get(word, word + 's')}"


def dashboard_md(pages: list[SitePage], lint: tuple[int, int] | None = None) -> str:
    by_type: dict[str, list[SitePage]] = defaultdict(list)
    kinds: Counter = Counter()
    for p in pages:
        by_type[p.type].append(p)
        kinds[kind_of(p)] += bool(p.type)
    out = [f"**{len(pages):,} pages**: " + ", ".join(
        _plural(n, mdtext.escape(k)) for k, n in kinds.most_common() if n) + "."]
    if lint is not None:
        errors, warnings = lint
        out.append(f"**Lint**: {errors} errors, {warnings} warnings"
                   + (" (run `tools lint`)." if errors or warnings else " (clean)."))
    loops = sorted(by_type.get("loop", []), key=lambda p: p.title.lower())
    if loops:  # first: where the method stands
        out += ["## Loops", "", mdtext.table(["loop", "model (lane)", "status", "best so far", "tokens/s",
                                              "gain over baseline"], [_loop_row(p, pages) for p in loops])]
    kernels = by_type.get("kernel", [])
    per_repo = Counter(str(k.meta.get("repo") or "") for k in kernels)
    cbs = sorted((c for c in by_type.get("codebase", []) if kind_of(c) == "codebase"), key=lambda p: p.title.lower())
    if cbs:
        rows = [[_link(c), mdtext.code(str(c.meta.get("commit") or "—")[:12]),
                 str(per_repo.get(str(c.meta.get("repo") or c.meta.get("title") or ""), 0))] for c in cbs]
        out += ["## Codebases", "", mdtext.table(["codebase", "commit", "kernels"], rows)]
    if kernels:
        cats = Counter(str(k.meta.get("category") or "other") for k in kernels)
        backends = sorted({str(k.meta.get("backend") or "unknown") for k in kernels})
        grid = Counter((str(k.meta.get("category") or "other"), str(k.meta.get("backend") or "unknown"))
                       for k in kernels)
        rows = [[mdtext.escape(c), str(n), *[str(grid[(c, b)] or "") for b in backends]] for c, n in cats.most_common()]
        out += [f"## Kernels ({len(kernels)})", "",
                mdtext.table(["category", "all", *map(mdtext.escape, backends)], rows)]
    exps = by_type.get("experiment", [])
    lanes: dict[tuple[str, str], list[SitePage]] = defaultdict(list)
    for e in exps:
        lanes[(str(e.meta.get("model") or "?"), str(e.meta.get("lane") or "?"))].append(e)
    if lanes:
        rows = []
        for (model, lane), es in sorted(lanes.items()):
            ok = [e for e in es if _tps(e) is not None and e.meta.get("verdict") == "supported"]
            base = [e for e in es if _tps(e) is not None and e.meta.get("role") == "baseline"]
            best = max(ok or base, key=_tps, default=None)
            rows.append([mdtext.escape(f"{model} ({lane})"), _link(best) if best else "—",
                         f"{_tps(best):,.0f}" if best else "—", str(len(es))])
        out += ["## Models", "", mdtext.table(["model (lane)", "current best", "tokens/s", "experiments"], rows)]
    if exps:
        latest = sorted(exps, key=lambda e: (str(e.meta.get("created") or ""), e.rel), reverse=True)[:LATEST]
        rows = [[mdtext.escape(str(e.meta.get("created") or "")), _link(e), mdtext.escape(str(e.meta.get("verdict") or "—")),
                 f"{_tps(e):,.0f}" if _tps(e) is not None else "—"] for e in latest]
        out += ["## Latest experiments", "", mdtext.table(["date", "experiment", "verdict", "tokens/s"], rows)]
    return "\n\n".join(x.rstrip("\n") for x in out) + "\n"


def _loop_row(p: SitePage, pages: list[SitePage]) -> list[str]:
    m = p.meta
    best = str(m.get("best") or "")
    page = next((e for e in pages if e.type == "experiment" and e.meta.get("exp_id") == best), None) if best else None
    tps, gain = m.get("best_tokens_per_s"), m.get("gain_pct")
    status = str(m.get("status") or "—") + (f" ({m['stop_reason']})" if m.get("stop_reason") else "")
    return [_link(p), mdtext.escape(f"{m.get('model')} ({m.get('lane')})"), mdtext.escape(status),
            _link(page) if page else mdtext.code(best or "—"),
            f"{tps:,.0f}" if isinstance(tps, (int, float)) else "—",
            f"{gain:+.1f} %" if isinstance(gain, (int, float)) else "—"]


def fill(markdown: str, dashboard: str) -> str:
    return markdown.replace(MARKER, dashboard, 1) if MARKER in markdown else markdown
