"""A stand-in training script that follows the JSON-line contract without JAX (fast tests)."""

import argparse
import json
import os
import subprocess
import sys
import time

p = argparse.ArgumentParser()
p.add_argument("--step-ms", type=float, default=10.0)
p.add_argument("--loss-shift", type=float, default=0.0)  # a decoy that changes the math
p.add_argument("--crash", action="store_true")
p.add_argument("--hang", action="store_true")
p.add_argument("--steps", type=int, default=8)
p.add_argument("--spawn-child", action="store_true")  # a helper process in the same process group
a = p.parse_args()

print(f"fake training: starting, pid {os.getpid()}", flush=True)
if a.spawn_child:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    print(f"helper pid {child.pid}", flush=True)
if a.hang:
    time.sleep(600)
if a.crash:
    print("Traceback (most recent call last):\nRuntimeError: RESOURCE_EXHAUSTED: out of memory", file=sys.stderr)
    sys.exit(3)
losses = [round(5.0 - 0.1 * i + (a.loss_shift * i / a.steps), 6) for i in range(a.steps)]
print(json.dumps({"step_times_s": [1.0] + [a.step_ms / 1e3] * (a.steps - 1), "tokens_per_step": 1024,
                  "warmup_steps": 1, "losses": losses, "flops_per_step": {"causal": 1e9, "noncausal": 1.2e9},
                  "device_kind": "TPU v5 lite", "platform": "tpu", "n_devices": 4,
                  "peak_memory_bytes": 2_000_000_000, "shape": {"batch": 4, "seq": 256},
                  "config": {"step_ms": a.step_ms}}))
