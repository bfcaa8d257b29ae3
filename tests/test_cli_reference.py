"""docs/cli.md is the commands' own help: a changed option shows up as a diff here."""

import runpy
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_cli_reference_is_current():
    reference = runpy.run_path(str(ROOT / "scripts/cli_reference.py"))["reference"]
    expected = reference()
    actual = (ROOT / "docs/cli.md").read_text()
    assert actual == expected, "docs/cli.md is stale: python scripts/cli_reference.py > docs/cli.md"
    for command in ("tools ingest", "tools kernels scan", "tools exp run", "tools profile summary",
                    "tools lint", "tools index", "tools init", "tools demo", "tools site stage"):
        assert f"## `{command}`" in expected
