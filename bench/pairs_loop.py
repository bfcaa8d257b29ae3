"""The loop with in-process pairs against the loop with process-level rounds, on the same lane and seeds.

    python bench/pairs_loop.py [--lane template|small] [--mode quiet|interference] [--seeds 2] [--budget 10]
                               [--rounds 5] [--no-screen] [--check]

The model, knob space (8 real knobs and the decoy; ``--lane``, bench/lanes.py) and loop settings of
bench/loop_efficacy.py (A/A calibration 5, repeats 2..6, statistic min, the sweep proposer with a seed), per seed
two loops, each in a knowledge base of its own: process-level rounds (as without `pairs:`) and `pairs: true` with
`screen: true` (flag moves screened in one process before any is confirmed; ``--no-screen``: without), in
alternating order (even seeds process first). Each loop's device-seconds (every arm of every run by the runner's
clock: the loop's `usage.device_s`), its experiments and its kept best; then the start configuration and every
loop's best re-measured interleaved (A B C ..., B C ... A, ... x ``--rounds``, the order turning each round;
each best's ratio to the start is the median of the ratios within a round). ``--mode interference``: both loops
run beside a background process of fixed duty cycle (busy 60 ms, idle 40 ms: bench/noise_model.py's load), started
before and stopped after each loop; the final re-measure runs quiet.

Also printed, not a target: each loop's device-seconds when it made its last keep (``to best``; the process
loops spend their whole budget, the pairs loops stop on a plateau), and the pairs/process ratio of that.

Targets (``--check``): the pairs loops' device-seconds at most half the process loops' (median of the per-seed
ratios); the pairs loops' best at least 0.95 of the process loops' (median of the per-seed ratios); every decoy
run of either loop filed ``invalid`` and every decoy a screen saw ruled out.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import loop_efficacy as le  # noqa: E402
from noise_model import load_for  # noqa: E402

DEVICE_TARGET, BEST_TARGET = 0.5, 0.95


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lane", choices=sorted(le.LANES), default="template", help="command and knobs (lanes.py)")
    ap.add_argument("--mode", choices=("quiet", "interference"), default="quiet",
                    help="interference: the loops run beside a fixed duty-cycle load")
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--budget", type=int, default=10, help="experiments per loop")
    ap.add_argument("--rounds", type=int, default=5, help="interleaved rounds of the final re-measure")
    ap.add_argument("--no-screen", action="store_true", help="the pairs loops without `screen: true`")
    ap.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    a = ap.parse_args()
    le.use_lane(a.lane)
    if not le.has_decoy_flag():
        raise SystemExit(f"bench/pairs_loop.py: {le.SCRIPT} has no --decoy-skip-layer flag (the decoy knob)")
    code = le.SCRIPT.read_text()
    base = Path(tempfile.mkdtemp(prefix="pairs-loop-"))
    t_all = time.perf_counter()
    loops: dict[int, dict[str, dict]] = {}
    try:
        for s in range(a.seeds):
            loops[s] = {}
            for mode in (("process", "pairs") if s % 2 == 0 else ("pairs", "process")):
                le.say(f"== seed {s}, {mode}: budget {a.budget} experiments")
                t = time.perf_counter()
                with load_for(a.mode):
                    out = le.run_loop(base / f"{mode}-{s}", f"{mode}-s{s}", s, a.budget, code, (2, 6), 5, "min",
                                      pairs=mode == "pairs", screen=mode == "pairs" and not a.no_screen)
                out["wall_s"] = round(time.perf_counter() - t, 1)
                loops[s][mode] = out
                le.say(f"  {out.get('error') or ''}device {out.get('device_s')} s, wall {out['wall_s']} s, "
                       f"{len(out.get('experiments', []))} experiments ({out.get('pairs_runs')} as pairs), "
                       f"{out.get('screens', 0)} screens ({out.get('screen_device_s', 0)} device-s); best "
                       f"{le.short(out['best']) if out.get('best') else '-'}")
                if out.get("power_set_aside"):
                    le.say("  set aside, too small to confirm at this noise: " + "; ".join(out["power_set_aside"]))
        spec = le.make_kb(base / "direct", "direct", a.budget, 2, 6, code)
        meter = le.Meter(spec, base / "direct" / "experiments")
        bests = [x["best"] for by in loops.values() for x in by.values() if x.get("best")]
        le.say(f"== final comparison: start and {len(bests)} loop bests, interleaved, {a.rounds} rounds")
        meter.run(meter.start)  # warm the compile cache and the reference losses
        final = le.Rounds(meter, list({le.key(c): c for c in [meter.start, *bests]}.values()), a.rounds)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    rows, dev_ratios, best_ratios, to_best_ratios = [], [], [], []
    for s, by in loops.items():
        p, q = by["process"], by["pairs"]
        rp, rq = final.ratio(p.get("best"), meter.start), final.ratio(q.get("best"), meter.start)
        if p.get("device_s") and q.get("device_s"):
            dev_ratios.append(round(q["device_s"] / p["device_s"], 3))
        if p.get("to_best_device_s") and q.get("to_best_device_s"):
            to_best_ratios.append(round(q["to_best_device_s"] / p["to_best_device_s"], 3))
        if rp and rq:
            best_ratios.append(round(rq / rp, 4))
        for mode, x, r in (("process", p, rp), ("pairs", q, rq)):
            n = len(x.get("experiments", []))
            rows.append({"seed": s, "mode": mode, "device_s": x.get("device_s"),
                         "to_best_device_s": x.get("to_best_device_s"), "experiments": n,
                         "device_s_per_experiment": round(x["device_s"] / n, 1) if n and x.get("device_s") else None,
                         "pairs_runs": x.get("pairs_runs"), "best_over_start": r, "best": x.get("best"),
                         "kept": sum(e["kept"] for e in x.get("experiments", [])),
                         "decoy_runs": x.get("decoy_runs", 0), "decoy_invalid": x.get("decoy_invalid", 0),
                         "screens": x.get("screens", 0), "screen_device_s": x.get("screen_device_s", 0),
                         "decoy_screened_out": x.get("decoy_screened_out", 0),
                         "decoy_screen_passed": x.get("decoy_screen_passed", 0),
                         "decoy_screen_invalid_rows": x.get("decoy_screen_invalid_rows", 0),
                         "power_set_aside": x.get("power_set_aside", []),
                         "stop": x.get("stop_reason"), "error": x.get("error")})
    le.say(f"\n{'seed':>4} {'mode':<8} {'device-s':>9} {'to best':>8} {'exps':>5} {'s/exp':>7} {'pairs':>6} "
           f"{'screen-s':>9} {'best/start':>11}  kept")
    for r in rows:
        le.say(f"{r['seed']:>4} {r['mode']:<8} {r['device_s'] or 0:>9.1f} {r['to_best_device_s'] or 0:>8.1f} "
               f"{r['experiments']:>5} "
               f"{r['device_s_per_experiment'] or 0:>7.1f} {r['pairs_runs'] or 0:>6} {r['screen_device_s'] or 0:>9.1f} "
               f"{r['best_over_start'] or 0:>11.3f}"
               f"  {r['kept']}  {le.short(r['best']) if r['best'] else '-'}")
    dev = statistics.median(dev_ratios) if dev_ratios else None
    best = statistics.median(best_ratios) if best_ratios else None
    to_best = statistics.median(to_best_ratios) if to_best_ratios else None
    decoys = sum(r["decoy_runs"] for r in rows), sum(r["decoy_invalid"] for r in rows)
    misses = []
    if dev is None or dev > DEVICE_TARGET:
        misses.append(f"pairs/process device-seconds median {dev} > {DEVICE_TARGET}")
    if best is None or best < BEST_TARGET:
        misses.append(f"pairs best / process best median {best} < {BEST_TARGET}")
    if decoys[0] != decoys[1]:
        misses.append(f"{decoys[0] - decoys[1]} of {decoys[0]} decoy runs not filed invalid")
    screened = sum(r["decoy_screened_out"] for r in rows), sum(r["decoy_screen_passed"] for r in rows)
    if screened[1]:
        misses.append(f"{screened[1]} decoys let through by a screen")
    screen_rows = sum(r["decoy_screen_invalid_rows"] for r in rows)
    if screen_rows != screened[0]:
        misses.append(f"{screened[0]} decoys ruled out by a screen, {screen_rows} `invalid` rows in the ledger")
    le.say(f"\npairs/process device-seconds {dev_ratios} (median {dev}); to the kept best {to_best_ratios} "
           f"(median {to_best}, not a target); pairs best / process best {best_ratios} "
           f"(median {best}); decoy runs {decoys[0]}, invalid {decoys[1]}; decoys ruled out by a screen {screened[0]}, "
           f"let through {screened[1]}, filed `invalid` in the ledger {screen_rows}; "
           f"total {time.perf_counter() - t_all:.0f} s")
    print(json.dumps({"bench": "pairs_loop", "lane": a.lane, "mode": a.mode, "seeds": a.seeds, "budget": a.budget, "rows": rows,
                      "device_ratio": dev_ratios, "device_ratio_median": dev, "to_best_ratio": to_best_ratios,
                      "to_best_ratio_median": to_best, "best_ratio": best_ratios,
                      "best_ratio_median": best, "decoy_runs": decoys[0], "decoy_invalid": decoys[1],
                      "decoy_screened_out": screened[0], "decoy_screen_passed": screened[1],
                      "decoy_screen_invalid_rows": screen_rows, "screen": not a.no_screen,
                      "targets_missed": misses, "wall_s": round(time.perf_counter() - t_all, 1)}, default=str))
    if a.check and misses:
        print("bench/pairs_loop.py: targets missed: " + "; ".join(misses), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
