"""Finer interleaving: both arms in one process, alternated in blocks of steps, against process-level rounds.

    python bench/inprocess_pairs.py [--modes quiet,interference] [--runs 30]

On the loop template's shape of the reference model (2 layers, d_model 128, batch 8 × 64), per mode (``interference``:
a background process of fixed duty cycle, busy 60 ms and idle 40 ms, runs all along):

1. process-level A/A: ``--runs`` runs of ``llama_train.py`` (compile cache on, as a loop's timed arms), read as
   rounds A B, B A, ...: the σ of a round's log-ratio, by the median step and by the fastest;
2. in-process A/A: ``llama_pairs.py`` with the same flags on both arms, 3 processes of 20 rounds of 4-step blocks;
3. the same A/B (float32 → bfloat16) both ways: 6 process-level rounds and one in-process run of 20 rounds, each
   with its 95 % interval (stats.paired, uncalibrated), so the two can be seen to agree on the gain.

Prints σ per round, device-seconds per round (every second of every process, compiles included), and the
device-seconds an interval of ±5 % would take at that σ (t ≈ 2: rounds = (2σ/5)²), and a final JSON line.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
TRAIN = REPO / "experiments" / "llama_train.py"
PAIRS = REPO / "tools" / "templates" / "llama_pairs.py"
FLAGS = ["--preset", "tiny", "--n-layers", "2", "--d-model", "128", "--d-ff", "384", "--batch", "8", "--seq-len",
         "64"]
BUSY = ("import time\nwhile True:\n    t = time.perf_counter()\n    while time.perf_counter() - t < 0.060:\n"
        "        pass\n    time.sleep(0.040)\n")


def env_with_cache(cache: Path) -> dict:
    return dict(os.environ, JAX_COMPILATION_CACHE_DIR=str(cache), JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0",
                JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES="0", TF_CPP_MIN_LOG_LEVEL="3")


def last_json(stdout: str) -> dict:
    return json.loads(stdout.strip().splitlines()[-1])


def process_runs(flags_a: list[str], flags_b: list[str], rounds: int, env: dict) -> tuple[dict, float]:
    """Rounds of two processes, the order alternating; tokens/s per arm by median and fastest step."""
    out = {"a": {"median": [], "min": []}, "b": {"median": [], "min": []}}
    spent = 0.0
    for r in range(rounds):
        for arm in ("a", "b") if r % 2 == 0 else ("b", "a"):
            t = time.perf_counter()
            p = subprocess.run([sys.executable, str(TRAIN), *FLAGS, "--steps", "14",
                                *(flags_a if arm == "a" else flags_b)], env=env, capture_output=True, text=True,
                               check=True, timeout=600)
            spent += time.perf_counter() - t
            res = last_json(p.stdout)
            steady = res["step_times_s"][res.get("warmup_steps", 1):]
            out[arm]["median"].append(res["tokens_per_step"] / statistics.median(steady))
            out[arm]["min"].append(res["tokens_per_step"] / min(steady))
    return out, spent


def inprocess(flags_a: list[str], flags_b: list[str], rounds: int, env: dict) -> tuple[dict, float]:
    t = time.perf_counter()
    p = subprocess.run([sys.executable, str(PAIRS), "--a", " ".join(FLAGS + flags_a), "--b",
                        " ".join(FLAGS + flags_b), "--rounds", str(rounds), "--block-steps", "4"], env=env,
                       capture_output=True, text=True, check=True, timeout=600)
    res = last_json(p.stdout)
    return ({arm: {"median": res[arm]["tokens_per_s"], "min": res[arm]["tokens_per_s_best"]} for arm in ("a", "b")},
            time.perf_counter() - t)


def log_ratios(d: dict, reading: str) -> list[float]:
    return [100 * math.log(b / a) for a, b in zip(d["a"][reading], d["b"][reading])]


def mode_run(mode: str, runs: int) -> dict:
    from tools.experiments import stats

    cache = Path(tempfile.mkdtemp(prefix="pairs-cache-"))
    env = env_with_cache(cache)
    subprocess.run([sys.executable, str(TRAIN), *FLAGS, "--steps", "14"], env=env, capture_output=True, timeout=600)
    subprocess.run([sys.executable, str(TRAIN), *FLAGS, "--steps", "14", "--compute-dtype", "bfloat16"], env=env,
                   capture_output=True, timeout=600)
    load = subprocess.Popen([sys.executable, "-c", BUSY]) if mode == "interference" else None
    try:
        proc_aa, proc_aa_s = process_runs([], [], runs // 2, env)
        inp = [inprocess([], [], 20, env) for _ in range(3)]
        proc_ab, proc_ab_s = process_runs([], ["--compute-dtype", "bfloat16"], 6, env)
        inp_ab, inp_ab_s = inprocess([], ["--compute-dtype", "bfloat16"], 20, env)
    finally:
        if load is not None:
            load.kill()
    out = {"mode": mode}
    for reading in ("median", "min"):
        proc_r = log_ratios(proc_aa, reading)
        inp_r = [x for d, _ in inp for x in log_ratios(d, reading)]
        out[reading] = {
            "process_sigma_pct": round(statistics.stdev(proc_r), 2),
            "inprocess_sigma_pct": round(statistics.stdev(inp_r), 2),
            "process_s_per_round": round(proc_aa_s / (runs // 2), 3),
            "inprocess_s_per_round": round(sum(s for _, s in inp) / (20 * len(inp)), 3)}
        for how, d in (("process", proc_ab), ("inprocess", inp_ab)):
            t = stats.paired(d["a"][reading], d["b"][reading], stats.Noise())
            out[reading][f"{how}_bf16_gain_pct"] = t.gain_pct
            out[reading][f"{how}_bf16_interval_pct"] = t.interval_pct
    out["ab_device_s"] = {"process_6_rounds": round(proc_ab_s, 1), "inprocess_20_rounds": round(inp_ab_s, 1)}
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--modes", default="quiet,interference")
    ap.add_argument("--runs", type=int, default=30)
    a = ap.parse_args()
    results = []
    for mode in a.modes.split(","):
        print(f"{mode}: measuring", flush=True)
        r = mode_run(mode, a.runs)
        results.append(r)
        for reading in ("median", "min"):
            x = r[reading]
            need = lambda s, per: per * (2 * s / 5) ** 2  # noqa: E731  device-seconds to a ±5 % interval
            print(f"  read by {reading}: σ of a round {x['process_sigma_pct']} % (processes) vs "
                  f"{x['inprocess_sigma_pct']} % (one process, 4-step blocks); device-seconds per round "
                  f"{x['process_s_per_round']} vs {x['inprocess_s_per_round']}; to a ±5 % interval "
                  f"{need(x['process_sigma_pct'], x['process_s_per_round']):.0f} s vs "
                  f"{need(x['inprocess_sigma_pct'], x['inprocess_s_per_round']):.1f} s")
            print(f"    bf16: processes {x['process_bf16_gain_pct']:+.1f} % {x['process_bf16_interval_pct']}, "
                  f"one process {x['inprocess_bf16_gain_pct']:+.1f} % {x['inprocess_bf16_interval_pct']}")
        print(f"  the A/B's device-seconds: {r['ab_device_s']}")
    print(json.dumps({"inprocess_pairs": results}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
