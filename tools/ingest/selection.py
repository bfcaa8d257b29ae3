"""A codebase's kernel selection map: which configuration value or registry entry chooses which kernel. The
choices come from each file's dispatch facts (``ingest/dispatch.py``: ``if config.attention == "flash"`` branches
and their calls, ``IMPLEMENTATIONS["mosaic_tpu"] = ...`` registries); a call reaches a kernel when it names one
of the catalog's launch functions, their public callers or their kernel classes, in this repository or in one
ingested before (MaxText's ``attention: flash`` reaches jax's and tokamax's splash attention). Rendered on the
overview and written as ``codebases/<slug>/selection.json`` (the ``kernels.selection`` operation reads it)."""

from __future__ import annotations

import json

from .. import mdtext
from .analyze import RepoModel

MAX_ROWS = 60


def _keys(site) -> list[str]:
    """The dotted names a call may use to reach a site's kernel: its public function and everything that reaches
    it through calls (``KernelSite.reached_by``: callers up to four hops, and their classes)."""
    keys = [site.qualname or "", *site.callers, *site.reached_by]
    return list(dict.fromkeys(k for k in keys if k.count(".") >= 1))


class KernelIndex:
    """Kernel pages by the dotted names that reach them, for one repository and those ingested before it."""

    def __init__(self, by_repo: dict[str, list[tuple]]):
        """``by_repo``: repository -> [(KernelSite, its page)]."""
        self.by_last: dict[str, list[tuple[str, str, str, str]]] = {}
        self.owners: dict[str, list[tuple[str, str, str, str]]] = {}  # what a registry may name besides
        for repo, rows in by_repo.items():
            for site, page in rows:
                for key in _keys(site):
                    self.by_last.setdefault(key.rsplit(".", 1)[-1], []).append((key, repo, site.kernel, page))
                for key in site.owners:
                    self.owners.setdefault(key.rsplit(".", 1)[-1], []).append((key, repo, site.kernel, page))

    def reached(self, call: str, registry: bool = False) -> list[dict]:
        """Kernel pages ``call`` names: a key that is a dotted suffix of the call (``jax.experimental...
        splash_attention_kernel.make_splash_mha`` names jax's ``...splash_attention_kernel.make_splash_mha``);
        a ``registry`` entry also by a class one of whose methods reaches the kernel."""
        out = {}
        last = call.rsplit(".", 1)[-1]
        for key, repo, kernel, page in self.by_last.get(last, []) + (self.owners.get(last, []) if registry else []):
            if call == key or call.endswith("." + key):
                out.setdefault(page, {"kernel": kernel, "repo": repo, "page": page})
        return list(out.values())


def selection_map(model: RepoModel, index: KernelIndex) -> dict:
    """{"choices": [{selector, values, where, calls, kernels}], "registries": [{registry, key, target, where,
    kernels}]}: each choice once per file and (selector, values)."""
    choices: dict[tuple, dict] = {}
    registries = []
    for rel in sorted(model.scan.files):
        found = model.scan.files[rel].facts.get("dispatch")
        if not found:
            continue
        for selector, values, line, calls, *others in found.get("branches", ()):
            # a call whose name says no kernel counts when it reaches a catalogued one (ln.layer_norm)
            calls = calls + [c for c in (others[0] if others else ()) if index.reached(c)]
            if not calls:
                continue
            kernels = [k for c in calls for k in index.reached(c)]
            key = (rel, selector, tuple(values))  # the same test in two files is two choices
            entry = choices.setdefault(key, {"selector": selector, "values": list(values),
                                             "where": f"{rel}:{line}", "calls": [], "kernels": []})
            if kernels and not entry["kernels"]:  # the line shown is the first test whose calls reach a kernel
                entry["where"] = f"{rel}:{line}"
            for c in calls:
                if c not in entry["calls"]:
                    entry["calls"].append(c)
            for k in kernels:
                if k not in entry["kernels"]:
                    entry["kernels"].append(k)
        for registry, key, target, line in found.get("registries", ()):
            registries.append({"registry": registry, "key": key, "target": target, "where": f"{rel}:{line}",
                               "kernels": index.reached(target, registry=True)})  # each page once
    return {"choices": list(choices.values()), "registries": registries}


def chosen_by(chosen: dict, source_link) -> dict[str, list[str]]:
    """Kernel page -> the markdown lines saying which setting values and registry entries of this codebase choose
    it (its **Callers** section shows them)."""
    out: dict[str, list[str]] = {}
    for c in chosen["choices"]:
        rel, _, line = c["where"].rpartition(":")
        said = (f"{mdtext.code(c['selector'])} = " + " or ".join(mdtext.code(v) for v in c["values"][:4]) +
                f" ({mdtext.link(mdtext.escape(c['where']), source_link(rel, int(line)))})")
        for k in c["kernels"]:
            out.setdefault(k["page"], []).append(said)
    for r in chosen["registries"]:
        rel, _, line = r["where"].rpartition(":")
        entry = mdtext.code(f"{r['registry']}[{r['key']!r}]")
        said = f"{entry} ({mdtext.link(mdtext.escape(r['where']), source_link(rel, int(line)))})"
        for k in r["kernels"]:
            out.setdefault(k["page"], []).append(said)
    return {page: list(dict.fromkeys(lines)) for page, lines in out.items()}


def selection_json(chosen: dict) -> str:
    return json.dumps(chosen, indent=1, ensure_ascii=False) + "\n"


def _kernels(kernels: list[dict], page_link) -> str:
    pages = list({k["page"]: k for k in kernels}.values())  # a kernel with several sites: its page once
    return ", ".join(mdtext.link(mdtext.code(k["kernel"]) + (f" ({k['repo']})" if k.get("repo") else ""),
                                 page_link(k["page"])) for k in pages[:6])


def _calls(calls: list[str]) -> str:
    """What a choice runs when it reaches no kernel page: its first calls, by their last two names."""
    return ", ".join(mdtext.code(".".join(c.split(".")[-2:])) for c in calls[:3]) or "—"


def selection_section(chosen: dict, source_link, page_link) -> str:
    """The overview's **Kernel selection** section: the choices that reach a kernel page, then the registries."""
    rows = []
    deciding = {c["selector"] for c in chosen["choices"] if c["kernels"]}  # a setting that picks some kernel
    for c in chosen["choices"]:
        if c["selector"] not in deciding:
            continue
        rel, _, line = c["where"].rpartition(":")
        rows.append([mdtext.code(c["selector"]), ", ".join(mdtext.code(v) for v in c["values"][:6]),
                     _kernels(c["kernels"], page_link) or _calls(c["calls"]),
                     mdtext.link(mdtext.escape(c["where"]), source_link(rel, int(line)))])
    regs = []
    for r in chosen["registries"]:
        if not r["kernels"]:
            continue
        rel, _, line = r["where"].rpartition(":")
        regs.append([mdtext.code(f"{r['registry']}[{r['key']!r}]"), mdtext.code(r["target"].rsplit(".", 1)[-1]),
                     _kernels(r["kernels"], page_link),
                     mdtext.link(mdtext.escape(r["where"]), source_link(rel, int(line)))])
    if not rows and not regs:
        return ""
    out = ["### Kernel selection\n",
           "Which setting or registry entry chooses which kernel (an `if` on a setting's value, followed one call "
           "into the same file; every choice in [selection.json](selection.json)):\n"]
    if rows:
        out.append(mdtext.table(["Setting", "Value", "Reaches", "Where"], rows[:MAX_ROWS]))
    if regs:
        out.append("\nRegistries of implementations:\n")
        out.append(mdtext.table(["Entry", "Implementation", "Kernel", "Where"], regs[:MAX_ROWS]))
    return "\n".join(out) + "\n"
