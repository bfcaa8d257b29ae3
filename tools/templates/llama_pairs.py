"""Two configurations of the reference model in one process, their steps alternated in short blocks.

    python llama_pairs.py --a "--preset tiny --compute-dtype float32" --b "--preset tiny --compute-dtype bfloat16" \\
        --rounds 20 --block-steps 4

A process-level round runs each arm as a process of its own: seconds of start-up and compile per arm, and another
job on the machine lands on one arm and not the other. Here both step functions are built from
``llama_train``'s own pieces (``init_params``, ``train_step``, ``make_batch``: the same program a run of
``llama_train.py`` compiles), compiled once, and stepped in blocks, the order alternating each round (A B, B A,
...): interference within a second hits both arms of a round. For compile-time knobs only (shapes, dtypes, remat,
scan, attention); an environment or flag change (XLA_FLAGS) needs processes of its own.

The last stdout line is one JSON object: per arm its configuration, tokens/s of each round's block (by the block's
total time and by its fastest step), its losses in step order; the compile time of each; the wall time in all.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import jax  # noqa: E402

import llama_train as lt  # noqa: E402


class Arm:
    def __init__(self, flags: str):
        self.cfg = lt.parse_args(shlex.split(flags))
        self.params = lt.init_params(self.cfg, jax.random.PRNGKey(self.cfg.seed))
        self.opt = lt.adamw_init(self.params)
        self.step_fn = jax.jit(lambda p, o, t, c=self.cfg: lt.train_step(c, p, o, t),
                               donate_argnums=(0, 1) if self.cfg.donate else ())
        self.n = 0
        t = time.perf_counter()
        self.step_fn = self.step_fn.lower(self.params, self.opt, lt.make_batch(self.cfg, 0)).compile()
        self.compile_s = time.perf_counter() - t
        self.block_tps: list[float] = []
        self.best_tps: list[float] = []
        self.losses: list[float] = []

    def steps(self, k: int, timed: bool = True) -> None:
        times = []
        for _ in range(k):
            batch = lt.make_batch(self.cfg, self.n)  # made before the clock starts, as llama_train's are
            t = time.perf_counter()
            self.params, self.opt, loss = self.step_fn(self.params, self.opt, batch)
            loss = float(jax.block_until_ready(loss))
            times.append(time.perf_counter() - t)
            self.losses.append(round(loss, 6))
            self.n += 1
        if timed:
            self.block_tps.append(round(self.cfg.tokens_per_step * k / sum(times), 2))
            self.best_tps.append(round(self.cfg.tokens_per_step / min(times), 2))

    def result(self) -> dict:
        import dataclasses

        return {"config": dataclasses.asdict(self.cfg), "tokens_per_step": self.cfg.tokens_per_step,
                "compile_s": round(self.compile_s, 4), "tokens_per_s": self.block_tps,
                "tokens_per_s_best": self.best_tps, "losses": self.losses}


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--a", required=True, help="llama_train.py flags of arm A (the baseline)")
    p.add_argument("--b", required=True, help="llama_train.py flags of arm B (the variant)")
    p.add_argument("--rounds", type=int, default=20)
    p.add_argument("--block-steps", type=int, default=4)
    p.add_argument("--warmup-steps", type=int, default=1)
    a = p.parse_args(argv)
    t0 = time.perf_counter()
    arms = {"a": Arm(a.a), "b": Arm(a.b)}
    for arm in arms.values():
        arm.steps(a.warmup_steps, timed=False)
    for r in range(a.rounds):
        for name in ("a", "b") if r % 2 == 0 else ("b", "a"):
            arms[name].steps(a.block_steps)
    out = {"schema": "autoresearch-pairs/1", "model": "llama", "rounds": a.rounds, "block_steps": a.block_steps,
           "warmup_steps": a.warmup_steps, "a": arms["a"].result(), "b": arms["b"].result(),
           "platform": jax.default_backend(), "jax_version": jax.__version__,
           "wall_s": round(time.perf_counter() - t0, 3)}
    print(json.dumps(out), flush=True)
    return out


if __name__ == "__main__":
    main()
