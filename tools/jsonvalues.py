"""Values as JSON can carry them: NaN and the infinities (which ``json.dumps`` writes as ``NaN``, not JSON, so that
`| jq`, a browser's ``JSON.parse`` or YAML readers fail on the whole document) become null."""

from __future__ import annotations

import datetime
import json
import math


def finite(obj):
    """``obj`` with every non-finite float replaced by None, through dicts, lists and tuples."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [finite(v) for v in obj]
    return obj


def plain(obj):
    """``obj`` as JSON can carry it whatever YAML gave: keys as text (``2024: notes``), bytes (``!!binary``) as text,
    dates as ISO text, sets and tuples as lists, non-finite floats as None, anything else as its text."""
    if isinstance(obj, dict):
        return {str(plain(k)) if not isinstance(k, str) else k: plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, set, frozenset)):
        return [plain(v) for v in obj]
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if obj is None or isinstance(obj, (str, int, bool)):
        return obj
    if isinstance(obj, (bytes, bytearray)):
        return bytes(obj).decode("utf-8", "replace")
    if isinstance(obj, (datetime.date, datetime.datetime, datetime.time)):
        return obj.isoformat()
    return str(obj)


def as_text(obj) -> str:
    """A frontmatter value as its YAML/JSON text: ``true``, ``null``, ``3``, ``draft``, ``["a", "b"]``."""
    v = plain(obj)
    return v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)
