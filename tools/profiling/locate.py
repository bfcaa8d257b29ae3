"""Find a profile folder from a path or an experiment id."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from ..errors import InputError
from ..project import Project


def profile_folder(project: Project, target: str, records: Iterable[dict] = ()) -> Path:
    """``target`` as a folder, else the ``raw_dir`` of the record (from ``records``, the caller's experiment
    records) whose exp_id or page matches it."""
    p = Path(target)
    if p.is_dir():
        return p
    for r in records:
        if target in (r.get("exp_id"), r.get("page"), Path(r.get("page") or "").stem) and r.get("raw_dir"):
            return project.root / r["raw_dir"]
    raise InputError(target, "neither a folder nor a known experiment id")
