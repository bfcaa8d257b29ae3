"""Which screened moves still speak for the trunk (``screen_table.current``), and the loop page's section: pure
functions of a state document."""

from __future__ import annotations

from tools.loop import screen_table
from tools.loop.device_time import device_time
from tools.loop.status import summary


def _move(knobs: dict, category: str, outcome: str, gain: float) -> dict:
    return {"change": {"kind": "knobs", "knobs": knobs}, "describe": ", ".join(f"{k}={v}" for k, v in knobs.items()),
            "category": category, "outcome": outcome, "gain_pct": gain, "interval_pct": [gain - 3, gain + 3],
            "rounds": 4, "losses": "ok", "loss_diff": 0.001, "problem": "", "why": "" if outcome == "confirm" else "x"}


def _state(kept_category: str | None) -> dict:
    wave = {"iteration": 1, "trunk_exp": "e1", "rounds": 4, "device_s": 30.5, "error": None,
            "moves": [_move({"compute_dtype": "bfloat16"}, "precision", "confirm", 12.0),
                      _move({"remat": "full"}, "memory", "slower", -4.0),
                      _move({"batch": 16}, "shape", "confirm", 4.0)]}
    history = [{"iteration": 1, "exp_id": "e2", "category": "precision", "kept": kept_category is not None,
                "verdict": "supported", "device_s": 14.0, "describe": "compute_dtype=bfloat16"}]
    if kept_category:
        history[0]["category"] = kept_category
    return {"name": "l", "status": "running", "iteration": 1, "usage": {"device_s": 60.0}, "history": history,
            "screens": [wave], "frontier": []}


def test_a_keep_sends_back_to_the_screen_only_the_moves_that_may_depend_on_it():
    # remat=full screened -4 % [-7, -1]: slower, but near enough that a keep it depends on may turn it around
    keys = {screen_table.change_key(k) for k in ({"compute_dtype": "bfloat16"}, {"remat": "full"}, {"batch": 16})}
    assert set(screen_table.current(_state(None))) == keys  # nothing kept since the wave: all of it holds
    # bf16 kept: precision (itself) and memory (bf16 halves what remat saves) are screened again; shape holds
    assert set(screen_table.current(_state("precision"))) == {screen_table.change_key({"batch": 16})}
    # a kernel keep moves shape moves only; a compiler keep (an XLA flag as a knob) moves precision moves only
    assert set(screen_table.current(_state("kernel"))) == {screen_table.change_key({"compute_dtype": "bfloat16"}),
                                                           screen_table.change_key({"remat": "full"})}
    assert set(screen_table.current(_state("compiler"))) == {screen_table.change_key({"remat": "full"}),
                                                             screen_table.change_key({"batch": 16})}
    # a shape keep moves memory and shape moves, not precision
    assert set(screen_table.current(_state("shape"))) == {screen_table.change_key({"compute_dtype": "bfloat16"})}
    failed = _state(None)
    failed["screens"][0]["error"] = "the process crashed"
    assert screen_table.current(failed) == {}
    # an environment keep (an XLA flag recompiles every program) sends every move back
    env = _state("compiler")
    env["history"][0]["change"] = {"kind": "env", "env": {"XLA_FLAGS": "--x"}}
    assert screen_table.current(env) == {}
    # ... and so does a keep of a knob that sets the environment
    flag = _state("compiler")
    flag["history"][0]["change"] = {"kind": "knobs", "knobs": {"xla_ynn_dot": "--xla_x=dot"}}
    assert set(screen_table.current(flag)) == keys - {screen_table.change_key({"compute_dtype": "bfloat16"})}
    assert screen_table.current(flag, {"xla_ynn_dot"}) == {}
    # a screen in processes that failed drops its own moves, not the ones screened in one process
    half = _state(None)
    half["screens"][0]["moves"][2]["screened_in"] = "processes"
    half["screens"][0]["processes_error"] = "the trunk's process trunk-1: exit code 1"
    assert set(screen_table.current(half)) == {screen_table.change_key({"compute_dtype": "bfloat16"}),
                                                screen_table.change_key({"remat": "full"})}


def test_what_a_keep_does_not_turn_around_stays_ruled_out():
    state = _state("precision")
    moves = state["screens"][0]["moves"]
    moves[1] = _move({"remat": "full"}, "memory", "slower", -20.0)      # [-23, -17]: clearly slower
    moves.append(_move({"decoy": True}, "precision", "broken", 80.0))   # its losses left the trunk's
    moves[-1]["losses"] = "changed"
    got = screen_table.current(state)
    assert set(got) == {screen_table.change_key(k) for k in ({"remat": "full"}, {"decoy": True}, {"batch": 16})}
    assert got[screen_table.change_key({"remat": "full"})]["wave"] == 1


def test_screens_show_on_the_loop_page_in_status_and_in_device_time():
    state = _state(None)
    text = "\n".join(screen_table.markdown(state))
    assert "## Screens" in text and "30.5 device-seconds" in text
    rows = [ln for ln in text.splitlines() if ln.startswith("| `")]
    assert rows[0].startswith("| `compute_dtype=bfloat16` | one process | 4 | +12.0 %") and "ruled out: slower" in rows[-1]
    dt = device_time(state)
    assert (dt["screens"], dt["screens_s"], dt["experiments_s"], dt["overhead_s"]) == (1, 30.5, 14.0, 15.5)
    assert dt["per_kept_gain_s"] is None  # nothing kept
    assert device_time(_state("precision"))["per_kept_gain_s"] == 44.5  # the kept experiment and the screen before it
    s = summary(state)
    assert s["screens"][0]["moves"][1]["outcome"] == "slower" and s["screens"][0]["device_s"] == 30.5
    assert screen_table.markdown({"screens": []}) == []
    state["screens"][0].update(rounds=2, rounds_why="2 of 4 rounds: a true +5 % screens above zero")
    assert "30.5 device-seconds; in one process, 2 of 4 rounds: a true +5 %" in "\n".join(screen_table.markdown(state))


def test_the_sweep_refuses_what_a_screen_ruled_out_and_ranks_the_rest_by_their_screened_gain():
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent))
    from llm_helpers import priors

    from tools.loop.proposers.sweep import SweepProposer

    p = priors()
    before = {c.change.describe() for c in SweepProposer().candidates(p)}
    shape = {"shape": {"batch": 32, "seq_len": 64}}
    assert {"remat=dots_saveable", 'shape={"batch":32,"seq_len":64}'} <= before, before
    p.screens = {screen_table.change_key({"remat": "dots_saveable"}): _move({"remat": "dots_saveable"}, "memory",
                                                                             "slower", -12.0),
                 screen_table.change_key(shape): _move(shape, "shape", "confirm", 30.0)}
    p.screens[screen_table.change_key({"remat": "dots_saveable"})]["why"] = "the screen before iteration 2: slower"
    sweep = SweepProposer()
    cands = sweep.candidates(p)
    assert "remat=dots_saveable" not in {c.change.describe() for c in cands}
    assert {"change": "remat=dots_saveable", "why": "the screen before iteration 2: slower"} in sweep.refused
    top = cands[0]
    assert top.change.knobs == shape and top.expected_gain_pct == 30.0 and top.confidence == 0.6, top
    assert top.notes.startswith("screened against this trunk: +30.0 % [+27.0, +33.0] over 4 rounds")
    # once the move's own experiment ran, the screen no longer sets its prior: the experiment's evidence does
    p.screens[screen_table.change_key(shape)]["confirmed_by"] = "e9"
    after = next(c for c in SweepProposer().candidates(p) if c.change.knobs == shape)
    assert not after.notes.startswith("screened") and after.expected_gain_pct != 30.0, after


def test_a_screened_move_knows_its_own_experiment_since_the_screen():
    state = _state(None)
    state["screens"][0]["iteration"] = 2
    assert all(m["confirmed_by"] is None for m in screen_table.current(state).values())
    state["history"] = [{"iteration": 1, "exp_id": "e1", "kept": False, "category": "shape",
                         "change": {"kind": "knobs", "knobs": {"batch": 16}}},   # before the screen: not its check
                        {"iteration": 2, "exp_id": "e3", "kept": False, "category": "precision",
                         "change": {"kind": "knobs", "knobs": {"compute_dtype": "bfloat16"}}}]
    got = screen_table.current(state)
    assert got[screen_table.change_key({"compute_dtype": "bfloat16"})]["confirmed_by"] == "e3"
    assert got[screen_table.change_key({"batch": 16})]["confirmed_by"] is None
    # a keep after its own (inconclusive) experiment: the move's experiment still speaks for it across a keep it
    # does not depend on (it is not screened and confirmed again on that account); a keep it may depend on sends
    # it back to the screen
    state["history"].append({"iteration": 3, "exp_id": "e4", "kept": True, "category": "kernel",
                             "change": {"kind": "knobs", "knobs": {"attention": "dpa"}}})
    got = screen_table.current(state)
    assert got[screen_table.change_key({"compute_dtype": "bfloat16"})]["confirmed_by"] == "e3"
    assert screen_table.change_key({"batch": 16}) not in got  # kernel <-> shape may depend: screened again
    state["history"][-1]["category"] = "precision"  # a precision keep: the precision move may depend on it
    got = screen_table.current(state)
    assert screen_table.change_key({"compute_dtype": "bfloat16"}) not in got
    assert got[screen_table.change_key({"batch": 16})]["confirmed_by"] is None, got


def test_what_a_screened_move_becomes():
    from tools.experiments.screen import Screened
    from tools.loop.screening import outcome, why_ruled_out

    assert outcome(Screened("b", gain_pct=4.0, interval_pct=[-1.0, 9.0], rounds=4)) == "confirm"
    assert outcome(Screened("b", gain_pct=-1.0, interval_pct=[-6.0, 4.0], rounds=4)) == "no gain"
    assert outcome(Screened("b", gain_pct=-9.0, interval_pct=[-12.0, -6.0], rounds=4)) == "slower"
    assert outcome(Screened("b", gain_pct=70.0, interval_pct=[60.0, 80.0], losses="changed", loss_diff=0.4)) == "broken"
    assert outcome(Screened("b", problem="a non-finite loss: the math broke")) == "broken"
    # the clock could not vouch for its blocks (another arm's code may have slowed them): no reading, not ruled out
    assert outcome(Screened("b", problem="clock-slow: screen-b: ...")) == "unscreened"
    row = {"outcome": "no gain", "gain_pct": -1.0, "interval_pct": None, "rounds": 1, "losses": "ok"}
    assert why_ruled_out(row, 3) == "the screen before iteration 3: no faster than the trunk, -1.0 % over 1 rounds"
