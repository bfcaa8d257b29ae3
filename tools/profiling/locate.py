"""Find a profile folder from a path or an experiment id."""

from __future__ import annotations

from pathlib import Path

from ..errors import InputError
from ..project import Project


def profile_folder(project: Project, target: str) -> Path:
    """``target`` as a folder, else the ``raw_dir`` of the experiment whose exp_id (or page) matches it."""
    p = Path(target)
    if p.is_dir():
        return p
    if project.wiki.is_dir():
        from ..experiments.records import load_experiments

        for r in load_experiments(project.wiki):
            if target in (r.get("exp_id"), r.get("page"), Path(r["page"]).stem) and r.get("raw_dir"):
                return project.root / r["raw_dir"]
    raise InputError(target, "neither a folder nor a known experiment id")
