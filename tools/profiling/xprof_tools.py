"""The xprof package's own converters on a captured trace: overview page, op profile, roofline, memory profile,
HLO stats, as xprof's UI would show them, or "no data on this backend" with the reason.

xprof reads the ``*.xplane.pb`` files of the latest run under the trace folder; it writes cache files next to what
it reads, so it works on copies (``raw/`` is never modified). On a CPU trace there is no device plane and the
device-side tools come back empty: that is reported as such, never as an error.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from ..errors import InputError
from . import trace as trace_mod

TOOLS = ("overview_page", "op_profile", "roofline_model", "memory_profile", "hlo_stats")
MAX_CHARS = 200_000   # a tool's JSON beyond this is cut (an agent reads the summary fields first)


def _rows(obj: Any) -> int:
    """Data rows anywhere in xprof's output (DataTables carry ``rows``; op profiles carry ``children``)."""
    if isinstance(obj, list):
        return sum(_rows(x) for x in obj)
    if isinstance(obj, dict):
        n = len(obj.get("rows") or []) if isinstance(obj.get("rows"), list) else 0
        n += len(obj.get("children") or []) if isinstance(obj.get("children"), list) else 0
        return n + sum(_rows(v) for k, v in obj.items() if k not in ("rows", "children") and isinstance(v, (dict, list)))
    return 0


def tool_data(folder: Path, tool: str) -> dict:
    """``{"tool", "has_data", "note", "data"}`` for one xprof tool on the latest run under ``folder``."""
    if tool not in TOOLS:
        raise ValueError(f"unknown xprof tool {tool!r} (one of {', '.join(TOOLS)})")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    with tempfile.TemporaryDirectory(prefix="xprof-copy-") as tmp:
        copies = trace_mod.copy_xplanes(folder, Path(tmp))
        if not copies:
            return {"tool": tool, "has_data": False, "note": "no xplane file in the trace folder", "data": None}
        try:
            from xprof.convert import raw_to_tool_data
        except ImportError:
            return {"tool": tool, "has_data": False, "note": "xprof not installed (pip install xprof)", "data": None}
        try:
            raw, _ = raw_to_tool_data.xspace_to_tool_data(copies, tool, {})
        except Exception as e:  # noqa: BLE001 - xprof raises assorted errors on traces it cannot read
            return {"tool": tool, "has_data": False, "note": f"xprof {tool} failed: {type(e).__name__}: {e}",
                    "data": None}
        if not raw:  # xprof answers nothing for a trace it cannot parse, as for a backend without the data
            broken = trace_mod.unreadable([Path(c) for c in copies])
            if broken:
                raise InputError(broken[0], f"not a readable jax.profiler trace (truncated or corrupt: {broken[1]})")
    if isinstance(raw, bytes):
        raw = raw.decode("utf-8", "replace")
    try:
        data = json.loads(raw) if raw else None
    except ValueError:
        data = raw[:MAX_CHARS] if isinstance(raw, str) else None
    rows = _rows(data)
    note = (f"xprof {tool}: {rows} rows" if rows else
            "no data on this backend (the trace has no device plane, e.g. a CPU run)")
    text = json.dumps(data, default=str) if data is not None else ""
    if len(text) > MAX_CHARS:
        data, note = text[:MAX_CHARS], note + f"; cut at {MAX_CHARS} characters of JSON"
    return {"tool": tool, "has_data": bool(rows), "note": note, "data": data if rows else None}
