"""Page checks: frontmatter per type, experiment ids, index drift, stale codebase pages."""

from __future__ import annotations

import posixpath
import re
from pathlib import Path

from .. import mdrisk, pages, wikiindex
from ..project import Project
from ..redact import redact
from ..wikiscan import Wiki, WikiPage
from .issues import issue

_YAML_LINE = re.compile(r"\(line (\d+)\)")
_EXP_NO = re.compile(r"(?:^|[-_.])(v\d{2,})(?=$|[-_.])", re.I)


def inferred_type(page: WikiPage) -> str | None:
    """The type a page's place implies: index.md -> index, log.md -> log, wiki/<folder>/ -> that folder's type."""
    if page.rel == "log.md":
        return "log"
    if posixpath.basename(page.rel) == "index.md":
        return "index"
    return page.folder_type


def key_line(page: WikiPage, key: str) -> int | None:
    """The file line of ``key:`` in the frontmatter block, if written there."""
    if page.text is None or page.body_line <= 1:
        return None
    pat = re.compile(rf"^{re.escape(key)}\s*:")
    for i, ln in enumerate(page.text.split("\n", page.body_line)[: page.body_line - 1], start=1):
        if pat.match(ln):
            return i
    return None


def _code(p: pages.Problem) -> str:
    if p.field == "sections":
        return "missing-section"
    if p.field == "metrics" and "supported" in p.problem:
        return "no-metrics"
    if p.field == "type" and p.problem.startswith("unknown"):
        return "unknown-type"
    if p.problem.startswith("missing"):
        return "missing-key"
    if p.problem.startswith(("expected", "must be")):
        return "wrong-type"
    return "invalid-value"


def validate(where: str, meta: dict, body: str) -> list[pages.Problem]:
    """pages.validate, guarded against values it does not expect (a list as ``type``...)."""
    ptype = meta.get("type")
    if ptype is not None and not isinstance(ptype, str):
        rest = {k: v for k, v in meta.items() if k != "type"}
        return [pages.Problem(where, "type", f"unknown type {ptype!r} (expected a string)"),
                *(p for p in validate(where, rest, body) if p.field != "type")]
    try:
        return pages.validate(where, meta, body)
    except (TypeError, ValueError, AttributeError) as e:  # reported, never a crash
        return [pages.Problem(where, "frontmatter", f"invalid value ({type(e).__name__}: {e})")]


def check_frontmatter(wiki: Wiki) -> list:
    out = []
    for page in wiki.pages:
        where = "wiki/" + page.rel
        if page.text is None:
            out.append(issue(where, None, "unreadable", page.error or "unreadable"))
            continue
        if page.error:
            m = _YAML_LINE.search(page.error)
            out.append(issue(where, int(m.group(1)) if m else 1, "frontmatter-invalid", page.error))
            continue
        if page.meta is None and page.text.lstrip("\ufeff").startswith("+++"):
            out.append(issue(where, 1, "frontmatter-missing", "a TOML frontmatter (+++), which the wiki does not read: "
                                                              "write it as YAML (---) by hand"))
            continue
        if page.meta is None:
            t = inferred_type(page)
            how = f" (--fix adds type {t!r})" if t else " (folder implies no type; add it by hand)"
            out.append(issue(where, 1, "frontmatter-missing", "no frontmatter" + how, t is not None))
            continue
        for p in validate(where, page.meta, page.body):
            code = _code(p)
            fixable = code == "missing-key" and (
                p.field == "title" or (p.field == "type" and inferred_type(page) is not None))
            line = key_line(page, p.field) or 1
            out.append(issue(where, line, code, f"{p.field}: {p.problem}", fixable))
    return out


def experiment_id(page: WikiPage) -> tuple[str, str] | None:
    """(lane, id) of an experiment page: ``model``/``lane``/``exp_id`` keys (two models may name their lanes
    alike, and their ids are their own), else parent folder / vNNN in the file name."""
    meta = page.meta or {}
    lane = meta.get("lane")
    model = meta.get("model")
    if lane in (None, ""):
        lane = posixpath.dirname(page.rel) or "-"
    else:
        lane = f"{model}/{lane}" if model not in (None, "") else str(lane)
    exp = meta.get("exp_id")
    if exp in (None, ""):
        m = _EXP_NO.search(posixpath.basename(page.rel)[:-3])
        if not m:
            return None
        exp = m.group(1).lower()
    return lane, str(exp)


def check_experiment_ids(wiki: Wiki) -> list:
    seen: dict[tuple[str, str], list[WikiPage]] = {}
    for page in wiki.pages:
        if page.type == "experiment" or (page.meta is None and page.folder_type == "experiment"):
            key = experiment_id(page)
            if key:
                seen.setdefault(key, []).append(page)
    out = []
    for (lane, exp), group in seen.items():
        if len(group) < 2:
            continue
        for page in group:
            others = ", ".join("wiki/" + p.rel for p in group if p is not page)
            line = key_line(page, "exp_id") or 1
            out.append(issue("wiki/" + page.rel, line, "duplicate-exp-id",
                             f"experiment id {exp!r} in lane {lane!r} is also used by {others}"))
    return out


def _line_of(text: str, pattern: str) -> int | None:
    m = re.search(pattern, text, re.M)
    return text.count("\n", 0, m.start()) + 1 if m else None


def check_index(wiki: Wiki) -> list:
    where = "wiki/" + wikiindex.INDEX
    page = wiki.by_rel.get(wikiindex.INDEX)
    if page is None:
        blocked = (wiki.root / wikiindex.INDEX).is_dir() or any(rel == wikiindex.INDEX for rel, _ in wiki.refused)
        if blocked:  # a folder, a FIFO or a link out holds the name: `tools index` cannot write there
            return [issue(where, None, "index-missing", "no index page, and something that is not one holds its "
                                                        "name (a folder, a special file, a link): move it, then run "
                                                        "`tools index`", False)]
        return [issue(where, None, "index-missing", "no index page; run `tools index`", True)]
    if page.text is None or page.error:
        return []  # reported by check_frontmatter
    expected = wikiindex.expected_counts(wiki)
    region = pages.regions(page.body).get(wikiindex.REGION)
    recorded = wikiindex.recorded_counts(page.body) or {}
    out = []
    if region is None:
        # A hand-written index: compare the counts it writes under headings we recognise.
        known = {k.casefold(): k for k in expected}
        known.update({t.casefold(): wikiindex.label(t) for t in pages.TYPES})
        for name, n in recorded.items():
            label = known.get(name.casefold())
            if label is not None and expected.get(label, 0) != n:
                line = _line_of(page.text, rf"^#+\s+{re.escape(name)}\s*\(")
                out.append(issue(where, line, "index-drift",
                                 f"{name}: index says {n}, the wiki has {expected.get(label, 0)}", True))
        if not out:
            out.append(issue(where, 1, "index-unmanaged", "no generated listing; run `tools index` to add one", True))
        return out
    for label in [*expected, *(k for k in recorded if k not in expected)]:
        have, want = recorded.get(label), expected.get(label, 0)
        if have != want:
            line = _line_of(page.text, rf"^#+\s+{re.escape(label)}\s*\(") or 1
            said = f"index says {have}" if have is not None else "index has no section"
            out.append(issue(where, line, "index-drift", f"{label}: {said}, the wiki has {want}", True))
    if not out and region != redact(wikiindex.listing(wiki)):  # the writer wrote it redacted
        line = _line_of(page.text, r"^<!-- tools:begin index -->") or 1
        out.append(issue(where, line, "index-stale", "titles, summaries or pages changed; run `tools index`", True))
    return out


def check_stale(project: Project, wiki: Wiki) -> list:
    """Pages whose recorded ``commit`` differs from the HEAD of the checkout they describe."""
    from ..gitinfo import head_commit

    heads: dict[str, str | None] = {}
    out = []
    for page in wiki.pages:
        meta = page.meta
        if not meta or page.type != "codebase" or not meta.get("commit"):
            continue
        repo, path = meta.get("repo"), meta.get("path")
        folder = path if isinstance(path, str) and path else f"raw/code/{repo}"
        folder = folder.rstrip("/")
        if folder not in heads:
            p = Path(folder)
            p = p if p.is_absolute() else project.root / p
            heads[folder] = head_commit(p) if p.is_dir() else None
        head = heads[folder]
        recorded = str(meta["commit"]).strip()
        if head is None or not recorded:
            continue
        if not (head.startswith(recorded) or recorded.startswith(head)):
            out.append(issue("wiki/" + page.rel, key_line(page, "commit") or 1, "stale-codebase",
                             f"commit {recorded[:12]} but {folder} is at {head[:12]}; run `tools ingest {folder}`"))
    return out


def check_hostile(wiki: Wiki) -> list:
    """Entries the scan refused (symlinks out of wiki/, special files) and pages the site publishes as text."""
    out = [issue(f"wiki/{rel}", None, "not-followed", reason) for rel, reason in wiki.refused]
    for page in wiki:
        reason = mdrisk.problem(page.text) if page.text is not None else None
        if reason:
            out.append(issue(f"wiki/{page.rel}", None, "pathological", f"{reason}; the site shows it as text"))
    return out
