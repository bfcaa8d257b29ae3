"""Which files of a checkout are as committed: read from ``.git/index`` directly (no git binary, nothing run).

A codebase page links a file's line to the forge at the pinned commit. That line is only there if the file on disk
is the committed one: a file edited in place, one git does not track (untracked, or in a nested repository of its
own), would get a link to another line or to a 404. ``Tracked`` answers per file, the way git itself does: the
index's size, mtime and ctime for the file, else its content's blob hash against the index's.

Index versions 2, 3 and 4 are read. An index that cannot be read (absent, too large, another format) answers
``None``: not known, and the caller keeps its forge links as before.
"""

from __future__ import annotations

import hashlib
import os
import struct
from pathlib import Path

from . import safeio
from .gitinfo import git_dir, head_commit

INDEX_LIMIT = 256 * 1024 * 1024
FILE_LIMIT = 64 * 1024 * 1024
GITLINK = 0o160000  # a submodule's entry: the folder is another repository


def read_index(data: bytes, oid_len: int = 20) -> dict[str, tuple[bytes, int, int, int]]:
    """path -> (blob id, size, mtime in ns, ctime in ns) of the index's stage-0 file entries; ValueError on
    anything not an index."""
    if len(data) < 12 or data[:4] != b"DIRC":
        raise ValueError("not a git index")
    version, count = struct.unpack(">II", data[4:12])
    if version not in (2, 3, 4):
        raise ValueError(f"index version {version}")
    out: dict[str, tuple[bytes, int, int, int]] = {}
    pos, prev = 12, b""
    fixed = 40 + oid_len + 2  # ten 32-bit stat fields, the object id, the flags
    for _ in range(count):
        if pos + fixed > len(data):
            raise ValueError("truncated index")
        ctime_s, ctime_ns, mtime_s, mtime_ns = struct.unpack(">IIII", data[pos:pos + 16])
        mode, size = struct.unpack(">I", data[pos + 24:pos + 28])[0], struct.unpack(">I", data[pos + 36:pos + 40])[0]
        oid = data[pos + 40:pos + 40 + oid_len]
        flags = struct.unpack(">H", data[pos + 40 + oid_len:pos + fixed])[0]
        head = fixed + (2 if version >= 3 and flags & 0x4000 else 0)
        start = pos + head
        if version == 4:  # the path: drop N bytes of the previous one (git's offset varint), then a suffix
            b, n = data[start], start + 1
            drop = b & 0x7F
            while b & 0x80:
                b, n = data[n], n + 1
                drop = ((drop + 1) << 7) | (b & 0x7F)
                if n - start > 8:  # no path is that long: a crafted run of 0xFF would grow it without end
                    raise ValueError("index path prefix too long")
            end = data.index(b"\0", n)
            path = (prev[:len(prev) - drop] if drop else prev) + data[n:end]
            pos = end + 1
        else:
            end = data.index(b"\0", start)
            path = data[start:end]
            pos += (head + len(path) + 8) // 8 * 8
        prev = path
        if (flags >> 12) & 3 or mode == GITLINK or mode & 0o170000 == 0o040000:  # a conflict stage, a submodule,
            continue                                                             # a sparse index's folder
        out[path.decode("utf-8", "surrogateescape")] = (oid, size & 0xFFFFFFFF, mtime_s * 10 ** 9 + mtime_ns,
                                                         ctime_s * 10 ** 9 + ctime_ns)
    return out


def blob_id(data: bytes, oid_len: int = 20) -> bytes:
    """Git's object id of a file's content (SHA-1, or SHA-256 in a repository of that format)."""
    h = hashlib.sha1() if oid_len == 20 else hashlib.sha256()
    h.update(b"blob %d\0" % len(data))
    h.update(data)
    return h.digest()


class Tracked:
    """``tracked(rel)``: True when the file at ``rel`` is as the index holds it, False when it was edited or git
    does not track it, None when the index could not be read."""

    def __init__(self, repo: Path):
        self.repo = Path(repo)
        self._entries: dict | None = None
        self._oid_len = 20
        self._known: dict[str, bool] = {}
        self._loaded = False

    def _load(self) -> None:
        self._loaded = True
        gd = git_dir(self.repo)
        if gd is None:
            return
        commit = head_commit(self.repo)
        self._oid_len = 32 if commit and len(commit) == 64 else 20
        try:
            self._entries = read_index(safeio.read_bytes(gd / "index", INDEX_LIMIT), self._oid_len)
        except (OSError, ValueError, IndexError, struct.error):
            self._entries = None

    def __call__(self, rel: str) -> bool | None:
        if not self._loaded:
            self._load()
        if self._entries is None:
            return None
        hit = self._known.get(rel)
        if hit is None:
            hit = self._known[rel] = self._check(rel)
        return hit

    def _check(self, rel: str) -> bool:
        entry = self._entries.get(rel) if self._entries is not None else None
        if entry is None:
            return False
        oid, size, mtime, ctime = entry
        path = self.repo / rel
        try:
            st = os.lstat(path)
        except OSError:
            return False
        if st.st_size & 0xFFFFFFFF == size and st.st_mtime_ns == mtime and st.st_ctime_ns == ctime:
            return True  # git's own test: the file was not written since it was checked out
        try:
            return blob_id(safeio.read_bytes(path, FILE_LIMIT, within=self.repo), self._oid_len) == oid
        except OSError:
            return False
