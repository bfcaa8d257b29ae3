"""An XLA flag compiled as a per-compile option runs at the speed the flag gives in ``XLA_FLAGS``.

    python bench/options_speed.py [--rounds 8] [--flag --xla_cpu_experimental_ynn_fusion_type=dot]

In-process pairs and screens (``tools/experiments/xla_options.py``) run an XLA-flag move in the trunk's process,
the variant compiled with the flag as ``compiler_options``. A witness process checks that this is the program the
flag gives; this bench checks that it also runs at that program's speed, so a gain measured as pairs is the gain
the flag brings when a user sets it. On the loop template's shape of the reference model (2 layers, d_model 128,
batch 8 × 64, 24 steps), ``--rounds`` times, interleaved, the order turning each round:

1. two processes of ``llama_train.py``, without and with the flag in ``XLA_FLAGS``: the gain by the median and by
   the fastest steady step (steps after the second);
2. one ``llama_pairs.py`` process, the flag as arm B's options (arm A's on odd rounds, so position cancels), 8
   rounds of 4-step blocks: the gain by each arm's median and fastest step;
3. the same process with the flag in its ``XLA_FLAGS`` for both arms (no options): the flag's arm speed there
   against the option arm's (the option path against the environment path in one kind of process).

Prints each gain with its 95 % interval over the rounds, the pairs gain over the process gain, and whether the
optimized program compiled with options is the witness's (``xla_options.same_program``); a final JSON line. The
target: the two gains agree (the 95 % interval of their difference holds zero, and their ratio is within 5 %).
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


def process(xla_flags: str | None) -> dict[str, float]:
    p = subprocess.run([sys.executable, str(TRAIN), *FLAGS], env=env_with(xla_flags), capture_output=True,
                       text=True, check=True)
    return steps_of(last_json(p.stdout)["step_times_s"][SKIP:])


def pairs(options: dict[str, str], arm: str, xla_flags: str | None = None, hlo_dir: Path | None = None,
          witness: bool = False) -> dict[str, dict[str, float]]:
    """Arm ``arm``'s step times compiled with ``options``, the other arm's without (per arm: median, min)."""
    flags = " ".join(FLAGS)
    cmd = [sys.executable, str(PAIRS), "--a", flags, "--b", flags, "--rounds", "8", "--block-steps", "4",
           f"--{arm}-options", json.dumps(options)]
    cmd += ["--hlo-dir", str(hlo_dir)] if hlo_dir else []
    cmd += ["--witness"] if witness else []
    p = subprocess.run(cmd, env=env_with(xla_flags), capture_output=True, text=True, check=True)
    r = last_json(p.stdout)
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
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--flag", default=YNN, help="the XLA flag (`--xla_name=value`)")
    a = ap.parse_args()
    from tools.experiments.xla_options import parse, same_program

    options = parse(a.flag)
    if not options or len(options) != 1:
        raise SystemExit(f"--flag: one `--xla_name=value` token, got {a.flag!r}")
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="options-speed-") as tmp:
        hlo, wit = Path(tmp) / "hlo", Path(tmp) / "witness"
        pairs(options, "b", hlo_dir=hlo)
        pairs({}, "a", xla_flags=a.flag, hlo_dir=wit, witness=True)
        program_same = same_program((hlo / "b.txt").read_text(), (wit / "a.txt").read_text())
    logs: dict[str, list[float]] = {k: [] for k in ("process_median", "process_min", "pairs_median", "pairs_min",
                                                    "option_vs_env_median")}
    for r in range(a.rounds):
        first, second = (None, a.flag) if r % 2 == 0 else (a.flag, None)
        got = {first: process(first), second: process(second)}
        base, flag = got[None], got[a.flag]
        arm = "b" if r % 2 == 0 else "a"
        pr = pairs(options, arm)
        plain = pr["a" if arm == "b" else "b"]
        env = pairs({}, "b", xla_flags=a.flag)
        for stat in ("median", "min"):
            logs[f"process_{stat}"].append(100 * math.log(base[stat] / flag[stat]))
            logs[f"pairs_{stat}"].append(100 * math.log(plain[stat] / pr[arm][stat]))
        logs["option_vs_env_median"].append(100 * math.log(statistics.fmean(e["median"] for e in env.values())
                                                          / pr[arm]["median"]))
        print(f"  round {r + 1}/{a.rounds}: process {logs['process_median'][-1]:+.1f}, pairs "
              f"{logs['pairs_median'][-1]:+.1f} (100·ln, median step)", flush=True)
    out = {k: gain(v) for k, v in logs.items()}
    print(f"flag {a.flag}; the program compiled with it as an option is the witness's: {program_same}")
    for k, v in out.items():
        print(f"  {k:<22} {v['gain_pct']:+7.2f} %  [{v['interval_pct'][0]:+.2f}, {v['interval_pct'][1]:+.2f}]  "
              f"σ {v['sd_pct']} % per round")
    checks = {}
    for stat in ("median", "min"):
        diff = [p - q for p, q in zip(logs[f"pairs_{stat}"], logs[f"process_{stat}"])]
        d = gain(diff)
        ratio = (1 + out[f"pairs_{stat}"]["gain_pct"] / 100) / (1 + out[f"process_{stat}"]["gain_pct"] / 100)
        agree = d["interval_pct"][0] <= 0 <= d["interval_pct"][1] and abs(ratio - 1) <= 0.05
        checks[stat] = {"pairs_over_process": round(ratio, 4), "difference": d, "agree": agree}
        print(f"  by the {stat} step: pairs gain / process gain {ratio:.3f}, difference {d['gain_pct']:+.2f} % "
              f"[{d['interval_pct'][0]:+.2f}, {d['interval_pct'][1]:+.2f}]: {'agree' if agree else 'DISAGREE'}")
    missed = [f"by the {s} step the gains disagree" for s, c in checks.items() if not c["agree"]]
    missed += [] if program_same else ["the option program is not the witness's"]
    print(json.dumps({"bench": "options_speed", "flag": a.flag, "rounds": a.rounds, "program_same": program_same,
                      **out, "checks": checks, "targets_missed": missed,
                      "wall_s": round(time.perf_counter() - t0, 1)}))
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
