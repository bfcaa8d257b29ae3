"""Priors, proposals and an artefact recorder shared by the LLM proposer tests (unique module name: tests/ has no
packages)."""

from __future__ import annotations

from pathlib import Path

from tools.loop.priors import Attempt, Priors
from tools.loop.proposal import Change
from tools.loop.spec import parse

KEY = "sk-ant-test-3f9c2d71e0b4a6587c1d"  # a fake key: it must never reach a file
GUIDANCE = "Prefer compiler flags before code changes; never touch the optimizer. (layered program.md)"

LOOP = {
    "model": "llama", "lane": "cpu-loop", "variant": "small/cpu",
    "command": "python experiments/llama_train.py --preset small --steps 10",
    "code": "experiments",
    "knobs": {
        "compute_dtype": {"flag": "--compute-dtype", "values": ["float32", "bfloat16"], "category": "precision"},
        "scan": {"flag": "--scan", "values": [False, True], "category": "compiler"},
        "remat": {"flag": "--remat", "values": ["none", "full", "dots_saveable"], "category": "memory"},
        "shape": {"category": "shape", "values": [{"batch": 16, "seq_len": 128}, {"batch": 32, "seq_len": 64}],
                  "flags": {"batch": "--batch", "seq_len": "--seq-len"}},
    },
    "target": {"tokens_per_s": 120000},
    "budget": {"runs": 10, "llm_tokens": 200000, "cost_usd": 5},
    "proposer": "llm",
}


def attempt(exp_id: str, change: Change, verdict: str, category: str, gain: float | None = None,
            statement: str = "") -> Attempt:
    from dataclasses import asdict
    return Attempt(exp_id, category, asdict(change), change.fingerprint(), verdict, gain, verdict == "supported",
                   statement=statement)


REMAT_FULL = Change("knobs", knobs={"remat": "full"})
SCAN_ON = Change("knobs", knobs={"scan": True})
BF16 = Change("knobs", knobs={"compute_dtype": "bfloat16"})


def priors(*, budget_left: dict | None = None, avoid_category: str = "", guidance: str = GUIDANCE,
           loop: dict | None = None) -> Priors:
    spec = parse(dict(loop or LOOP), Path("loops/cpu-loop.yml"))
    refuted = [attempt("2026-12-01-llama-cpu-loop-003", REMAT_FULL, "refuted", "memory", -18.2,
                       "Full remat frees memory for a larger batch.")]
    tried = [attempt("2026-12-01-llama-cpu-loop-001", BF16, "supported", "precision", 9.6),
             attempt("2026-12-01-llama-cpu-loop-002", SCAN_ON, "refuted", "compiler", -11.0), *refuted]
    return Priors(
        spec=spec, trunk={**spec.start_config(), "compute_dtype": "bfloat16"}, trunk_env={}, trunk_commit="abc1234",
        best={"exp_id": "2026-12-01-llama-cpu-loop-001", "tokens_per_s": 98000.0},
        attempts=tried, other_lanes=[], refuted=refuted + [tried[1]],
        memory={"precision": {"tried": 1, "supported": 1, "refuted": 0, "best_gain_pct": 9.6},
                "memory": {"tried": 1, "supported": 0, "refuted": 1, "closed": True}},
        open_hypotheses=[{"title": "Fuse the dot with YNN on CPU", "path": "hypotheses/ynn-dot.md",
                          "category": "compiler", "author": "person"}],
        profile={"top_ops": [{"op": "dot.211", "category": "matmul", "ms": 0.188}], "busy_pct": 63.8},
        concepts=[{"title": "Rematerialization", "path": "concepts/remat.md", "excerpt": "Trades compute for memory."}],
        kernels=[{"name": "splash_attention", "backend": "pallas-tpu", "category": "attention"}],
        retrospective="Precision paid off; memory changes did not.", guidance=guidance,
        avoid_category=avoid_category, budget_left=dict(budget_left if budget_left is not None else
                                                        {"runs": 7, "llm_tokens": 150000, "cost_usd": 4.5}))


def good(**over) -> dict:
    """A valid tool input: an env change (XLA_FLAGS) as name/value pairs."""
    d = {"statement": "YNN dot fusion raises tokens/s by at least 5 %.",
         "mechanism": "Dots fused with their producers skip a round trip through memory.",
         "predicted_signal": "Fewer, longer fusions in the profile; matmul share of step time drops.",
         "falsification": "tokens/s within noise of the trunk or lower.",
         "change": {"kind": "env", "env": [{"name": "XLA_FLAGS",
                                             "value": "--xla_cpu_experimental_ynn_fusion_type=dot"}]},
         "category": "compiler", "expected_gain_pct": 8, "confidence": 0.6, "effort": 1}
    d.update(over)
    return d


class Recorder:
    """What the engine does with ``record``: each artefact becomes a file in the experiment's folder."""

    def __init__(self, folder: Path):
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        self.names: list[str] = []

    def __call__(self, name: str, text: str) -> None:
        self.names.append(name)
        (self.folder / name).write_text(text, encoding="utf-8")

    def text(self, name: str) -> str:
        return (self.folder / name).read_text(encoding="utf-8")
