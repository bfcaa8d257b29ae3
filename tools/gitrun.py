"""Run the git binary on a repository the user named (``gitinfo`` reads ``.git`` without running anything)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from .errors import ToolsError

# commits the tools make carry this identity, never the user's (nothing here reads or writes their git config)
GIT_ENV = {"GIT_AUTHOR_NAME": "tools loop", "GIT_AUTHOR_EMAIL": "loop@autoresearch-wiki.invalid",
           "GIT_COMMITTER_NAME": "tools loop", "GIT_COMMITTER_EMAIL": "loop@autoresearch-wiki.invalid"}


def git(repo: Path, *args: str, check: bool = True, input: str | None = None, env: dict | None = None) -> str:
    """``git -C repo args``: its stdout stripped; a failure raises ``ToolsError`` with git's message. ``env``: more
    variables (a commit's dates)."""
    p = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, input=input,
                       env=dict(os.environ, **GIT_ENV, **(env or {})), timeout=120, check=False)
    if check and p.returncode != 0:
        raise ToolsError(f"git {' '.join(args[:3])} in {repo}: {(p.stderr or p.stdout).strip()[:500]}")
    return p.stdout.strip()


def git_ok(repo: Path, *args: str, input: str | None = None, env: dict | None = None) -> bool:
    """Whether ``git -C repo args`` succeeds (a probe: apply --check, a cherry-pick that may conflict)."""
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, input=input, timeout=120,
                          env=dict(os.environ, **GIT_ENV, **(env or {})), check=False).returncode == 0
