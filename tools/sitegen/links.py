"""URLs of built pages, and links from wiki pages into raw/ turned into hosted or plain paths."""

from __future__ import annotations

import html
import posixpath
import re
from urllib.parse import quote

from .. import mdtext
from ..mdscan import is_external, md_link_spans, resolve, split_target
from ..wikiscan import slug
from .pages_view import SitePage


def page_url(src: str, directory_urls: bool = True) -> str:
    """Site-root-relative URL of a docs-relative source file ('wiki/a/b.md' -> 'wiki/a/b/')."""
    if not src.endswith(".md"):
        return src
    stem = src[:-3]
    base = posixpath.basename(stem)
    if base in ("index", "README"):
        d = posixpath.dirname(stem)
        return d + "/" if d else ""
    return stem + "/" if directory_urls else stem + ".html"


def href(url: str) -> str:
    """A URL made of a page's path as a browser must be given it: ``#``, ``?``, ``%`` and spaces in a file's name
    percent-encoded (``p0#x/`` would be page ``p0`` at anchor ``x/``)."""
    return quote(url, safe="/")


def rel_url(from_url: str, to_url: str) -> str:
    """Relative href from the page served at ``from_url`` to ``to_url`` (both site-root-relative)."""
    from_dir = from_url if from_url.endswith("/") or not from_url else posixpath.dirname(from_url) + "/"
    rel = posixpath.relpath("/" + to_url, "/" + from_dir) if to_url else posixpath.relpath("/", "/" + from_dir)
    if to_url.endswith("/") and not rel.endswith("/"):
        rel += "/"
    return "./" if rel in (".", "./") else rel


def normalize_remote(remote: str) -> str:
    """'git@github.com:org/repo.git' -> 'https://github.com/org/repo'."""
    r = remote.strip()
    m = re.match(r"^[\w.-]+@([\w.-]+):(.+)$", r)
    if m:
        r = f"https://{m.group(1)}/{m.group(2)}"
    r = re.sub(r"^ssh://[\w.-]+@", "https://", r)
    return re.sub(r"\.git/?$", "", r).rstrip("/")


def hosted(remote: str, commit: str | None, path: str, line: int | None = None) -> str | None:
    """Browsable URL of a file on a forge, or None when the remote is not http(s)."""
    from ..gitinfo import forge_blob

    base = normalize_remote(remote)
    if not base.startswith(("http://", "https://")):
        return None
    return forge_blob(base, commit or "HEAD", path, line)


class Sources:
    """Where the code of each ingested repository can be read: from the codebase pages' frontmatter."""

    def __init__(self, pages: list[SitePage], raw_url: str | None = None):
        self.raw_url = raw_url.rstrip("/") + "/" if raw_url else None
        self.by_dir: dict[str, dict] = {}   # 'raw/code/<dir>' -> codebase meta
        self.by_repo: dict[str, dict] = {}  # slug(repo) -> codebase meta
        self.folders: set[str] = {"."}      # the wiki's folders
        self.landing: dict[str, str] = {}   # folder -> its landing page's file name on the site (``set_landing``)
        for p in pages:
            d = posixpath.dirname(p.rel)
            while d and d not in self.folders:
                self.folders.add(d)
                d = posixpath.dirname(d)
            if p.type != "codebase":
                continue
            if isinstance(p.meta.get("path"), str):
                self.by_dir[p.meta["path"].strip("/")] = p.meta
            if p.meta.get("repo"):
                self.by_repo[slug(p.meta["repo"])] = p.meta

    def set_landing(self, files: set[str]) -> None:
        """Which folders have a landing page on the site, from the wiki-relative files it will hold (the pages
        and the generated listings): its index.md, else its README.md. A deep folder listed on its parent's
        landing page has none, and a link to it is left as written."""
        for folder in self.folders:
            base = "" if folder == "." else folder + "/"
            for name in ("index.md", "README.md"):
                if base + name in files:
                    self.landing[folder] = name
                    break

    def for_repo(self, repo: str) -> dict | None:
        return self.by_repo.get(slug(repo))

    def kernel_source(self, meta: dict) -> tuple[str, str | None]:
        """(plain 'repo/path:line' text, hosted URL or None) for a kernel page's frontmatter."""
        repo, path, line = str(meta.get("repo") or ""), str(meta.get("path") or ""), meta.get("line")
        plain = f"{repo}/{path}" + (f":{line}" if isinstance(line, int) else "")
        cb = self.for_repo(repo) or {}
        url = None
        if cb.get("remote"):
            url = hosted(str(cb["remote"]), meta.get("commit") or cb.get("commit"), path,
                         line if isinstance(line, int) else None)
        return plain, url

    def raw_target(self, project_rel: str, anchor: str = "") -> str | None:
        """Hosted URL for a project-relative raw/ path, or None to show it as a plain path."""
        parts = project_rel.split("/")
        if len(parts) >= 3 and parts[:2] == ["raw", "code"]:
            cb = self.by_dir.get("/".join(parts[:3])) or self.by_repo.get(slug(parts[2]))
            if cb and cb.get("remote"):
                m = re.match(r"#L(\d+)", anchor)
                return hosted(str(cb["remote"]), cb.get("commit"), "/".join(parts[3:]),
                              int(m.group(1)) if m else None)
        if self.raw_url:
            return self.raw_url + project_rel + anchor
        return None


def _unescaped(label: str) -> str:
    """A link label as the text it shows (markdown escapes and HTML entities undone, code ticks dropped)."""
    return html.unescape(mdtext.unescape(label.strip().strip("`")))


def local_note(trees: list[str]) -> str:
    shown = ", ".join(f"`{t}`" for t in trees[:3]) + (f" and {len(trees) - 3} more" if len(trees) > 3 else "")
    return (f"*Source paths on this page are plain text: {shown} {'is a local tree' if len(trees) == 1 else 'are local trees'} "
            "(no remote recorded) and `raw/` is not published with the site.*")


_H1 = re.compile(r"^# [^\n]*$", re.M)


def _with_note(body: str, note: str) -> str:
    """``note`` as a paragraph after the page's title heading (after any frontmatter; else first)."""
    start = 0
    if body.startswith("---\n"):
        end = body.find("\n---", 3)
        if end != -1:
            nl = body.find("\n", end + 4)
            start = len(body) if nl == -1 else nl + 1
    m = _H1.search(body, start)
    at = m.end() if m else start
    return body[:at] + ("\n\n" if m else "") + note + "\n\n" + body[at:].lstrip("\n")


def rewrite_raw_links(body: str, page_rel: str, sources: Sources, wiki_prefix: str = "wiki") -> str:
    """Replace links that leave wiki/ for raw/ (or anywhere outside the site) by hosted URLs or plain code; a page
    whose code references stay plain says why (the tree is local). A link to a wiki folder (``../kernels/``) is
    pointed at its landing page (``../kernels/index.md``, or its README.md): MkDocs rewrites links to pages only,
    and a folder's relative path, read from a page served at ``a/b/``, is one level off (a 404)."""
    if ".." not in body and "/)" not in body and "/#" not in body:  # nothing leaves wiki/, no folder link: most
        return body                                                   # pages, read no further
    out, last = [], 0
    local: dict[str, None] = {}
    for start, end, text, target in md_link_spans(body):
        if start and body[start - 1] == "!":  # images stay as they are
            continue
        raw_target = target.strip()
        target, anchor = split_target(raw_target)
        if not target or is_external(target):
            continue
        path = resolve(page_rel, target)
        if not path.startswith("../"):
            page = sources.landing.get(path)
            if page and not raw_target.startswith(("<", "/")):
                folder = raw_target[:len(raw_target) - len(anchor)].rstrip("/")  # as written (%20 kept)
                out += [body[last:start], f"[{text}]({folder + '/' if folder else ''}{page}{anchor})"]
                last = end
            continue
        project_rel = posixpath.normpath(posixpath.join(wiki_prefix, path))
        if project_rel.startswith("../"):
            continue
        url = sources.raw_target(project_rel, anchor)
        if not url and project_rel.startswith("raw/code/"):
            local["/".join(project_rel.split("/")[:3])] = None
        if url:
            repl = f"[{text}]({url})"
        elif text.strip("`") == project_rel or not text.strip():
            repl = f"`{project_rel}`"
        elif re.fullmatch(r"\d+", text.strip()):  # a line number beside the file it belongs to: keep it compact
            repl = text.strip()
        elif posixpath.basename(project_rel) in (plain := _unescaped(text)):  # the text already names the file
            line = re.match(r"#L(\d+)", anchor)
            repl = mdtext.code(plain + (f":{line.group(1)}" if line and f":{line.group(1)}" not in plain else ""))
        else:
            repl = f"{text} (`{project_rel}`)"
        out.append(body[last:start])
        out.append(repl)
        last = end
    if not out:
        return body
    out.append(body[last:])
    text = "".join(out)
    return _with_note(text, local_note(list(local))) if local else text
