"""Named baselines: a name (``main``, ``release-1.2``) pinned to one filed run of a lane, so a CI gate can say
"no slower than main". Kept in ``wiki/experiments/baselines.json`` ({name: {"model/lane": entry}}), written whole
and atomically by the writer; an entry names the run and what a comparison against it needs (its command,
commit, variant and tokens/s)."""

from __future__ import annotations

import json
import re
from datetime import datetime, timezone

from ..errors import InputError
from ..project import Project
from ..writer import Writer
from . import records

STORE = "experiments/baselines.json"
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}")


def load(project: Project) -> dict[str, dict[str, dict]]:
    path = project.wiki / STORE
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as e:
        raise InputError(f"wiki/{STORE}", f"not JSON ({e}); fix or delete it, then tag the baselines again") from None
    if not isinstance(data, dict) or not all(isinstance(v, dict) for v in data.values()):
        raise InputError(f"wiki/{STORE}", "not a {name: {model/lane: entry}} table")
    return data


ENTRY = ("model", "lane", "exp_id", "variant", "command")  # what an entry must hold for a gate to use it


def problem(name: str, key: str, e) -> str:
    """Why the entry ``key`` of ``name`` cannot be used ("" when it can): a hand edit left out what a gate needs.
    Only that entry is refused; the others, and tagging it again, still work."""
    missing = [k for k in ENTRY if not isinstance(e, dict) or not isinstance(e.get(k), str) or not e.get(k)]
    return (f"wiki/{STORE}: {name} / {key}: not an entry (no {', '.join(missing)}); tag it again: tools exp "
            f"baseline tag {name} EXP --model M --lane L") if missing else ""


def tag(project: Project, name: str, model: str, lane: str, exp_id: str) -> dict:
    """Pin ``name`` to ``exp_id`` of ``model``/``lane`` (replacing what the name held for that lane)."""
    if not NAME.fullmatch(name or ""):
        raise InputError("NAME", f"{name!r}: letters, digits, '.', '_' or '-', at most 64")
    r = records.find(records.lane_records(project.wiki, model, lane), exp_id)
    if r is None:
        raise InputError("EXP", f"{exp_id} is not an experiment of {model}/{lane}")
    why = records.usable(r)
    if why:
        raise InputError("EXP", f"{exp_id} cannot be a baseline: {why}")
    entry = {"name": name, "model": model, "lane": lane, "exp_id": exp_id, "variant": r.get("variant"),
             "command": r.get("command"), "commit": r.get("commit"),
             "tokens_per_s": (r.get("metrics") or {}).get("tokens_per_s"), "page": r.get("page"),
             "tagged": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")}
    if why := problem(name, f"{model}/{lane}", entry):
        raise InputError("EXP", f"{exp_id} cannot be a baseline: its record has {why.split('not an entry ')[1]}")
    data = load(project)
    data.setdefault(name, {})[f"{model}/{lane}"] = entry
    Writer(project.wiki).write_file(STORE, json.dumps(data, indent=1, sort_keys=True) + "\n")
    return entry


def get(project: Project, name: str, model: str | None = None, lane: str | None = None) -> dict:
    """The entry ``name`` holds for ``model``/``lane``; either may be left out when the name holds one lane."""
    lanes = load(project).get(name)
    if not lanes:
        raise InputError("--baseline", f"no baseline named {name!r} (tag one: tools exp baseline tag {name} EXP)")
    bad = {key: why for key, e in lanes.items() if (why := problem(name, key, e))}
    hits = [e for key, e in lanes.items() if key not in bad and (model is None or e["model"] == model)
            and (lane is None or e["lane"] == lane)]
    if len(hits) != 1 and bad:
        raise InputError("--baseline", next(iter(bad.values())))
    if len(hits) != 1:
        raise InputError("--baseline", f"{name!r} holds {len(hits)} lanes matching "
                                       f"{model or '*'}/{lane or '*'} ({', '.join(sorted(lanes))}); give --model and --lane")
    return hits[0]
