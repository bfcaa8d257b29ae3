"""Two configurations of the reference model in one process, their steps alternated in short blocks (or more:
``--arm``, a screen of several variants against arm A, ``tools.experiments.screen``).

    python llama_pairs.py --a "--preset tiny --compute-dtype float32" --b "--preset tiny --compute-dtype bfloat16" \\
        --rounds 20 --block-steps 4

A process-level round runs each arm as a process of its own: seconds of start-up and compile per arm, and another
job on the machine lands on one arm and not the other. Here both step functions are built from
``llama_train``'s own pieces (``init_params``, ``train_step``, ``make_batch``: the same program a run of
``llama_train.py`` compiles), compiled once, and stepped in blocks, the order alternating each round (A B, B A,
...): interference within a second hits both arms of a round. For compile-time knobs (shapes, dtypes, remat,
scan, attention) and XLA flags that are per-compile options (``--a-options``, ``--b-options``, ``--arm-options``:
JSON objects, the arm compiled with ``compiler_options``; ``tools/experiments/xla_options.py``); another
environment change needs processes of its own. ``--hlo-dir``: each arm's optimized program written there
(``<arm>.txt``); ``--witness``: compile arm A and write its program, no step run (the program the flag in
``XLA_FLAGS`` gives, against which an arm compiled with options is checked); ``--skip-refused`` (a screen): an
arm after A whose options XLA refuses is left out and named in ``refused`` (otherwise the process exits 3).

Every step prints a line ``{"arm": "a", "step": i, "loss": ..., "step_time_s": ...}`` as ``llama_train`` does, so
a runner can time each block on its own clock. The last stdout line is one JSON object: per arm its configuration,
tokens/s of each round's block (by the block's total time and by its fastest step), its losses in step order, the
step indices of each round's block, and ``result``: the arm's whole run as ``llama_train``'s JSON line reports it
(its peak memory from the compiled step's own analysis, since a device's peak would hold both arms); the compile
time of each; the wall time in all. ``--model`` names the ``llama_train.py`` to build from (default: the one
beside this file).
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import shlex
import sys
import time
from pathlib import Path

import jax

lt = None  # the llama_train module the arms are built from (``load``)


def load(path: Path):
    """``llama_train.py`` at ``path``, imported as a module (its ``main`` does not run)."""
    global lt
    spec = importlib.util.spec_from_file_location("llama_train", path)
    lt = importlib.util.module_from_spec(spec)
    sys.modules["llama_train"] = lt
    spec.loader.exec_module(lt)
    return lt


# XLA_FLAGS spells an enum value as its parser reads it ("dot"); a compile option wants the proto's name
# ("LIBRARY_FUSION_TYPE_DOT"): the enum type's prefix of each such flag XLA_FLAGS takes short
ENUM_PREFIXES = {"xla_cpu_experimental_ynn_fusion_type": "LIBRARY_FUSION_TYPE_",
                 "xla_cpu_experimental_onednn_fusion_type": "LIBRARY_FUSION_TYPE_",
                 "xla_cpu_experimental_xnn_fusion_type": "LIBRARY_FUSION_TYPE_",
                 "xla_cpu_experimental_xnn_graph_fusion_mode": "XNN_GRAPH_FUSION_MODE_"}


class OptionRefused(Exception):
    pass


def spellings(name: str, value: str) -> list[str]:
    """The ways to spell an XLA_FLAGS value as a compile option, the flag's own first (a list of enum values:
    each spelled)."""
    prefix = ENUM_PREFIXES.get(name, "")
    out = [value, value.capitalize() if value.lower() in ("true", "false") else value, value.upper()]  # a bool: True
    if prefix:
        out.append(",".join(v if v.upper().startswith(prefix) else prefix + v.upper() for v in value.split(",")))
    return list(dict.fromkeys(out))


def compile_with(lowered, options: dict[str, str]):
    """``lowered`` compiled with ``options``, each value in the first spelling XLA takes (OptionRefused: none)."""
    try:  # each option in its first spelling: one compile when XLA takes them all
        return lowered.compile(compiler_options=dict(options)), dict(options)
    except Exception:  # noqa: BLE001 - a spelling XLA refuses: each option on its own below
        pass
    chosen: dict[str, str] = {}
    compiled = None
    for name, value in options.items():
        last = None
        for v in spellings(name, value):
            try:  # a spelling XLA refuses fails before anything compiles
                compiled = lowered.compile(compiler_options={**chosen, name: v})
            except Exception as e:  # XlaRuntimeError: INVALID_ARGUMENT, an option or value XLA does not take
                last = e
                continue
            chosen[name] = v
            break
        else:
            raise OptionRefused(f"--{name}={value}: {str(last).splitlines()[0][:300]}")
    return compiled, chosen


class Arm:
    def __init__(self, name: str, flags: str, options: dict[str, str] | None = None):
        self.name = name
        self.cfg = lt.parse_args(shlex.split(flags))
        self.params = lt.init_params(self.cfg, jax.random.PRNGKey(self.cfg.seed))
        self.opt = lt.adamw_init(self.params)
        step_fn = jax.jit(lambda p, o, t, c=self.cfg: lt.train_step(c, p, o, t),
                          donate_argnums=(0, 1) if self.cfg.donate else ())
        self.n = 0
        t = time.perf_counter()
        lowered = step_fn.lower(self.params, self.opt, lt.make_batch(self.cfg, 0))
        self.step_fn, self.options = compile_with(lowered, options) if options else (lowered.compile(), {})
        self.compile_s = time.perf_counter() - t
        print(json.dumps({"arm": name, "compiled_s": round(self.compile_s, 4)}), flush=True)  # alive: not hung
        self.block_tps: list[float] = []
        self.best_tps: list[float] = []
        self.losses: list[float] = []
        self.times: list[float] = []
        self.blocks: list[list[int]] = []

    def steps(self, k: int, timed: bool = True) -> None:
        batches = [lt.make_batch(self.cfg, self.n + i) for i in range(k)]  # made before any clock starts
        times, first = [], self.n
        for batch in batches:
            t = time.perf_counter()
            self.params, self.opt, loss = self.step_fn(self.params, self.opt, batch)
            loss = float(jax.block_until_ready(loss))
            times.append(time.perf_counter() - t)
            self.losses.append(round(loss, 6))
            print(json.dumps({"arm": self.name, "step": self.n, "loss": round(loss, 6),
                              "step_time_s": round(times[-1], 6)}), flush=True)
            self.n += 1
        self.times += times
        if timed:
            self.blocks.append(list(range(first, self.n)))
            self.block_tps.append(round(self.cfg.tokens_per_step * k / sum(times), 2))
            self.best_tps.append(round(self.cfg.tokens_per_step / min(times), 2))

    def result(self) -> dict:
        run = lt.report(self.cfg, self.step_fn, lt.xla_flops(self.step_fn), self.compile_s, self.times, self.losses)
        ma = self.step_fn.memory_analysis()
        if ma is not None:
            run["peak_memory_bytes"] = sum(int(getattr(ma, k, 0) or 0) for k in
                                           ("argument_size_in_bytes", "output_size_in_bytes", "temp_size_in_bytes"))
            run["peak_memory_source"] = "compiled memory_analysis (arguments + outputs + temporaries)"
        return {"config": dataclasses.asdict(self.cfg), "tokens_per_step": self.cfg.tokens_per_step,
                "options": self.options,
                "compile_s": round(self.compile_s, 4), "tokens_per_s": self.block_tps,
                "tokens_per_s_best": self.best_tps, "losses": self.losses, "blocks": self.blocks, "result": run}


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--a", required=True, help="llama_train.py flags of arm A (the baseline)")
    p.add_argument("--b", required=True, help="llama_train.py flags of arm B (the variant)")
    p.add_argument("--arm", action="append", default=[], metavar="FLAGS",
                   help="more arms (c, d, ...: a screen of several variants against arm A), in rotating order")
    p.add_argument("--rounds", type=int, default=20)
    p.add_argument("--block-steps", type=int, default=4)
    p.add_argument("--warmup-steps", type=int, default=1)
    p.add_argument("--model", type=Path, default=Path(__file__).resolve().parent / "llama_train.py",
                   help="the llama_train.py to build both arms from")
    p.add_argument("--a-options", default="{}", help="arm A's XLA compile options (a JSON object)")
    p.add_argument("--b-options", default="{}", help="arm B's XLA compile options (a JSON object)")
    p.add_argument("--arm-options", action="append", default=[], metavar="JSON",
                   help="the compile options of each --arm, in order (default: none)")
    p.add_argument("--hlo-dir", type=Path, help="write each arm's optimized program there (<arm>.txt)")
    p.add_argument("--witness", action="store_true", help="compile arm A, write its program, run no step")
    p.add_argument("--skip-refused", action="store_true",
                   help="leave out an arm after A whose options XLA refuses (named in `refused`), not the process")
    a = p.parse_args(argv)
    t0 = time.perf_counter()
    load(a.model)
    flags = [a.a, a.b, *a.arm]
    if len(flags) > 26:
        p.error(f"at most 26 arms, got {len(flags)}")
    if len(a.arm_options) > len(a.arm):
        p.error(f"{len(a.arm_options)} --arm-options for {len(a.arm)} --arm")
    options = [json.loads(o) for o in [a.a_options, a.b_options, *a.arm_options]]
    options += [{}] * (len(flags) - len(options))
    names = [chr(ord("a") + i) for i in range(len(flags))]
    if a.witness:
        names, flags = names[:1], flags[:1]
    arms, refused = {}, {}
    for n, f, o in zip(names, flags, options):
        try:
            arms[n] = Arm(n, f, o)
        except OptionRefused as e:
            if n == "a" or not a.skip_refused:
                print(json.dumps({"schema": "autoresearch-pairs/1", "refused_option": str(e)}), flush=True)
                raise SystemExit(3)
            refused[n] = str(e)  # a screen: the other arms still rank
            print(json.dumps({"arm": n, "refused_option": str(e)}), flush=True)
    names = [n for n in names if n in arms]
    if a.hlo_dir:
        a.hlo_dir.mkdir(parents=True, exist_ok=True)
        for n, arm in arms.items():
            (a.hlo_dir / f"{n}.txt").write_text(arm.step_fn.as_text())
    if a.witness:
        out = {"schema": "autoresearch-pairs/1", "witness": True, "arms": names, "platform": jax.default_backend(),
               "wall_s": round(time.perf_counter() - t0, 3)}
        print(json.dumps(out), flush=True)
        return out
    for arm in arms.values():
        arm.steps(a.warmup_steps, timed=False)
    for r in range(a.rounds):
        # each round starts one arm later (two arms: A B, B A, ...): over as many rounds as arms, every arm
        # holds every position once
        k = r % len(names)
        for name in names[k:] + names[:k]:
            arms[name].steps(a.block_steps)
    out = {"schema": "autoresearch-pairs/1", "model": "llama", "rounds": a.rounds, "block_steps": a.block_steps,
           "warmup_steps": a.warmup_steps, "arms": names, **{n: arm.result() for n, arm in arms.items()},
           "platform": jax.default_backend(), "jax_version": jax.__version__,
           **({"refused": refused} if refused else {}), "wall_s": round(time.perf_counter() - t0, 3)}
    print(json.dumps(out), flush=True)
    return out


if __name__ == "__main__":
    main()
