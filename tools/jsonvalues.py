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


def text_or_none(obj) -> str | None:
    """A frontmatter value for an answer's text field: ``None`` stays, anything else is its text (a hand-kept
    page's ``backend: [tpu, gpu]`` is the text ``["tpu", "gpu"]``, not a failed answer for the whole catalog), cut
    to ``MAX_TEXT`` characters."""
    return None if obj is None else short_text(as_text(obj))


MAX_TEXT = 2_000    # characters of one text (a key or a value) in a bounded answer


def short_text(text: str) -> str:
    """``text`` cut to ``MAX_TEXT`` characters, saying so (a hand-kept page's 1 MB title answered every listing
    of the wiki whole)."""
    return text if len(text) <= MAX_TEXT else f"{text[:MAX_TEXT]}[... cut: {len(text):,} characters]"


def bounded_values(value) -> tuple[object, bool]:
    """``value`` (plain JSON) with each text cut to ``MAX_TEXT`` characters and each list or mapping to
    ``MAX_ITEMS`` entries, all its entries kept otherwise (a record); whether anything was cut."""
    return _cut(value)
MAX_ITEMS = 200     # entries of one list or mapping in it
MAX_TOTAL = 20_000  # characters of the whole mapping in it (as JSON): entries past it are left out


def _cut(value) -> tuple[object, bool]:
    """``value`` (plain JSON) with each text cut to ``MAX_TEXT`` characters and each list or mapping to
    ``MAX_ITEMS`` entries; whether anything was cut."""
    if isinstance(value, str):
        return short_text(value), len(value) > MAX_TEXT
    if isinstance(value, list):
        parts = [_cut(v) for v in value[:MAX_ITEMS]]
        return [v for v, _ in parts], len(value) > MAX_ITEMS or any(c for _, c in parts)
    if isinstance(value, dict):
        parts = {_cut(k)[0]: _cut(v) for k, v in list(value.items())[:MAX_ITEMS]}  # a key can be 3 MB too
        return {k: v for k, (v, _) in parts.items()}, len(value) > MAX_ITEMS or any(c for _, c in parts.values()) \
            or any(len(k) > MAX_TEXT for k in value if isinstance(k, str))
    return value, False


def bounded_mapping(meta: dict) -> tuple[dict, bool]:
    """A mapping (a page's frontmatter) bounded for an answer: each key and value cut (``_cut``), then the entries
    that keep the whole within ``MAX_TOTAL`` characters of JSON, in order (100 keys of 2,000-character lists passed
    each value's bound); and whether anything was cut."""
    cut_meta, cut = _cut(meta)
    out: dict = {}
    size = 0
    for k, v in cut_meta.items():
        n = len(json.dumps({k: v}, default=str))
        if size + n > MAX_TOTAL:  # left out; a smaller entry after it (the title) may still fit
            cut = True
            continue
        size += n
        out[k] = v
    return out, cut
