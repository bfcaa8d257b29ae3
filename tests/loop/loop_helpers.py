"""A knowledge base with a loop file over tests/loop/fake_model.py (a unique module name: tests/ has no packages)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import yaml

HERE = Path(__file__).parent

KNOBS = {
    "dtype": {"flag": "--dtype", "values": ["f32", "bf16"], "category": "precision"},
    "remat": {"flag": "--remat", "values": ["none", "full"], "category": "memory"},
    "accum": {"flag": "--accum", "values": [1, 2], "category": "memory"},
    "shape": {"flags": {"batch": "--batch", "seq": "--seq"}, "category": "shape",
              "values": [{"batch": 4, "seq": 128}, {"batch": 8, "seq": 64}]},
    "fast": {"env": "FAKE_FAST", "values": ["", "1"], "category": "compiler"},
    "decoy": {"flag": "--decoy", "values": [False, True], "category": "other", "semantics": True},
}


def make_kb(root: Path, name: str = "fake-loop", **overrides) -> Path:
    """``root`` becomes a knowledge base holding model/fake_model.py and loops/<name>.yml; returns the loop file."""
    (root / "wiki").mkdir(parents=True, exist_ok=True)
    (root / "model").mkdir(exist_ok=True)
    shutil.copy(HERE / "fake_model.py", root / "model" / "fake_model.py")
    spec = {"model": "fake", "lane": "loop", "variant": "small/cpu", "code": "model",
            "command": [sys.executable, "fake_model.py"], "knobs": KNOBS, "budget": {"runs": 7},
            "repeats": {"min": 2, "max": 3}, "profile": False, "timeout_s": 60,
            "trust_step_times": True}  # a simulation: its step times are made up, no clock checks them
    spec.update(overrides)
    path = root / "loops" / f"{name}.yml"
    path.parent.mkdir(exist_ok=True)
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def tools(root, *args, code=0) -> str:
    """``tools --root ROOT ARGS`` through the CLI in this process; asserts the exit code, returns the output."""
    from click.testing import CliRunner

    from tools.cli import cli

    res = CliRunner().invoke(cli, ["--root", str(root), *args])
    assert res.exit_code == code, res.output + repr(res.exception)
    return res.output


def lane(root) -> list[dict]:
    """The stand-in lane's filed runs."""
    from tools.experiments import records

    return records.lane_records(root / "wiki", "fake", "loop")
