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


def dashboard_md(pages: list[SitePage], lint: tuple[int, int] | None = None) -> str:
    by_type: dict[str, list[SitePage]] = defaultdict(list)
    for p in pages:
        by_type[p.type].append(p)
    out = [f"**{len(pages):,} pages**: " + ", ".join(
        f"{len(v)} {t}" for t, v in sorted(by_type.items(), key=lambda kv: -len(kv[1])) if t) + "."]
    if lint is not None:
        errors, warnings = lint
        out.append(f"**Lint**: {errors} errors, {warnings} warnings"
                   + (" (run `tools lint`)." if errors or warnings else " (clean)."))
    kernels = by_type.get("kernel", [])
    per_repo = Counter(str(k.meta.get("repo") or "") for k in kernels)
    cbs = sorted((c for c in by_type.get("codebase", []) if not {"module", "xla-flags"} & set(c.meta.get("tags") or [])),
                 key=lambda p: p.title.lower())
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


def fill(markdown: str, dashboard: str) -> str:
    return markdown.replace(MARKER, dashboard, 1) if MARKER in markdown else markdown
