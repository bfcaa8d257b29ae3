"""Both arms of the reference model in one process, alternated in blocks (tools/templates/llama_pairs.py): real JAX
on the CPU; an A/A pair runs the very same steps on both arms, an A/B pair keeps each arm's own math."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest
from _exp_helpers import REPO

pytestmark = pytest.mark.slow
PAIRS = REPO / "experiments" / "llama_pairs.py"
TINY = "--preset tiny --steps 4"


def pairs(a: str, b: str, rounds: int = 6, block: int = 2) -> dict:
    p = subprocess.run([sys.executable, str(PAIRS), "--a", a, "--b", b, "--rounds", str(rounds), "--block-steps",
                        str(block)], capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


def test_a_a_and_a_b_pairs_in_one_process():
    aa = pairs(TINY, TINY)
    assert aa["schema"] == "autoresearch-pairs/1" and aa["rounds"] == 6 and aa["block_steps"] == 2
    for arm in ("a", "b"):
        r = aa[arm]
        assert len(r["tokens_per_s"]) == len(r["tokens_per_s_best"]) == 6
        assert all(t > 0 for t in r["tokens_per_s"]) and all(b >= t for b, t in zip(r["tokens_per_s_best"],
                                                                                     r["tokens_per_s"]))
        assert len(r["losses"]) == 1 + 6 * 2 and r["compile_s"] > 0  # the warm-up step, then every block's
    assert aa["a"]["losses"] == aa["b"]["losses"]  # the same program on the same data: the same trajectory
    # the arms' rounds alternate their order, so neither is always second
    ab = pairs(TINY, f"{TINY} --compute-dtype bfloat16 --remat full")
    assert ab["b"]["config"]["compute_dtype"] == "bfloat16" and ab["a"]["config"]["compute_dtype"] == "float32"
    # bf16 moves the losses a little and only a little (the runner's semantics tolerance is 0.025 over 12 steps)
    delta = max(abs(x - y) for x, y in zip(ab["a"]["losses"][:12], ab["b"]["losses"][:12]))
    assert 0 < delta < 0.05
    assert all(math.isfinite(x) for x in ab["b"]["losses"])
