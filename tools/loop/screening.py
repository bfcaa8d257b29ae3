"""Screen, then confirm (``screen:`` in a loop file with ``pairs:``). Before the first proposal on a trunk, every
untried knob move the sweep would propose that differs from the trunk in flags only runs in ONE process against
the trunk (``experiments.screen``: a few rounds of blocks, the arms in rotating order). What it finds is a ranking,
never a verdict:

- a move whose losses left the trunk's (same shape, the semantics tolerance) or whose math broke is ruled out (it
  would be filed ``invalid``); one whose blocks the runner's clock contradicts or cannot check has no reading and
  is proposed on its usual prior (another arm's code in the same process could have caused it);
- a move slower than the trunk beyond the screen's own noise (its whole interval below zero), or no faster (its
  median gain at or below zero), is ruled out on this trunk: the screen's rounds find a true +10 % but may miss a
  small gain, which the loop trades for the device time of confirming moves that do not pay;
- the rest are ranked by their screened gain (the sweep's prior for them), and each is confirmed by an experiment of
  its own (in-process pairs, ``pairs:`` rounds), the only thing that can be ``supported``.

A keep moves the trunk: the moves in a category that may depend on the kept one (``proposal.DEPENDS``; every move
after an environment or patch keep) are screened again on the new trunk rather than trusted from the old; the others
keep what their screen found (``screen_table.current``). The screen's process counts in the loop's device-seconds.
"""

from __future__ import annotations

from ..experiments import pairs, screen
from ..experiments.sides import Side, compile_cache_env
from ..runners import Arm
from ..runners import get as get_runner
from . import admission, gather
from .proposers.sweep import SweepProposer
from .screen_table import change_key

MIN_MOVES = 2  # one move alone: its confirmation costs what its screen would


def moves(engine) -> tuple[Side | None, list[dict]]:
    """The trunk's side and the moves a screen of it would run: {change, describe, config, run_key, flags}."""
    spec, state = engine.spec, engine.state
    trunk = state.trunk
    priors = gather.gather(engine.project, spec, state.to_dict(), engine.budget_left())
    with engine._git:
        cwd = engine.workspace.prepare("screen", "").cwd
    trunk_env = dict(trunk.get("env") or {})
    base = Side(spec.command_for(trunk["config"]), spec.env_for(trunk["config"], trunk_env), cwd, [])
    out, seen = [], set()
    for p in SweepProposer(promote=False).candidates(priors):
        if p.change.kind != "knobs" or len(p.change.knobs) != 1:
            continue  # the sweep reads screens for its single-knob moves
        cfg, env = admission.config_of(spec, trunk, p)
        if env != trunk_env:
            continue  # an environment change needs processes of its own
        key = admission.key_of(spec, trunk, p, cfg, env)
        if key in seen or change_key(p.change.knobs) in priors.screens:
            continue
        planned, _ = pairs.plan(base, Side(spec.command_for(cfg), spec.env_for(cfg, env), cwd, []), spec.runner)
        if planned is None:
            continue
        seen.add(key)
        out.append({"change": vars(p.change).copy(), "describe": p.change.describe(), "category": p.category,
                    "config": cfg, "run_key": key, "flags": planned[3], "planned": planned})
    return base, out


def wave(engine, n: int) -> dict | None:
    """Screen the current trunk's untried flag moves once (None: nothing to screen, or screened already;
    ``{"stopped_by": ...}``: the process was stopped by a signal)."""
    spec, state = engine.spec, engine.state
    trunk = state.trunk
    if not spec.screen_rounds or spec.runner != "local" or not trunk:
        return None
    if any(w.get("trunk_exp") == trunk["exp_id"] for w in state.screens):
        return None  # screened this trunk already (what the wave left out is not a flag move, or too few)
    base, todo = moves(engine)
    if len(todo) < MIN_MOVES:
        return None
    left = engine.budget_left().get("device_s")
    if left is not None and left <= 0:
        return None
    if spec.compile_cache:
        base.env = compile_cache_env(engine.project.cache / "jax-compile", base.env)
    side = screen.side(todo[0]["planned"], [m["flags"] for m in todo[1:]], base, spec.screen_rounds)
    folder = engine.paths.iteration_dir(n)
    folder.mkdir(parents=True, exist_ok=True)
    log = folder / "screen.log"
    engine.say(f"screen of {trunk['exp_id']}: {len(todo)} moves in one process, {spec.screen_rounds} rounds")
    timeout = spec.timeout_s * (len(todo) + 1)  # a compile and the blocks of every arm, as pairs scale theirs
    proc = get_runner("local").run_round([Arm("screen", side.command, log, side.env, side.cwd, timeout,
                                              hang_s=spec.hang_s)])[0]
    state.usage["device_s"] = round(state.usage["device_s"] + proc.wall_s, 3)
    state.usage["wall_s"] = round(state.usage["wall_s"] + proc.wall_s, 3)
    if proc.stopped_by:  # Ctrl-C or SIGTERM: nothing filed; the engine stops, and a resume screens again
        return {"stopped_by": proc.stopped_by}
    crash, got = screen.read(proc, len(todo), spec.statistic, timeout)
    rows = []
    for m, s in zip(todo, got):
        row = {k: m[k] for k in ("change", "describe", "category", "config", "run_key")} | s.to_dict()
        row["outcome"] = outcome(s)
        row["why"] = why_ruled_out(row, n) if row["outcome"] in RULED_OUT else row.get("problem") or ""
        rows.append(row)
    w = {"iteration": n, "trunk_exp": trunk["exp_id"], "rounds": spec.screen_rounds, "statistic": spec.statistic,
         "log": str(log.relative_to(engine.project.root)), "device_s": round(proc.wall_s, 3),
         "error": crash, "moves": rows}
    state.screens.append(w)
    engine.save()
    if crash:
        engine.say(f"  the screen failed ({crash}): every move is confirmed on its own")
    else:
        ruled = [r for r in rows if r["outcome"] in RULED_OUT]
        engine.say(f"  {len(rows) - len(ruled)} to confirm, {len(ruled)} ruled out, {proc.wall_s:.1f} device-s")
    return w


def outcome(s: screen.Screened) -> str:
    """What the sweep does with a screened move: ``confirm`` (proposed, its screened gain its prior), ``unscreened``
    (proposed on its usual prior: its arm's blocks had no clock-checked reading, which another arm's code in the same
    process could cause), or ruled out on this trunk: ``broken`` (its losses left the trunk's, or the math broke),
    ``slower`` (the whole interval below zero), ``no gain`` (the median at or below zero)."""
    if s.losses == "changed" or s.problem.startswith("a non-finite loss"):
        return "broken"
    if s.problem or s.gain_pct is None:
        return "unscreened"
    if s.slower:
        return "slower"
    return "confirm" if s.gain_pct > 0 else "no gain"


RULED_OUT = ("broken", "slower", "no gain")


def why_ruled_out(row: dict, n: int) -> str:
    """The sentence the sweep's refusal list gives for a move a screen ruled out."""
    where = f"the screen before iteration {n}"
    if row.get("losses") == "changed":
        return f"{where}: its losses left the trunk's (max |Δloss| {row.get('loss_diff')}): it would be invalid"
    if row.get("problem"):
        return f"{where}: {row['problem']}"
    lo, hi = row.get("interval_pct") or [None, None]
    what = "slower than the trunk" if row.get("outcome") == "slower" else "no faster than the trunk"
    interval = f" [{lo:+.1f}, {hi:+.1f}]" if lo is not None and hi is not None else ""
    return f"{where}: {what}, {row['gain_pct']:+.1f} %{interval} over {row['rounds']} rounds"
