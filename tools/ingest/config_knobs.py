"""A codebase's configuration knobs: the settings its config and launch files hold that move performance (remat
policy, scan over layers, attention kernel, parallelism axes), each with the default its base config gives. Pure:
read from the repository model; rendered on the overview page and written as ``codebases/<slug>/knobs.json``, which
``tools gap`` reads when the reference is an ingested codebase."""

from __future__ import annotations

import json
import re
from collections import Counter

from .analyze import RepoModel
from .paths import is_test

_DEFAULTS_FILE = re.compile(r"(?:^|/)(?:base|defaults?|config)(?:[._-][^/]*)?\.(?:ya?ml|toml|gin|cfg|ini|json)$")
_NOT_CONFIG = re.compile(r"(?:^|/)(?:testdata|test_data|golden\w*|fixtures?|__snapshots__)/")


def config_knobs(model: RepoModel) -> list[dict]:
    """Settings in config files that move performance (remat policy, scan, parallelism axes, ...), by concept then
    key. A key is a knob when a concept's config pattern matches it in some file; then every value any YAML file
    gives it counts (a multi-line value read whole), with the values its comments offer. The default is the value
    in the shallowest base or default config file (``default_at``); other defaults files that disagree are listed
    under ``defaults``. Test data, golden dumps and fixtures are not configuration. Also written as ``knobs.json``."""
    knobs: dict[str, dict] = {}
    for slug, occ in model.surfaces.items():
        if slug == "xla-flags":
            continue  # they have their own table
        for rel, line, label in occ:
            if model.scan.files[rel].facts.get("lang") != "config" or _NOT_CONFIG.search(rel):
                continue
            key, _, value = label.partition(": ")
            k = knobs.setdefault(key, {"concept": slug, "values": Counter(), "files": set(), "first": (rel, line),
                                       "defaults": [], "offered": {}, "seen": set()})
            k["labels"] = k.get("labels", []) + [(rel, line, value)]
    for rel, rec in model.scan.files.items():
        if _NOT_CONFIG.search(rel):
            continue
        for st in rec.facts.get("settings") or ():
            k = knobs.get(st["key"])
            if k is not None:
                _count(k, rel, st["line"], st["value"], empty_is_a_value=bool(st.get("empty")))  # `quantization: ""`
                k["offered"].update(dict.fromkeys(st.get("offered") or ()))
    for k in knobs.values():
        for rel, line, value in k.pop("labels", []):  # lines no YAML reading gave (shell, TOML, a bad YAML file)
            _count(k, rel, line, value)
    out = []
    for key, k in sorted(knobs.items(), key=lambda kv: (kv[1]["concept"], kv[0])):
        defaults = sorted(k["defaults"], key=lambda d: (d[1].count("/"), d[1], d[2]))
        d = defaults[0] if defaults else None
        row = {"key": key, "concept": k["concept"], "default": d[0] if d else None,
               "default_at": f"{d[1]}:{d[2]}" if d else None,
               "values": [v for v, _ in k["values"].most_common()], "files": len(k["files"]),
               "example": f"{k['first'][0]}:{k['first'][1]}"}
        if k["offered"]:
            row["offered"] = list(k["offered"])
        others = [{"file": f, "value": v} for v, f, _ in defaults[1:] if v != d[0]]
        if others:
            row["defaults"] = others
        out.append(row)
    return out


def _count(k: dict, rel: str, line: int, value: str, empty_is_a_value: bool = False) -> None:
    """``empty_is_a_value``: ``""`` written as one (``quantization: ""``, off); a key with nothing after it holds
    no value (a block below it, or a line no YAML reading gave)."""
    if (rel, line) in k["seen"]:
        return
    k["seen"].add((rel, line))
    k["files"].add(rel)
    if value or empty_is_a_value and value == "":
        k["values"][value] += 1
        if _DEFAULTS_FILE.search(rel):
            k["defaults"].append((value, rel, line))
    if is_test(k["first"][0]) and not is_test(rel):
        k["first"] = (rel, line)


def knobs_json(model: RepoModel) -> str:
    return json.dumps(config_knobs(model), indent=1, ensure_ascii=False) + "\n"
