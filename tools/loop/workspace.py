"""The model code a loop may change, under git: a trunk branch that moves only on kept runs, one branch per
code-patch experiment (kept for audit), and work trees the runs execute in. The user's own checkout is never
touched: the loop works in its own work trees under ``loops/<name>/``.

- ``code`` naming the top of a git work tree (a checkout the user chose): branches ``loop/<name>/trunk`` and
  ``loop/<name>/<iteration>`` are made in that repository, starting from its HEAD (refused when it has uncommitted
  changes); its own checkout and HEAD are never moved.
- any other folder (not under git, or a folder inside someone's repository: a knowledge base kept in a clone or a
  monorepo): the loop snapshots the folder into ``loops/<name>/repo``, a git repository of its own, and works
  there. A loop never makes branches or work trees in a repository the user did not point it at.
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from ..errors import InputError, ToolsError
from ..gitrun import git
from . import patchfiles

IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc", ".git")
class PatchError(ToolsError):
    """A code patch that does not apply; the run is filed ``invalid`` with this reason."""


def user_repository(folder: Path) -> Path | None:
    """``folder`` itself when it is the top of a git work tree (a repository the user pointed the loop at), else
    None: a folder inside a larger repository is not a choice of that repository."""
    top = git(folder, "rev-parse", "--show-toplevel", check=False) if folder.is_dir() else ""
    if top and Path(top).resolve() == folder.resolve():
        return folder.resolve()
    return None


@dataclass
class Prepared:
    cwd: Path          # where the run's command executes
    commit: str        # the commit it runs (full sha)
    branch: str        # its branch ("" for knob/env changes: they run the trunk's code)


class Workspace:
    def __init__(self, root: Path, code: Path | None, state_dir: Path, name: str, cwd: str = "."):
        self.kb_root = Path(root)
        self.rel_cwd = cwd  # where commands run: relative to the code folder (or to the knowledge base without one)
        self.code = Path(code) if code else None
        self.state_dir = Path(state_dir)
        self.name = name
        self.trunk_branch = f"loop/{name}/trunk"

    # ----------------------------------------------------------------- where things are

    @property
    def trunk_dir(self) -> Path:
        return self.state_dir / "trunk"

    @property
    def private(self) -> Path:
        return self.state_dir / "repo"

    def repo(self) -> Path:
        """The git repository the loop works in: its private snapshot, or the repository ``code`` names."""
        if (self.private / ".git").exists():
            return self.private
        assert self.code is not None
        return user_repository(self.code) or self.private

    # ----------------------------------------------------------------- set-up

    def ensure(self) -> str:
        """Make the trunk branch and its work tree if needed; returns the trunk commit."""
        if self.code is None:
            return ""
        if not self.code.is_dir():
            raise InputError(self.code, "the loop's `code` folder does not exist")
        repo = self.repo()
        if repo == self.private and not (repo / ".git").exists():
            try:  # links are copied as links: a dangling one raised, one leading out had its target copied in
                shutil.copytree(self.code, repo, ignore=IGNORE, dirs_exist_ok=True, symlinks=True)
            except (shutil.Error, OSError) as e:
                shutil.rmtree(repo, ignore_errors=True)  # a half copy would be committed by the next start
                raise InputError(self.code, f"the loop's `code` folder could not be snapshot: {_first(e)}") from None
            git(repo, "init", "-q", "-b", "main")
            git(repo, "add", "-A")
            git(repo, "commit", "-q", "--allow-empty", "-m", f"loop {self.name}: snapshot of {self.code}")
        if not git(repo, "branch", "--list", self.trunk_branch):
            dirty = git(repo, "status", "--porcelain")
            if dirty:
                raise InputError(self.code, "the model code has uncommitted changes; commit them so the loop's "
                                            "trunk starts from a known commit")
            git(repo, "branch", self.trunk_branch, "HEAD")
        if (self.trunk_dir / ".git").exists():
            self._check_own(repo, self.trunk_dir)
        else:
            self._add_worktree(repo, self.trunk_dir, self.trunk_branch)
        return self.trunk_commit()

    def _check_own(self, repo: Path, tree: Path) -> None:
        """A work tree left by an earlier version in another repository (the one enclosing the knowledge base) is
        not this loop's to reuse or to move: say how to clean it up."""
        common = git(tree, "rev-parse", "--path-format=absolute", "--git-common-dir", check=False)
        if common and Path(common).resolve() != (repo / ".git").resolve():
            raise InputError(tree, f"this work tree belongs to the repository at {Path(common).parent} (made by an "
                                   f"earlier version of tools loop); `tools loop strays --remove` takes it out, "
                                   f"then `tools loop start {self.name} --fresh` snapshots the model code")

    def _add_worktree(self, repo: Path, where: Path, ref: str) -> None:
        if where.exists():
            shutil.rmtree(where)
        git(repo, "worktree", "prune")
        git(repo, "worktree", "add", "-q", "--detach", str(where), ref)

    def trunk_commit(self) -> str:
        if self.code is None:
            return ""
        repo = self.repo()
        return git(repo, "rev-parse", self.trunk_branch)

    def cwd_in(self, tree: Path) -> Path:
        return (tree / self.rel_cwd).resolve()

    # ----------------------------------------------------------------- per experiment

    def prepare(self, key: str, patch: str = "", protected: list[str] | tuple = ()) -> Prepared:
        """The trunk's work tree for a knob/env change; for a patch, a new branch ``loop/<name>/<key>`` from
        the trunk with the patch applied (not yet committed: see ``commit``). Raises PatchError, also for a patch
        git reads as touching the runner's files or ``protected`` ones, or as binary (the admission's own reading
        of it, ``patchfiles``, refused those already: this asks git itself)."""
        if self.code is None:
            if patch:
                raise PatchError("this loop declares no `code` folder: code patches cannot be applied")
            return Prepared((self.kb_root / self.rel_cwd).resolve(), "", "")
        trunk = self.ensure()
        self.sync_trunk()
        if not patch:
            return Prepared(self.cwd_in(self.trunk_dir), trunk, "")
        repo = self.repo()
        branch = f"loop/{self.name}/{key}"
        where = self.state_dir / "worktrees" / key
        self.remove(key)  # a run cut off mid-way left its work tree (and its branch checked out there)
        git(repo, "branch", "-f", branch, trunk)
        self._add_worktree(repo, where, branch)
        git(where, "checkout", "-q", branch)
        text = patch if patch.endswith("\n") else patch + "\n"
        args = ["apply", "--whitespace=nowarn"]
        check = subprocess.run(["git", "-C", str(where), *args, "--check", "-"], input=text, capture_output=True,
                               text=True, timeout=60, check=False)
        if check.returncode != 0:
            self.remove(key)
            raise PatchError(f"the patch does not apply to trunk {trunk[:12]}: {check.stderr.strip()[:800]}")
        if why := _refused_by_git(where, text, protected):
            self.remove(key)
            raise PatchError(why)
        git(where, *args, "-", input=text)
        return Prepared(self.cwd_in(where), "", branch)

    def commit(self, key: str, message: str) -> str:
        """Commit the applied patch on its branch (the message carries the ``exp: <exp_id>`` footer)."""
        where = self.state_dir / "worktrees" / key
        git(where, "add", "-A")
        git(where, "commit", "-q", "-m", message)
        return git(where, "rev-parse", "HEAD")

    def keep(self, commit: str) -> None:
        """Advance the trunk to a kept run's commit."""
        if self.code is None or not commit:
            return
        repo = self.repo()
        git(repo, "branch", "-f", self.trunk_branch, commit)
        self.sync_trunk()

    def sync_trunk(self) -> None:
        """The trunk work tree at the trunk branch's commit, after a keep or a kill. Only when the trunk moved:
        parallel runs may be executing in this tree (files they write there are theirs)."""
        if (self.trunk_dir / ".git").exists():
            want = self.trunk_commit()
            if git(self.trunk_dir, "rev-parse", "HEAD") != want:
                git(self.trunk_dir, "reset", "-q", "--hard", want)
                git(self.trunk_dir, "clean", "-qfd")

    def start_over(self) -> None:
        """``--fresh``: the trunk back at the model code as it is now (a new snapshot of a folder without git)."""
        if self.code is None:
            return
        private = self.state_dir / "repo"
        for tree in (self.trunk_dir, self.state_dir / "worktrees"):
            shutil.rmtree(tree, ignore_errors=True)
        if (private / ".git").exists():  # the snapshot goes to one side, with its branches, for audit
            aside = self.state_dir / f"repo-before-{time.strftime('%Y%m%dT%H%M%S')}"
            n = 1
            while aside.exists():  # two fresh starts within a second
                n += 1
                aside = aside.with_name(f"{aside.name.split('~')[0]}~{n}")
            private.rename(aside)
            return
        repo = self.repo()
        if not (repo / ".git").exists() and repo == private:
            return  # the loop never made its snapshot: nothing to put aside
        git(repo, "worktree", "prune")
        stamp = time.strftime("%Y%m%dT%H%M%S")
        for b in self.branches():  # the old run's branches keep their commits under another name
            if b != self.trunk_branch:
                git(repo, "branch", "-m", b, b.replace(f"loop/{self.name}/", f"loop/{self.name}-before-{stamp}/", 1))
        git(repo, "branch", "-f", self.trunk_branch, "HEAD")

    def remove(self, key: str) -> None:
        """Drop a run's work tree; its branch stays for audit."""
        where = self.state_dir / "worktrees" / key
        if where.exists():
            repo = self.repo()
            with contextlib.suppress(ToolsError):
                git(repo, "worktree", "remove", "--force", str(where))
            shutil.rmtree(where, ignore_errors=True)

    def branches(self) -> list[str]:
        if self.code is None:
            return []
        repo = self.repo()
        out = git(repo, "branch", "--list", f"loop/{self.name}/*", "--format=%(refname:short)")
        return [b for b in out.splitlines() if b]

    def log(self, ref: str, n: int = 20) -> list[str]:
        repo = self.repo()
        return git(repo, "log", f"-{n}", "--format=%H %s", ref).splitlines()


def _refused_by_git(where: Path, patch: str, protected) -> str:
    """Why git's own reading of ``patch`` (``--numstat -z``: each file's added and deleted lines, ``-`` for a binary
    one, a rename's two names) refuses it, or ""."""
    out = subprocess.run(["git", "-C", str(where), "apply", "--numstat", "-z", "-"], input=patch, capture_output=True,
                         text=True, timeout=60, check=False).stdout
    fields = out.split("\0")
    paths, binary, i = [], False, 0
    while i < len(fields) - 1:
        added, deleted, name = (fields[i].split("\t", 2) + ["", ""])[:3]
        binary = binary or added == "-" or deleted == "-"
        if name:
            paths.append(name)
            i += 1
        else:  # a rename or copy: its two names follow
            paths += fields[i + 1:i + 3]
            i += 3
    if binary:
        return "the patch holds a binary hunk (GIT binary patch): a proposal's code change is text"
    if hit := patchfiles.covered(paths, list(protected)):
        return (f"the patch touches protected files ({', '.join(hit)}), as git reads it: the metric code and the "
                "runner are not the model's to change")
    return ""


def _first(e: Exception) -> str:
    """The first file a copy failed on, and why (``shutil.Error`` carries a list of them)."""
    if isinstance(e, shutil.Error) and e.args and isinstance(e.args[0], list) and e.args[0]:
        src, _, why = e.args[0][0]
        return f"{src}: {why}"
    return str(e)
