"""Work trees and branches that earlier versions of `tools loop` left in a repository nobody pointed a loop at.

Up to December 2026 a loop whose ``code`` folder lay inside a larger git repository (a knowledge base kept in a
clone of this project, or in a monorepo) made its ``loop/<name>/...`` branches and its work trees in that
repository. Loops now snapshot such a folder into a repository of their own (tools/loop/workspace.py); this module
finds what the old behaviour left and, when asked, removes it.

A stray is a work tree under the knowledge base's ``loops/`` folder, or a ``loop/<name>/`` branch (and the
``loop/<name>-before-<stamp>/`` branches of a ``--fresh`` start), of a loop of this knowledge base, registered in a
repository that is not one the loop uses now.
"""

from __future__ import annotations

import contextlib
from dataclasses import asdict, dataclass
from pathlib import Path

import yaml

from ..errors import ToolsError
from ..pages import load_yaml
from ..project import Project
from ..safeio import read_text
from .workspace import git, user_repository


@dataclass
class Stray:
    repo: str
    kind: str  # worktree | branch
    name: str  # the work tree's path, or the branch
    loop: str
    removed: bool = False
    problem: str = ""

    def to_dict(self) -> dict:
        return asdict(self)


def _loop_codes(project: Project) -> dict[str, Path | None]:
    """Each loop of the knowledge base (a loop file or a state folder) -> its ``code`` folder, when declared."""
    loops = project.root / "loops"
    out: dict[str, Path | None] = {}
    if not loops.is_dir():
        return out
    for entry in sorted(loops.iterdir()):
        if entry.is_dir() and not entry.is_symlink():
            out.setdefault(entry.name, None)
        elif entry.suffix in (".yml", ".yaml") and entry.is_file():
            try:
                data = load_yaml(read_text(entry, 1_000_000))
            except (OSError, yaml.YAMLError, ValueError, RecursionError):  # Refused, FrontmatterError included
                data = None
            code = data.get("code") if isinstance(data, dict) else None
            name = data.get("name") if isinstance(data, dict) and isinstance(data.get("name"), str) else entry.stem
            out[name] = (project.root / code).resolve() if isinstance(code, str) and code else None
    return out


def _toplevel(folder: Path) -> Path | None:
    if not folder.is_dir():
        return None
    top = git(folder, "rev-parse", "--show-toplevel", check=False)
    return Path(top).resolve() if top else None


def _worktrees(repo: Path) -> list[Path]:
    out = git(repo, "worktree", "list", "--porcelain", check=False)
    return [Path(line[len("worktree "):]) for line in out.splitlines() if line.startswith("worktree ")]


def _branch_loop(branch: str, names: set[str]) -> str | None:
    if not branch.startswith("loop/"):
        return None
    head = branch[len("loop/"):].split("/", 1)[0]
    for name in names:
        if head == name or head.startswith(f"{name}-before-"):
            return name
    return None


def find(project: Project) -> list[Stray]:
    codes = _loop_codes(project)
    if not codes:
        return []
    loops_dir = (project.root / "loops").resolve()
    repos = {t for t in [_toplevel(project.root), *(_toplevel(c) for c in codes.values() if c)] if t}
    strays: list[Stray] = []
    for repo in sorted(repos):
        if repo == loops_dir or loops_dir in repo.parents:
            continue  # a loop's own private repository
        legit = {name for name, code in codes.items() if code and user_repository(code) == repo}
        for tree in _worktrees(repo):
            tree_abs = tree.resolve() if tree.exists() else tree
            with contextlib.suppress(ValueError):
                name = tree_abs.relative_to(loops_dir).parts[0]
                if name in codes and name not in legit:
                    strays.append(Stray(str(repo), "worktree", str(tree), name))
        out = git(repo, "for-each-ref", "--format=%(refname:short)", "refs/heads/loop/", check=False)
        for branch in out.splitlines():
            name = _branch_loop(branch, set(codes))
            if name and name not in legit:
                strays.append(Stray(str(repo), "branch", branch, name))
    return strays


def remove(strays: list[Stray]) -> list[Stray]:
    """Remove work trees first (a branch checked out in one cannot be deleted), then the branches."""
    for s in sorted(strays, key=lambda s: s.kind != "worktree"):
        repo = Path(s.repo)
        try:
            if s.kind == "worktree":
                if Path(s.name).exists():
                    git(repo, "worktree", "remove", "--force", s.name)
                git(repo, "worktree", "prune")
            else:
                git(repo, "branch", "-D", s.name)
            s.removed = True
        except ToolsError as e:
            s.problem = str(e)
    return strays
