"""The lanes the loop benches search: the reference model's command and its declared knob space.

- ``template``: the loop template's shape (2 layers, d_model 128, 14 steps; 512 tokens per step in every shape):
  a run takes ~1.5 s on 2 cores, the lane most benches use.
- ``small``: the reference model's ``small`` preset (4 layers, d_model 256, 16 steps; 2,048 tokens per step in
  every shape), the lane issue 26 was measured on: a run takes ~12 s on 2 cores.

Both: 8 real knobs (shape, grad-accum, dtype, remat, scan, attention, donation, an XLA flag) and one decoy that
changes the math (skips the last layer: faster, wrong), not declared ``semantics``. The first value of each knob
is the start.
"""

from __future__ import annotations

YNN = "--xla_cpu_experimental_ynn_fusion_type=dot"
DECOY = "decoy_skip_layer"


def knobs(shapes: list[dict]) -> dict:
    return {
        "shape": {"category": "shape", "flags": {"batch": "--batch", "seq_len": "--seq-len"}, "values": shapes},
        "grad_accum": {"flag": "--grad-accum", "values": [1, 2, 4], "category": "memory"},
        "compute_dtype": {"flag": "--compute-dtype", "values": ["float32", "bfloat16"], "category": "precision"},
        "remat": {"flag": "--remat", "values": ["none", "full", "dots_saveable"], "category": "memory"},
        "scan": {"flag": "--scan", "values": [False, True], "category": "compiler"},
        "attention": {"flag": "--attention", "values": ["naive", "dpa"], "category": "kernel"},
        "donate": {"flag": "--donate", "values": [True, False], "category": "memory"},
        "xla_ynn_dot": {"env": "XLA_FLAGS", "values": ["", YNN], "category": "compiler"},
        DECOY: {"flag": "--decoy-skip-layer", "values": [False, True], "category": "other"},
    }


LANES = {
    "template": {"preset": ["--preset", "tiny", "--n-layers", "2", "--d-model", "128", "--d-ff", "384", "--steps",
                            "14"],
                 "tokens_per_step": 512,
                 "knobs": knobs([{"batch": 8, "seq_len": 64}, {"batch": 16, "seq_len": 32},
                                 {"batch": 4, "seq_len": 128}])},
    "small": {"preset": ["--preset", "small", "--steps", "16"],
              "tokens_per_step": 2048,
              "knobs": knobs([{"batch": 16, "seq_len": 128}, {"batch": 32, "seq_len": 64},
                              {"batch": 8, "seq_len": 256}])},
}
