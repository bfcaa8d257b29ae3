"""The one writer: every page and generated file under wiki/ goes through here.

Writes are atomic (temp file in the same folder, fsync, rename). Writing the same bytes again
touches nothing, so an unchanged regeneration leaves mtimes alone. Pages keep what people wrote
outside generated regions, keep their ``created`` date, and get a new ``updated`` date only when
their content really changed.

Concurrency: every read-merge-write of a page holds the knowledge base's write lock (``wiki/.write.lock``), so
two commands (24 concurrent ingests) never merge into a stale copy, and the write is a compare-and-swap against
the bytes it merged with, so an editor saving meanwhile (who takes no lock) is re-read and kept, not overwritten.
Temp files are named ``.<name>.<pid>.<random>.tmp``; a writer removes those whose process is gone.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import re
import stat
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Callable, Iterator

from . import pages, safeio
from .redact import redact, redact_added
from .errors import InputError

log = logging.getLogger("tools.writer")
LOCK_NAME = ".write.lock"
LATE_APPEND_S = 0.002  # how long an append that opened the old file may take to land in it
CAS_ATTEMPTS = 8
LOG_LIMIT = 256 * 1024 * 1024  # wiki/log.md is appended to by rewriting it: past this, someone else's
_TEMP = re.compile(r"^\..*\.(\d+)\.[A-Za-z0-9_]+\.tmp$")

CREATED, UPDATED, UNCHANGED, REMOVED = "created", "updated", "unchanged", "removed"


def _staged(path: Path, raw: bytes) -> str:
    """A temp file beside ``path`` holding ``raw``, synced: renaming it over ``path`` is the whole write."""
    path.parent.mkdir(parents=True, exist_ok=True)
    # The name is bounded (a 250-byte page name plus a prefix would pass NAME_MAX) and carries the pid.
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name[:48]}.{os.getpid()}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(raw)
            f.flush()
            os.fsync(f.fileno())
        try:  # the file's own mode kept (a private page stays private), else the usual one for a new file
            mode = os.stat(path).st_mode & 0o7777
        except OSError:
            mode = 0o644
        os.chmod(tmp, mode)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    return tmp


def atomic_write(path: Path, data: str | bytes) -> None:
    tmp = _staged(path, data.encode("utf-8") if isinstance(data, str) else data)
    try:
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def write_if_changed(path: Path, data: str | bytes) -> str:
    raw = data.encode("utf-8") if isinstance(data, str) else data
    cur = _current(path)
    if cur == raw:
        return UNCHANGED
    status = CREATED if cur is None else UPDATED
    atomic_write(path, raw)
    return status


_held = threading.local()


def open_lock_file(path: Path):
    """``path`` opened for reading and appending (created if needed), never through a link: one planted at
    ``wiki/.write.lock`` or a loop's ``.driver.lock`` would create or truncate its target wherever it points."""
    flags = os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(path, flags, 0o644)
    except OSError as e:
        raise InputError(path, f"the lock file cannot be opened ({e.strerror}; a link is not followed)") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise InputError(path, "the lock file is not a regular file")
    return os.fdopen(fd, "a+")


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """An exclusive advisory lock held on ``path`` (created if needed) for the block; re-entrant within a
    thread (a nested block on the same path holds it already), exclusive across threads and processes."""
    key = str(path)
    depth = getattr(_held, "depth", None)
    if depth is None:
        depth = _held.depth = Counter()
    if depth[key]:
        depth[key] += 1
        try:
            yield
        finally:
            depth[key] -= 1
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    with open_lock_file(path) as f:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX)
        depth[key] += 1
        try:
            yield
        finally:
            depth[key] -= 1
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)


PAGE_LIMIT = 64 * 1024 * 1024  # a page or file under wiki/ larger than this is someone else's, never rewritten


def _current(path: Path) -> bytes | None:
    """The bytes now at ``path`` (None: nothing there). A FIFO, a device or a huge file where a page belongs is not
    read (a FIFO would hang the writer) nor replaced: InputError names it."""
    try:
        return safeio.read_bytes(path, PAGE_LIMIT)
    except FileNotFoundError:
        return None
    except safeio.Refused as e:
        raise InputError(path, f"{e}: not a file this tool reads or replaces") from None


def _open_existing(path: Path) -> int | None:
    try:
        return os.open(path, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        return None


def _read_fd(fd: int) -> bytes:
    chunks, offset = [], 0
    while chunk := os.pread(fd, 1 << 20, offset):
        chunks.append(chunk)
        offset += len(chunk)
    return b"".join(chunks)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def sweep_temps(root: Path) -> list[str]:
    """Remove temp files left by writers that were killed (their pid is gone); returns what was removed."""
    removed = []
    for dirpath, dirnames, filenames in os.walk(root):
        for name in filenames:
            m = _TEMP.match(name)
            if m and int(m.group(1)) != os.getpid() and not _pid_alive(int(m.group(1))):
                with contextlib.suppress(OSError):
                    os.unlink(os.path.join(dirpath, name))
                    removed.append(os.path.relpath(os.path.join(dirpath, name), root))
    return removed


class Writer:
    """Writes pages and files under one wiki root and counts what happened."""

    def __init__(self, wiki: Path, today: str | None = None):
        self.wiki = Path(wiki)
        self.today = today or pages.today()
        self.stats: Counter[str] = Counter()
        self.changed: dict[str, list[str]] = {CREATED: [], UPDATED: [], REMOVED: []}
        self.swept = sweep_temps(self.wiki) if self.wiki.is_dir() else []
        self._root: Path | None = None  # wiki.resolve(), once it exists

    def exclusive(self):
        """Hold the knowledge base's write lock for a read-compute-write sequence (index, directories)."""
        return locked(self.wiki / LOCK_NAME)

    def _note(self, rel: str, status: str) -> str:
        self.stats[status] += 1
        if status in self.changed:
            self.changed[status].append(rel)
        return status

    def target(self, rel: str) -> Path:
        p = (self.wiki / rel).resolve()
        if self._root is None:
            self._root = self.wiki.resolve()
        if not p.is_relative_to(self._root):
            raise InputError(rel, "page path escapes wiki/")
        return p

    def render_page(self, page: pages.Page, current: bytes | None = None, *, read: bool = True) -> str:
        """The text ``write_page`` would leave on disk, merged with ``current`` (read from disk by default)."""
        path = self.target(page.path)
        if read and current is None:
            current = _current(path)
        meta = dict(page.meta)
        body = page.body
        old_text = None
        if current is not None:
            try:
                old_text = current.decode("utf-8").removeprefix("\ufeff")
            except UnicodeDecodeError:
                raise InputError(path, "existing page is not UTF-8; refusing to overwrite") from None
        if old_text is not None:
            try:
                old_meta, old_body = pages.split(old_text)
            except pages.FrontmatterError:
                old_meta, old_body = None, old_text
            old_meta = old_meta or {}
            # Keys people added by hand survive; generated keys win.
            merged = {k: v for k, v in old_meta.items() if k not in meta and k not in page.owned_meta}
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
        path = self.target(page.path)
        return self._note(page.path, self._swap(path, lambda cur: self.render_page(page, cur, read=False)))

    def update_file(self, rel: str, change: Callable[[str], str | None]) -> str:
        """Apply ``change`` to the file's text as it is at write time (never to a snapshot taken earlier):
        ``change(text)`` returns the new text, or None for no change. For ``lint --fix`` and other edits."""
        path = self.target(rel)

        def render(cur: bytes | None) -> str | None:
            if cur is None:
                return None
            try:
                text = cur.decode("utf-8")
            except UnicodeDecodeError:  # a page from someone else: left as it is (lint reports it)
                return None
            return change(text)
        return self._note(rel, self._swap(path, render))

    def _swap(self, path: Path, render: Callable[[bytes | None], str | None]) -> str:
        """Render from the current bytes and write, unless the file changed meanwhile (then render again)."""
        with self.exclusive():
            status = None
            base = disk = _current(path)  # what we render from, and what we expect to replace
            for _ in range(CAS_ATTEMPTS):
                text = render(base)
                if text is None:
                    return status or UNCHANGED
                # never a key or token, whatever a command or a crash message held; a person's own lines stay
                text = redact_added(text, base.decode("utf-8", "replace") if base is not None else None)
                raw = text.encode("utf-8")
                if disk == raw:
                    return status or UNCHANGED
                tmp = _staged(path, raw)  # the slow part (fsync) before the check, so the window is the rename
                old = _open_existing(path)
                try:
                    if (_read_fd(old) if old is not None else None) != disk:  # an editor saved meanwhile
                        os.unlink(tmp)
                        base = disk = _current(path)
                        continue
                    os.replace(tmp, path)
                    status = status or (CREATED if disk is None else UPDATED)
                    # An append that opened the old file just before the rename lands in it, not in ours:
                    # look once more (after a moment: an editor's open and write are not one step), and merge what
                    # was appended there into what is at the path now.
                    if old is not None:
                        time.sleep(LATE_APPEND_S)
                    late = _read_fd(old) if old is not None else None
                finally:
                    if old is not None:
                        os.close(old)
                if late == disk:
                    return status
                now = _current(path) or b""
                if not (late and disk is not None and late.startswith(disk) and now.startswith(raw)):
                    log.warning("%s: changed by someone else while being written; check it", path)
                    return status
                base, disk = late + now[len(raw):], now
        raise InputError(path, f"changed on each of {CAS_ATTEMPTS} attempts to update it; nothing written, try again")

    def write_file(self, rel: str, data: str | bytes) -> str:
        """A generated non-page file under wiki/ (symbols.tsv, graph data, ...)."""
        return self._note(rel, write_if_changed(self.target(rel), redact(data) if isinstance(data, str) else data))

    def remove(self, rel: str) -> str | None:
        """Remove the file at ``rel``; a link is removed itself, never the file it points to (which may be
        anywhere, a page of another folder among them)."""
        p = self.target(str(Path(rel).parent)) / Path(rel).name  # the folder inside wiki/, the name not followed
        if p.is_symlink() or p.is_file():
            p.unlink()
            return self._note(rel, REMOVED)
        return None

    def append_log(self, op: str, subject: str, lines: list[str] | None = None) -> None:
        """Append ``## [date] op | subject`` and its detail lines to wiki/log.md."""
        path = self.target("log.md")
        entry = f"\n## [{self.today}] {op} | {subject}\n\n"
        entry += "".join(f"- {ln}\n" for ln in (lines or [])) or "- no changes\n"
        entry = redact(entry)
        with locked(path.with_name(".log.lock")):
            try:  # a bounded read of a regular file: a FIFO there made every command that logs wait forever
                old = safeio.read_text(path, LOG_LIMIT, within=self.wiki)
            except FileNotFoundError:
                old = pages.render({"title": "Log", "type": "log"}, "# Log\n\nAppend-only record of operations.\n")
            except OSError as e:  # someone else's log (not UTF-8, not a file, too large): left as it is, and said
                log.warning("wiki/log.md: %s; left untouched, this %s not logged", e, op)
                return
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
