"""A stand-in model for loop tests: the JSON-line contract without JAX, its speed a known function of its knobs.

Known answers: bf16 1.5x faster, remat full 0.7x, accum 2 1.2x, shape 8x64 1.1x (same tokens), FAKE_FAST=1 in the
environment 1.3x, --decoy 1.4x but the loss trajectory moves (semantics); --fuse and --tile 1.06x each alone, 1.3x
together (one unlocks the other); --noise-pct P moves each run's speed by up to P % (with --alternate COUNTER_FILE: by
exactly P %, slower and faster in turn). --sleep-ms makes each step really take
that long (for kill tests); --oom-batch N fails as XLA does, out of memory, at batch >= N unless remat is full. The file SPEED_FILE (optional) multiplies the speed (a code patch can edit it).
"""

import argparse
import json
import os
import random
import time
from pathlib import Path

p = argparse.ArgumentParser()
p.add_argument("--dtype", default="f32")
p.add_argument("--remat", default="none")
p.add_argument("--accum", type=int, default=1)
p.add_argument("--batch", type=int, default=4)
p.add_argument("--seq", type=int, default=128)
p.add_argument("--decoy", action=argparse.BooleanOptionalAction, default=False)
p.add_argument("--steps", type=int, default=14)
p.add_argument("--sleep-ms", type=float, default=0.0)
p.add_argument("--oom-batch", type=int, default=0)  # batch >= this without full remat: out of memory
p.add_argument("--fuse", action=argparse.BooleanOptionalAction, default=False)
p.add_argument("--tile", action=argparse.BooleanOptionalAction, default=False)
p.add_argument("--noise-pct", type=float, default=0.0)  # each run's steps all slower or faster by up to this
p.add_argument("--alternate", default="")  # with --noise-pct: a counter file; runs alternate +P %, -P % (no chance)
a = p.parse_args()
print(f"t0 {time.time():.6f}", flush=True)  # wall-clock start and end: tests check runs in flight together

if a.oom_batch and a.batch >= a.oom_batch and a.remat != "full":
    need = a.batch * a.seq * 2 ** 20
    print("Traceback (most recent call last):\n  File \"fake_model.py\", line 1, in <module>\n"
          f"jax.errors.JaxRuntimeError: RESOURCE_EXHAUSTED: Out of memory allocating {need} bytes.", flush=True)
    raise SystemExit(1)
speed = 1.0
speed *= 1.5 if a.dtype == "bf16" else 1.0
speed *= 0.7 if a.remat == "full" else 1.0
speed *= 1.2 if a.accum == 2 else 1.0
speed *= 1.1 if (a.batch, a.seq) == (8, 64) else 1.0
speed *= 1.3 if os.environ.get("FAKE_FAST") == "1" else 1.0
speed *= 1.4 if a.decoy else 1.0
speed *= {(True, True): 1.3, (True, False): 1.06, (False, True): 1.06}.get((a.fuse, a.tile), 1.0)  # together
factor = Path(__file__).with_name("SPEED")
if factor.exists():
    speed *= float(factor.read_text().strip() or 1)

rng = random.Random()
if a.alternate:  # the n-th run of the whole test is P % slower when n is odd, P % faster when it is even
    n = int(Path(a.alternate).read_text() or 0) if Path(a.alternate).exists() else 0
    Path(a.alternate).write_text(str(n + 1))
    base = 0.010 / speed * (1 + (a.noise_pct if n % 2 else -a.noise_pct) / 100)
else:
    base = 0.010 / speed * (1 + rng.uniform(-a.noise_pct, a.noise_pct) / 100)
times = [0.5] + [base * (1 + rng.uniform(-0.004, 0.004)) for _ in range(a.steps - 1)]
for _ in range(a.steps):
    if a.sleep_ms:
        time.sleep(a.sleep_ms / 1e3)
shape_shift = 0.01 * (a.seq / 64)
losses = [round(5.0 - 0.1 * i - shape_shift + (0.3 * i / a.steps if a.decoy else 0)
                + (0.001 if a.dtype == "bf16" else 0), 6) for i in range(a.steps)]
print(f"fake model: speed {speed:.3f}")
print(f"t1 {time.time():.6f}")
print(json.dumps({"step_times_s": times, "tokens_per_step": a.batch * a.seq, "warmup_steps": 1, "losses": losses,
                  "shape": {"tokens": a.batch * a.seq, "batch": a.batch, "seq": a.seq},
                  "flops_per_step": {"causal": 1e9, "noncausal": 1.2e9}, "platform": "cpu", "device_kind": "cpu",
                  "n_devices": 1, "config": vars(a)}))
