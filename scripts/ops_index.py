"""Write tools/cli/ops.json: the registry's operations by group, with their help, for `tools <group> <op>`.

    python scripts/ops_index.py

The CLI reads this file rather than the registry, so `tools --help` never imports pydantic or the MCP SDK;
tests/agent/test_mcp.py keeps it equal to what this script writes.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # this checkout's tools, whatever is installed

OUT = ROOT / "tools" / "cli" / "ops.json"


def index() -> dict[str, dict[str, dict]]:
    """group -> op -> {"help": the first paragraph of its docstring, "args": its input fields, required first}."""
    from tools.agent.registry import load

    out: dict[str, dict[str, dict]] = {}
    for name, op in sorted(load().items()):
        group, _, verb = name.partition(".")
        fields = op.input.model_fields
        args = sorted(fields, key=lambda f: not fields[f].is_required())
        out.setdefault(group, {})[verb.replace("_", "-")] = {
            "help": " ".join((op.doc or name).split("\n\n")[0].split()),
            "args": [f if fields[f].is_required() else f"[{f}]" for f in args]}
    return out


def text() -> str:
    return json.dumps(index(), indent=1, ensure_ascii=False) + "\n"


if __name__ == "__main__":
    OUT.write_text(text(), encoding="utf-8")
    print(f"wrote {OUT.relative_to(ROOT)}")
