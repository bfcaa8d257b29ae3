"""Loop efficacy: does the loop find a configuration close to the best one, in 10 experiments?

    python bench/loop_efficacy.py [--quick] [--seeds 3] [--keep DIR] [--check]

On the reference model (CPU, a preset that runs in a few seconds), over a declared space of 8 real knobs plus one
decoy that changes the math (skips the last layer: faster, wrong), in one run:

1. a large search: a one-knob-at-a-time sweep from the start, a seeded random sample of the factorial space
   (decoy off) and a coordinate-descent polish from its best, each configuration measured directly;
2. per seed: the loop (``tools.loop.engine.Loop`` with ``SweepProposer(seed=s)``) with a budget of 10 experiments,
   in a knowledge base of its own (no seed learns from another);
3. per seed: random search over the same space, decoy included, 10 configurations; one whose first 12 losses
   differ from the same-shape fp32 reference by more than 0.025 is invalid (the runner's rule);
4. the large search's best, each loop best and each random best, re-measured interleaved (A B C ... x rounds).

Prints a table, the knob effects measured, and a final JSON line. ``--check`` exits 1 when a target is missed:
loop best >= 0.95 of the large search's best (median over seeds), loop better than random (medians), every decoy
run filed ``invalid``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
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
PRESET = ["--preset", "tiny", "--n-layers", "2", "--d-model", "128", "--d-ff", "384", "--steps", "14"]
YNN = "--xla_cpu_experimental_ynn_fusion_type=dot"
DECOY = "decoy_skip_layer"
KNOBS = {  # the first value of each knob is the start; 512 tokens per step in every shape
    "shape": {"category": "shape", "flags": {"batch": "--batch", "seq_len": "--seq-len"},
              "values": [{"batch": 8, "seq_len": 64}, {"batch": 16, "seq_len": 32}, {"batch": 4, "seq_len": 128}]},
    "grad_accum": {"flag": "--grad-accum", "values": [1, 2, 4], "category": "memory"},
    "compute_dtype": {"flag": "--compute-dtype", "values": ["float32", "bfloat16"], "category": "precision"},
    "remat": {"flag": "--remat", "values": ["none", "full", "dots_saveable"], "category": "memory"},
    "scan": {"flag": "--scan", "values": [False, True], "category": "compiler"},
    "attention": {"flag": "--attention", "values": ["naive", "dpa"], "category": "kernel"},
    "donate": {"flag": "--donate", "values": [True, False], "category": "memory"},
    "xla_ynn_dot": {"env": "XLA_FLAGS", "values": ["", YNN], "category": "compiler"},
    DECOY: {"flag": "--decoy-skip-layer", "values": [False, True], "category": "other"},  # not declared `semantics`
}
LOSS_TOL, LOSS_STEPS = 0.025, 12
TARGET_RATIO = 0.95


def say(msg: str) -> None:
    print(msg, flush=True)


def key(cfg: dict) -> str:
    return json.dumps(cfg, sort_keys=True)


def label(v) -> str:
    return json.dumps(v, separators=(",", ":")) if isinstance(v, dict) else str(v)


def short(cfg: dict) -> str:
    """The configuration as its differences from the start."""
    start = {k: v["values"][0] for k, v in KNOBS.items()}
    return ", ".join(f"{k}={label(v)}" for k, v in cfg.items() if v != start[k]) or "(start)"


# ----------------------------------------------------------------------------- the knowledge base and model copy

def has_decoy_flag() -> bool:
    out = subprocess.run([sys.executable, str(SCRIPT), "--help"], capture_output=True, text=True, check=True).stdout
    return "--decoy-skip-layer" in out


def stand_in_decoy(text: str) -> str:
    """Until llama_train.py has --decoy-skip-layer: the same script with a flag that skips the last layer."""
    subs = [('    attention: str = "naive"', '    decoy_skip_layer: bool = False\n    attention: str = "naive"'),
            ("for i in range(cfg.n_layers):", "for i in range(cfg.n_layers - int(cfg.decoy_skip_layer)):"),
            ('x_BxTxD, params["layers"])',
             'x_BxTxD, jax.tree.map(lambda w: w[: cfg.n_layers - int(cfg.decoy_skip_layer)], params["layers"]))')]
    for old, new in subs:
        if text.count(old) != 1:
            raise SystemExit(f"bench/loop_efficacy.py: cannot add the stand-in decoy to {SCRIPT}: "
                             f"{old!r} not found once")
        text = text.replace(old, new)
    return text


def make_kb(root: Path, lane: str, budget: int, min_rep: int, max_rep: int, code_text: str):
    """A fresh knowledge base at ``root`` with experiments/llama_train.py and loops/<lane>.yml; returns the spec."""
    import yaml

    from tools import scaffold
    from tools.loop.spec import load

    scaffold.init(root, site_name=f"loop efficacy {lane}")
    (root / "experiments").mkdir(exist_ok=True)
    (root / "experiments" / "llama_train.py").write_text(code_text)
    loop = {"model": "llama", "lane": lane, "variant": "efficacy/cpu", "code": "experiments",
            "command": [sys.executable, "llama_train.py", *PRESET], "knobs": KNOBS,
            "budget": {"runs": budget}, "repeats": {"min": min_rep, "max": max_rep}, "proposer": "sweep",
            "runner": "local", "profile": False, "timeout_s": 600}
    path = root / "loops" / f"{lane}.yml"
    path.parent.mkdir(exist_ok=True)
    path.write_text(yaml.safe_dump(loop, sort_keys=False))
    return load(path)


# ----------------------------------------------------------------------------- direct measurement

class Meter:
    """Runs configurations directly and keeps every measurement; the fp32 same-shape references are cached."""

    def __init__(self, spec, cwd: Path):
        self.spec, self.cwd = spec, cwd
        self.runs: dict[str, list[dict]] = {}
        self.refs: dict[str, list[float]] = {}
        self.n = 0

    def run(self, cfg: dict) -> dict:
        from tools.experiments.metrics import parse_result

        env = dict(os.environ, **self.spec.env_for(cfg))
        t = time.perf_counter()
        p = subprocess.run(self.spec.command_for(cfg), cwd=self.cwd, env=env, capture_output=True, text=True,
                           timeout=600, check=False)
        self.n += 1
        r = parse_result(p.stdout) if p.returncode == 0 else None
        if r is None:
            tail = (p.stderr or p.stdout).strip().splitlines()[-1:] or ["no output"]
            m = {"crash": f"exit {p.returncode}: {tail[0][:200]}", "wall_s": time.perf_counter() - t}
        else:
            w = int(r.get("warmup_steps", 1))
            steady = r["step_times_s"][w:] or r["step_times_s"]
            m = {"tokens_per_s": r["tokens_per_step"] / statistics.median(steady), "losses": r.get("losses") or [],
                 "wall_s": time.perf_counter() - t}
        self.runs.setdefault(key(cfg), []).append(m)
        return m

    def reference(self, cfg: dict) -> list[float]:
        ref = {k: (cfg[k] if KNOBS[k]["category"] == "shape" else KNOBS[k]["values"][0]) for k in KNOBS}
        k = key(ref["shape"])
        if k not in self.refs:
            done = [m for m in self.runs.get(key(ref), []) if "losses" in m]
            self.refs[k] = (done[0] if done else self.run(ref))["losses"]
        return self.refs[k]

    def invalid(self, cfg: dict, m: dict) -> str | None:
        """Why this measurement cannot count (crash, or the loss trajectory moved), else None."""
        if "crash" in m:
            return m["crash"]
        ref = self.reference(cfg)
        n = min(LOSS_STEPS, len(ref), len(m["losses"]))
        d = max((abs(a - b) for a, b in zip(ref[:n], m["losses"][:n])), default=float("inf"))
        return f"max |Δloss| {d:.4f} > {LOSS_TOL} over {n} steps" if d > LOSS_TOL else None

    def measure(self, cfg: dict) -> float | None:
        """One run; tokens/s, or None when invalid."""
        m = self.run(cfg)
        return None if self.invalid(cfg, m) else m["tokens_per_s"]

    def median(self, cfg: dict) -> float | None:
        ok = [m["tokens_per_s"] for m in self.runs.get(key(cfg), []) if "crash" not in m]
        return statistics.median(ok) if ok else None


def noise(meter: Meter, cfg: dict) -> dict:
    """The floor: how much one configuration's tokens/s moved over its runs in this benchmark."""
    xs = [m["tokens_per_s"] for m in meter.runs.get(key(cfg), []) if "crash" not in m]
    if len(xs) < 2:
        return {"runs": len(xs)}
    return {"runs": len(xs), "median": round(statistics.median(xs)), "cv_pct": round(100 * statistics.stdev(xs) /
            statistics.mean(xs), 1), "min_over_max": round(min(xs) / max(xs), 3)}


def main_effects(meter: Meter) -> dict:
    """Each knob value's effect on tokens/s (%), fitted on log tokens/s over every decoy-free run (least squares):
    averaged over the other knobs and over many runs, steadier than one-knob pairs on a shared machine."""
    import math

    import numpy as np

    cols = [(k, v) for k in KNOBS if k != DECOY for v in KNOBS[k]["values"][1:]]
    rows, ys = [], []
    for kk, ms in meter.runs.items():
        cfg = json.loads(kk)
        for m in ms if not cfg.get(DECOY) else []:
            if "crash" not in m:
                rows.append([1.0] + [float(cfg[k] == v) for k, v in cols])
                ys.append(math.log(m["tokens_per_s"]))
    if len(rows) <= len(cols):
        return {}
    coef = np.linalg.lstsq(np.array(rows), np.array(ys), rcond=None)[0]
    out: dict = {"_runs": len(rows)}
    for (k, v), c in zip(cols, coef[1:]):
        out.setdefault(k, {})[label(v)] = round(100 * (math.exp(c) - 1), 1)
    return out


def space(decoy: bool) -> list[dict]:
    import itertools

    names = [k for k in KNOBS if decoy or k != DECOY]
    out = []
    for vals in itertools.product(*(KNOBS[k]["values"] for k in names)):
        cfg = dict(zip(names, vals))
        cfg.setdefault(DECOY, False)
        if cfg["shape"]["batch"] % cfg["grad_accum"] == 0:
            out.append(cfg)
    return out


def large_search(meter: Meter, n_sample: int, passes: int, seed: int, n_oat: int | None = None) -> tuple[dict, dict]:
    """(best configuration, knob effects % from the start): OAT sweep, random sample, coordinate descent."""
    start = {k: v["values"][0] for k, v in KNOBS.items()}
    moves = [(k, v) for k in KNOBS if k != DECOY for v in KNOBS[k]["values"][1:]]
    effects, tps = {}, {}
    s0 = [meter.measure(start)]
    for k, v in moves[:n_oat]:  # one knob at a time from the start, each between two runs of the start (drift cancels)
        cfg = dict(start, **{k: v})
        tps[key(cfg)] = meter.measure(cfg)
        s0.append(meter.measure(start))
        t, around = tps[key(cfg)], [x for x in s0[-2:] if x]
        effects.setdefault(k, {})[label(v)] = \
            None if t is None or not around else round(100 * (t / statistics.mean(around) - 1), 1)
    base = statistics.median(x for x in s0 if x)
    pool = space(decoy=False)
    for cfg in random.Random(seed).sample(pool, min(n_sample, len(pool))):
        if key(cfg) not in meter.runs:
            tps[key(cfg)] = meter.measure(cfg)
    tps[key(start)] = base
    top = sorted((json.loads(k) for k, t in tps.items() if t), key=lambda c: -tps[key(c)])[:3]
    for _ in range(2):  # the sample's top 3, re-measured interleaved: a single lucky run does not win
        for c in top:
            meter.measure(c)
    best = max(top, key=lambda c: meter.median(c) or 0)
    say(f"  sample best {meter.median(best):,.0f} tokens/s (median of {len(meter.runs[key(best)])}): {short(best)}")
    for _ in range(passes):  # coordinate descent: a move that wins once is re-measured with the incumbent
        moved = False
        for k, v in moves:
            cand = dict(best, **{k: v})
            if cand == best or (cand["shape"]["batch"] % cand["grad_accum"]) or key(cand) in meter.runs:
                continue
            t = meter.measure(cand)
            if t and t > (meter.median(best) or 0):
                meter.measure(best), meter.measure(cand)
                if (meter.median(cand) or 0) > (meter.median(best) or 0):
                    say(f"  polish: {short({k: v})} -> {meter.median(cand):,.0f} tokens/s")
                    best, moved = cand, True
        if not moved:
            break
    return best, effects


# ----------------------------------------------------------------------------- the loop and random search

def run_loop(kb: Path, lane: str, seed: int, budget: int, code_text: str, reps: tuple[int, int]) -> dict:
    from tools.experiments.records import lane_records
    from tools.loop.engine import Loop
    from tools.loop.proposers.sweep import SweepProposer
    from tools.project import Project

    spec = make_kb(kb, lane, budget, *reps, code_text)
    out: dict = {"seed": seed, "lane": lane, "kb": str(kb)}
    try:
        state = Loop(Project(kb), spec, say=lambda m: say(f"  [{lane}] {m}"), proposer=SweepProposer(seed=seed)).run()
    except Exception as e:  # the engine or runner is not ours: keep the traceback, go on with the other parts
        out["error"] = f"{type(e).__name__}: {e}"
        out["traceback"] = traceback.format_exc()
        say(f"  [{lane}] Loop.run() failed:\n{out['traceback']}")
        return out
    trunk = state.get("trunk") or {}
    recs = [r for r in lane_records(kb / "wiki", "llama", lane) if r.get("status") == "filed"]
    decoys = [r for r in recs if (r.get("loop_config") or {}).get(DECOY)]
    out.update(best=dict(trunk.get("config") or {}), best_env=trunk.get("env") or {},
               best_tokens_per_s=trunk.get("tokens_per_s"), stop_reason=state.get("stop_reason"),
               experiments=[{"iteration": h["iteration"], "change": h["describe"], "verdict": h["verdict"],
                             "gain_pct": h.get("gain_pct"), "repeats": h.get("repeats"), "kept": h["kept"]}
                            for h in state["history"]],
               configs_tried=len({h["run_key"] for h in state["history"]}),
               decoy_runs=len(decoys), decoy_invalid=sum(r.get("verdict") == "invalid" for r in decoys),
               decoy_verdicts=[r.get("verdict") for r in decoys])
    return out


def random_search(meter: Meter, n: int, seed: int) -> dict:
    picks = random.Random(1000 + seed).sample(space(decoy=True), n)
    tried = []
    for cfg in picks:
        m = meter.run(cfg)
        why = meter.invalid(cfg, m)
        tried.append({"config": cfg, "tokens_per_s": m.get("tokens_per_s"), "invalid": why})
    valid = [t for t in tried if not t["invalid"]]
    best = max(valid, key=lambda t: t["tokens_per_s"]) if valid else None
    dec = [t for t in tried if t["config"][DECOY]]
    return {"seed": seed, "best": best["config"] if best else None, "best_tokens_per_s": best and best["tokens_per_s"],
            "tried": tried, "decoy_runs": len(dec), "decoy_invalid": sum(bool(t["invalid"]) for t in dec),
            "invalid": sum(bool(t["invalid"]) for t in tried)}


def interleaved(meter: Meter, configs: list[dict], rounds: int) -> dict[str, float | None]:
    """A B C ... repeated ``rounds`` times; the median per configuration (of these runs only)."""
    got: dict[str, list[float]] = {key(c): [] for c in configs}
    for r in range(rounds):
        for c in configs:
            m = meter.run(c)
            if "crash" not in m:
                got[key(c)].append(m["tokens_per_s"])
        say(f"  round {r + 1}/{rounds} done")
    return {k: (statistics.median(v) if v else None) for k, v in got.items()}


# ----------------------------------------------------------------------------- main

def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="smoke run: 1 seed, small searches, budget 4")
    ap.add_argument("--seeds", type=int, default=None)
    ap.add_argument("--budget", type=int, default=None, help="experiments per loop and random search (10)")
    ap.add_argument("--large", type=int, default=None, help="random configurations in the large search (32)")
    ap.add_argument("--rounds", type=int, default=None, help="interleaved rounds of the final comparison (3)")
    ap.add_argument("--keep", type=Path, help="build the knowledge bases here (kept) instead of a temp dir")
    ap.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    a = ap.parse_args()
    q = a.quick
    seeds = list(range(a.seeds or (1 if q else 3)))
    budget, n_large = a.budget or (4 if q else 10), a.large or (4 if q else 32)
    rounds, passes = a.rounds or (2 if q else 3), 1 if q else 2
    reps = (2, 3) if q else (2, 4)
    t_all = time.perf_counter()
    code = SCRIPT.read_text()
    decoy_real = has_decoy_flag()
    if not decoy_real:
        code = stand_in_decoy(code)
    say("decoy: " + ("--decoy-skip-layer of experiments/llama_train.py" if decoy_real else
                     "stand-in (a patched copy of experiments/llama_train.py: the flag is not there yet)"))
    base = a.keep.resolve() if a.keep else Path(tempfile.mkdtemp(prefix="loop-efficacy-"))
    if subprocess.run(["git", "-C", str(base.parent if not base.exists() else base), "rev-parse"],
                      capture_output=True, check=False).returncode == 0:
        raise SystemExit(f"bench/loop_efficacy.py: --keep {base}: inside a git work tree; the loop would make "
                         "branches there. Give a folder outside any repository (e.g. under /tmp)")
    parts: dict[str, float] = {}
    try:
        spec = make_kb(base / "direct", "direct", budget, *reps, code)
        meter = Meter(spec, base / "direct" / "experiments")
        cmd = " ".join(spec.command_for(spec.start_config())[1:])
        say(f"model: {cmd}  (512 tokens/step in every shape; knowledge bases under {base})")
        t = time.perf_counter()
        for _ in range(2):
            m = meter.run(spec.start_config())
        say(f"start config: {m['tokens_per_s']:,.0f} tokens/s, {m['wall_s']:.1f} s a run")
        parts["warmup_s"] = time.perf_counter() - t

        say(f"== large search ({n_large} sampled + one-knob sweep + {passes} polish pass(es))")
        t, n0 = time.perf_counter(), meter.n
        large_best, effects = large_search(meter, n_large, passes, seed=12345, n_oat=3 if q else None)
        parts["large_search_s"] = time.perf_counter() - t
        n_large_runs, n_large_cfgs = meter.n - n0, len(meter.runs)
        say(f"  {n_large_cfgs} configurations, {n_large_runs} runs, {parts['large_search_s']:.0f} s; best "
            f"{meter.median(large_best):,.0f} tokens/s: {short(large_best)}")
        fmt = lambda eff: "; ".join(f"{k}={v}: {g:+.1f} %" if g is not None else f"{k}={v}: invalid"
                                    for k, d in eff.items() if k[0] != "_" for v, g in d.items())
        say(f"  noise floor, the start configuration: {noise(meter, spec.start_config())}")
        say(f"  knob effects, one knob at a time from the start (against the start runs around it): {fmt(effects)}")
        fitted = main_effects(meter)
        say(f"  knob effects, fitted over the {fitted.get('_runs')} runs so far: {fmt(fitted)}")

        loops, randoms = [], []
        for s in seeds:
            say(f"== loop, seed {s} (budget {budget} experiments, repeats {reps[0]}..{reps[1]})")
            t = time.perf_counter()
            loops.append(run_loop(base / f"seed-{s}", f"efficacy-s{s}", s, budget, code, reps))
            parts[f"loop_seed{s}_s"] = time.perf_counter() - t
            lp = loops[-1]
            if "error" not in lp:
                say(f"  best {lp['best_tokens_per_s'] or 0:,.0f} tokens/s (as filed): {short(lp['best'])}; "
                    f"decoy runs {lp['decoy_runs']}, invalid {lp['decoy_invalid']}; {parts[f'loop_seed{s}_s']:.0f} s")
            say(f"== random search, seed {s} ({budget} configurations, decoy in the space)")
            t = time.perf_counter()
            randoms.append(random_search(meter, budget, s))
            parts[f"random_seed{s}_s"] = time.perf_counter() - t
            rb = randoms[-1]
            say(f"  best {rb['best_tokens_per_s'] or 0:,.0f} tokens/s: {short(rb['best']) if rb['best'] else '-'}; "
                f"{rb['invalid']} invalid, decoy {rb['decoy_runs']} (invalid {rb['decoy_invalid']})")

        say(f"== final comparison, interleaved, {rounds} rounds")
        t = time.perf_counter()
        finals = [large_best] + [lp["best"] for lp in loops if lp.get("best")] + \
            [r["best"] for r in randoms if r["best"]]
        distinct = list({key(c): c for c in finals}.values())
        med = interleaved(meter, distinct, rounds)
        parts["final_s"] = time.perf_counter() - t
        top = med[key(large_best)] or float("nan")
        ratio = lambda c: round(med[key(c)] / top, 4) if c and med.get(key(c)) else None
        loop_r = [ratio(lp.get("best")) for lp in loops]
        rand_r = [ratio(r["best"]) for r in randoms]
        say(f"\n{'who':<16} {'tokens/s':>10} {'/ large':>8}  configuration")
        say(f"{'large search':<16} {top:>10,.0f} {1:>8.3f}  {short(large_best)}")
        for lp, r in zip(loops, loop_r):
            say(f"{'loop s' + str(lp['seed']):<16} {(med.get(key(lp['best'])) if lp.get('best') else 0) or 0:>10,.0f} "
                f"{r or 0:>8.3f}  {short(lp['best']) if lp.get('best') else lp.get('error', '-')}")
        for rb, r in zip(randoms, rand_r):
            say(f"{'random s' + str(rb['seed']):<16} {(med.get(key(rb['best'])) if rb['best'] else 0) or 0:>10,.0f} "
                f"{r or 0:>8.3f}  {short(rb['best']) if rb['best'] else '-'}")
        for lp in loops:
            for e in lp.get("experiments", []):
                say(f"  loop s{lp['seed']} #{e['iteration']:>2} {e['change']:<40} {e['verdict']:<12} "
                    f"gain {e['gain_pct'] if e['gain_pct'] is not None else '-'} %  repeats {e['repeats']}"
                    + ("  KEPT" if e["kept"] else ""))
    finally:
        if not a.keep:
            shutil.rmtree(base, ignore_errors=True)
    parts["total_s"] = time.perf_counter() - t_all
    ok = lambda xs: [x for x in xs if x is not None]
    lm = statistics.median(ok(loop_r)) if ok(loop_r) else None
    rm = statistics.median(ok(rand_r)) if ok(rand_r) else None
    decoy_runs = sum(lp.get("decoy_runs", 0) for lp in loops)
    decoy_inv = sum(lp.get("decoy_invalid", 0) for lp in loops)
    result = {
        "bench": "loop_efficacy", "quick": q, "seeds": seeds, "budget": budget,
        "decoy": "real" if decoy_real else "stand-in",
        "command": cmd, "large_search": {"best": large_best, "tokens_per_s": round(top), "configs": n_large_cfgs,
                                         "runs": n_large_runs},
        "loop_best_over_large": loop_r, "loop_median": lm, "random_best_over_large": rand_r, "random_median": rm,
        "loop_decoy_runs": decoy_runs, "loop_decoy_invalid": decoy_inv,
        "random_decoy_runs": sum(r["decoy_runs"] for r in randoms),
        "random_decoy_invalid": sum(r["decoy_invalid"] for r in randoms),
        "loop_repeats": {lp["seed"]: [e["repeats"] for e in lp.get("experiments", [])] for lp in loops},
        "loop_configs_tried": {lp["seed"]: lp.get("configs_tried") for lp in loops},
        "loop_errors": {lp["seed"]: lp["error"] for lp in loops if "error" in lp},
        "noise_start": noise(meter, spec.start_config()),
        "noise_large_best": noise(meter, large_best), "knob_effects_oat_pct": effects,
        "knob_effects_fit_pct": main_effects(meter), "wall_s": {k: round(v, 1) for k, v in parts.items()},
    }
    misses = []
    if lm is None or lm < TARGET_RATIO:
        misses.append(f"loop best / large best median {lm} < {TARGET_RATIO}")
    if lm is None or rm is None or lm <= rm:
        misses.append(f"loop median {lm} not above random median {rm}")
    if decoy_inv != decoy_runs:
        misses.append(f"{decoy_runs - decoy_inv} of {decoy_runs} decoy runs of the loop not filed invalid")
    result["targets_missed"] = misses
    say(f"\nloop/large median {lm}, random/large median {rm}; decoy runs {decoy_runs}, invalid {decoy_inv}"
        + ("" if decoy_runs else " (the loop never tried the decoy)") + f"; total {parts['total_s']:.0f} s")
    print(json.dumps(result, default=str), flush=True)
    if a.check and misses:
        print("targets missed: " + "; ".join(misses), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
