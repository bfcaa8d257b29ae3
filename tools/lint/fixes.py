"""`tools lint --fix`: the mechanical repairs, all written through the writer.

- [[wikilinks]] that name exactly one page -> relative markdown links;
- file:// and absolute-path links to files inside the project -> relative links;
- missing frontmatter -> ``type`` from the folder, ``title`` from the first heading or file name;
- missing ``title`` / ``type`` keys -> the same inference;
- index missing, drifted or stale -> rebuilt;
- links naming ``#Symbol`` where a heading of the target starts with that symbol -> the heading gets the id
  (``{#Symbol}``; an id other links already use is kept as an inline anchor).

Link rewrites change only the link found, at its place on its line (never a code example of it, nor another link
whose target starts the same); frontmatter additions add their keys as lines of their own, every other line of the
frontmatter kept as written (created/updated stamped as for any page write).

Every fix is applied to the page as it is at write time (``Writer.update_file``: read, fix, compare-and-swap),
never to the scan taken at the start, so an edit saved while ``--fix`` runs is kept.
"""

from __future__ import annotations

import logging
import posixpath
import re
from collections import Counter

from .. import mdscan, pages, wikiindex
from ..errors import InputError
from ..project import Project
from ..mdscan import Link
from ..wikiscan import Wiki, WikiPage, parse_page, scan
from ..writer import UNCHANGED, Writer
from . import links
from .checks import check_index, inferred_type
from .issues import Issue

LINK_CODES = ("wikilink", "file-link", "absolute-link")
META_CODES = ("frontmatter-missing", "missing-key")
INDEX_CODES = ("index-missing", "index-drift", "index-stale", "index-unmanaged")
LOG_LIMIT = 30
log = logging.getLogger(__name__)


def _in_prose(line: str, pattern: re.Pattern) -> re.Match | None:
    """The first match of ``pattern`` on ``line`` that starts in its prose (not in a code span or a comment): the
    link found there, never a code example of it earlier on the line."""
    view = mdscan.prose_view(line)
    return next((m for m in pattern.finditer(line) if view[m.start()] == line[m.start()]), None)


def _swap(line: str, m: re.Match | None, text: str) -> str:
    return line if m is None else line[:m.start()] + text + line[m.end():]


def _replace_link(line: str, link: Link, new: str) -> str:
    t = re.escape(link.target)
    if link.kind == "wiki":
        label = link.text.split("|", 1)[1].strip() if "|" in link.text else link.target.split("#", 1)[0].strip()
        label = label.replace("[", "\\[").replace("]", "\\]")
        return _swap(line, _in_prose(line, re.compile(re.escape(f"[[{link.text}]]"))), f"[{label}]({new})")
    if link.kind == "md":  # the whole target, not one it starts (`remat.md` is not `remat.md.orig`)
        m = _in_prose(line, re.compile(rf"\]\(\s*<?{t}>?(?=[\s)])"))
        return _swap(line, m, f"]({new}")
    if link.kind == "ref":
        return re.sub(rf"^(\s{{0,3}}\[[^\]]+\]:\s*)<?{t}>?", lambda m: m.group(1) + new, line, count=1)
    if link.kind == "auto":
        name = posixpath.basename(new.split("#", 1)[0]) or new
        return _swap(line, _in_prose(line, re.compile(re.escape(f"<{link.target}>"))), f"[{name}]({new})")
    return line


def _link_fixes(page: WikiPage, res: links.Resolver) -> tuple[str | None, list[str]]:
    """The page's text with its fixable links rewritten (None: nothing to do), and one line per rewrite."""
    if page.text is None:
        return None, []
    lines = page.text.split("\n")
    done = []
    for link in page.links:
        t = res.resolve(page, link)
        if t.status not in (links.WIKI, links.FILE, links.ABSOLUTE) or not t.fix:
            continue
        old = lines[link.line - 1]
        new = _replace_link(old, link, t.fix)
        if new != old:
            lines[link.line - 1] = new
            shown = f"[[{link.text}]]" if link.kind == "wiki" else link.target
            done.append(f"wiki/{page.rel}:{link.line}: `{shown}` -> `{t.fix}`")  # code: no link in the log
    return ("\n".join(lines) if done else None), done


def fix_links(page: WikiPage, res: links.Resolver, writer: Writer) -> list[str]:
    done: list[str] = []

    def change(text: str) -> str | None:
        new, lines = _link_fixes(parse_page(page.rel, text, path=page.path), res)
        done[:] = lines
        return _same_form(text, new)
    return done if writer.update_file(page.rel, change) != UNCHANGED else []


def _same_form(old: str, new: str | None) -> str | None:
    """``new`` in the form ``old`` was written in: its byte-order mark kept, and its CRLF line ends where every
    line of it had one (a fix rebuilt from the parsed text dropped the one and mixed in LF lines)."""
    if new is None:
        return None
    if "\r\n" in old and old.count("\r\n") == old.count("\n"):
        new = new.replace("\r\n", "\n").replace("\n", "\r\n")
    if old.startswith("\ufeff") and not new.startswith("\ufeff"):
        new = "\ufeff" + new
    return new


def _meta_fixes(page: WikiPage, today: str) -> tuple[str | None, list[str]]:
    if page.text is None or page.error:
        return None, []
    if page.meta is None and page.text.lstrip("\ufeff").startswith("+++"):
        return None, []  # a TOML frontmatter (Hugo's): one in YAML put in front of it would make it body text
    meta = dict(page.meta or {})
    added = []
    if not meta.get("type"):
        t = inferred_type(page)
        if t:
            meta["type"] = t
            added.append(f"type {t}")
    if not meta.get("title"):
        meta["title"] = page.title
        added.append(f"title {page.title!r}")
    if not added:
        return None, []
    meta.setdefault("created", today)
    meta["updated"] = today
    if page.meta is None:  # no frontmatter to keep: a new block
        return pages.render(meta, page.body), added
    return _added_keys(page.text, {k: meta[k] for k in ("type", "title", "created", "updated")
                                   if k in meta and meta[k] != page.meta.get(k)}), added


def _added_keys(text: str, keys: dict) -> str | None:
    """``text`` with ``keys`` set in its frontmatter as lines of their own, every other line kept as written (its
    comments, its order, and values YAML would re-read otherwise: ``1.10``, ``0123``, ``yes``). A key already there
    (``updated``) has its lines replaced. None (no fix) when the edited block would not read back as the old one
    plus the keys (a flow mapping ``{tags: [a]}``: lines added after it are no YAML)."""
    import yaml

    m = pages.FRONTMATTER_RE.match(text)
    if m is None:
        return None
    lines = m.group(1).split("\n")
    for key, value in keys.items():
        line = yaml.safe_dump({key: value}, allow_unicode=True, width=10_000, default_flow_style=False).strip()
        at = next((i for i, ln in enumerate(lines) if re.match(rf"{re.escape(key)}\s*:", ln)), None)
        if at is None:
            lines.append(line)
        else:  # the key's line and its continuation (a block scalar, a nested list or mapping)
            end = at + 1
            while end < len(lines) and (lines[end][:1] in (" ", "\t") or lines[end].startswith("- ")):
                end += 1
            lines[at:end] = [line]
    block = "\n".join(lines)
    try:  # the block as edited must read back as the old mapping plus the keys; else it is left alone (both read
        # with a line end after them: a block scalar last in the old block keeps its newline once a key follows it)
        same = yaml.safe_load(block + "\n") == {**(yaml.safe_load(m.group(1) + "\n") or {}), **keys}
    except yaml.YAMLError:
        same = False
    return text[:m.start(1)] + block + text[m.end(1):] if same else None


def fixable_meta(wiki: Wiki, issues: list[Issue]) -> list[Issue]:
    """``issues`` with a frontmatter problem marked fixable only where the fix would change the page (a key given
    twice, its last value empty, is left alone: a page said "fixable" on every run and never fixed)."""
    works: dict[str, bool] = {}
    out = []
    for i in issues:
        if i.fixable and i.code in META_CODES:
            rel = i.path.removeprefix("wiki/")
            if rel not in works:
                works[rel] = rel in wiki.by_rel and _meta_fixes(wiki.by_rel[rel], "2000-01-01")[0] is not None
            if not works[rel]:
                i = i._replace(fixable=False)
        out.append(i)
    return out


def fix_meta(page: WikiPage, writer: Writer) -> list[str]:
    added: list[str] = []
    was_missing = [page.meta is None]

    def change(text: str) -> str | None:
        cur = parse_page(page.rel, text, path=page.path, links=False)
        was_missing[0] = cur.meta is None
        new, what = _meta_fixes(cur, writer.today)
        added[:] = what
        return _same_form(text, new)
    if writer.update_file(page.rel, change) == UNCHANGED:
        return []
    what = "frontmatter added" if was_missing[0] else "frontmatter completed"
    return [f"wiki/{page.rel}: {what} ({', '.join(added)})"]


def _symbol_targets(wiki: Wiki, res: links.Resolver) -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """(page -> the ``#Symbol`` fragments links name that a heading of it starts with; page -> the heading ids
    links already use, which must keep working)."""
    want: dict[str, set[str]] = {}
    used: dict[str, set[str]] = {}
    for _page, link, t in links.resolve_all(wiki, res):
        if t.rel is None or t.status not in (links.ANCHOR, links.OK):
            continue
        frag = links.fragment(link.target)
        if not frag:
            continue
        if t.status == links.ANCHOR and res.symbol_heading(t.rel, frag):
            want.setdefault(t.rel, set()).add(frag)
        elif t.status == links.OK:
            used.setdefault(t.rel, set()).add(frag)
    return want, used


def _with_ids(text: str, rel: str, frags: set[str], used: set[str]) -> tuple[str | None, list[str]]:
    """Each heading starting with one of ``frags`` gets that id (``{#Symbol}``, attr_list); a heading whose own id
    links already use keeps it as an inline anchor."""
    page = parse_page(rel, text, links=False)
    if page.text is None or page.error:
        return None, []
    offset = page.body_line - 1
    lines = text.split("\n")
    done = []
    for sym, i in links.symbol_headings(page.body).items():
        if sym not in frags:
            continue
        n = offset + i
        m = mdscan.HEADING.match(lines[n])
        setext = not m and n + 1 < len(lines) and mdscan._SETEXT.match(lines[n + 1])  # attr_list reads it there too
        if not m and not setext:
            continue
        old_id = links.heading_slug(m.group(2) if m else lines[n].strip())
        keep = f' <a id="{old_id}"></a>' if old_id in used else ""
        lines[n] = f"{lines[n].rstrip()}{keep} {{#{sym}}}"
        done.append(f"wiki/{rel}:{n + 1}: heading id `{sym}`" + (f" (its old id `{old_id}` kept)" if keep else ""))
    return ("\n".join(lines) if done else None), done


def fix_symbol_anchors(wiki: Wiki, res: links.Resolver, writer: Writer) -> list[str]:
    want, used = _symbol_targets(wiki, res)
    fixed: list[str] = []
    for rel, frags in sorted(want.items()):
        done: list[str] = []

        def change(text: str, rel=rel, frags=frags) -> str | None:
            new, lines = _with_ids(text, rel, frags, used.get(rel, set()))
            done[:] = lines
            return _same_form(text, new)
        if writer.update_file(rel, change) != UNCHANGED:
            fixed += done
    return fixed


def apply(project: Project, wiki: Wiki, issues: list[Issue], today: str | None = None) -> list[str]:
    """Repair the fixable issues; return one line per repair (also logged to wiki/log.md)."""
    writer = Writer(project.wiki, today=today)
    by_code: dict[str, set[str]] = {}
    for i in issues:
        if i.fixable:
            by_code.setdefault(i.code, set()).add(i.path.removeprefix("wiki/"))
    fixed: list[str] = []
    link_pages = set().union(*(by_code.get(c, set()) for c in LINK_CODES))
    if link_pages:
        res = links.Resolver(project, wiki)
        for rel in sorted(link_pages):
            fixed += fix_links(wiki.by_rel[rel], res, writer)
    for rel in sorted(set().union(*(by_code.get(c, set()) for c in META_CODES))):
        fixed += fix_meta(wiki.by_rel[rel], writer)
    if "broken-anchor" in by_code:
        fixed += fix_symbol_anchors(wiki, links.Resolver(project, wiki), writer)
    if fixed or any(c in by_code for c in INDEX_CODES):
        fresh = scan(project.wiki, links=False)  # repairs above can move counts and summaries
        if any(c in by_code for c in INDEX_CODES) or check_index(fresh):
            try:  # the fixes above are written: they are logged below whatever the index does
                result = wikiindex.rebuild(project.wiki, writer, wiki=fresh, log=False)
            except InputError as e:
                log.warning("%s", e)
            else:
                if result.status != UNCHANGED:
                    fixed.append(f"wiki/{wikiindex.INDEX}: {result.status} ({result.pages} pages)")
    if fixed:
        kinds = Counter("frontmatter" if ": frontmatter " in ln else "heading id" if ": heading id " in ln else
                        "index" if ln.startswith(f"wiki/{wikiindex.INDEX}: ") else "link" for ln in fixed)
        head = ", ".join(f"{k} {n}" for k, n in sorted(kinds.items()))
        more = [f"... (+{len(fixed) - LOG_LIMIT} more)"] if len(fixed) > LOG_LIMIT else []
        writer.append_log("lint --fix", "wiki", [f"fixed {len(fixed)}: {head}", *fixed[:LOG_LIMIT], *more])
    return fixed
