"""An XLA flag compiled as a per-compile option runs at the speed the flag gives in ``XLA_FLAGS``.

    python bench/options_speed.py [--rounds 10] [--flag=--xla_cpu_experimental_ynn_fusion_type=dot]

In-process pairs and screens (``tools/experiments/xla_options.py``) run an XLA-flag move in the trunk's process,
the variant compiled with the flag as ``compiler_options``. A witness process checks that this is the program the
flag gives; this bench checks that it also runs at that program's speed, so a gain measured as pairs is the gain
the flag brings when a user sets it. On the loop template's model (2 layers, d_model 128, batch 8 × 64; 24 steps a
process here, where the lane runs 14), first the programs: the option's (a witness-mode compile with the option)
must be the witness's (``XLA_FLAGS``), and the program without the flag must not (``xla_options.same_program``).
Then ``--rounds`` rounds, each:

1. two processes of ``llama_train.py``, without and with the flag in ``XLA_FLAGS`` (which runs first turns each
   round): the gain by the median and by the fastest steady step (steps after the second);
2. one ``llama_pairs.py`` process, the flag as arm B's options on even rounds and arm A's on odd ones (so the arm's
   identity, built first or second, cancels; the process alternates block positions itself), 8 rounds of 4-step
   blocks: the gain by each arm's median and fastest step;
3. one ``llama_pairs.py`` process with the flag in its ``XLA_FLAGS`` for both arms (no options): the option arm's
   median step against these arms' (a comparison across two processes, so with process-level noise).

Prints each gain with its 95 % interval over the rounds (rounds' log-ratios, t), the difference of the pairs and
process gains with its interval, the first and second halves of the rounds apart (a drifting machine shows there),
and a final JSON line. The target: the difference's 95 % interval lies within ±``MARGIN_PCT`` % (equivalence: an
option path that biased the gain by more is excluded), and the programs are as above.
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
sys.path.insert(0, str(Path(__file__).resolve().parent))
from lanes import LANES, YNN  # noqa: E402

TRAIN = REPO / "experiments" / "llama_train.py"
PAIRS = REPO / "tools" / "templates" / "llama_pairs.py"
FLAGS = LANES["template"]["preset"] + ["--batch", "8", "--seq-len", "64", "--steps", "24"]
SKIP = 2  # steps a process reading leaves out (compile, then the first warm step)
MARGIN_PCT = 10.0  # the bias of the option path the bench must exclude (±5 % needs more rounds at process σ ~7 %)


def last_json(out: str) -> dict:
    for line in reversed(out.strip().splitlines()):
        try:
            return json.loads(line)
        except ValueError:
            continue
    raise SystemExit(f"no JSON result line in:\n{out[-2000:]}")


def env_with(xla_flags: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    return {**env, "XLA_FLAGS": xla_flags} if xla_flags else env


def steps_of(times: list[float]) -> dict[str, float]:
    return {"median": statistics.median(times), "min": min(times)}


def run(cmd: list[str], xla_flags: str | None) -> str:
    p = subprocess.run(cmd, env=env_with(xla_flags), capture_output=True, text=True, check=False)
    if p.returncode != 0:
        raise SystemExit(f"exit {p.returncode}: {' '.join(cmd[:3])} ...\n{p.stdout[-1000:]}{p.stderr[-2000:]}")
    return p.stdout


def process(xla_flags: str | None) -> dict[str, float]:
    return steps_of(last_json(run([sys.executable, str(TRAIN), *FLAGS], xla_flags))["step_times_s"][SKIP:])


def pairs(options: dict[str, str], arm: str, xla_flags: str | None = None, hlo_dir: Path | None = None,
          witness: bool = False) -> dict[str, dict[str, float]]:
    """Arm ``arm``'s step times compiled with ``options``, the other arm's without (per arm: median, min)."""
    flags = " ".join(FLAGS)
    cmd = [sys.executable, str(PAIRS), "--a", flags, "--b", flags, "--rounds", "8", "--block-steps", "4",
           f"--{arm}-options", json.dumps(options)]
    cmd += ["--hlo-dir", str(hlo_dir)] if hlo_dir else []
    cmd += ["--witness"] if witness else []
    r = last_json(run(cmd, xla_flags))
    return {} if witness else {a: steps_of(r[a]["result"]["step_times_s"][1:]) for a in "ab"}


def gain(logs: list[float]) -> dict:
    """The mean of per-round log-ratios (100·ln) as a gain %, with its 95 % t interval."""
    from tools.experiments.stats import t_quantile, to_pct

    n, mean = len(logs), statistics.fmean(logs)
    half = t_quantile(0.975, n - 1) * statistics.stdev(logs) / math.sqrt(n) if n > 1 else float("inf")
    return {"gain_pct": round(to_pct(mean), 2), "interval_pct": [round(to_pct(mean - half), 2),
            round(to_pct(mean + half), 2)], "sd_pct": round(statistics.stdev(logs), 2) if n > 1 else None}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--flag", default=YNN, help="the XLA flag, written `--flag=--xla_name=value`")
    a = ap.parse_args()
    from tools.experiments.xla_options import parse, same_program

    options = parse(a.flag)
    if not options or len(options) != 1:
        raise SystemExit(f"--flag: one `--xla_name=value` token, got {a.flag!r}")
    if a.rounds < 2:
        raise SystemExit("--rounds: at least 2 (an interval needs two rounds)")
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="options-speed-") as tmp:
        programs = {}
        for name, opts, flags in (("option", options, None), ("witness", {}, a.flag), ("plain", {}, None)):
            pairs(opts, "a", xla_flags=flags, hlo_dir=Path(tmp) / name, witness=True)
            programs[name] = (Path(tmp) / name / "a.txt").read_text()
    program_same = same_program(programs["option"], programs["witness"])
    control_differs = not same_program(programs["plain"], programs["witness"])
    logs: dict[str, list[float]] = {k: [] for k in ("process_median", "process_min", "pairs_median", "pairs_min",
                                                    "option_over_env_median")}
    for r in range(a.rounds):
        first, second = (None, a.flag) if r % 2 == 0 else (a.flag, None)
        got = {first: process(first), second: process(second)}
        without, flagged = got[None], got[a.flag]
        arm = "b" if r % 2 == 0 else "a"
        pr = pairs(options, arm)
        plain = pr["a" if arm == "b" else "b"]
        env_pairs = pairs({}, "b", xla_flags=a.flag)
        for stat in ("median", "min"):
            logs[f"process_{stat}"].append(100 * math.log(without[stat] / flagged[stat]))
            logs[f"pairs_{stat}"].append(100 * math.log(plain[stat] / pr[arm][stat]))
        logs["option_over_env_median"].append(100 * math.log(
            statistics.fmean(e["median"] for e in env_pairs.values()) / pr[arm]["median"]))
        print(f"  round {r + 1}/{a.rounds}: process {logs['process_median'][-1]:+.1f}, pairs "
              f"{logs['pairs_median'][-1]:+.1f} (100·ln, median step)", flush=True)
    out = {k: gain(v) for k, v in logs.items()}
    print(f"flag {a.flag}: the option's program is the witness's: {program_same}; the program without the flag "
          f"differs from it: {control_differs}")
    for k, v in out.items():
        print(f"  {k:<24} {v['gain_pct']:+7.2f} %  [{v['interval_pct'][0]:+.2f}, {v['interval_pct'][1]:+.2f}]  "
              f"σ {v['sd_pct']} % per round")
    half = a.rounds // 2
    checks = {}
    for stat in ("median", "min"):
        diff = [p - q for p, q in zip(logs[f"pairs_{stat}"], logs[f"process_{stat}"])]
        d = gain(diff)
        halves = [gain(diff[:half])["gain_pct"] if half >= 2 else None,
                  gain(diff[half:])["gain_pct"] if a.rounds - half >= 2 else None]
        equivalent = -MARGIN_PCT <= d["interval_pct"][0] and d["interval_pct"][1] <= MARGIN_PCT
        checks[stat] = {"difference": d, "halves_pct": halves, "equivalent": equivalent}
        print(f"  by the {stat} step: pairs speed-up / process speed-up {1 + d['gain_pct'] / 100:.3f}, "
              f"difference {d['gain_pct']:+.2f} % [{d['interval_pct'][0]:+.2f}, {d['interval_pct'][1]:+.2f}] "
              f"(first and second half of the rounds: {halves}): "
              f"{'within' if equivalent else 'NOT within'} ±{MARGIN_PCT:g} %")
    missed = [f"by the {s} step a bias beyond ±{MARGIN_PCT:g} % is not excluded"
              for s, c in checks.items() if not c["equivalent"]]
    missed += [] if program_same else ["the option's program is not the witness's"]
    missed += [] if control_differs else ["the flag leaves the program unchanged: nothing to measure"]
    print(json.dumps({"bench": "options_speed", "flag": a.flag, "rounds": a.rounds, "program_same": program_same,
                      "control_differs": control_differs, "margin_pct": MARGIN_PCT, **out, "checks": checks,
                      "targets_missed": missed, "wall_s": round(time.perf_counter() - t0, 1)}))
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
