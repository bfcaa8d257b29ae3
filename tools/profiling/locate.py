"""Find a profile folder from a path or an experiment id."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from ..errors import InputError
from ..project import Project


def _names(r: dict) -> set[str]:
    """What a record answers to: its exp_id (unique within its lane only), ``MODEL/LANE/EXP_ID``, its page."""
    page = str(r.get("page") or "")
    out = {str(r.get("exp_id") or ""), f"{r.get('model')}/{r.get('lane')}/{r.get('exp_id')}", page, Path(page).stem}
    return out - {""}


def profile_folder(project: Project, target: str, records: Iterable[dict] = ()) -> Path:
    """``target`` as a folder, else the ``raw_dir`` of the record (from ``records``, the caller's experiment
    records) whose exp_id, ``MODEL/LANE/EXP_ID`` or page matches it. An id two lanes share is refused with both
    (ids count up per lane); a ``raw_dir`` outside the project's ``raw/`` (a hand-edited page) is refused."""
    p = Path(target)
    if p.is_dir():
        return p
    hits = [r for r in records if target in _names(r) and r.get("raw_dir")]
    lanes = sorted({f"{r.get('model')}/{r.get('lane')}" for r in hits})
    if len(lanes) > 1:
        raise InputError(target, "an experiment id of more than one lane: give one of "
                         + ", ".join(f"{lane}/{target}" for lane in lanes))
    if not hits:
        raise InputError(target, "neither a folder nor a known experiment id")
    raw = (project.root / "raw").resolve()
    folder = (project.root / str(hits[0]["raw_dir"])).resolve()
    if not folder.is_relative_to(raw):
        raise InputError(hits[0].get("page") or target, f"its raw_dir {hits[0]['raw_dir']!r} is outside raw/")
    return folder
