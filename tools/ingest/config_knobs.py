"""A codebase's configuration knobs: the settings its config and launch files hold that move performance (remat
policy, scan over layers, attention kernel, parallelism axes), each with the default its base config gives. Pure:
read from the repository model; rendered on the overview page and written as ``codebases/<slug>/knobs.json``, which
``tools gap`` reads when the reference is an ingested codebase."""

from __future__ import annotations

import json
import re
from collections import Counter

from .analyze import RepoModel

_DEFAULTS_FILE = re.compile(r"(?:^|/)(?:base|defaults?|config)(?:[._-][^/]*)?\.(?:ya?ml|toml|gin|cfg|ini|json)$")
_TEST_PATH = re.compile(r"(?:^|/)(?:tests?|testing)/|(?:^|/)test_[^/]*$|_test\.py$|(?:^|/)conftest\.py$")


def is_test(rel: str) -> bool:
    """A test file or a file under a tests folder: never a knob's example when another file sets it."""
    return bool(_TEST_PATH.search(rel))


def config_knobs(model: RepoModel) -> list[dict]:
    """Settings in config files that move performance (remat policy, scan, parallelism axes, ...), by concept then
    key: the default (the value in the repository's base or default config file, with its file:line), the values
    seen (most used first), how many files set it and a non-test example site. Also written as ``knobs.json``."""
    knobs: dict[str, dict] = {}
    for slug, occ in model.surfaces.items():
        if slug == "xla-flags":
            continue  # they have their own table
        for rel, line, label in occ:
            if model.scan.files[rel].facts.get("lang") != "config":
                continue
            key, _, value = label.partition(": ")
            k = knobs.setdefault(key, {"concept": slug, "values": Counter(), "files": set(), "first": (rel, line),
                                       "default": None})
            if value:
                k["values"][value] += 1
                if k["default"] is None and _DEFAULTS_FILE.search(rel):
                    k["default"] = (value, rel, line)
            k["files"].add(rel)
            if is_test(k["first"][0]) and not is_test(rel):
                k["first"] = (rel, line)
    out = []
    for key, k in sorted(knobs.items(), key=lambda kv: (kv[1]["concept"], kv[0])):
        d = k["default"]
        out.append({"key": key, "concept": k["concept"], "default": d[0] if d else None,
                    "default_at": f"{d[1]}:{d[2]}" if d else None,
                    "values": [v for v, _ in k["values"].most_common()], "files": len(k["files"]),
                    "example": f"{k['first'][0]}:{k['first'][1]}"})
    return out


def knobs_json(model: RepoModel) -> str:
    return json.dumps(config_knobs(model), indent=1, ensure_ascii=False) + "\n"
