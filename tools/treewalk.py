"""Walk a code tree without following symlinks; say why each skipped file was skipped. The one walker and skip list
of the ingest and the kernel scanner."""

from __future__ import annotations

import errno
import os
from dataclasses import dataclass
from pathlib import Path

from .safeio import kind

SKIP_DIRS = {".git", ".hg", ".svn", "node_modules", "__pycache__", ".tox", ".nox", ".venv", "venv",
             ".mypy_cache", ".pytest_cache", ".ruff_cache", ".ipynb_checkpoints", ".eggs", "site-packages"}
KEEP_HIDDEN = {".github", ".buildkite", ".circleci", ".gitlab"}

PYTHON_EXT = (".py", ".pyi", ".ipynb")
MARKDOWN_EXT = (".md", ".markdown")
CONFIG_EXT = (".yml", ".yaml", ".toml", ".cfg", ".ini", ".sh", ".bash", ".env", ".json", ".txt", ".gin")
CONFIG_NAMES = {"Dockerfile", "Makefile", "BUILD", "WORKSPACE"}

LANGUAGES = {
    ".py": "Python", ".pyi": "Python", ".ipynb": "Jupyter", ".md": "Markdown", ".markdown": "Markdown",
    ".rst": "reStructuredText", ".c": "C", ".h": "C/C++ header", ".cc": "C++", ".cpp": "C++", ".cu": "CUDA",
    ".cuh": "CUDA", ".hpp": "C++", ".rs": "Rust", ".go": "Go", ".java": "Java", ".js": "JavaScript",
    ".ts": "TypeScript", ".sh": "Shell", ".bash": "Shell", ".yml": "YAML", ".yaml": "YAML", ".toml": "TOML",
    ".json": "JSON", ".cfg": "Config", ".ini": "Config", ".txt": "Text", ".bzl": "Starlark", ".mlir": "MLIR",
    ".proto": "Protobuf", ".html": "HTML", ".css": "CSS", ".gin": "Gin",
}


@dataclass(frozen=True)
class Entry:
    rel: str  # posix path relative to the root
    size: int
    mtime_ns: int
    role: str  # python | markdown | config | other
    ctime_ns: int = 0  # no tool sets it (`cp -p`, `rsync -a` and `touch -r` keep an edited file's mtime, not this)


@dataclass(frozen=True)
class Skip:
    rel: str
    reason: str


def role_of(name: str) -> str:
    if name.endswith(PYTHON_EXT):
        return "python"
    if name.endswith(MARKDOWN_EXT):
        return "markdown"
    if name.endswith(CONFIG_EXT) or name in CONFIG_NAMES:
        return "config"
    return "other"


def language_of(name: str) -> str:
    ext = os.path.splitext(name)[1].lower()
    if name in CONFIG_NAMES:
        return name
    return LANGUAGES.get(ext, "other")


def _symlink_reason(path: str) -> str:
    try:
        os.stat(path)
    except OSError as e:
        if e.errno == errno.ELOOP:
            return "symlink loop"
        return "dangling symlink"
    return "symlink to directory (not followed)" if os.path.isdir(path) else "symlink (not followed)"


def walk(root: Path) -> tuple[list[Entry], list[Skip], set[str]]:
    """Files under root (sorted), files skipped with reasons, and folders holding __init__.py."""
    entries: list[Entry] = []
    skips: list[Skip] = []
    packages: set[str] = set()
    stack = [""]
    while stack:
        rel_dir = stack.pop()
        try:
            it = os.scandir(root / rel_dir if rel_dir else root)
        except OSError as e:
            skips.append(Skip(rel_dir or ".", f"unreadable folder ({e.strerror})"))
            continue
        with it:
            for d in it:
                rel = f"{rel_dir}/{d.name}" if rel_dir else d.name
                if d.is_symlink():
                    skips.append(Skip(rel, _symlink_reason(d.path)))
                    continue
                if d.is_dir(follow_symlinks=False):
                    if d.name in SKIP_DIRS or (d.name.startswith(".") and d.name not in KEEP_HIDDEN):
                        continue
                    stack.append(rel)
                elif d.is_file(follow_symlinks=False):
                    if d.name == "__init__.py":
                        packages.add(rel_dir)
                    try:
                        st = d.stat(follow_symlinks=False)
                    except OSError as e:
                        skips.append(Skip(rel, f"unreadable ({e.strerror})"))
                        continue
                    entries.append(Entry(rel, st.st_size, st.st_mtime_ns, role_of(d.name), st.st_ctime_ns))
                else:
                    try:
                        what = kind(d.stat(follow_symlinks=False).st_mode)
                    except OSError:
                        what = "special file"
                    skips.append(Skip(rel, f"{what}: not a regular file (not read)"))
    entries.sort(key=lambda e: e.rel)
    skips.sort(key=lambda s: s.rel)
    return entries, skips, packages
