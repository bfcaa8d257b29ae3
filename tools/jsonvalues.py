"""Values as JSON can carry them: NaN and the infinities (which ``json.dumps`` writes as ``NaN``, not JSON, so that
`| jq`, a browser's ``JSON.parse`` or YAML readers fail on the whole document) become null."""

from __future__ import annotations

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
