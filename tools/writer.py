"""The one writer: every page and generated file under wiki/ goes through here.

Writes are atomic (temp file in the same folder, fsync, rename). Writing the same bytes again
touches nothing, so an unchanged regeneration leaves mtimes alone. Pages keep what people wrote
outside generated regions, keep their ``created`` date, and get a new ``updated`` date only when
their content really changed.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
from collections import Counter
from pathlib import Path
from typing import Iterator

from . import pages
from .errors import InputError

CREATED, UPDATED, UNCHANGED, REMOVED = "created", "updated", "unchanged", "removed"


def atomic_write(path: Path, data: str | bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    raw = data.encode("utf-8") if isinstance(data, str) else data
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(raw)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def write_if_changed(path: Path, data: str | bytes) -> str:
    raw = data.encode("utf-8") if isinstance(data, str) else data
    try:
        if path.read_bytes() == raw:
            return UNCHANGED
        status = UPDATED
    except FileNotFoundError:
        status = CREATED
    atomic_write(path, raw)
    return status


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """An exclusive advisory lock held on ``path`` (created if needed) for the block."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as f:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)


class Writer:
    """Writes pages and files under one wiki root and counts what happened."""

    def __init__(self, wiki: Path, today: str | None = None):
        self.wiki = Path(wiki)
        self.today = today or pages.today()
        self.stats: Counter[str] = Counter()
        self.changed: dict[str, list[str]] = {CREATED: [], UPDATED: [], REMOVED: []}

    def _note(self, rel: str, status: str) -> str:
        self.stats[status] += 1
        if status in self.changed:
            self.changed[status].append(rel)
        return status

    def target(self, rel: str) -> Path:
        p = (self.wiki / rel).resolve()
        if not p.is_relative_to(self.wiki.resolve()):
            raise InputError(rel, "page path escapes wiki/")
        return p

    def render_page(self, page: pages.Page) -> str:
        """The bytes ``write_page`` would leave on disk (merged with what is there)."""
        path = self.target(page.path)
        meta = dict(page.meta)
        body = page.body
        old_text = None
        try:
            old_text = path.read_text(encoding="utf-8").removeprefix("\ufeff")
        except FileNotFoundError:
            pass
        except UnicodeDecodeError:
            raise InputError(path, "existing page is not UTF-8; refusing to overwrite") from None
        if old_text is not None:
            try:
                old_meta, old_body = pages.split(old_text)
            except pages.FrontmatterError:
                old_meta, old_body = None, old_text
            old_meta = old_meta or {}
            # Keys people added by hand survive; generated keys win.
            merged = {k: v for k, v in old_meta.items() if k not in meta}
            merged.update(meta)
            for k in page.preserve_meta:
                if k in old_meta:
                    merged[k] = old_meta[k]
            meta = merged
            body = pages.merge_body(old_body, body, page.keep_regions)
            meta.setdefault("created", self.today)
            # Same content apart from the date stamp: keep the old stamp.
            if "updated" in old_meta:
                meta["updated"] = old_meta["updated"]
                text = pages.render(meta, body)
                if text == old_text:
                    return text
            meta["updated"] = self.today
            return pages.render(meta, body)
        meta.setdefault("created", self.today)
        meta.setdefault("updated", self.today)
        # A fresh page holds no empty regions (an empty region means "nothing here from me").
        return pages.render(meta, pages.drop_empty_regions(body))

    def write_page(self, page: pages.Page) -> str:
        text = self.render_page(page)
        return self._note(page.path, write_if_changed(self.target(page.path), text))

    def write_file(self, rel: str, data: str | bytes) -> str:
        """A generated non-page file under wiki/ (symbols.tsv, graph data, ...)."""
        return self._note(rel, write_if_changed(self.target(rel), data))

    def remove(self, rel: str) -> str | None:
        p = self.target(rel)
        if p.exists():
            p.unlink()
            return self._note(rel, REMOVED)
        return None

    def append_log(self, op: str, subject: str, lines: list[str] | None = None) -> None:
        """Append ``## [date] op | subject`` and its detail lines to wiki/log.md."""
        path = self.target("log.md")
        entry = f"\n## [{self.today}] {op} | {subject}\n\n"
        entry += "".join(f"- {ln}\n" for ln in (lines or [])) or "- no changes\n"
        with locked(path.with_name(".log.lock")):
            try:
                old = path.read_text(encoding="utf-8")
            except FileNotFoundError:
                old = pages.render({"title": "Log", "type": "log"}, "# Log\n\nAppend-only record of operations.\n")
            atomic_write(path, old.rstrip("\n") + "\n" + entry)

    def log_changes(self, op: str, subject: str, limit: int = 30) -> None:
        """Log what this writer created, updated and removed (long lists are elided)."""
        lines = []
        for status in (CREATED, UPDATED, REMOVED):
            items = sorted(self.changed[status])
            if not items:
                continue
            shown = ", ".join(items[:limit])
            more = f" (+{len(items) - limit} more)" if len(items) > limit else ""
            lines.append(f"{status} {len(items)}: {shown}{more}")
        self.append_log(op, subject, lines)
