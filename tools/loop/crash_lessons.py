"""What this loop's crashes teach its proposers. Pure: priors in, reasons and moves out.

- An out-of-memory run marks every configuration that needs at least as much memory: the same knobs, with each
  size knob (batch, sequence, a shape mapping) at least as large. A move into one is refused, and the refusal
  names the crash.
- The move that ran out of memory, combined with one memory-side knob (remat, accumulation, offload: the loop
  file's ``memory`` category), is a hypothesis of its own, carrying the allocator's figures.
"""

from __future__ import annotations

import re

from .priors import Attempt, Priors
from .spec import Knob, LoopSpec

SIZE_WORDS = re.compile(r"batch|seq|shape|tokens", re.I)


def _size_knob(knob: Knob) -> bool:
    return knob.category == "shape" or bool(SIZE_WORDS.search(" ".join([knob.name, knob.flag, *knob.flags])))


def _size(v) -> float | None:
    """A size knob's value as one number (a mapping: the product of its numbers)."""
    if isinstance(v, bool):
        return None
    if isinstance(v, (int, float)):
        return float(v)
    if isinstance(v, dict):
        nums = [float(x) for x in v.values() if isinstance(x, (int, float)) and not isinstance(x, bool)]
        out = 1.0
        for x in nums:
            out *= x
        return out if nums else None
    return None


def needs_at_least(spec: LoopSpec, cfg: dict, crashed: dict) -> bool:
    """``cfg`` needs at least the memory of ``crashed``: equal on every other knob, no smaller on a size knob."""
    bigger = False
    for name, knob in spec.knobs.items():
        a, b = cfg.get(name), crashed.get(name)
        if _size_knob(knob) and _size(a) is not None and _size(b) is not None:
            if _size(a) < _size(b):
                return False
            bigger = bigger or _size(a) > _size(b)
        elif a != b:
            return False
    return True


def ooms(priors: Priors) -> list[Attempt]:
    return [a for a in priors.attempts if a.verdict == "crash" and (a.crash or {}).get("kind") == "oom" and a.config]


def figures(a: Attempt) -> str:
    oom = (a.crash or {}).get("oom") or {}
    gib = lambda b: f"{b / 2 ** 30:.2f} GiB"  # noqa: E731
    parts = []
    if oom.get("needed_bytes"):
        parts.append(f"one allocation needed {gib(oom['needed_bytes'])}")
    if oom.get("used_bytes"):
        parts.append(f"used {gib(oom['used_bytes'])} of {gib(oom.get('available_bytes') or 0)}")
    return "; ".join(parts) or "no figures printed"


def refusal(priors: Priors, cfg: dict) -> str | None:
    """Why a move into ``cfg`` is refused: it needs at least the memory of a configuration that ran out of it."""
    for a in ooms(priors):
        if needs_at_least(priors.spec, cfg, a.config):
            return (f"{a.exp_id} ran out of memory ({figures(a)}; signature {a.crash.get('signature')}) in a "
                    f"configuration this one needs at least as much memory as")
    return None


def memory_moves(priors: Priors) -> list[tuple[dict, Attempt]]:
    """(knobs, the OOM it answers): each out-of-memory move from the current trunk plus one memory-side knob value."""
    out = []
    for a in ooms(priors):
        if a.trunk_exp != priors.trunk_exp:
            continue
        moved = (a.change or {}).get("knobs") or {}
        if not moved:
            continue
        for knob in priors.spec.knobs.values():
            if knob.category != "memory" or knob.name in moved:
                continue
            for v in knob.values:
                if v != priors.trunk.get(knob.name):
                    out.append((dict(moved, **{knob.name: v}), a))
    return out
