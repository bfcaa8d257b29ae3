"""Gap loop: does a loop given a fast reference reach it in few experiments, and faster than without one?

    python bench/gap_loop.py [--seeds 3] [--budget 8] [--rounds 5] [--keep DIR] [--check]

On the reference model (CPU, the tiny preset), the loop starts 3 knobs away from a reference configuration
(``compute_dtype``, ``remat`` and ``batch``; two more knobs, ``grad_accum`` and ``scan``, are declared but the
reference leaves them at the start's value). Per seed, in a knowledge base of its own:

1. the loop with ``reference:`` (the reference's command, run once, profiled, on ``<lane>-reference``) and
   ``target: {reference: 95}``, profiled (the gap analysis reads the trunk's HLO and profile);
2. the same loop without ``reference:`` (no target; the sweep's table priors only), same budget.

Then, for each loop, every configuration its trunk held is measured against the reference, interleaved
(reference, trunk 1, trunk 2, ... x ``--rounds``; each ratio is the median over rounds of the ratio within a
round, every run read by its fastest steady step). "Experiments to 95 %" is the loop iteration that kept the first
trunk at >= 95 % of the reference (the baseline, the reference run and the loop's own interleaved reference checks
are not counted); a loop that never got there counts as budget + 1 (printed ``>N``).

Also times ``tools gap`` on the start against the reference (the analysis alone, on the filed runs).

Prints a table per seed and a final JSON line. ``--check`` exits 1 when a target is missed: median experiments to
95 % with the reference <= 5, and at least 2x fewer than without it (medians); the gap analysis <= 3 s.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
SCRIPT = REPO / "experiments" / "llama_train.py"
PRESET = ["--preset", "tiny", "--steps", "10"]
KNOBS = {  # the first value of each knob is the start
    "compute_dtype": {"flag": "--compute-dtype", "values": ["bfloat16", "float32"], "category": "precision"},
    "remat": {"flag": "--remat", "values": ["full", "none"], "category": "memory"},
    "batch": {"flag": "--batch", "values": [4, 16], "category": "shape"},
    "grad_accum": {"flag": "--grad-accum", "values": [1, 2], "category": "memory"},
    "scan": {"flag": "--scan", "values": [False, True], "category": "compiler"},
}
REFERENCE = {"compute_dtype": "float32", "remat": "none", "batch": 16}  # 3 knobs from the start
TARGET_PCT, TARGET_EXPERIMENTS, TARGET_SPEEDUP, TARGET_ANALYSIS_S = 95.0, 5, 2.0, 3.0


def say(msg: str) -> None:
    print(msg, flush=True)


def flags(cfg: dict) -> list[str]:
    out = []
    for k, v in cfg.items():
        f = KNOBS[k]["flag"]
        out += ([f] if v else [f"--no-{f[2:]}"]) if isinstance(v, bool) else [f, str(v)]
    return out


def start_config() -> dict:
    return {k: v["values"][0] for k, v in KNOBS.items()}


def make_kb(root: Path, lane: str, budget: int, reps: tuple[int, int], with_reference: bool):
    import yaml

    from tools import scaffold
    from tools.loop.spec import load

    scaffold.init(root, site_name=f"gap loop {lane}")
    (root / "experiments").mkdir(exist_ok=True)
    shutil.copy(SCRIPT, root / "experiments" / "llama_train.py")
    loop = {"model": "llama", "lane": lane, "variant": "gap/cpu", "code": "experiments",
            "command": [sys.executable, "llama_train.py", *PRESET], "knobs": KNOBS,
            "budget": {"runs": budget}, "repeats": {"min": reps[0], "max": reps[1]}, "proposer": "sweep",
            "runner": "local", "profile": with_reference, "timeout_s": 600, "calibrate": 3, "statistic": "min",
            "memory": {"max_gb": 8}}  # batch 16 holds 2.5x the memory of batch 4: a trade declared allowed
    if with_reference:
        loop["reference"] = [sys.executable, "llama_train.py", *PRESET, *flags(dict(start_config(), **REFERENCE))]
        loop["target"] = {"reference": TARGET_PCT}
    path = root / "loops" / f"{lane}.yml"
    path.parent.mkdir(exist_ok=True)
    path.write_text(yaml.safe_dump(loop, sort_keys=False))
    return load(path)


def run_loop(kb: Path, lane: str, seed: int, budget: int, reps: tuple[int, int], with_reference: bool) -> dict:
    from tools.experiments.records import lane_records
    from tools.loop.engine import Loop
    from tools.loop.proposers.sweep import SweepProposer
    from tools.project import Project

    spec = make_kb(kb, lane, budget, reps, with_reference)
    t = time.perf_counter()
    out: dict = {"seed": seed, "lane": lane, "reference": with_reference, "kb": str(kb)}
    try:
        state = Loop(Project(kb), spec, say=lambda m: say(f"  [{lane}] {m}"), proposer=SweepProposer(seed=seed)).run()
    except Exception as e:  # keep the traceback, go on with the other parts
        out.update(error=f"{type(e).__name__}: {e}", traceback=traceback.format_exc())
        say(f"  [{lane}] Loop.run() failed:\n{out['traceback']}")
        return out
    configs = {r["exp_id"]: r.get("loop_config") or {} for r in lane_records(kb / "wiki", "llama", lane)}
    out.update(wall_s=round(time.perf_counter() - t, 1), stop_reason=state.get("stop_reason"),
               experiments=[{"iteration": h["iteration"], "change": h["describe"], "verdict": h["verdict"],
                             "gain_pct": h.get("gain_pct"), "kept": h["kept"]} for h in state["history"]],
               trunks=[{"iteration": f["iteration"], "exp_id": f["exp_id"], "change": f.get("description"),
                        "config": configs.get(f["exp_id"]) or start_config()} for f in state["frontier"]],
               reference_exp=(state.get("reference") or {}).get("exp_id"),
               reference_check=(state.get("reference") or {}).get("check"))
    return out


def measure(trunks: list[dict], rounds: int, cwd: Path) -> list[float | None]:
    """Each trunk's tokens/s over the reference's, interleaved: median over rounds of the within-round ratio."""
    from tools.experiments.metrics import parse_result

    def tps(cfg: dict) -> float | None:
        p = subprocess.run([sys.executable, str(SCRIPT), *PRESET, *flags(cfg)], cwd=cwd, capture_output=True,
                           text=True, timeout=600, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
        r = parse_result(p.stdout) if p.returncode == 0 else None
        if not r:
            return None
        steady = [float(x) for x in r["step_times_s"][int(r.get("warmup_steps", 1)):]]
        return float(r["tokens_per_step"]) / min(steady)

    ref_cfg = dict(start_config(), **REFERENCE)
    ratios: list[list[float]] = [[] for _ in trunks]
    for n in range(rounds):
        ref = tps(ref_cfg)
        for i, t in enumerate(trunks):
            got = tps(dict(start_config(), **t["config"]))
            if ref and got:
                ratios[i].append(got / ref)
        say(f"  interleaved round {n + 1}/{rounds}")
    return [round(100 * statistics.median(r), 1) if r else None for r in ratios]


def to_target(loop: dict, budget: int) -> int:
    for t in loop.get("trunks") or []:
        if (t.get("ratio_pct") or 0) >= TARGET_PCT:
            return int(t["iteration"])
    return budget + 1


def gap_time(kb: Path, loop: dict) -> float | None:
    """The analysis alone (compare + page render, no filing) of the start against the reference, best of 3."""
    from tools.gap import compare, sides
    from tools.project import Project

    ref = loop.get("reference_exp")
    start = (loop.get("trunks") or [{}])[0].get("exp_id")
    if not ref or not start:
        return None
    project, best = Project(kb), None
    for _ in range(3):
        t = time.perf_counter()
        a, b = sides.resolve(project, start), sides.resolve(project, ref)
        compare.analyze(a, b)
        best = min(best or 1e9, time.perf_counter() - t)
    return round(best, 3)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--budget", type=int, default=8)
    ap.add_argument("--min-repeats", type=int, default=2)
    ap.add_argument("--max-repeats", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--keep", type=Path, help="keep the knowledge bases here")
    ap.add_argument("--check", action="store_true")
    a = ap.parse_args()
    base = a.keep or Path(tempfile.mkdtemp(prefix="gap-loop-"))
    base.mkdir(parents=True, exist_ok=True)
    reps = (a.min_repeats, a.max_repeats)
    say(f"gap loop: start {start_config()}, reference {REFERENCE} ({len(REFERENCE)} knobs away), budget {a.budget}, "
        f"{a.seeds} seed(s), in {base}")
    results, times = [], []
    for seed in range(a.seeds):
        pair = []
        for with_ref in (True, False):
            lane = f"{'ref' if with_ref else 'noref'}-s{seed}"
            say(f"seed {seed}: loop {'with' if with_ref else 'without'} reference")
            pair.append(run_loop(base / lane, lane, seed, a.budget, reps, with_ref))
        for loop in pair:
            if loop.get("trunks"):
                say(f"seed {seed} [{loop['lane']}]: {len(loop['trunks'])} trunk(s) measured against the reference")
                for t, r in zip(loop["trunks"], measure(loop["trunks"], a.rounds, base)):
                    t["ratio_pct"] = r
            loop["to_target"] = to_target(loop, a.budget)
        if (g := gap_time(base / pair[0]["lane"], pair[0])) is not None:
            times.append(g)
        results.append(pair)
        for loop in pair:
            say(f"  {loop['lane']}: {'>' + str(a.budget) if loop['to_target'] > a.budget else loop['to_target']} "
                f"experiments to {TARGET_PCT:.0f} %; stop: {loop.get('stop_reason')}")
            for t in loop.get("trunks") or []:
                say(f"    it {t['iteration']:>2}  {t['ratio_pct']!s:>6} % of the reference  {t.get('change')}")
            for e in loop.get("experiments") or []:
                gain = "" if e["gain_pct"] is None else f"{e['gain_pct']:+.1f} %"
                say(f"    exp {e['iteration']:>2}  {e['verdict']:<12} {gain:>8}  {'kept ' if e['kept'] else '     '}"
                    f"{e['change']}")
    with_ref = statistics.median(p[0]["to_target"] for p in results)
    without = statistics.median(p[1]["to_target"] for p in results)
    analysis_s = max(times) if times else None
    ok = {"experiments": with_ref <= TARGET_EXPERIMENTS, "speedup": without >= TARGET_SPEEDUP * with_ref,
          "analysis_s": analysis_s is not None and analysis_s <= TARGET_ANALYSIS_S}
    say(f"median experiments to {TARGET_PCT:.0f} % of the reference: with reference {with_ref}, without {without} "
        f"({'>' if without > a.budget else ''}{without / with_ref:.1f}x); gap analysis {analysis_s} s")
    print(json.dumps({"with_reference": [p[0]["to_target"] for p in results],
                      "without_reference": [p[1]["to_target"] for p in results], "median_with": with_ref,
                      "median_without": without, "budget": a.budget, "analysis_s": analysis_s, "targets_met": ok,
                      "final_ratio_pct": {p[0]["lane"]: (p[0].get("trunks") or [{}])[-1].get("ratio_pct")
                                          for p in results} | {p[1]["lane"]: (p[1].get("trunks") or [{}])[-1]
                                                               .get("ratio_pct") for p in results}}))
    if not a.keep:
        shutil.rmtree(base, ignore_errors=True)
    return 1 if a.check and not all(ok.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
