"""`tools lint`: check a wiki for broken links, orphans, bad frontmatter, drift; optionally fix the mechanical ones.

``run(project, fix=False) -> Report``. Checks read one ``wikiscan.scan`` of wiki/ and never raise on a
bad page. Fixes go through the writer and are followed by a fresh scan, so the report shows what remains.
"""

from __future__ import annotations

import gc
import time
from contextlib import contextmanager
from dataclasses import dataclass, field

from ..project import Project
from ..wikiscan import Wiki, scan
from . import checks, links
from .issues import CODES, ERROR, WARNING, Issue, issue  # noqa: F401  (re-exported)


@dataclass
class Report:
    pages: int
    issues: list[Issue]
    fixed: list[str] = field(default_factory=list)  # "wiki/x.md: what was done"
    seconds: float = 0.0

    @property
    def errors(self) -> int:
        return sum(1 for i in self.issues if i.severity == ERROR)

    @property
    def warnings(self) -> int:
        return sum(1 for i in self.issues if i.severity == WARNING)

    @property
    def ok(self) -> bool:
        return self.errors == 0

    def summary(self) -> str:
        fixed = f", fixed {len(self.fixed)}" if self.fixed else ""
        fixable = sum(1 for i in self.issues if i.fixable)
        hint = f" ({fixable} fixable with --fix)" if fixable and not self.fixed else ""
        return (f"{self.errors} errors, {self.warnings} warnings in {self.pages} pages"
                f"{fixed}{hint} ({self.seconds:.2f}s)")

    def as_dict(self) -> dict:
        return {"pages": self.pages, "errors": self.errors, "warnings": self.warnings, "ok": self.ok,
                "seconds": round(self.seconds, 3), "fixed": self.fixed,
                "problems": [i.as_dict() for i in self.issues]}


def check(project: Project, wiki: Wiki | None = None) -> list[Issue]:
    """All problems, sorted by path, line and code."""
    wiki = wiki if wiki is not None else scan(project.wiki)
    out: list[Issue] = []
    res = links.Resolver(project, wiki)
    resolved = links.resolve_all(wiki, res)
    out += links.check_links(resolved, project.root, res)
    out += links.check_orphans(wiki, resolved)
    out += checks.check_frontmatter(wiki)
    out += checks.check_experiment_ids(wiki)
    out += checks.check_index(wiki)
    out += checks.check_stale(project, wiki)
    out += checks.check_hostile(wiki)
    if any(i.fixable and i.code in ("frontmatter-missing", "missing-key") for i in out):
        from .fixes import fixable_meta  # a frontmatter the fix would leave as it is (a duplicate key) is not fixable

        out = fixable_meta(wiki, out)
    return sorted(set(out))


@contextmanager
def _collector_paused():
    """The cyclic garbage collector off for one lint: a large wiki makes ~10^6 short-lived tuples and strings and
    no cycles, and the collector's passes over the whole scan took a third of the time (measured at 4,000 pages)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def run(project: Project, fix: bool = False, today: str | None = None) -> Report:
    """Lint the project's wiki; with ``fix``, repair what is mechanical first and report what remains."""
    project.require_wiki()
    with _collector_paused():
        return _run(project, fix, today)


def _run(project: Project, fix: bool, today: str | None) -> Report:
    t0 = time.perf_counter()
    wiki = scan(project.wiki)
    issues = check(project, wiki)
    fixed: list[str] = []
    if fix and any(i.fixable for i in issues):
        from . import fixes

        fixed = fixes.apply(project, wiki, issues, today=today)
        if fixed:
            wiki = scan(project.wiki)
            issues = check(project, wiki)
    return Report(len(wiki), issues, fixed, time.perf_counter() - t0)
