"""The checks of one loop-file value (a yes/no, a count, a positive number, rounds, protected paths, a target):
each returns the value typed, or an InputError naming the loop file and the key."""

from __future__ import annotations

import math
from pathlib import Path

from ..errors import InputError

def _positive(path, key: str, v, what: str = "a positive number of seconds") -> float | None:
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 < v < float("inf"):
        raise InputError(path, f"`{key}` is {what}, not {v!r}")
    return float(v)

def _target(path, key: str, v) -> float:
    """A target figure: a positive finite number (YAML reads ``1.2e5`` as text: it is taken as the number)."""
    try:
        f = float(v) if isinstance(v, str) else v
    except ValueError:
        f = None
    if isinstance(f, bool) or not isinstance(f, (int, float)) or not 0 < f < float("inf"):
        raise InputError(path, f"`target.{key}` is a positive number, not {v!r}")
    return float(f)

def _unknown(path: Path, where: str, keys, known: tuple[str, ...]) -> None:
    """A key the loop reads nowhere is a typo until said otherwise: silently ignored, ``calibrat: 5`` would run the
    loop uncalibrated."""
    import difflib

    for k in keys:
        if str(k) not in known:
            near = difflib.get_close_matches(str(k), known, n=1)
            raise InputError(path, f"{where}unknown key `{k}`" + (f" (did you mean `{near[0]}`?)" if near else
                                                                   f"; the keys are {', '.join(known)}"))

def _yes_no(path: Path, key: str, v) -> bool:
    if not isinstance(v, bool):
        raise InputError(path, f"`{key}` is true or false, not {v!r}")
    return v

def _count(path: Path, key: str, v, least: int) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < least:
        raise InputError(path, f"`{key}` is a whole number of at least {least}, not {v!r}")
    return v

def _rounds(path: Path, key: str, value, default: int) -> int:
    """A key that is false, true (``default`` rounds) or a number of rounds (at least 2)."""
    if value is None or isinstance(value, bool):
        return default if value else 0
    if isinstance(value, int) and value >= 2:
        return value
    raise InputError(path, f"`{key}` is true, false or a number of rounds (at least 2), not {value!r}")

def _protected(path: Path, value) -> list[str]:
    """``protected:``: paths relative to ``cwd`` (``path::name`` for one function of a Python file); globs are
    allowed for the patch check, plain paths are also hashed with every run."""
    if value is None:
        return []
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise InputError(path, f"`protected` is a list of paths (path or path::function), not {value!r}")
    return [v.strip() for v in value]


WHOLE_BUDGETS = ("runs", "llm_tokens")  # counted things: 2.5 runs ran 3


def _budget(path: Path, raw) -> dict[str, float]:
    """``budget:``: a mapping of limit to a number (a whole one for runs and tokens); a wrong one named."""
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise InputError(path, f"`budget` is a mapping such as {{runs: 10, wall_s: 3600}}, not {raw!r}")
    out = {}
    for k, v in raw.items():
        if isinstance(v, str):  # YAML reads `1e6` (no dot) and `'10'` as text: a number written so is one
            try:
                v = int(v) if v.strip().lstrip("+").isdigit() else float(v)
            except ValueError:
                pass
        whole = str(k) in WHOLE_BUDGETS
        if isinstance(v, bool) or not isinstance(v, (int, float)) or (whole and isinstance(v, float)
                                                                       and not v.is_integer()):  # 2.5 runs ran 3
            raise InputError(path, f"budget `{k}` is a positive {'whole ' if whole else ''}number, not {v!r}")
        if not math.isfinite(v) or v <= 0:  # a NaN budget never stops a loop ('nan' is text YAML reads as a float)
            raise InputError(path, f"budget `{k}` is a positive {'whole ' if whole else ''}number, not {v!r}")
        out[str(k)] = float(v)
    return out
