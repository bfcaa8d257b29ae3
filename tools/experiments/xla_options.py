"""An XLA flag change as per-compile options, so that one process can run both arms (``pairs.plan``).

``XLA_FLAGS`` is read once, when a process starts its backend: two arms that differ in it cannot share a process.
Most of its flags, though, are fields of XLA's ``DebugOptions``, which a compile also takes per executable
(``jax.jit(f).lower(...).compile(compiler_options=...)``). Two arms whose ``XLA_FLAGS`` differ then run in one
process: the process gets the flags both arms share, and each arm compiles with its own as options.

A flag spelled one way in ``XLA_FLAGS`` may be spelled another as an option (an enum value: ``dot`` there,
``LIBRARY_FUSION_TYPE_DOT`` here: ``templates/llama_pairs.py`` tries the spellings), and a few flags act on the
backend rather than on a compile. So what an arm compiled with options is believed only when it is the program the
flag gives: a witness process with the arm's real ``XLA_FLAGS`` compiles it too, and the two optimized programs
must match (``same_program``); else the comparison runs in processes.
"""

from __future__ import annotations

import json
import re
import shlex

from ..profiling.hlo_diff import canonical_text

# flags that act on the process or the backend, not on one compile: never options
PROCESS_ONLY = ("xla_dump", "xla_force_host_platform_device_count", "xla_cpu_multi_thread_eigen",
                "xla_backend_extra_options", "xla_flags_reset")
_TOKEN = re.compile(r"^--(?P<name>xla_\w+)(?:=(?P<value>.*))?$")


def parse(value: str | None) -> dict[str, str] | None:
    """``--name=value`` tokens of an ``XLA_FLAGS`` value as {name: value} (a bare ``--name``: ``true``), in order;
    None when a token is not such a flag (a file of flags, a quoting this reading cannot follow)."""
    try:
        tokens = shlex.split(value or "")
    except ValueError:
        return None
    out: dict[str, str] = {}
    for t in tokens:
        m = _TOKEN.match(t)
        if m is None:
            return None
        out[m.group("name")] = "true" if m.group("value") is None else m.group("value")
    return out


def split(base_env: dict[str, str], variant_env: dict[str, str]
          ) -> tuple[tuple[str | None, dict[str, str], dict[str, str]] | None, str]:
    """When the two environments differ in ``XLA_FLAGS`` alone: ((the flags both share, as the process's
    ``XLA_FLAGS``, or None for none; the baseline arm's options; the variant arm's options), ""); else (None, why).
    A flag only one arm sets goes to that arm as an option; the other compiles with the default."""
    others = set(base_env) | set(variant_env)
    others.discard("XLA_FLAGS")
    if any(base_env.get(k) != variant_env.get(k) for k in others):
        return None, "the arms differ in their environment beyond XLA_FLAGS (an environment change needs processes)"
    fa, fb = parse(base_env.get("XLA_FLAGS")), parse(variant_env.get("XLA_FLAGS"))
    if fa is None or fb is None:
        return None, "the arms differ in their environment: an XLA_FLAGS token is not `--xla_name=value`"
    shared = {k: v for k, v in fa.items() if fb.get(k) == v}
    own_a = {k: v for k, v in fa.items() if k not in shared}
    own_b = {k: v for k, v in fb.items() if k not in shared}
    if bad := next((k for k in [*own_a, *own_b] if k.startswith(PROCESS_ONLY)), None):
        return None, f"the arms differ in their environment: --{bad} acts on the process, not on one compile"
    common = " ".join(f"--{k}={v}" for k, v in shared.items()) or None
    return (common, own_a, own_b), ""


def encode(options: dict[str, str]) -> str:
    return json.dumps(options, sort_keys=True)


_BACKEND_CONFIG = re.compile(r"backend_config=(\{.*?\})(?=,\s*[\w.]+=|$)")


def normal_text(hlo: str) -> str:
    """Optimized HLO as ``hlo_diff.canonical_text`` reads it, with each ``backend_config`` JSON's keys sorted (a
    dump and ``Compiled.as_text()`` order them differently)."""
    def sort_keys(m: re.Match) -> str:
        try:
            return "backend_config=" + json.dumps(json.loads(m.group(1)), sort_keys=True)
        except ValueError:
            return m.group(0)
    return "\n".join(_BACKEND_CONFIG.sub(sort_keys, ln) for ln in canonical_text(hlo).splitlines()) + "\n"


def same_program(with_options: str, witness: str) -> bool:
    """Did the arm compiled with options get the program the flag in ``XLA_FLAGS`` gives (the witness's)?"""
    return normal_text(with_options) == normal_text(witness)
