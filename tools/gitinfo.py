"""Pinned commit and remote of a checkout, read from .git directly (no git binary, nothing run)."""

from __future__ import annotations

import configparser
import os
import stat
import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from .safeio import kind, try_text

SMALL = 1024 * 1024          # HEAD, refs, config, commondir
PACKED_REFS = 64 * 1024 * 1024


@dataclass(frozen=True)
class GitInfo:
    commit: str | None
    remote: str | None  # as configured (origin first)
    web: str | None  # https://github.com/owner/repo when the remote is a known host

    def blob_url(self, path: str, line: int | None = None) -> str | None:
        if not (self.web and self.commit):
            return None
        return forge_blob(self.web, self.commit, path, line)


def forge_blob(web: str, ref: str, path: str, line: int | None = None) -> str:
    """The web view of ``path`` at ``ref`` on a forge: GitHub ``/blob/<ref>/p#L3``, GitLab (any host named for it)
    ``/-/blob/<ref>/p#L3``, Bitbucket ``/src/<ref>/p#lines-3``; other hosts get GitHub's form."""
    host = re.sub(r"^https?://", "", web).split("/", 1)[0].lower()
    p = quote(path.lstrip("/"), safe="/")
    if "gitlab" in host:
        return f"{web}/-/blob/{ref}/{p}" + (f"#L{line}" if line else "")
    if host == "bitbucket.org":
        return f"{web}/src/{ref}/{p}" + (f"#lines-{line}" if line else "")
    return f"{web}/blob/{ref}/{p}" + (f"#L{line}" if line else "")


def git_dir(repo: Path) -> Path | None:
    dot = repo / ".git"
    if dot.is_dir():
        return dot
    text = try_text(dot, SMALL) if not dot.is_symlink() else None
    if text is not None:  # worktrees and submodules: "gitdir: <path>"
        m = re.match(r"gitdir:\s*(.+)", text.strip())
        if m:
            target = Path(m.group(1))
            target = target if target.is_absolute() else (repo / target)
            return target.resolve() if target.is_dir() else None
    return None


def _common_dir(gd: Path) -> Path:
    text = try_text(gd / "commondir", SMALL)
    return (gd / text.strip()).resolve() if text else gd


def _plain_ref(ref: str) -> bool:
    """``refs/heads/main``; not an absolute path or one that climbs out of .git (a crafted HEAD)."""
    return bool(ref) and not ref.startswith("/") and ".." not in ref.split("/") and "\0" not in ref


def _resolve_ref(gd: Path, ref: str, depth: int = 0) -> str | None:
    if depth > 5:
        return None
    for base in (gd, _common_dir(gd)):
        val = try_text(base / ref, SMALL) if _plain_ref(ref) else None
        if val is not None:
            val = val.strip()
            if val.startswith("ref:"):
                return _resolve_ref(gd, val[4:].strip(), depth + 1)
            return val if re.fullmatch(r"[0-9a-f]{40,64}", val) else None
        packed = try_text(base / "packed-refs", PACKED_REFS)
        if packed is not None:
            for line in packed.splitlines():
                parts = line.split()
                if len(parts) == 2 and parts[1] == ref and not line.startswith(("#", "^")):
                    return parts[0]
    return None


def head_commit(repo: Path) -> str | None:
    gd = git_dir(repo)
    if gd is None:
        return None
    head = try_text(gd / "HEAD", SMALL)
    if head is None:
        return None
    head = head.strip()
    if head.startswith("ref:"):
        return _resolve_ref(gd, head[4:].strip())
    return head if re.fullmatch(r"[0-9a-f]{40,64}", head) else None


def web_url(remote: str | None) -> str | None:
    """https://host/owner/repo for GitHub, GitLab (gitlab.com and gitlab.* hosts) and Bitbucket remotes (https,
    ssh, scp-like)."""
    if not remote:
        return None
    m = re.match(r"^(?:https?://(?:[^@/]+@)?|ssh://(?:[^@/]+@)?|git@)(github\.com|gitlab\.com|gitlab\.[\w.-]+|bitbucket\.org)[:/]"
                 r"([A-Za-z0-9_.-]+(?:/[A-Za-z0-9_.-]+)+?)(?:\.git)?/?$",
                 remote.strip())
    return f"https://{m.group(1)}/{m.group(2).removesuffix('.git')}" if m else None


def remote_url(repo: Path) -> str | None:
    gd = git_dir(repo)
    if gd is None:
        return None
    text = try_text(_common_dir(gd) / "config", SMALL)
    if text is None:
        return None
    parser = configparser.RawConfigParser(strict=False)
    try:
        parser.read_string(text)
    except configparser.Error:
        return None
    remotes = [s for s in parser.sections() if s.startswith('remote "')]
    remotes.sort(key=lambda s: s != 'remote "origin"')
    for s in remotes:
        if parser.has_option(s, "url"):
            return parser.get(s, "url")
    return None


def problems(repo: Path) -> list[tuple[str, str]]:
    """(path, reason) for the git metadata files ingest would not read: a FIFO, a device, a link out of .git."""
    out = []
    for rel in (".git/HEAD", ".git/config", ".git/packed-refs", ".git/commondir"):
        p = repo / rel
        if not os.path.lexists(p):
            continue
        st = os.lstat(p)
        if stat.S_ISLNK(st.st_mode):
            out.append((rel, f"symlink to {os.readlink(p)} (not followed)"))
        elif not stat.S_ISREG(st.st_mode):
            out.append((rel, f"{kind(st.st_mode)} (not read)"))
    return out


PROVENANCE = ".tools-provenance.json"  # {"remote": URL, "ref": tag or commit}: a snapshot of a tree with no .git


def provenance(repo: Path) -> tuple[str, str] | None:
    """(remote, ref) a snapshot declares about itself (`tools demo` writes one for the installed jax), else None."""
    import json

    text = try_text(repo / PROVENANCE, SMALL)
    try:
        data = json.loads(text) if text else None
    except ValueError:
        return None
    if isinstance(data, dict) and isinstance(data.get("remote"), str) and isinstance(data.get("ref"), str) \
            and re.fullmatch(r"[\w.\-/]{1,200}", data["ref"]) and ".." not in data["ref"]:
        return data["remote"], data["ref"]
    return None


def read(repo: Path) -> GitInfo:
    if git_dir(repo) is None and (prov := provenance(repo)):
        return GitInfo(prov[1], prov[0], web_url(prov[0]))
    remote = remote_url(repo)
    return GitInfo(head_commit(repo), remote, web_url(remote))
