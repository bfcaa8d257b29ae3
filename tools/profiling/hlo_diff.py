"""Did a change reach the compiler? The optimized HLO of two runs, compared with ids and metadata stripped."""

from __future__ import annotations

import difflib
import hashlib
import re
from collections import Counter
from pathlib import Path

from ..errors import InputError
from .hlo import _COMP, _OPCODE, hlo_dumps

_META_ANY = re.compile(r",?\s*metadata=\{[^}]*\}")
_NAME_TOKEN = re.compile(r"%?\b(?P<n>[A-Za-z_][\w\-]*\.\d+(?:\.\d+)*)\b")
_MODULE_PREFIX = re.compile(r"^module_\d+\.")


def canonical_text(text: str) -> str:
    """Optimized HLO with what differs between two compiles of the same program removed: the module header and
    stack-frame tables, ``metadata={...}`` (source lines, op names), and instruction/computation numbering
    (``fusion.123`` → ``fusion.#1`` in order of first appearance)."""
    lines = text.splitlines()
    start = next((i for i, ln in enumerate(lines) if _COMP.match(ln) and not ln.startswith("HloModule")), len(lines))
    names: dict[str, str] = {}
    per_base: dict[str, int] = {}

    def rename(m: re.Match) -> str:
        n = m.group("n")
        if n not in names:
            base = n.split(".", 1)[0]
            per_base[base] = per_base.get(base, 0) + 1
            names[n] = f"{base}.#{per_base[base]}"
        return ("%" if m.group(0).startswith("%") else "") + names[n]

    out = []
    for ln in lines[start:]:
        ln = _META_ANY.sub("", ln).rstrip()
        if ln:
            out.append(_NAME_TOKEN.sub(rename, ln))
    return "\n".join(out) + "\n"


def fingerprint(folder: Path) -> str | None:
    """A hash of every dumped optimized module under ``folder`` (canonical text, by module name); None when the
    folder holds no dump that is HLO text. Equal fingerprints: the compiler produced the same program."""
    dumps = hlo_dumps(Path(folder))[0]
    if not dumps:
        return None
    by_name: dict[str, str] = {}
    for p, text in dumps:
        key = _MODULE_PREFIX.sub("", p.name)
        by_name[key] = canonical_text(text)
    h = hashlib.sha256()
    for key in sorted(by_name):
        h.update(key.encode() + b"\0" + by_name[key].encode() + b"\0")
    return h.hexdigest()[:20]


_ANY_NAME = re.compile(r"%?\b[A-Za-z_][\w\-]*\.#\d+\b|%[\w.\-#]+")
_HEADER = re.compile(r"^HloModule\s+([^\s,]+)")
_CANON_INSTR = re.compile(r"^\s+(?:ROOT\s+)?%?[\w.\-#]+\s*=\s*(?P<rest>.*)$")


def _modules(folder: Path) -> tuple[dict[str, str], list[str]]:
    """Module name -> canonical optimized HLO (the last dump of a name wins, as in ``fingerprint``), and the dumps
    left out as not HLO text."""
    dumps, bad = hlo_dumps(folder)
    if bad and not dumps:
        raise InputError(folder, "no optimized HLO dump here is HLO text: " + "; ".join(bad[:3]))
    if not dumps:
        raise InputError(folder, "no optimized HLO dump here (*after_optimizations.txt); run with --profile "
                                 "or XLA_FLAGS=--xla_dump_to=... --xla_dump_hlo_as_text")
    out = {}
    for p, text in dumps:
        text = text.lstrip()
        m = _HEADER.match(text)
        out[m.group(1) if m else p.name] = canonical_text(text)
    return out, bad


def _instructions(canon: str) -> Counter:
    """Each instruction with every name replaced by ``%``: what it computes, nothing of what it is called."""
    out: Counter = Counter()
    for ln in canon.splitlines():
        m = _CANON_INSTR.match(ln)
        if m and _OPCODE.search(m.group("rest")):
            out[_ANY_NAME.sub("%", m.group("rest"))] += 1
    return out


def _opcode(key: str) -> str:
    m = _OPCODE.search(key)
    return m.group("op") if m else "?"


def hlo_diff(folder_a: Path, folder_b: Path, context: int = 2, max_lines: int = 40) -> dict:
    """Per module: identical or not, instruction counts, added/removed instructions by opcode (names ignored),
    and a unified diff excerpt of the canonical text (at most ``max_lines`` lines of 160 characters)."""
    (ma, bad_a), (mb, bad_b) = _modules(Path(folder_a)), _modules(Path(folder_b))
    paired = None
    if len(ma) == len(mb) == 1 and set(ma) != set(mb):  # one program each, its function renamed: compared as one
        (na, ta), (nb, tb) = next(iter(ma.items())), next(iter(mb.items()))
        paired = [na, nb]
        ma, mb = {f"{na} / {nb}": ta}, {f"{na} / {nb}": tb}
    modules = []
    for name in sorted(set(ma) & set(mb)):
        ia, ib = _instructions(ma[name]), _instructions(mb[name])
        added, removed = Counter(), Counter()
        for k, n in (ib - ia).items():
            added[_opcode(k)] += n
        for k, n in (ia - ib).items():
            removed[_opcode(k)] += n
        row = {"module": name, "identical": ma[name] == mb[name],
               "instructions": [sum(ia.values()), sum(ib.values())],
               "added": dict(added.most_common()), "removed": dict(removed.most_common()),
               "diff_lines": 0, "excerpt": ""}
        if not row["identical"]:
            lines = list(difflib.unified_diff(ma[name].splitlines(), mb[name].splitlines(), "A", "B",
                                              n=context, lineterm=""))
            row["diff_lines"] = sum(1 for ln in lines if ln[:1] in "+-" and ln[:3] not in ("+++", "---"))
            shown = [ln if len(ln) <= 160 else ln[:159] + "…" for ln in lines[:max_lines]]
            if len(lines) > max_lines:
                shown.append(f"… {len(lines) - max_lines} more diff lines")
            row["excerpt"] = "\n".join(shown)
        modules.append(row)
    only_a, only_b = sorted(set(ma) - set(mb)), sorted(set(mb) - set(ma))
    return {"a": str(folder_a), "b": str(folder_b),
            "identical": not only_a and not only_b and all(m["identical"] for m in modules),
            "modules": modules, "only_in_a": only_a, "only_in_b": only_b, "left_out": bad_a + bad_b,
            "paired": paired}


def render_markdown(d: dict) -> str:
    out = [f"A: `{d['a']}`", f"B: `{d['b']}`", ""]
    out += [f"Left out, not HLO text: {line}" for line in d.get("left_out") or []] + ([""] if d.get("left_out") else [])
    if d.get("paired"):
        out += [f"One program each, named apart: A's `{d['paired'][0]}` compared with B's `{d['paired'][1]}`.", ""]
    if d["identical"]:
        out.append("**Identical optimized HLO** (ids and metadata aside): the change did not reach the compiler; "
                   "any timing difference is noise or host-side.")
        return "\n".join(out) + "\n"
    out += ["**The optimized HLO differs**: the change reached the compiler.", "",
            "| module | identical | instructions A → B | added | removed |", "|---|---|---|---|---|"]
    fmt = lambda c: ", ".join(f"{k} {v}" for k, v in c.items()) or "—"
    for m in d["modules"]:
        out.append(f"| `{m['module']}` | {'yes' if m['identical'] else 'no'} | {m['instructions'][0]} → "
                   f"{m['instructions'][1]} | {fmt(m['added'])} | {fmt(m['removed'])} |")
    for side, names in (("A", d["only_in_a"]), ("B", d["only_in_b"])):
        if names:
            out.append(f"\nOnly in {side}: " + ", ".join(f"`{n}`" for n in names))
    for m in d["modules"]:
        if m["excerpt"]:
            out += ["", f"`{m['module']}`: {m['diff_lines']} changed lines of canonical text; excerpt:", "",
                    "```diff", m["excerpt"], "```"]
    return "\n".join(out) + "\n"
