"""Bounded reads of files we did not write: a regular file, inside its tree, under a size limit, or a clear reason.

Every reader of ``raw/`` and of pages written by others goes through here, so no input can hang a command (a FIFO
at ``.git/HEAD``), exhaust its memory (``.git/HEAD`` -> ``/dev/zero``, a sparse 64 GB file), or pull a file from
outside the knowledge base into it (a page that is a symlink to ``/etc/passwd``). The checks are made on the open
descriptor (``O_NOFOLLOW | O_NONBLOCK``, then ``fstat``, and where a tree is given the path the kernel opened), so a
file or a folder on its path swapped between the check and the read is caught.
"""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

DEFAULT_LIMIT = 64 * 1024 * 1024


class Refused(OSError):
    """The file was not read; ``str()`` is the reason, phrased for a skip list ("FIFO (not read)")."""

    def __init__(self, path: str | Path, reason: str):
        super().__init__(reason)
        self.path = str(path)
        self.reason = reason

    def __str__(self) -> str:
        return self.reason


_KINDS = ((stat.S_ISFIFO, "FIFO"), (stat.S_ISCHR, "character device"), (stat.S_ISBLK, "block device"),
          (stat.S_ISSOCK, "socket"), (stat.S_ISDIR, "folder"))


def kind(mode: int) -> str:
    for test, name in _KINDS:
        if test(mode):
            return name
    return "special file"


def inside(path: Path, within: Path) -> bool:
    """Whether ``path``, every link on it resolved, lies in the folder ``within``."""
    return _inside(Path(path), Path(within))


def _inside(path: Path, within: Path) -> bool:
    try:
        real, top = os.path.realpath(path, strict=False), _real(str(within))
    except (OSError, RuntimeError, ValueError):  # a symlink loop
        return False
    return real == top or real.startswith(top.rstrip(os.sep) + os.sep)


def _real(folder: str) -> str:
    """``folder`` with every link resolved, remembered for a moment (a scan checks thousands of files against one
    folder; a folder moved in the meantime is seen within a second)."""
    now = time.monotonic()
    hit = _REAL.get(folder)
    if hit is None or now - hit[1] > 1.0:
        hit = _REAL[folder] = (os.path.realpath(folder), now)
    return hit[0]


_REAL: dict[str, tuple[str, float]] = {}


def _opened_inside(fd: int, within: Path) -> bool:
    """Whether the file the kernel opened lies inside ``within``: a folder on the path can be swapped for a link
    out between ``_inside`` and ``os.open`` (O_NOFOLLOW guards the last component only). Where the kernel does
    not name an open file's path (no ``/proc``), the check before the open stands alone."""
    try:
        real = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return True
    top = _real(str(within))
    return real == top or real.startswith(top.rstrip(os.sep) + os.sep)


def read_bytes(path: str | Path, limit: int = DEFAULT_LIMIT, *, within: str | Path | None = None) -> bytes:
    """The bytes of ``path``, or :class:`Refused` saying why not.

    With ``within``, the file must lie inside that folder once every link on its path is resolved; a symlink is
    followed only then. A file over
    ``limit`` bytes is refused before anything is read (its size comes from ``fstat``, not from reading).
    """
    path = Path(path)
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        raise
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    if within is not None and not stat.S_ISLNK(st.st_mode) and not _inside(path, Path(within)):
        raise Refused(path, "outside its tree (a folder on its path links out; not followed)")
    if stat.S_ISLNK(st.st_mode):
        if within is None or not _inside(path, Path(within)):
            raise Refused(path, "symlink out of its tree (not followed)")
    else:
        flags |= os.O_NOFOLLOW
        if not stat.S_ISREG(st.st_mode):
            raise Refused(path, f"{kind(st.st_mode)} (not read)")
    try:
        fd = os.open(path, flags)
    except OSError as e:
        raise Refused(path, f"unreadable ({e.strerror})") from None
    try:
        if within is not None and not _opened_inside(fd, Path(within)):
            raise Refused(path, "outside its tree (a link on its path changed while it was opened; not followed)")
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise Refused(path, f"{kind(st.st_mode)} (not read)")
        if st.st_size > limit:
            raise Refused(path, f"too large ({_size(st.st_size)} > {_size(limit)})")
        chunks, left = [], limit + 1
        while left > 0:
            b = os.read(fd, min(left, 1 << 20))
            if not b:
                break
            chunks.append(b)
            left -= len(b)
        data = b"".join(chunks)
        if len(data) > limit:  # grew while being read
            raise Refused(path, f"too large (over {_size(limit)})")
        return data
    finally:
        os.close(fd)


def read_text(path: str | Path, limit: int = DEFAULT_LIMIT, *, within: str | Path | None = None) -> str:
    """UTF-8 text (a BOM dropped) of a bounded read; :class:`Refused` when it is not UTF-8."""
    data = read_bytes(path, limit, within=within)
    try:
        return data.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as e:
        raise Refused(path, f"not UTF-8 (byte {e.start})") from None


def try_text(path: str | Path, limit: int = DEFAULT_LIMIT) -> str | None:
    """Text of a small metadata file (``.git/HEAD``, ``pyproject.toml``), or None for anything unsafe or absent."""
    try:
        return read_bytes(path, limit).decode("utf-8", errors="replace")
    except OSError:
        return None


def die_with_parent(parent: int | None = None) -> None:
    """Worker initializer: the kernel kills this process when its parent dies (Linux ``PR_SET_PDEATHSIG``), so a
    ``kill -9`` of a command leaves no parser workers behind. ``parent``: the pool's maker (``pool_parent()``)."""
    try:
        import ctypes
        import signal

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, int(signal.SIGKILL), 0, 0, 0)  # 1 = PR_SET_PDEATHSIG
        # the parent died before the call: its orphans went to init, or to a subreaper (tini -s, systemd --user,
        # a command run by `tools exp run`), whose pid is no sign
        if os.getppid() == 1 or parent is not None and os.getppid() != parent:
            os._exit(1)
    except (OSError, AttributeError):
        pass


def pool_parent() -> tuple[int, ...]:
    """``initargs`` for a pool of ``die_with_parent`` workers: this process, where workers are its forks (not
    under a fork server, whose children's parent it is not)."""
    import multiprocessing

    # allow_none: asking must not fix the start method for the whole process (the platform's default comes first)
    method = multiprocessing.get_start_method(allow_none=True) or multiprocessing.get_all_start_methods()[0]
    return (os.getpid(),) if method == "fork" else ()


def _size(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)
