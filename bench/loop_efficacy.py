"""Loop efficacy: does the loop find a configuration close to the best one, in 10 experiments?

    python bench/loop_efficacy.py [--lane template|small] [--loop process|pairs] [--mode quiet|interference]
                                  [--quick] [--seeds 3] [--keep DIR] [--check]

On the reference model (CPU, a preset that runs in a few seconds), over a declared space of 8 real knobs plus one
decoy that changes the math (skips the last layer: faster, wrong), in one run:

1. a large search, always quiet: a one-knob-at-a-time sweep from the start, a seeded random sample of the factorial
   space (decoy off) and a coordinate-descent polish from its best, each configuration run directly and scored
   against the start configuration, rerun every few runs (the machine drifts); its top 5 re-measured interleaved;
2. per seed: the loop (``tools.loop.engine.Loop`` with ``SweepProposer(seed=s)``, A/A calibration 5, repeats
   2..6) with a budget of 10 experiments, in a knowledge base of its own (no seed learns from another). ``--loop
   process`` (the default): process-level rounds; ``--loop pairs``: ``pairs: true`` and ``screen: true``, the loop
   of bench/pairs_loop.py;
3. per seed: random search over the same space, decoy included, one run per configuration, until its runs have
   taken the device-seconds the seed's loop took (at least 10 configurations; ``--random count``: exactly 10); one
   whose first 12 losses differ from the same-shape fp32 reference by more than 0.025 is invalid (the runner's rule);
4. the large search's best, the start, each loop best and each random best, re-measured interleaved
   (A B C ..., B C ... A, ... x 5 rounds, each round starting one configuration later): every ratio is the median
   over rounds of the ratio within a round.

``--mode interference``: the loops and random searches of step 2 and 3 run beside a background process of fixed
duty cycle (busy 60 ms, idle 40 ms: bench/noise_model.py's load); the large search and the final re-measure run quiet.

Every run, of every part, is read by one statistic (``--statistic``, default ``min``: tokens per step over the
fastest steady step, what the loop file's ``statistic: min`` compares; ``median``: over the median step).

Prints a table, the knob effects measured, and a final JSON line. ``--check`` exits 1 when a target is missed:
loop best >= 0.95 of the large search's best (median over seeds), loop better than random (medians), every decoy
run filed ``invalid`` and no screen letting the decoy through (``--loop pairs``: a screen that rules it out files it
``invalid`` in the lane's ledger).
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
sys.path.insert(0, str(Path(__file__).resolve().parent))
from lanes import DECOY, LANES  # noqa: E402
from noise_model import load_for  # noqa: E402
SCRIPT = REPO / "experiments" / "llama_train.py"
PRESET, KNOBS, TOKENS = LANES["template"]["preset"], LANES["template"]["knobs"], 512


def use_lane(name: str) -> None:
    """Search ``lanes.LANES[name]``: its command and knob space for everything below."""
    global PRESET, KNOBS, TOKENS
    lane = LANES[name]
    PRESET, KNOBS, TOKENS = lane["preset"], lane["knobs"], lane["tokens_per_step"]


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


def make_kb(root: Path, lane: str, budget: int, min_rep: int, max_rep: int, code_text: str, calibrate: int = 5,
            statistic: str = "min", pairs: bool = False, screen: bool = False):
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
            "runner": "local", "profile": False, "timeout_s": 600, "calibrate": calibrate, "statistic": statistic,
            "pairs": pairs, **({"screen": True} if screen else {})}
    path = root / "loops" / f"{lane}.yml"
    path.parent.mkdir(exist_ok=True)
    path.write_text(yaml.safe_dump(loop, sort_keys=False))
    return load(path)


# ----------------------------------------------------------------------------- direct measurement

class Meter:
    """Runs configurations directly, keeps every run in order; fp32 same-shape reference losses are cached.
    The start configuration is the anchor: run every few runs, it tracks the machine's drift (``score``)."""

    def __init__(self, spec, cwd: Path):
        self.spec, self.cwd = spec, cwd
        self.start = spec.start_config()
        self.runs: dict[str, list[dict]] = {}
        self.timeline: list[tuple[str, dict]] = []
        self.refs: dict[str, list[float]] = {}

    def run(self, cfg: dict) -> dict:
        """One run: tokens/s (median steady step), losses, and ``invalid`` (why it cannot count) or None."""
        from tools.experiments.metrics import parse_result

        env = dict(os.environ, **self.spec.env_for(cfg))
        t = time.perf_counter()
        p = subprocess.run(self.spec.command_for(cfg), cwd=self.cwd, env=env, capture_output=True, text=True,
                           timeout=600, check=False)
        r = parse_result(p.stdout) if p.returncode == 0 else None
        if r is None:
            tail = (p.stderr or p.stdout).strip().splitlines()[-1:] or ["no output"]
            m = {"crash": f"exit {p.returncode}: {tail[0][:200]}", "invalid": "crash"}
        else:
            steady = r["step_times_s"][int(r.get("warmup_steps", 1)):] or r["step_times_s"]
            step = min(steady) if self.spec.statistic == "min" else statistics.median(steady)
            m = {"tokens_per_s": r["tokens_per_step"] / step, "losses": r.get("losses") or []}
        m["wall_s"] = time.perf_counter() - t
        self.runs.setdefault(key(cfg), []).append(m)  # recorded before it is judged: a reference judges itself
        self.timeline.append((key(cfg), m))
        m.setdefault("invalid", self.invalid(cfg, m))
        return m

    def reference(self, cfg: dict) -> list[float]:
        ref = {k: (cfg[k] if KNOBS[k]["category"] == "shape" else KNOBS[k]["values"][0]) for k in KNOBS}
        k = key(ref["shape"])
        if k not in self.refs:
            if not any("losses" in m for m in self.runs.get(key(ref), [])):
                self.run(ref)
            done = [m for m in self.runs.get(key(ref), []) if "losses" in m]
            self.refs.setdefault(k, done[0]["losses"] if done else [])
        return self.refs[k]

    def invalid(self, cfg: dict, m: dict) -> str | None:
        """The runner's rule: the first 12 losses within 0.025 of the same-shape fp32 reference."""
        ref = self.reference(cfg)
        if not ref:
            return "no fp32 reference of this shape (it crashed)"
        n = min(LOSS_STEPS, len(ref), len(m["losses"]))
        d = max((abs(a - b) for a, b in zip(ref[:n], m["losses"][:n])), default=float("inf"))
        return f"max |Δloss| {d:.4f} > {LOSS_TOL} over {n} steps" if d > LOSS_TOL else None

    def measure(self, cfg: dict) -> float | None:
        """One run; tokens/s, or None when invalid."""
        m = self.run(cfg)
        return None if m["invalid"] else m["tokens_per_s"]

    def anchor(self) -> None:
        self.run(self.start)

    def ratios(self, cfg: dict) -> list[float]:
        """Each valid run's tokens/s ÷ the median of the (up to) 4 nearest anchor runs, 2 before and 2 after it:
        that follows the machine's drift without letting one contended anchor run decide."""
        k0, ka = key(cfg), key(self.start)
        anchors = [i for i, (k, m) in enumerate(self.timeline) if k == ka and not m["invalid"]]
        xs = []
        for i, (k, m) in enumerate(self.timeline):
            if k != k0 or m["invalid"]:
                continue
            near = [j for j in anchors if j < i][-2:] + [j for j in anchors if j > i][:2]
            if near:
                xs.append(m["tokens_per_s"] / statistics.median(self.timeline[j][1]["tokens_per_s"] for j in near))
        return xs

    def score(self, cfg: dict) -> float | None:
        xs = self.ratios(cfg)
        return statistics.median(xs) if xs else None


def noise(meter: Meter) -> dict:
    """The floor, from the anchor's runs: raw spread (noise and drift) and the spread of each run against its
    neighbouring anchor runs (what is left once drift is taken out)."""
    xs = [m["tokens_per_s"] for m in meter.runs.get(key(meter.start), []) if not m["invalid"]]
    rs = meter.ratios(meter.start)
    if len(xs) < 3:
        return {"runs": len(xs)}
    return {"runs": len(xs), "median": round(statistics.median(xs)),
            "raw_cv_pct": round(100 * statistics.stdev(xs) / statistics.mean(xs), 1),
            "raw_min_over_max": round(min(xs) / max(xs), 3),
            "vs_neighbours_cv_pct": round(100 * statistics.stdev(rs), 1) if len(rs) > 1 else None}


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


def large_search(meter: Meter, n_sample: int, passes: int, seed: int, rounds: int,
                 n_oat: int | None = None) -> tuple[dict, dict]:
    """(best configuration, knob effects % from the start). A one-knob sweep from the start, a seeded random
    sample, a coordinate-descent polish, all scored against the anchor; then the top 5 re-measured interleaved."""
    start = meter.start
    moves = [(k, v) for k in KNOBS if k != DECOY for v in KNOBS[k]["values"][1:]]
    fits = lambda c: c["shape"]["batch"] % c["grad_accum"] == 0
    meter.anchor()
    for k, v in moves[:n_oat]:  # one knob at a time, each between two runs of the start
        meter.measure(dict(start, **{k: v}))
        meter.anchor()
    pct = lambda s: None if s is None else round(100 * (s - 1), 1)
    effects: dict = {}
    for k, v in moves[:n_oat]:
        effects.setdefault(k, {})[label(v)] = pct(meter.score(dict(start, **{k: v})))
    pool = [c for c in space(decoy=False) if key(c) not in meter.runs]
    for i, cfg in enumerate(random.Random(seed).sample(pool, min(n_sample, len(pool)))):
        meter.measure(cfg)
        if i % 4 == 3:
            meter.anchor()
    meter.anchor()
    ranked = lambda: sorted((json.loads(k) for k in meter.runs if meter.score(json.loads(k))),
                            key=lambda c: -meter.score(c))
    best = ranked()[0]
    say(f"  sample best {100 * meter.score(best) - 100:+.1f} % vs the start: {short(best)}")
    for _ in range(passes):  # coordinate descent; a move that wins once is measured again with the incumbent
        moved = False
        for i, (k, v) in enumerate(moves):
            cand = dict(best, **{k: v})
            if cand == best or not fits(cand) or key(cand) in meter.runs:
                continue
            meter.measure(cand)
            if (meter.score(cand) or 0) > meter.score(best):
                meter.measure(best), meter.measure(cand), meter.anchor()
                if (meter.score(cand) or 0) > meter.score(best):
                    say(f"  polish: {short({k: v})} -> {100 * meter.score(cand) - 100:+.1f} % vs the start")
                    best, moved = cand, True
            elif i % 3 == 2:
                meter.anchor()
        meter.anchor()
        if not moved:
            break
    top = list({key(c): c for c in ranked()[:5] + [start]}.values())
    say(f"  top 5 and the start re-measured interleaved, {rounds} rounds")
    got = Rounds(meter, top, rounds)
    return max(top, key=lambda c: got.ratio(c, start) or 0), effects


# ----------------------------------------------------------------------------- the loop and random search

def run_loop(kb: Path, lane: str, seed: int, budget: int, code_text: str, reps: tuple[int, int],
             calibrate: int, statistic: str, pairs: bool = False, screen: bool = False) -> dict:
    from tools.experiments import ledger
    from tools.experiments.records import lane_records
    from tools.loop.engine import Loop, LoopInterrupted
    from tools.loop.proposers.sweep import SweepProposer
    from tools.loop.screening import RULED_OUT
    from tools.project import Project

    spec = make_kb(kb, lane, budget, *reps, code_text, calibrate, statistic, pairs, screen)
    out: dict = {"seed": seed, "lane": lane, "kb": str(kb)}
    out["interruptions"] = []
    while True:
        try:
            state = Loop(Project(kb), spec, say=lambda m: say(f"  [{lane}] {m}"),
                         proposer=SweepProposer(seed=seed)).run()
            break
        except LoopInterrupted as e:  # a SIGTERM from outside: the state is on disk, resume it (as `tools loop resume`)
            out["interruptions"].append(e.how)
            if e.how != "SIGTERM" or len(out["interruptions"]) > 2:
                raise
            say(f"  [{lane}] interrupted by {e.how}; resuming")
        except Exception as e:  # the engine or runner is not ours: keep the traceback, go on with the other parts
            out["error"] = f"{type(e).__name__}: {e}"
            out["traceback"] = traceback.format_exc()
            say(f"  [{lane}] Loop.run() failed:\n{out['traceback']}")
            return out
    trunk = state.get("trunk") or {}
    recs = [r for r in lane_records(kb / "wiki", "llama", lane) if r.get("status") == "filed"]
    decoys = [r for r in recs if (r.get("loop_config") or {}).get(DECOY)]
    hist = state["history"]
    out.update(best=dict(trunk.get("config") or {}), best_env=trunk.get("env") or {},
               best_tokens_per_s=trunk.get("tokens_per_s"), stop_reason=state.get("stop_reason"),
               device_s=round(float((state.get("usage") or {}).get("device_s") or 0), 1),
               # the device-seconds spent when the loop made its last keep (its baseline's, when it kept nothing)
               to_best_device_s=(state.get("frontier") or [{}])[-1].get("device_s_total"),
               pairs_runs=sum(bool(r.get("pairs")) for r in recs),
               experiments=[{"iteration": h["iteration"], "change": h["describe"], "verdict": h["verdict"],
                             "gain_pct": h.get("gain_pct"), "repeats": h.get("repeats"), "kept": h["kept"],
                             "device_s": h.get("device_s")}
                            for h in hist],
               configs_tried=len({h["run_key"] for h in hist}),
               supported_not_kept=[h["iteration"] for h in hist if h["verdict"] == "supported" and not h["kept"]],
               decoy_runs=len(decoys), decoy_invalid=sum(r.get("verdict") == "invalid" for r in decoys),
               decoy_verdicts=[r.get("verdict") for r in decoys],
               screens=len(state.get("screens") or []),
               power_set_aside=_power_set_aside(kb),
               screen_device_s=round(sum(w.get("device_s") or 0 for w in state.get("screens") or []), 1),
               screen_outcomes=[m.get("outcome") for w in state.get("screens") or [] for m in w.get("moves") or []],
               decoy_screened_out=sum(m.get("outcome") in RULED_OUT for w in state.get("screens") or []
                                      for m in w.get("moves") or [] if (m.get("config") or {}).get(DECOY)),
               decoy_screen_passed=sum(m.get("outcome") not in RULED_OUT for w in state.get("screens") or []
                                       for m in w.get("moves") or [] if (m.get("config") or {}).get(DECOY)),
               # the screen's own `invalid` rows in the lane's ledger (no experiment page: the screen was the run)
               decoy_screen_invalid_rows=sum(not r.get("exp_id") and r.get("verdict") == "invalid"
                                             and json.loads(r.get("config") or "{}").get(DECOY)
                                             for r in ledger.read(_text(kb / "wiki/experiments/llama" / lane
                                                                        / "RESULTS.tsv"))))
    return out


def _power_set_aside(kb: Path) -> list[str]:
    """The moves the sweep set aside as screened at a gain too small to confirm at the lane's noise
    (``tools/loop/power.py``), from every iteration's candidates.json: "move: screened +x %, σ y %"."""
    out: dict[str, str] = {}
    for f in sorted(kb.rglob("candidates.json")):
        for c in json.loads(f.read_text(encoding="utf-8")):
            why = str(c.get("why") or "")
            if c.get("refused") and "a confirmation of" in why and why.startswith("screened "):
                sigma = why.split("σ ", 1)[1].split(" ", 1)[0] if "σ " in why else "?"
                out.setdefault(c["change"], f"{c['change']}: {why.split(' on this trunk')[0]}, σ {sigma} %")
    return list(out.values())


def _text(p: Path) -> str:
    return p.read_text(encoding="utf-8") if p.is_file() else ""


def random_search(meter: Meter, n: int, seed: int, device_s: float = 0.0) -> dict:
    """At least ``n`` configurations, one run each, and more until the runs have taken ``device_s`` seconds."""
    picks = random.Random(1000 + seed).sample(space(decoy=True), len(space(decoy=True)))
    tried, spent = [], 0.0
    for cfg in picks:
        if len(tried) >= n and spent >= device_s:
            break
        m = meter.run(cfg)
        spent += m["wall_s"]
        tried.append({"config": cfg, "tokens_per_s": m.get("tokens_per_s"), "invalid": m["invalid"]})
    valid = [t for t in tried if not t["invalid"]]
    best = max(valid, key=lambda t: t["tokens_per_s"]) if valid else None
    dec = [t for t in tried if t["config"][DECOY]]
    return {"seed": seed, "best": best["config"] if best else None, "best_tokens_per_s": best and best["tokens_per_s"],
            "tried": tried, "device_s": round(spent, 1), "decoy_runs": len(dec),
            "decoy_invalid": sum(bool(t["invalid"]) for t in dec),
            "invalid": sum(bool(t["invalid"]) for t in tried)}


class Rounds:
    """A B C ..., B C ... A, ... repeated ``rounds`` times: tokens/s per configuration per round (None: invalid).
    Each round starts one configuration later, so no configuration always runs first (each runs first once in
    every ``len(configs)`` rounds; the cyclic order stays: B always follows A)."""

    def __init__(self, meter: Meter, configs: list[dict], rounds: int):
        self.got: dict[str, list[float | None]] = {key(c): [] for c in configs}
        for r in range(rounds):
            k = r % len(configs)
            for c in configs[k:] + configs[:k]:
                m = meter.run(c)
                self.got[key(c)].append(None if m["invalid"] else m["tokens_per_s"])
            say(f"  round {r + 1}/{rounds} done")

    def median(self, cfg: dict | None) -> float | None:
        xs = [x for x in self.got.get(key(cfg), []) if x] if cfg else []
        return statistics.median(xs) if xs else None

    def ratio(self, cfg: dict | None, ref: dict) -> float | None:
        """Median over the rounds of cfg ÷ ref within the round (neighbours in time: drift cancels)."""
        pairs = zip(self.got.get(key(cfg), []) if cfg else [], self.got[key(ref)])
        xs = [a / b for a, b in pairs if a and b]
        return round(statistics.median(xs), 4) if xs else None


# ----------------------------------------------------------------------------- main

def row(who: str, tps: float | None, ratio: float | None, cfg: dict | None, note: str = "") -> str:
    return (f"{who:<14} {tps or 0:>10,.0f} {ratio or 0:>8.3f}  "
            f"{short(cfg) if cfg else '-'}{'  ' + note if note else ''}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="smoke run: 1 seed, small searches, budget 4")
    ap.add_argument("--lane", choices=sorted(LANES), default="template", help="the command and knob space (lanes.py)")
    ap.add_argument("--loop", choices=("process", "pairs"), default="process",
                    help="the loop's rounds: process-level, or `pairs: true` with `screen: true`")
    ap.add_argument("--mode", choices=("quiet", "interference"), default="quiet",
                    help="interference: the loops and random searches run beside a fixed duty-cycle load")
    ap.add_argument("--random", choices=("time", "count"), default="time",
                    help="random search: until the seed's loop's device-seconds (time) or the budget's count")
    ap.add_argument("--seeds", type=int, help="loop and random-search seeds (3)")
    ap.add_argument("--budget", type=int, help="experiments per loop, configurations per random search (10)")
    ap.add_argument("--large", type=int,
                    help="random configurations in the large search (86: with the one-knob sweep and the polish, "
                         "100-odd configurations)")
    ap.add_argument("--rounds", type=int, help="interleaved rounds of each re-measure (5)")
    ap.add_argument("--statistic", choices=["min", "median"], default="min",
                    help="what every run's tokens/s is read from: its fastest steady step (min) or its median one")
    ap.add_argument("--keep", type=Path, help="build the knowledge bases here (kept) instead of a temp dir")
    ap.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    a = ap.parse_args()
    use_lane(a.lane)
    q = a.quick
    seeds = list(range(a.seeds or (1 if q else 3)))
    budget, n_large, rounds = a.budget or (4 if q else 10), a.large or (4 if q else 86), a.rounds or (2 if q else 5)
    passes, reps, calibrate = (1, (2, 4), 3) if q else (2, (2, 6), 5)
    t_all = time.perf_counter()
    if not has_decoy_flag():
        raise SystemExit(f"bench/loop_efficacy.py: {SCRIPT} has no --decoy-skip-layer flag (the decoy knob)")
    code = SCRIPT.read_text()
    base = a.keep.resolve() if a.keep else Path(tempfile.mkdtemp(prefix="loop-efficacy-"))
    if subprocess.run(["git", "-C", str(base if base.exists() else base.parent), "rev-parse"],
                      capture_output=True, check=False).returncode == 0:
        raise SystemExit(f"bench/loop_efficacy.py: --keep {base}: inside a git work tree; the loop would make "
                         "branches there. Give a folder outside any repository (e.g. under /tmp)")
    if a.keep and base.is_dir() and any(base.iterdir()):
        raise SystemExit(f"bench/loop_efficacy.py: --keep {base}: not empty; the loops would resume old states. "
                         "Give a new or empty folder")
    parts: dict[str, float] = {}
    mark = lambda name, t: parts.__setitem__(name, round(time.perf_counter() - t, 1))
    try:
        spec = make_kb(base / "direct", "direct", budget, *reps, code, statistic=a.statistic)
        meter = Meter(spec, base / "direct" / "experiments")
        cmd = " ".join(spec.command_for(meter.start)[1:])
        say(f"model: {cmd}\n  {TOKENS:,} tokens/step in every shape; knowledge bases under {base}")
        t = time.perf_counter()
        m = [meter.run(meter.start) for _ in range(2)][-1]
        say(f"start configuration: {m['tokens_per_s']:,.0f} tokens/s, {m['wall_s']:.1f} s a run")
        mark("warmup_s", t)

        say(f"== large search: one-knob sweep, {n_large} sampled, {passes} polish pass(es), top 5 re-measured")
        t = time.perf_counter()
        large_best, effects = large_search(meter, n_large, passes, 12345, rounds, n_oat=3 if q else None)
        mark("large_search_s", t)
        large = {"configs": len(meter.runs), "runs": len(meter.timeline), "best": large_best}
        fmt = lambda eff: "; ".join(f"{k}={v}: {g:+.1f} %" if g is not None else f"{k}={v}: invalid"
                                    for k, d in eff.items() if k[0] != "_" for v, g in d.items())
        say(f"  {large['configs']} configurations, {large['runs']} runs, {parts['large_search_s']:.0f} s; "
            f"best: {short(large_best)}")
        say(f"  noise floor (the start configuration's runs): {noise(meter)}")
        say(f"  knob effects, one at a time from the start (vs the start runs around each): {fmt(effects)}")

        loops, randoms = [], []
        for s in seeds:
            say(f"== loop, seed {s}: budget {budget} experiments, repeats {reps[0]}..{reps[1]}, "
                f"A/A calibration {calibrate} rounds; {a.loop} rounds, {a.mode}")
            t = time.perf_counter()
            with load_for(a.mode):
                lp = run_loop(base / f"seed-{s}", f"efficacy-s{s}", s, budget, code, reps, calibrate, a.statistic,
                              pairs=a.loop == "pairs", screen=a.loop == "pairs")
            mark(f"loop_seed{s}_s", t)
            loops.append(lp)
            if "error" not in lp:
                say(f"  trunk {lp['best_tokens_per_s'] or 0:,.0f} tokens/s as filed: {short(lp['best'])}; "
                    f"decoy runs {lp['decoy_runs']}, invalid {lp['decoy_invalid']}; {lp['device_s']} device-s; "
                    f"{lp['stop_reason']}")
                if lp.get("power_set_aside"):
                    say("  set aside, too small to confirm at this noise: " + "; ".join(lp["power_set_aside"]))
            equal = float(lp.get("device_s") or 0) if a.random == "time" else 0.0
            say(f"== random search, seed {s}: {budget} configurations or more, to {equal:.0f} device-s; decoy in "
                "the space")
            t = time.perf_counter()
            with load_for(a.mode):
                rb = random_search(meter, budget, s, equal)
            mark(f"random_seed{s}_s", t)
            randoms.append(rb)
            say(f"  best {rb['best_tokens_per_s'] or 0:,.0f} tokens/s: {short(rb['best']) if rb['best'] else '-'}; "
                f"{len(rb['tried'])} configurations, {rb['device_s']} device-s, {rb['invalid']} invalid, decoy "
                f"{rb['decoy_runs']} (invalid {rb['decoy_invalid']})")

        say(f"== final comparison: interleaved, {rounds} rounds")
        t = time.perf_counter()
        finals = [large_best, meter.start] + [x["best"] for x in loops + randoms if x.get("best")]
        final = Rounds(meter, list({key(c): c for c in finals}.values()), rounds)
        mark("final_s", t)
        if a.keep:
            (base / "runs.json").write_text(json.dumps([{"config": json.loads(k), **m} for k, m in meter.timeline]))
    finally:
        if not a.keep:
            shutil.rmtree(base, ignore_errors=True)
    ratio = lambda c: final.ratio(c, large_best)
    loop_r, rand_r = [ratio(x.get("best")) for x in loops], [ratio(x["best"]) for x in randoms]
    say(f"\n{'who':<14} {'tokens/s':>10} {'/ large':>8}  configuration ({rounds} interleaved rounds: median "
        "tokens/s; median of the ratios within each round)")
    for who, cfg, note in ([("large search", large_best, ""), ("start", meter.start, "")]
                           + [(f"loop s{x['seed']}", x.get("best"), x.get("error", "")) for x in loops]
                           + [(f"random s{x['seed']}", x["best"], "") for x in randoms]):
        say(row(who, final.median(cfg), ratio(cfg), cfg, note))
    for x in loops:
        for e in x.get("experiments", []):
            gain = "-" if e["gain_pct"] is None else f"{e['gain_pct']:+.1f} %"
            say(f"  loop s{x['seed']} #{e['iteration']:>2} {e['change']:<36} {e['verdict']:<12} {gain:>9}  "
                f"repeats {e['repeats']}" + ("  KEPT" if e["kept"] else ""))
    parts["total_s"] = round(time.perf_counter() - t_all, 1)
    ok = lambda xs: [x for x in xs if x is not None]
    lm = statistics.median(ok(loop_r)) if ok(loop_r) else None
    rm = statistics.median(ok(rand_r)) if ok(rand_r) else None
    decoy_runs, decoy_inv = sum(x.get("decoy_runs", 0) for x in loops), sum(x.get("decoy_invalid", 0) for x in loops)
    misses = []
    if lm is None or lm < TARGET_RATIO:
        misses.append(f"loop best / large best median {lm} < {TARGET_RATIO}")
    if lm is None or rm is None or lm <= rm:
        misses.append(f"loop median {lm} not above random median {rm}")
    if decoy_inv != decoy_runs:
        misses.append(f"{decoy_runs - decoy_inv} of {decoy_runs} decoy runs of the loop not filed invalid")
    if passed := sum(x.get("decoy_screen_passed", 0) for x in loops):
        misses.append(f"{passed} screen(s) of the loop let the decoy through")
    say(f"\nloop/large median {lm}, random/large median {rm}; loop decoy runs {decoy_runs}, invalid {decoy_inv}"
        + ("" if decoy_runs else " (the loop never ran the decoy)")
        + f"; decoys ruled out by a screen {sum(x.get('decoy_screened_out', 0) for x in loops)}, filed `invalid` "
          f"in the ledger {sum(x.get('decoy_screen_invalid_rows', 0) for x in loops)}; total {parts['total_s']:.0f} s")
    result = {
        "bench": "loop_efficacy", "loop": a.loop, "mode": a.mode, "random": a.random, "quick": q, "seeds": seeds,
        "budget": budget, "command": cmd,
        "statistic": a.statistic, "repeats": list(reps),
        "large_search": dict(large, tokens_per_s=round(final.median(large_best) or 0)),
        "start_over_large": ratio(meter.start),
        "loop_best_over_large": loop_r, "loop_median": lm, "random_best_over_large": rand_r, "random_median": rm,
        "loop_decoy_runs": decoy_runs, "loop_decoy_invalid": decoy_inv,
        "loop_decoy_screened_out": sum(x.get("decoy_screened_out", 0) for x in loops),
        "loop_decoy_screen_passed": sum(x.get("decoy_screen_passed", 0) for x in loops),
        "loop_decoy_screen_invalid_rows": sum(x.get("decoy_screen_invalid_rows", 0) for x in loops),
        "loop_device_s": {x["seed"]: x.get("device_s") for x in loops},
        "loop_experiments": {x["seed"]: len(x.get("experiments") or []) for x in loops},
        "loop_screens": {x["seed"]: x.get("screens") for x in loops},
        "loop_power_set_aside": {x["seed"]: x.get("power_set_aside") for x in loops},
        "random_device_s": {x["seed"]: x["device_s"] for x in randoms},
        "random_configs": {x["seed"]: len(x["tried"]) for x in randoms},
        "random_decoy_runs": sum(x["decoy_runs"] for x in randoms),
        "random_decoy_invalid": sum(x["decoy_invalid"] for x in randoms),
        "loop_repeats": {x["seed"]: [e["repeats"] for e in x.get("experiments", [])] for x in loops},
        "loop_configs_tried": {x["seed"]: x.get("configs_tried") for x in loops},
        "loop_supported_not_kept": {x["seed"]: x.get("supported_not_kept") for x in loops},
        "loop_stop": {x["seed"]: x.get("stop_reason") for x in loops},
        "loop_errors": {x["seed"]: x["error"] for x in loops if "error" in x},
        "loop_interruptions": {x["seed"]: x["interruptions"] for x in loops if x.get("interruptions")},
        "noise": noise(meter), "knob_effects_oat_pct": effects,
        "wall_s": parts, "targets_missed": misses,
    }
    print(json.dumps(result, default=str), flush=True)
    if a.check and misses:
        print("bench/loop_efficacy.py: targets missed: " + "; ".join(misses), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
