"""A stand-in training script that follows the JSON-line contract without JAX (fast tests).

Knobs for the failure modes the runner must file honestly: ``--crash``, ``--hang``, ``--exit-after-json N``,
``--nan`` (a NaN loss), ``--bad-step-times zero|empty|text|nan``, ``--huge-line N`` (one N-character log line),
``--noise-pct P`` (random step-time noise), ``--interference-pct P`` (70 % of the steps, drawn at random, delayed by up to
P %: another job on a shared machine), ``--batch B`` (another shape). ``XLA_FLAGS=--fake_speedup=F`` makes the
steps F times faster, and the JSON line reports the XLA_FLAGS it saw, so tests can tell which arm got which flags;
with ``--xla_dump_to=DIR`` in XLA_FLAGS it writes an "optimized HLO" module there: one matmul of the reported
model FLOPs (none with ``--no-dot``) and a root op (``--hlo``).
"""

import argparse
import json
import os
import random
import re
import subprocess
import sys
import time

p = argparse.ArgumentParser()
p.add_argument("--step-ms", type=float, default=10.0)
p.add_argument("--loss-shift", type=float, default=0.0)  # a decoy that changes the math
p.add_argument("--crash", action="store_true")
p.add_argument("--hang", action="store_true")
p.add_argument("--steps", type=int, default=8)
p.add_argument("--batch", type=int, default=4)
p.add_argument("--spawn-child", action="store_true")  # a helper process in the same process group
p.add_argument("--noise-pct", type=float, default=0.0)
p.add_argument("--interference-pct", type=float, default=0.0)
p.add_argument("--exit-after-json", type=int, default=0)
p.add_argument("--nan", action="store_true")
p.add_argument("--bad-step-times", choices=["zero", "empty", "text", "nan"], default=None)
p.add_argument("--huge-line", type=int, default=0)
p.add_argument("--memory-gb", type=float, default=2.0)
p.add_argument("--hlo", default="add")  # the op the fake "optimized HLO" dump holds (see --xla_dump_to below)
p.add_argument("--no-dot", action="store_true")  # ... and no matmul in it: nothing of the model's FLOPs computed
a = p.parse_args()

print(f"fake training: starting, pid {os.getpid()}", flush=True)
if a.spawn_child:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    print(f"helper pid {child.pid}", flush=True)
if a.huge_line:
    print("x" * a.huge_line, flush=True)
if a.hang:
    time.sleep(600)
if a.crash:
    print("Traceback (most recent call last):\nRuntimeError: RESOURCE_EXHAUSTED: out of memory", file=sys.stderr)
    sys.exit(3)
xla = os.environ.get("XLA_FLAGS", "")
if m := re.search(r"--xla_dump_to=(\S+)", xla):  # what XLA would dump: one optimized module, as text
    os.makedirs(m.group(1), exist_ok=True)
    with open(os.path.join(m.group(1), f"module_{os.getpid() % 97:04d}.jit_train_step.cpu_after_optimizations.txt"),
              "w") as f:
        dot = "" if a.no_dot else (  # the model's matmuls: 2 x 1000 x 600 x 1000 = 1.2 GFLOP, as reported
            "  %x = f32[1000,1000]{1,0} parameter(1)\n  %w = f32[1000,600]{1,0} parameter(2)\n"
            "  %d = f32[1000,600]{1,0} dot(f32[1000,1000]{1,0} %x, f32[1000,600]{1,0} %w), lhs_contracting_dims={1}, "
            "rhs_contracting_dims={0}\n")
        f.write(f"HloModule jit_train_step\n\nENTRY %main (p: f32[4]) -> f32[4] {{\n  %p = f32[4]{{0}} parameter(0)\n"
                f"{dot}  ROOT %r.{os.getpid()} = f32[4]{{0}} {a.hlo}(%p, %p), metadata={{op_name=\"x\"}}\n}}\n")
speedup = float(m.group(1)) if (m := re.search(r"--fake_speedup=([\d.]+)", xla)) else 1.0
rng = random.Random()
noise = (lambda: rng.lognormvariate(0, a.noise_pct / 100)) if a.noise_pct else (lambda: 1.0)
step_s = a.step_ms / 1e3 / speedup
times = [1.0] + [step_s * noise()] * (a.steps - 1)  # one noise draw per run: run-to-run noise
if a.interference_pct:  # delays only: 70 % of the steps, drawn at random, wait for another job, by up to P %
    delayed = set(rng.sample(range(1, len(times)), round(0.7 * (len(times) - 1))))
    times = [t * (1 + rng.uniform(0, a.interference_pct / 100)) if i in delayed else t for i, t in enumerate(times)]
losses = [round(5.0 - 0.1 * i + 0.01 * (a.batch - 4) * i + (a.loss_shift * i / a.steps), 6) for i in range(a.steps)]
if a.nan:
    losses[2] = float("nan")
if a.bad_step_times:
    times = {"zero": [1.0, 0.0, 0.01], "empty": [], "text": [1.0, "fast"], "nan": [1.0, float("nan")]}[a.bad_step_times]
print(json.dumps({"step_times_s": times, "tokens_per_step": 256 * a.batch,
                  "warmup_steps": 1, "losses": losses, "flops_per_step": {"causal": 1e9, "noncausal": 1.2e9},
                  "device_kind": "TPU v5 lite", "platform": "tpu", "n_devices": 4,
                  "peak_memory_bytes": int(a.memory_gb * 1e9), "shape": {"batch": a.batch, "seq": 256},
                  "config": {"step_ms": a.step_ms}, "xla_flags": xla}), flush=True)
if a.exit_after_json:
    sys.exit(a.exit_after_json)
