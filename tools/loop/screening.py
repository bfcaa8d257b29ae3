"""Screen, then confirm (``screen:`` in a loop file with ``pairs:``). Before the first proposal on a trunk, every
untried knob move the sweep would propose runs against the trunk: the moves that differ from it in flags, or that
add an XLA flag (compiled with it as an option, ``experiments/xla_options.py``; a move whose option XLA refuses
is left out of the process and has no reading), together in ONE process
(``experiments.screen``: a few rounds of blocks, the arms in rotating order, as few as the lane's noise allows:
``power.screen_rounds``); the moves that change the environment
otherwise (another variable, an XLA flag of the trunk's taken away or changed) in processes, ``ENV_ROUNDS`` rounds of
the trunk and each such move as processes of their own (``screen.read_processes``). What it finds is a ranking,
never a verdict:

- a move whose losses left the trunk's (same shape, the semantics tolerance) or whose math broke is ruled out (it
  would be filed ``invalid``); one whose figures the runner's clock contradicts or cannot check, or whose process
  crashed, has no reading and is proposed on its usual prior (another arm's code in the same process could have
  caused it; its own experiment files a crash with its page);
- a move slower than the trunk beyond the screen's own noise (its whole interval below zero), or no faster (its
  median gain at or below zero), is ruled out on this trunk: the screen's rounds find a true +10 % but may miss a
  small gain, which the loop trades for the device time of confirming moves that do not pay;
- the rest are ranked by their screened gain (the sweep's prior for them), and each is confirmed by an experiment of
  its own (in-process pairs, ``pairs:`` rounds, or processes for an environment move), the only thing that can be
  ``supported``.

A keep moves the trunk: the moves in a category that may depend on the kept one (``proposal.DEPENDS``; every move
after an environment or patch keep) are screened again on the new trunk rather than trusted from the old; the others
keep what their screen found (``screen_table.current``). The screen's processes count in the loop's device-seconds.
"""

from __future__ import annotations

from ..experiments import arms, filing, pairs, screen
from ..experiments.sides import Side, compile_cache_env
from ..runners import Arm
from ..runners import get as get_runner
from . import admission, gather, power, shrink
from .proposers.sweep import SweepProposer
from .screen_table import change_key

MIN_MOVES = 2  # one flag move alone: its confirmation costs what its screen would
ENV_ROUNDS = 2  # rounds of a screen in processes: a process costs a compile; two rounds miss a true +10 % at a
                # process-level σ of 7 % about one time in 40, and a move is only ruled out, never kept, on them


def moves(engine, priors) -> tuple[Side | None, list[dict], list[dict]]:
    """The trunk's side, the flag moves a screen in one process would run ({change, describe, category, config,
    run_key, flags, planned}) and the moves that change the environment, screened in processes ({..., side})."""
    spec, state = engine.spec, engine.state
    trunk = state.trunk
    with engine._git:
        cwd = engine.workspace.prepare("screen", "").cwd
    trunk_env = dict(trunk.get("env") or {})
    base = Side(spec.command_for(trunk["config"]), spec.env_for(trunk["config"], trunk_env), cwd, [])
    flags, envs, seen = [], [], set()
    for p in SweepProposer(promote=False).candidates(priors):
        if p.change.kind != "knobs" or len(p.change.knobs) != 1:
            continue  # the sweep reads screens for its single-knob moves
        cfg, env = admission.config_of(spec, trunk, p)
        if env != trunk_env:
            continue  # a proposal's own environment is not a knob move
        key = admission.key_of(spec, trunk, p, cfg, env)
        if key in seen or change_key(p.change.knobs) in priors.screens:
            continue
        seen.add(key)
        row = {"change": vars(p.change).copy(), "describe": p.change.describe(), "category": p.category,
               "config": cfg, "run_key": key}
        variant = Side(spec.command_for(cfg), spec.env_for(cfg, env), cwd, [])
        planned, _ = pairs.plan(base, variant, spec.runner)
        if planned is not None and not planned.options_a:  # the process keeps every XLA flag of the trunk's
            flags.append(row | {"flags": planned.flags_b, "planned": planned})
        elif variant.env != base.env:  # another environment change: processes of its own
            envs.append(row | {"side": variant})
    return base, flags, envs


def wave(engine, n: int) -> dict | None:
    """Screen the current trunk's untried knob moves once: the flag moves together in one process, the environment
    moves in processes (None: nothing to screen, or screened already; ``{"stopped_by": ...}``: stopped by a
    signal)."""
    spec, state = engine.spec, engine.state
    trunk = state.trunk
    if not spec.screen_rounds or spec.runner != "local" or not trunk:
        return None
    for w in state.screens:
        if w.get("invalid_filed") is False:  # a kill between the screen's save and its ledger rows
            _file_invalid_once(engine, w)
    if any(w.get("trunk_exp") == trunk["exp_id"] for w in state.screens):
        return None  # screened this trunk already (what the wave left out: not a knob move, or a flag move alone)
    priors = gather.gather(engine.project, spec, state.to_dict(), engine.budget_left())
    base, flags, envs = moves(engine, priors)
    if len(flags) < MIN_MOVES:
        flags = []
    if not flags and not envs:
        return None
    left = engine.budget_left().get("device_s")
    if left is not None and left <= 0:
        return None
    if spec.compile_cache:
        for side in [base] + [m["side"] for m in envs]:
            side.env = compile_cache_env(engine.project.cache / "jax-compile", side.env)
    folder = engine.paths.iteration_dir(n)
    folder.mkdir(parents=True, exist_ok=True)
    rounds, why = power.screen_rounds(spec, priors.noise)
    w = {"iteration": n, "trunk_exp": trunk["exp_id"], "rounds": rounds, "statistic": spec.statistic,
         "log": None, "device_s": 0.0, "error": None, "moves": [], **({"rounds_why": why} if why else {})}
    engine.say(f"screen of {trunk['exp_id']}: " + ", ".join(
        ([f"{len(flags)} flag moves in one process ({why or f'{rounds} rounds'})"] if flags else [])
        + ([f"{len(envs)} environment move(s) in processes ({ENV_ROUNDS} rounds)"] if envs else [])))
    for screen_part, todo in ((_in_one_process, flags), (_in_processes, envs)):
        if todo and (stopped := screen_part(engine, w, base, todo, folder)):
            return stopped  # Ctrl-C or SIGTERM: nothing filed; the engine stops, and a resume screens again
    for how in ("one process", "processes"):
        if figures := shrink.shrink([m for m in w["moves"] if m["screened_in"] == how]):
            w.setdefault("shrink", {})[how] = figures
            engine.say(f"  {how}: {figures['moves']} readings whose true gains spread about "
                       f"±{figures['spread_pct']:.1f} % (σ {figures['round_sd_pct']:.1f} % per round): each "
                       "believed among them")
    w["invalid_filed"] = False
    state.screens.append(w)
    engine.save()
    _file_invalid_once(engine, w)
    ruled = [r for r in w["moves"] if r["outcome"] in RULED_OUT]
    engine.say(f"  {len(w['moves']) - len(ruled)} to confirm, {len(ruled)} ruled out, {w['device_s']:.1f} device-s")
    return w


def _file_invalid_once(engine, w: dict) -> None:
    file_invalid(engine, w)
    w["invalid_filed"] = True
    engine.save()


def file_invalid(engine, w: dict) -> None:
    """A ledger row per move the screen found broken (its losses left the trunk's, or its math broke): status
    ``discard``, verdict ``invalid``, the screen's log as its evidence. Slower or no-faster moves get none: a screen
    ranks them and is never a verdict on speed, but changed losses mean another program, whatever its speed."""
    broken = [m for m in w["moves"] if m["outcome"] == "broken"]
    if not broken:
        return
    spec, trunk = engine.spec, engine.state.trunk
    rows = []
    for m in broken:
        evidence = w.get("log" if m["screened_in"] == "one process" else "processes_log") or "no log"
        rows.append({"commit": (trunk.get("commit") or "")[:12], "status": "discard", "verdict": "invalid",
                     "date": engine.writer.today, "config": m["config"], "gain_pct": m.get("gain_pct"),
                     "rounds": m.get("rounds"),
                     "description": f"screen of {trunk['exp_id']} (loop {spec.name}): {m['describe']}: "
                                    f"{m['why']} ({evidence})"})
    filing.Lane(engine.project, spec.model, spec.lane).append_rows(engine.writer, rows)


def _charge(engine, w: dict, procs: list) -> None:
    spent = sum(p.wall_s for p in procs)
    usage = engine.state.usage
    usage["device_s"] = round(usage["device_s"] + spent, 3)
    usage["wall_s"] = round(usage["wall_s"] + spent, 3)
    w["device_s"] = round(w["device_s"] + spent, 3)


def _in_one_process(engine, w: dict, base: Side, todo: list[dict], folder) -> dict | None:
    spec = engine.spec
    with_options = any(m["planned"].options for m in todo)
    hlo = folder / "screen-hlo" if with_options else None
    side = screen.side(todo[0]["planned"], [m["planned"] for m in todo[1:]], base, w["rounds"], hlo)
    log = folder / "screen.log"
    timeout = spec.timeout_s * (len(todo) + 1)  # a compile and the blocks of every arm, as pairs scale theirs
    proc = get_runner("local").run_round([Arm("screen", side.command, log, side.env, side.cwd, timeout,
                                              hang_s=spec.hang_s)])[0]
    _charge(engine, w, [proc])
    if proc.stopped_by:
        return {"stopped_by": proc.stopped_by}
    w["log"] = str(log.relative_to(engine.project.root))
    crash, got = screen.read(proc, len(todo), spec.statistic, timeout)
    if hlo is not None and not crash:
        problems = screen.option_problems(hlo, {s.letter: bool(m["planned"].options) for s, m in zip(got, todo)})
        for s in got:
            if s.letter in problems and not s.problem:  # a refused option wrote no program: its refusal stands
                s.problem, s.gain_pct, s.interval_pct = problems[s.letter], None, None
    w["error"] = crash
    if crash:
        engine.say(f"  the screen failed ({crash}): every flag move is confirmed on its own")
    _rows(w, todo, got, "one process")
    return None


def _in_processes(engine, w: dict, base: Side, todo: list[dict], folder) -> dict | None:
    """``ENV_ROUNDS`` rounds, each the trunk and every move as processes of their own, in rotating order."""
    spec = engine.spec
    raw = folder / "screen-processes"
    raw.mkdir(parents=True, exist_ok=True)
    sides = [("trunk", base)] + [(f"m{i + 1}", m["side"]) for i, m in enumerate(todo)]
    got: dict[str, list] = {name: [] for name, _ in sides}
    for r in range(ENV_ROUNDS):
        order = sides[r % len(sides):] + sides[:r % len(sides)]
        arm_list = [side.arm(f"{name}-{r + 1}", raw, spec.timeout_s) for name, side in order]
        for arm in arm_list:
            arm.hang_s = spec.hang_s
        procs = get_runner("local").run_round(arm_list)
        _charge(engine, w, procs)
        if any(p.stopped_by for p in procs):
            return {"stopped_by": next(p.stopped_by for p in procs if p.stopped_by)}
        for (name, _), arm, p in zip(order, arm_list, procs):
            got[name].append(arms.check(arm.name, p, arm.timeout, None))
    w["processes_log"] = str(raw.relative_to(engine.project.root))
    crash, screened = screen.read_processes(got["trunk"], [got[f"m{i + 1}"] for i in range(len(todo))],
                                            spec.statistic)
    w["processes_error"] = crash
    if crash:
        engine.say(f"  the screen in processes failed ({crash}): every environment move is confirmed on its own")
    _rows(w, todo, screened, "processes")
    return None


def _rows(w: dict, todo: list[dict], got: list, how: str) -> None:
    for m, s in zip(todo, got):
        row = {k: m[k] for k in ("change", "describe", "category", "config", "run_key")} | s.to_dict()
        row["screened_in"] = how
        row["outcome"] = outcome(s)
        row["why"] = why_ruled_out(row, w["iteration"]) if row["outcome"] in RULED_OUT else row.get("problem") or ""
        w["moves"].append(row)


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
