"""A side's configuration when its code is an ingested codebase: the knob defaults its overview lists
(``codebases/<slug>/knobs.json``: remat policy, scan over layers, attention kernel, sharding axes, ...), overridden by
what the run's command sets (``key=value`` arguments, as MaxText takes them, and ``--key value`` flags). Pure: the
knobs come in read (``gap/sides.py`` reads the file); this module turns them into evidence on the HLO's items, into
``basis: config`` items where both sides name the same setting, and into the table the gap page shows."""

from __future__ import annotations

import shlex

# The concepts whose settings explain a step-time difference, the HLO item kinds they speak to, the loop category
# and the op-time categories they touch.
CONCEPTS = {
    "rematerialization": (("remat",), "memory", ["matmul", "attention", "elementwise fusion"]),
    "scan-over-layers": (("layer_scan",), "compiler", ["control flow", "data movement"]),
    "gradient-accumulation": (("accumulation",), "shape", ["control flow", "data movement"]),
    "flash-attention": (("kernel",), "kernel", ["attention", "custom-call"]),
    "splash-attention": (("kernel",), "kernel", ["attention", "custom-call"]),
    "paged-attention": (("kernel",), "kernel", ["attention", "custom-call"]),
    "dot-product-attention": (("kernel",), "kernel", ["attention", "custom-call"]),
    "pallas-kernels": (("kernel",), "kernel", ["custom-call"]),
    "sharding": (("collective",), "parallelism", ["collective"]),
    "collective-matmul": (("collective",), "parallelism", ["collective", "matmul"]),
    "expert-parallelism": (("collective",), "parallelism", ["collective"]),
    "pipeline-parallelism": (("collective",), "parallelism", ["collective"]),
    "quantization": (("precision",), "precision", ["matmul"]),
    "host-offload": (("remat",), "memory", ["data movement"]),
}
EVIDENCE_PER_SIDE = 4


def tokens(command: str) -> list[str]:
    try:
        return shlex.split(command or "")
    except ValueError:  # an unbalanced quote: the words as written
        return (command or "").split()


def command_flags(command: str) -> dict[str, str]:
    """The ``--flag value`` / ``--flag=value`` / ``--flag`` pairs of a command line (the script's last one wins)."""
    toks = tokens(command)
    out: dict[str, str] = {}
    i = 0
    while i < len(toks):
        t = toks[i]
        if t.startswith("--"):
            k, eq, v = t.partition("=")
            if not eq and i + 1 < len(toks) and not toks[i + 1].startswith("--"):
                v, i = toks[i + 1], i + 1
            out[k] = v
        i += 1
    return out


def command_settings(command: str) -> dict[str, str]:
    """The settings a command gives: its ``--key value`` flags (dashes read as underscores) and its ``key=value``
    arguments (as MaxText takes them), the last one of a key winning."""
    toks = tokens(command)
    out = {k[2:].replace("-", "_"): v or "true" for k, v in command_flags(command).items()}
    for t in toks:
        key, eq, value = t.partition("=")
        if eq and not t.startswith(("-", "/", ".")) and key.replace("_", "").replace(".", "").isalnum():
            out[key] = value
    return out


def settings(knobs: list[dict], command: str = "", codebase: str = "") -> list[dict]:
    """Each knob of a performance concept with the value this run used: the command's, else the base config's
    default (``source`` says which; ``where`` is ``raw/code/<slug>/<file>:<line>`` for a default)."""
    given = command_settings(command)
    out = []
    for k in knobs:
        if k.get("concept") not in CONCEPTS:
            continue
        key = str(k.get("key") or "")
        if key in given:
            out.append({"key": key, "concept": k["concept"], "value": given[key], "source": "command", "where": ""})
        elif k.get("default") is not None:
            where = f"raw/code/{codebase}/{k['default_at']}" if codebase and k.get("default_at") else ""
            out.append({"key": key, "concept": k["concept"], "value": str(k["default"]).strip("'\""),
                        "source": "default", "where": where})
    return out


def _line(s: dict) -> str:
    how = "set by the command" if s["source"] == "command" else "the base config's default"
    return f"config `{s['key']}: {s['value']}` ({how})"


def attach_evidence(items: list[dict], ours, ref) -> None:
    """Each HLO item gains the settings of its concept on either side as evidence: which knob of that codebase
    produces what the compiled program shows (a remat difference and the reference's ``remat_policy``)."""
    for it in items:
        for role, side in (("ours", ours), ("ref", ref)):
            said = [s for s in side.config if it["kind"] in CONCEPTS[s["concept"]][0] and _relevant(it, s)]
            said.sort(key=lambda s: s["source"] != "command")  # what the run chose first, then the defaults
            for s in said[:EVIDENCE_PER_SIDE]:  # a codebase can hold 28 sharding settings: the first few speak
                it["evidence"].append({"side": role, "text": _line(s), "where": s["where"]})


def _relevant(item: dict, s: dict) -> bool:
    if item["kind"] != "kernel":
        return True
    kernel = str((item.get("property") or {}).get("kernel") or "").lower()
    if s["concept"] == "pallas-kernels":
        return True
    return "attention" in kernel or any(w in kernel for w in ("flash", "splash", "mha", "paged"))


def items(ours, ref) -> list[dict]:
    """One ``basis: config`` item per setting both sides' codebases name with different values (a fork of the
    reference's codebase, or the same codebase run two ways); a setting only one side names is evidence, not a
    difference (``attach_evidence``)."""
    mine = {s["key"]: s for s in ours.config}
    out = []
    for s in ref.config:
        o = mine.get(s["key"])
        if o is None or str(o["value"]).lower() == str(s["value"]).lower():
            continue
        _, category, touches = CONCEPTS[s["concept"]]
        out.append({"kind": "config_knob", "what": f"setting `{s['key']}` {s['value']} (ours: {o['value']})",
                    "category": category, "touches": list(touches),
                    "property": {"setting": s["key"], "value": s["value"]},
                    "evidence": [{"side": "ours", "text": _line(o), "where": o["where"]},
                                 {"side": "ref", "text": _line(s), "where": s["where"]}],
                    "basis": "config", "ours": o["value"], "ref": s["value"]})
    return out


def table(side) -> list[dict]:
    """The side's performance settings for the gap page: remat, scan, accumulation and attention first, then
    kernels, parallelism and the rest (the order of ``CONCEPTS``)."""
    order = list(CONCEPTS)
    return sorted(side.config, key=lambda s: (order.index(s["concept"]), s["key"]))
