"""A run as one side of a gap: from an experiment record (its profile folder under raw/, its metrics, its command
and environment) or from a bare profile/HLO folder (no command line: items then rest on the HLO and profile alone)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from .. import safeio
from ..errors import InputError
from ..experiments import records
from ..project import Project
from ..profiling import summary as summary_mod
from . import config
from .compare import FLAG_ENV, Side, flag_parts
from .facts import run_facts

SUMMARY_LIMIT = 64 * 1024 * 1024


def _summary(folder: Path) -> dict | None:
    """The run's profile summary: the runner's summary.json, else made from the trace (None without one)."""
    p = folder / "summary.json"
    if p.is_file():
        try:
            return json.loads(safeio.read_text(p, SUMMARY_LIMIT, within=folder))
        except (ValueError, safeio.Refused, OSError):
            pass
    if not (folder / "trace").is_dir():
        return None
    try:
        return summary_mod.summarize(folder, use_xprof=False, confine=folder)
    except InputError as e:  # kept, so the comparison says why it has no step time (not "no tokens/s")
        return {"unreadable": str(e)}


def _hlo_folder(folder: Path) -> Path:
    return folder / "hlo" if (folder / "hlo").is_dir() else folder


def from_folder(folder: Path, label: str = "") -> Side:
    folder = Path(folder)
    if not folder.is_dir():
        raise InputError(folder, "not a folder (give an experiment id, or a profile/HLO folder)")
    facts = run_facts(_hlo_folder(folder))
    if facts["stage"] == "none":
        raise InputError(folder, "no HLO here (*after_optimizations.txt, *before_optimizations.txt or *.hlo.txt); "
                                 "run with --profile, or XLA_FLAGS=--xla_dump_to=... --xla_dump_hlo_as_text")
    from ..profiling.hlo_diff import fingerprint

    return Side(label or folder.name, facts, _summary(folder), folder=str(folder),
                program=fingerprint(_hlo_folder(folder)) or "")


def from_record(project: Project, rec: dict) -> Side:
    name = str(rec.get("exp_id") or rec.get("page"))
    if rec.get("verdict") in ("crash", "invalid") or rec.get("status") in ("crash", "in_progress"):
        why = rec.get("crash") if isinstance(rec.get("crash"), str) else rec.get("verdict") or rec.get("status")
        raise InputError(name, f"it {'is still running' if rec.get('status') == 'in_progress' else 'was filed '}"
                               f"{'' if rec.get('status') == 'in_progress' else why}: its step time is no speed to "
                               "compare; compare a run that finished")
    raw = rec.get("raw_dir")
    folder = (project.root / str(raw)).resolve() if raw else None
    if folder is None or not folder.is_relative_to(project.raw.resolve()) or not folder.is_dir():
        raise InputError(str(rec.get("page") or rec.get("exp_id")), "no profile folder under raw/: run it with "
                                                                     "--profile to compare it")
    side = from_folder(folder, str(rec.get("exp_id")))
    side.metrics = dict(rec.get("metrics") or {})
    side.command = str(rec.get("command") or "")
    side.flags = config.command_flags(side.command)
    env = dict(rec.get("env") or {})
    xla = env.get("XLA_FLAGS", (rec.get("metrics") or {}).get("xla_flags", ""))
    parts: dict[str, str] = {}
    for name in FLAG_ENV:
        value = xla if name == "XLA_FLAGS" else env.get(name, "")
        parts.update({k: v for k, v in flag_parts(value).items() if not k.startswith("--xla_dump")})
    side.env_flags = parts
    side.page = str(rec.get("page") or "")
    shape = rec.get("shape") if isinstance(rec.get("shape"), dict) else (rec.get("metrics") or {}).get("shape")
    side.shape = dict(shape) if isinstance(shape, dict) else {}
    slug = codebase_of(project, rec)
    if slug:
        with_codebase(project, side, slug, side.command)
    return side


def codebase_of(project: Project, rec: dict) -> str:
    """The ingested codebase a record's program lives in: its working folder or a path in its command under
    ``raw/code/<slug>/`` ("" when none, or when that codebase has no knob table)."""
    code = (project.raw / "code").resolve()
    words = [str(rec.get("cwd") or "")] + config.tokens(str(rec.get("command") or ""))
    cwd = project.root / str(rec.get("cwd") or ".")
    for w in words:
        if not w or w.startswith("-") or "=" in w:
            continue
        for base in (project.root, cwd):
            p = Path(os.path.normpath(base / w))
            if p.is_relative_to(code) and p != code:
                slug = p.relative_to(code).parts[0]
                if (project.wiki / "codebases" / slug / "knobs.json").is_file():
                    return slug
    return ""


def codebase_knobs(project: Project, slug: str) -> list[dict]:
    """The knob table the ingest wrote for ``slug`` (``wiki/codebases/<slug>/knobs.json``)."""
    rel = f"wiki/codebases/{slug}/knobs.json"
    if not slug or "/" in slug or "\\" in slug or slug.startswith("."):
        raise InputError(slug or "''", "not a codebase name (the folder under raw/code/)")
    path = project.wiki / "codebases" / slug / "knobs.json"
    if not path.is_file():
        raise InputError(rel, f"no knob table for codebase {slug!r}: ingest it first (tools ingest raw/code/{slug})")
    try:
        data = json.loads(safeio.read_text(path, SUMMARY_LIMIT, within=project.wiki))
    except (ValueError, safeio.Refused, OSError) as e:
        raise InputError(rel, f"unreadable knob table ({e}); re-ingest raw/code/{slug}") from None
    if not isinstance(data, list) or not all(isinstance(k, dict) for k in data):
        raise InputError(rel, "not a list of knobs; re-ingest the codebase")
    return data


def with_codebase(project: Project, side: Side, slug: str, command: str = "") -> Side:
    """``side`` with the performance settings of codebase ``slug`` as this run used them."""
    side.codebase = slug
    side.config = config.settings(codebase_knobs(project, slug), command, slug)
    return side


def find_record(project: Project, exp_id: str) -> dict | None:
    """The run ``exp_id`` names: its id, ``MODEL/LANE/EXP_ID`` or page (an id two lanes share is refused)."""
    from ..profiling.locate import named

    return named(records.load_experiments(project.wiki), exp_id)


def resolve(project: Project, name: str, folders: bool = True) -> Side:
    """An experiment id of this knowledge base, else (``folders``: the CLI, never an agent) a folder path."""
    rec = find_record(project, name)
    if rec is not None:
        return from_record(project, rec)
    if folders and Path(name).is_dir():
        return from_folder(Path(name))
    raise InputError(name, "no experiment with this id here" + (", and not a folder" if folders else ""))
