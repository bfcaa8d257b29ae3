"""Find an experiment record by the names it answers to, and a profile folder from a path or an experiment id."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from ..errors import InputError
from ..project import Project


def names_of(r: dict) -> set[str]:
    """What a record answers to: its exp_id (unique within its lane only), ``MODEL/LANE/EXP_ID``, its page."""
    page = str(r.get("page") or "")
    return {str(r.get("exp_id") or ""), f"{r.get('model')}/{r.get('lane')}/{r.get('exp_id')}", page,
            Path(page).stem} - {""}


def named(records: list[dict], name: str) -> dict | None:
    """The record ``name`` names (its exp_id, ``MODEL/LANE/EXP_ID``, page or page stem), None when none does.
    An id that runs of several lanes share is refused naming each (ids count up per lane): never the first."""
    hits = [r for r in records if name in names_of(r)]
    lanes = sorted({f"{r.get('model')}/{r.get('lane')}" for r in hits})
    if len(lanes) > 1:
        raise InputError(name, "an experiment id of more than one lane: give one of "
                         + ", ".join(f"{lane}/{name}" for lane in lanes))
    return hits[0] if hits else None


def profile_folder(project: Project, target: str, records: Iterable[dict] = ()) -> Path:
    """``target`` as a folder, else the ``raw_dir`` of the record (from ``records``, the caller's experiment
    records) whose exp_id, ``MODEL/LANE/EXP_ID`` or page matches it. An id two lanes share is refused with both
    (ids count up per lane); a ``raw_dir`` outside the project's ``raw/`` (a hand-edited page) is refused."""
    p = Path(target)
    if p.is_dir():
        return p
    rec = named([r for r in records if r.get("raw_dir")], target)
    if rec is None:
        raise InputError(target, "neither a folder nor a known experiment id")
    raw = (project.root / "raw").resolve()
    folder = (project.root / str(rec["raw_dir"])).resolve()
    if not folder.is_relative_to(raw):
        raise InputError(rec.get("page") or target, f"its raw_dir {rec['raw_dir']!r} is outside raw/")
    return folder
