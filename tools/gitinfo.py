"""Pinned commit and remote of a checkout, read from .git directly (no git binary, nothing run)."""

from __future__ import annotations

import configparser
import re
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class GitInfo:
    commit: str | None
    remote: str | None  # as configured (origin first)
    web: str | None  # https://github.com/owner/repo when the remote is a known host

    def blob_url(self, path: str, line: int | None = None) -> str | None:
        if not (self.web and self.commit):
            return None
        anchor = f"#L{line}" if line else ""
        return f"{self.web}/blob/{self.commit}/{path}{anchor}"


def git_dir(repo: Path) -> Path | None:
    dot = repo / ".git"
    if dot.is_dir():
        return dot
    if dot.is_file():  # worktrees and submodules: "gitdir: <path>"
        m = re.match(r"gitdir:\s*(.+)", dot.read_text(errors="replace").strip())
        if m:
            target = Path(m.group(1))
            target = target if target.is_absolute() else (repo / target)
            return target.resolve() if target.is_dir() else None
    return None


def _common_dir(gd: Path) -> Path:
    common = gd / "commondir"
    if common.is_file():
        return (gd / common.read_text().strip()).resolve()
    return gd


def _resolve_ref(gd: Path, ref: str, depth: int = 0) -> str | None:
    if depth > 5:
        return None
    for base in (gd, _common_dir(gd)):
        f = base / ref
        if f.is_file():
            val = f.read_text(errors="replace").strip()
            if val.startswith("ref:"):
                return _resolve_ref(gd, val[4:].strip(), depth + 1)
            return val if re.fullmatch(r"[0-9a-f]{40,64}", val) else None
        packed = base / "packed-refs"
        if packed.is_file():
            for line in packed.read_text(errors="replace").splitlines():
                parts = line.split()
                if len(parts) == 2 and parts[1] == ref and not line.startswith(("#", "^")):
                    return parts[0]
    return None


def head_commit(repo: Path) -> str | None:
    gd = git_dir(repo)
    if gd is None:
        return None
    try:
        head = (gd / "HEAD").read_text(errors="replace").strip()
    except OSError:
        return None
    if head.startswith("ref:"):
        return _resolve_ref(gd, head[4:].strip())
    return head if re.fullmatch(r"[0-9a-f]{40,64}", head) else None


def web_url(remote: str | None) -> str | None:
    """https://host/owner/repo for github.com / gitlab.com remotes (https, ssh, scp-like)."""
    if not remote:
        return None
    m = re.match(r"^(?:https?://(?:[^@/]+@)?|ssh://(?:[^@/]+@)?|git@)(github\.com|gitlab\.com)[:/](.+?)(?:\.git)?/?$",
                 remote.strip())
    return f"https://{m.group(1)}/{m.group(2)}" if m else None


def remote_url(repo: Path) -> str | None:
    gd = git_dir(repo)
    if gd is None:
        return None
    cfg = _common_dir(gd) / "config"
    parser = configparser.RawConfigParser(strict=False)
    try:
        parser.read(cfg, encoding="utf-8")
    except (configparser.Error, UnicodeDecodeError):
        return None
    remotes = [s for s in parser.sections() if s.startswith('remote "')]
    remotes.sort(key=lambda s: s != 'remote "origin"')
    for s in remotes:
        if parser.has_option(s, "url"):
            return parser.get(s, "url")
    return None


def read(repo: Path) -> GitInfo:
    remote = remote_url(repo)
    return GitInfo(head_commit(repo), remote, web_url(remote))
