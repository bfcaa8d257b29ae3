"""What a screen's process must show before its figures rank anything (``experiments.screen.read``): the arms asked
for, the blocks asked for, and step lines the runner saw for every reported step. The real process runs in
tests/loop/test_loop_pairs.py; here, logs that fall short of it."""

from __future__ import annotations

import json

from tools.experiments import pairs, screen
from tools.runners.process import Proc

ROUNDS, WARM = 2, pairs.BLOCK_STEPS


def _arm(name: str, tps: float) -> dict:
    steps = WARM + ROUNDS * pairs.BLOCK_STEPS
    blocks = [list(range(WARM + i * pairs.BLOCK_STEPS, WARM + (i + 1) * pairs.BLOCK_STEPS)) for i in range(ROUNDS)]
    return {"config": {"batch": 8, "seq_len": 64}, "tokens_per_step": 512, "tokens_per_s": [tps] * ROUNDS,
            "tokens_per_s_best": [tps * 1.1] * ROUNDS, "blocks": blocks,
            "result": {"step_times_s": [512 / tps] * steps, "losses": [5.0 - 0.01 * i for i in range(steps)]}}


def _proc(tmp_path, out: dict, step_lines: bool = False, rc: int = 0, together: bool = False) -> Proc:
    """The process's log; with ``step_lines``, every step's line as its own chunk on a runner's clock that agrees
    with the reported step times (each line printed when its step ended). ``together``: the runner read the whole
    log at once (a busy machine's late reader)."""
    log = tmp_path / "screen.log"
    lines, clock, t, size = [], [], 0.0, 0
    if step_lines:
        for name in out["arms"]:
            run = out[name]["result"]
            for i, loss in enumerate(run["losses"]):
                lines.append(json.dumps({"arm": name, "step": i, "loss": loss,
                                         "step_time_s": run["step_times_s"][i]}))
                t += run["step_times_s"][i]
                size += len(lines[-1]) + 1
                clock.append((t, size))
    lines.append(json.dumps(out))
    log.write_text("\n".join(lines) + "\n")
    clock.append((t + 0.01, size + len(lines[-1]) + 1))
    if together:
        clock = [clock[-1]]
    return Proc(rc=rc, timed_out=False, wall_s=3.0, log=log, tail=lines[-1][-200:], clock=clock)


def _out(names: list[str]) -> dict:
    return {"schema": pairs.SCHEMA, "rounds": ROUNDS, "block_steps": pairs.BLOCK_STEPS, "warmup_steps": WARM,
            "arms": names, **{n: _arm(n, 30000.0 + 1000 * i) for i, n in enumerate(names)}}


def test_a_screen_that_ran_other_arms_than_asked_is_a_failed_screen(tmp_path):
    crash, got = screen.read(_proc(tmp_path, _out(["a", "b"])), moves=2, statistic="min", timeout=60)
    assert got == [] and crash == "bad JSON field `arms`: expected ['a', 'b', 'c'], got ['a', 'b']"
    bad = _out(["a", "b", "c"])
    bad["c"]["blocks"] = bad["c"]["blocks"][:1]
    crash, _ = screen.read(_proc(tmp_path, bad), moves=2, statistic="min", timeout=60)
    assert crash.startswith("bad JSON field `blocks`: arm c's blocks are not 2 runs of 8")
    crash, _ = screen.read(_proc(tmp_path, _out(["a", "b", "c"]), rc=1), moves=2, statistic="min", timeout=60)
    assert crash and "exit code 1" in crash


def test_steps_the_runner_never_saw_rank_nothing(tmp_path):
    # figures printed in one JSON line, no step line behind them: the trunk's arm cannot be timed, so nothing is
    crash, got = screen.read(_proc(tmp_path, _out(["a", "b", "c"])), moves=2, statistic="min", timeout=60)
    assert got == [] and crash.startswith("the trunk's arm: step-count:")
    # every line read at once by a busy machine's runner: the clock contradicts nothing, so the trunk is still the
    # yardstick (the whole screen failed under load); the moves, unbounded, are proposed on their usual priors
    crash, got = screen.read(_proc(tmp_path, _out(["a", "b", "c"]), step_lines=True, together=True), moves=2,
                             statistic="min", timeout=60)
    assert crash is None and [s.problem.split(":")[0] for s in got] == ["clock unchecked"] * 2, (crash, got)


def test_a_move_whose_losses_leave_the_trunks_is_marked_changed_and_gains_are_read_per_round(tmp_path):
    out = _out(["a", "b", "c"])
    out["c"]["result"]["losses"] = [x + 0.5 for x in out["c"]["result"]["losses"]]
    crash, (b, c) = screen.read(_proc(tmp_path, out, step_lines=True), moves=2, statistic="min", timeout=60)
    assert crash is None and not b.problem and not c.problem, (b.problem, c.problem)
    assert (b.losses, c.losses, c.loss_diff) == ("ok", "changed", 0.5)
    assert b.gain_pct == round(100 * (31000 / 30000 - 1), 3) and c.gain_pct == round(100 * (32000 / 30000 - 1), 3)
    assert b.facts["steps"] == ROUNDS * (pairs.BLOCK_STEPS - 1)  # every block's steps after its first, timed
    # an arm whose blocks claim less time than its lines took on the runner's clock is broken, not fast
    out["b"]["result"]["step_times_s"] = [x * 0.5 for x in out["b"]["result"]["step_times_s"]]
    proc = _proc(tmp_path, _out(["a", "b", "c"]), step_lines=True)  # the clock of the honest times
    proc.log.write_text(proc.log.read_text().rsplit("\n", 2)[0] + "\n" + json.dumps(out) + "\n")
    crash, (b, c) = screen.read(proc, moves=2, statistic="min", timeout=60)
    assert crash is None and b.problem.startswith("clock-slow: screen-b") and b.gain_pct is None, b.problem
    # and one whose result reports other losses than its step lines printed (arm c's +0.5 against honest lines)
    assert c.problem.startswith("step-losses: screen-c: step 0's line printed loss 5.0, the result reports 5.5")


def test_a_move_whose_option_xla_refused_is_left_out_and_the_rest_still_rank(tmp_path):
    # --skip-refused: arm b's option was refused, so the process ran a and c only and names b in `refused`
    out = _out(["a", "c"])
    out["refused"] = {"b": "--xla_cpu_use_thunk_runtime=false: No such compile option"}
    crash, (b, c) = screen.read(_proc(tmp_path, out, step_lines=True), moves=2, statistic="min", timeout=60)
    assert crash is None and b.gain_pct is None and b.problem.startswith("XLA refused its flag as a compile option")
    assert "thunk_runtime" in b.problem and not c.problem and c.gain_pct is not None
    from tools.loop.screening import outcome
    assert outcome(b) == "unscreened" and outcome(c) == "confirm"
    # `refused` naming an arm that is not a move's, or with no reason: the screen failed
    out["refused"] = {"a": "x"}
    crash, got = screen.read(_proc(tmp_path, out, step_lines=True), moves=2, statistic="min", timeout=60)
    assert got == [] and crash.startswith("bad JSON field `refused`")
    # claims to have run the arm it refused
    crash, _ = screen.read(_proc(tmp_path, _out(["a", "b", "c"]) | {"refused": {"b": "x"}}, step_lines=True),
                           moves=2, statistic="min", timeout=60)
    assert crash == "bad JSON field `arms`: expected ['a', 'c'], got ['a', 'b', 'c']"


def _process(tmp_path, name: str, step_s: float, losses_shift: float = 0.0, timer: float = 1.0, rc: int = 0,
             together: bool = False):
    """One process of a screen in processes: its step lines on a runner's clock that saw ``step_s`` per step, and a
    result reporting ``step_s * timer`` per step (``timer`` < 1: a step timer that runs slow). ``together``: the
    runner read every line at once (a busy machine's late reader)."""
    from tools.experiments import arms

    steps = 8
    losses = [5.0 - 0.01 * i + losses_shift for i in range(steps)]
    lines, clock, t, size = [], [], 0.0, 0
    for i, loss in enumerate(losses):
        lines.append(json.dumps({"step": i, "loss": loss}))
        t += step_s
        size += len(lines[-1]) + 1
        clock.append((t, size))
    lines.append(json.dumps({"step_times_s": [step_s * timer] * steps, "tokens_per_step": 512, "losses": losses,
                             "warmup_steps": 1, "shape": {"batch": 8, "seq_len": 64}}))
    log = tmp_path / f"{name}.log"
    log.write_text("\n".join(lines) + "\n")
    clock.append((t + 0.01, size + len(lines[-1]) + 1))
    if together:
        clock = [clock[-1]]
    p = Proc(rc=rc, timed_out=False, wall_s=t + 1.0, log=log, tail=lines[-1][-200:], clock=clock)
    return arms.check(name, p, 60, None)


def test_a_screen_in_processes_reads_each_round_against_the_trunks_process(tmp_path):
    trunk = [_process(tmp_path, "trunk-1", 0.02), _process(tmp_path, "trunk-2", 0.021)]
    fast = [_process(tmp_path, "m1-1", 0.018), _process(tmp_path, "m1-2", 0.0185)]        # +11.1 %, +13.5 %
    other = [_process(tmp_path, "m2-1", 0.015, 0.5), _process(tmp_path, "m2-2", 0.015, 0.5)]  # losses off
    slow_timer = [_process(tmp_path, "m3-1", 0.02, timer=0.5), _process(tmp_path, "m3-2", 0.02, timer=0.5)]
    crashed = [_process(tmp_path, "m4-1", 0.02), _process(tmp_path, "m4-2", 0.02, rc=1)]
    crash, (a, b, c, d) = screen.read_processes(trunk, [fast, other, slow_timer, crashed], "min")
    assert crash is None
    assert a.letter == "m1" and a.rounds == 2 and 11.1 < a.gain_pct < 13.6, a  # round by round, each its own trunk
    assert a.losses == "ok" and not a.problem and a.interval_pct[0] < a.gain_pct < a.interval_pct[1]
    assert b.losses == "changed" and b.loss_diff == 0.5
    assert c.problem.startswith("m3-1: clock-slow") and c.gain_pct is None, c.problem
    assert d.problem.startswith("m4-2: exit code 1") and d.gain_pct is None, d.problem
    # the trunk is the yardstick: a trunk process without a result, or the clock cannot vouch for, ranks nothing
    crash, got = screen.read_processes([trunk[0], _process(tmp_path, "trunk-2", 0.02, rc=1)], [fast], "min")
    assert got == [] and crash.startswith("the trunk's process trunk-2: exit code 1")
    crash, got = screen.read_processes([_process(tmp_path, "trunk-1", 0.02, timer=0.5)], [fast[:1]], "min")
    assert got == [] and "clock-slow" in crash
    # ... but a trunk whose lines a busy machine's runner read together contradicts nothing: it is read as an
    # experiment reads it (the whole screen failed under load, every move then confirmed alone); a move read so
    # stays unscreened
    late = [_process(tmp_path, "trunk-1", 0.02, together=True), _process(tmp_path, "trunk-2", 0.021, together=True)]
    crash, (a, late_move) = screen.read_processes(late, [fast, [_process(tmp_path, "m5-1", 0.018, together=True)]],
                                                  "min")
    assert crash is None and 11.1 < a.gain_pct < 13.6 and not a.problem, (crash, a)
    assert late_move.problem.startswith("m5-1: clock unchecked") and late_move.gain_pct is None
    # as an experiment reads its runs: one of a move's processes read late is no problem while another was checked
    crash, (half,) = screen.read_processes(late, [[fast[0], _process(tmp_path, "m6-2", 0.0185, together=True)]],
                                           "min")
    assert crash is None and not half.problem and 11.1 < half.gain_pct < 13.6, half
