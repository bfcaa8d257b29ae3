"""Typed errors: each names the file and the problem."""

from __future__ import annotations

from pathlib import Path

EXIT_SKIPS = 3  # a command completed, and some inputs were skipped (each listed with its reason)


class ToolsError(Exception):
    """Base class; the CLI turns these into a clean message and a non-zero exit."""


class InputError(ToolsError):
    """A file could not be used; ``path`` says which, ``problem`` says why."""

    def __init__(self, path: str | Path, problem: str):
        self.path = str(path)
        self.problem = problem
        super().__init__(f"{self.path}: {problem}")


class ProjectError(ToolsError):
    """The knowledge base layout is missing or wrong."""


class Stop(BaseException):
    """A signal asked the command to stop (a BaseException like KeyboardInterrupt, so ``except Exception`` never
    swallows it). The CLI exits as a stopped process does: 143 for SIGTERM."""

    def __init__(self, how: str):
        super().__init__(how)
        self.how = how
