"""The loop's pure steps without running a loop: admission (refuse and say why), stop gates, learning from a
filed run, retrospectives and plateaus; and the state file's model."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from test_loop_report import BF16, HISTORY, SPEC, entry, exp_id, state

from tools.loop import admission, gates, learn, retro
from tools.loop import state as st
from tools.loop.priors import Priors
from tools.loop.proposal import Change, Proposal
from tools.loop.state import LoopState


def loop_state(history=HISTORY, **changes) -> LoopState:
    s = LoopState.from_dict(state(history))
    for k, v in changes.items():
        setattr(s, k, v)
    return s


def priors(**kw) -> Priors:
    base = dict(spec=SPEC, trunk=BF16, trunk_env={}, trunk_commit="abc1234", best=None, attempts=[],
                other_lanes=[], refuted=[], memory={}, open_hypotheses=[], profile=None, concepts=[], kernels=[],
                retrospective="", guidance="")
    return Priors(**{**base, **kw})


def proposal(category="compiler", **knobs) -> Proposal:
    return Proposal("s", "m", "p", "f", Change("knobs", knobs=knobs), category)


# ----------------------------------------------------------------------------- admission

def test_admission_refuses_outside_the_declared_space():
    s = loop_state()
    assert admission.refuse(SPEC, s, proposal(nope=1), priors()).startswith("unknown knob 'nope'")
    assert "outside the declared space" in admission.refuse(SPEC, s, proposal(remat="half"), priors())


def test_a_proposed_value_is_the_declared_one_of_its_type():
    """An LLM's `{"batch": 8.0}` and a queue page's `scan: 1` passed `value in values` (8.0 == 8, 1 == True), ran
    `--batch 8.0` (a crash that cost budget) and missed the duplicate and refuted checks by their fingerprint."""
    from tools.loop.proposal import ProposalError
    from tools.loop.spec import parse

    s = loop_state()
    assert "outside the declared space" in admission.refuse(SPEC, s, proposal("compiler", scan=1), priors())
    with pytest.raises(ProposalError):
        admission.check_fits(proposal("compiler", scan=0), SPEC)
    spec = parse({"name": "n", "model": "m", "lane": "l", "variant": "v", "command": "python t.py",
                  "budget": {"runs": 3},
                  "knobs": {"accum": {"flag": "--accum", "values": [1, 2, 4]}}}, Path("loops/n.yml"))
    p = proposal("memory", accum=2.0)
    admission.check_fits(p, spec)
    assert type(p.change.knobs["accum"]) is int and spec.command_for({"accum": p.change.knobs["accum"]})[-1] == "2"


def test_a_trunk_value_the_loop_file_no_longer_declares_stops_a_resume():
    """A knob renamed between stop and resume: the trunk's kept bf16 fell back to float32 in every command, its
    next change was judged against the bf16 trunk's own run and refuted: a +30 % gain lost for good."""
    trunk = {"exp_id": "v001", "config": dict(BF16)}
    assert admission.trunk_outside_spec(SPEC, trunk) is None
    renamed = {"exp_id": "v001", "config": {**{k: v for k, v in BF16.items() if k != "compute_dtype"},
                                            "precision": "bfloat16"}}
    assert "no longer declares the knob 'precision'" in admission.trunk_outside_spec(SPEC, renamed)
    odd = {"exp_id": "v001", "config": {**BF16, "compute_dtype": "float8"}}
    assert "--fresh" in admission.trunk_outside_spec(SPEC, odd)


def test_admission_refuses_what_was_refuted_whatever_the_trunk_became():
    s = loop_state()
    why = admission.refuse(SPEC, s, proposal("compiler", scan=True), priors())
    assert why.startswith("refuted by ") and HISTORY[1]["page"] in why
    assert admission.closes_page(why) == "refuted"


def test_admission_refuses_a_configuration_in_flight_or_held_by_the_trunk():
    s = loop_state()
    p = proposal("precision", compute_dtype="float32")
    cfg, env = admission.config_of(SPEC, s.trunk, p)
    assert cfg == dict(BF16, compute_dtype="float32") and env == {"XLA_FLAGS": "--xla_fast"}
    key = admission.key_of(SPEC, s.trunk, p, cfg, env)
    assert admission.refuse(SPEC, s, p, priors()) is None
    assert admission.refuse(SPEC, s, p, priors(), {key}) == "the same configuration is already running in this batch"
    s.frontier.append({"exp_id": "x", "page": "experiments/x.md", "run_key": key})
    assert admission.refuse(SPEC, s, p, priors()).startswith("the trunk already ran this configuration")


def test_admission_reruns_an_inconclusive_result_only_with_more_repeats():
    s = loop_state([])
    p = proposal("shape", shape={"batch": 32, "seq_len": 64})
    cfg, env = admission.config_of(SPEC, s.trunk, p)
    s.history.append(dict(entry(1, "shape", p.change, "inconclusive", 0.4), repeats=2,
                          run_key=admission.key_of(SPEC, s.trunk, p, cfg, env)))
    assert admission.refuse(SPEC, s, p, priors()).startswith("duplicate of ")
    p.repeats = 4
    assert admission.refuse(SPEC, s, p, priors()) is None


def test_admission_defers_a_category_streak_without_closing_the_page():
    why = admission.refuse(SPEC, loop_state([]), proposal("memory", remat="full"), priors(avoid_category="memory"))
    assert "three runs in a row from category 'memory'" in why and admission.closes_page(why) is None


def test_admission_refuses_an_env_change_whose_secret_a_page_could_not_hold():
    """A reviewer's: a hypothesis page's `WANDB_API_KEY` was redacted when it was written; the queue then ran the
    experiment with the variable set to the mark itself, and filed it as a test of the hypothesis."""
    p = Proposal("s", "m", "p", "f", Change("env", env={"WANDB_API_KEY": "[redacted]"}), "compiler")
    why = admission.refuse(SPEC, loop_state([]), p, priors())
    assert why.startswith("the value of WANDB_API_KEY was redacted") and "environment the loop runs in" in why


def test_flag_variables_are_appended_to_the_trunks():
    p = Proposal("s", "m", "p", "f", Change("env", env={"XLA_FLAGS": "--xla_b", "OTHER": "1"}), "compiler")
    _, env = admission.config_of(SPEC, {"config": BF16, "env": {"XLA_FLAGS": "--xla_a", "OTHER": "0"}}, p)
    assert env == {"XLA_FLAGS": "--xla_a --xla_b", "OTHER": "1"}


# ----------------------------------------------------------------------------- gates

def test_gates_in_order_decided_stops_then_request_then_budget_then_target():
    s = loop_state(usage={"runs": 3, "wall_s": 10.0, "llm_tokens": 0, "cost_usd": 0.0, "device_s": 0.0})
    s.trunk["tokens_per_s"] = 500.0
    assert gates.stop_gate(s, {"runs": 5}, {"tokens_per_s": 1000}, False) is None
    assert gates.stop_gate(s, {"runs": 5}, {"tokens_per_s": 1000}, True).kind == "request"
    g = gates.stop_gate(s, {"runs": 3}, {}, False)
    assert (g.kind, g.reason) == ("budget", "budget: runs 3 of 3 used")
    g = gates.stop_gate(s, {}, {"tokens_per_s": 400}, False)
    assert g.kind == "target" and "tokens/s 500 ≥ 400" in g.reason
    s.budget_hit, s.plateau_stop = "budget: the next proposal would exceed cost_usd", "double plateau: ..."
    assert gates.stop_gate(s, {"runs": 3}, {}, True).kind == "plateau"
    gates.clear(s)
    assert (s.plateau_stop, s.budget_hit, s.error_stop) == (None, None, None)
    assert gates.budget_left(s, {"runs": 5, "wall_s": 60}) == {"runs": 2, "wall_s": 50.0}


# ----------------------------------------------------------------------------- learning

def _pending(s: LoopState, n: int, p: Proposal, rec: dict) -> dict:
    cfg, env = admission.config_of(SPEC, s.trunk, p)
    return {"phase": "filed", "iteration": n, "proposal": p.to_dict(), "config": cfg, "env": env,
            "run_key": admission.key_of(SPEC, s.trunk, p, cfg, env), "trunk_exp": s.trunk["exp_id"],
            "hypothesis_page": f"hypotheses/llama/cpu-loop/{n:03d}-h.md", "record": rec}


def _record(n: int, verdict: str, gain: float, baseline: str) -> dict:
    return {"exp_id": exp_id(n), "page": f"experiments/llama/cpu-loop/{exp_id(n)}.md", "verdict": verdict,
            "ledger_status": "keep" if verdict == "supported" else "discard", "gain_pct": gain, "baseline": baseline,
            "metrics": {"tokens_per_s": 1300.0, "mfu_percent": 33.0}, "wall_s_total": 12.5}


def test_a_supported_run_moves_the_trunk_once_and_chains_the_gain():
    s = loop_state()
    before, spent = s.frontier[-1]["gain_pct"], s.usage["device_s"]
    p = proposal("precision", compute_dtype="float32")
    pend = _pending(s, 12, p, _record(12, "supported", 10.0, s.trunk["exp_id"]))
    s.pending = [pend]
    lesson = learn.learn(SPEC, s, pend)
    assert (lesson.kept, lesson.moved, lesson.status) == (True, True, "supported")
    assert s.trunk["exp_id"] == exp_id(12) and s.frontier[-1]["gain_pct"] == round(learn.chained_gain(before, 10.0), 3)
    assert s.history[-1]["exp_id"] == exp_id(12) and s.usage["runs"] == 13 and s.usage["device_s"] == spent + 12.5
    assert s.history[-1]["device_s"] == 12.5 and s.frontier[-1]["device_s_total"] == spent + 12.5
    assert s.pending is None and s.iteration == 12
    again = learn.learn(SPEC, s, pend)  # the same iteration learnt twice (a resume): nothing counted twice
    assert not again.moved and len(s.history) == len(HISTORY) + 1 and s.usage["runs"] == 13


def test_a_refuted_run_or_one_judged_against_another_trunk_is_discarded():
    s = loop_state()
    trunk = s.trunk["exp_id"]
    lesson = learn.learn(SPEC, s, _pending(s, 12, proposal(remat="none"), _record(12, "refuted", -3.0, trunk)))
    assert (lesson.kept, lesson.status, s.trunk["exp_id"]) == (False, "refuted", trunk)
    stale = _record(13, "supported", 8.0, "some-older-trunk")
    assert not learn.learn(SPEC, s, _pending(s, 13, proposal(scan=False), stale)).kept
    assert learn.learn(SPEC, s, _pending(s, 14, proposal(scan=False), dict(stale, verdict="crash"))).status \
        == "inconclusive"


def test_chained_gains_multiply():
    assert learn.chained_gain(10.0, 10.0) == pytest.approx(21.0)
    assert learn.chained_gain(None, -50.0) == pytest.approx(-50.0)


# ----------------------------------------------------------------------------- retrospectives

def test_a_retrospective_is_due_after_a_few_iterations_without_a_move():
    s = loop_state(HISTORY[:1], retrospectives=[])
    assert retro.due(s) is None
    more = [entry(n, "memory", Change("knobs", knobs={"remat": "full"}), "refuted", -1.0) for n in range(2, 6)]
    s = loop_state(HISTORY[:1] + more, retrospectives=[])
    assert retro.due(s) == "4 iterations without a frontier move"


def test_two_retrospectives_without_a_move_are_a_double_plateau_unless_asked_for():
    s = loop_state(retrospectives=[])
    s.iteration = 4
    retro.record(s, "analyses/r1.md", "first")
    assert s.plateau_stop is None and s.retrospectives[-1]["frontier_moved"]  # moves before the first count
    s.frontier = s.frontier[:1]
    s.iteration = 8
    retro.record(s, "analyses/r2.md", "asked", manual=True)
    assert s.plateau_stop is None
    retro.record(s, "analyses/r3.md", "second")
    assert s.plateau_stop.startswith("double plateau: two retrospectives (analyses/r1.md, analyses/r3.md)")


def test_an_exhausted_proposer_is_a_plateau_only_right_after_a_retrospective():
    s = loop_state(retrospectives=[])
    assert not retro.exhausted(s) and s.plateau_stop is None
    retro.record(s, "analyses/r1.md", "nothing left")
    assert retro.exhausted(s) and s.plateau_stop.startswith("plateau: the proposer has nothing left")


# ----------------------------------------------------------------------------- the state file

def test_the_state_round_trips_and_names_every_key(tmp_path):
    from tools.project import Project

    paths = st.LoopPaths(Project(tmp_path), "cpu-loop")
    s = loop_state(calibration={"exp_id": "a", "pair_sd_pct": 0.4, "band_pct": 1.1}, proposer_failures=2)
    st.save(paths, s)
    doc = json.loads(paths.state.read_text())
    assert set(doc) == {f for f in LoopState.__dataclass_fields__}
    back = st.read(paths)
    assert back == s and back is not s


def test_an_old_state_is_read_with_defaults():
    old = copy.deepcopy(state())
    old["pending"] = {"iteration": 3, "phase": "running"}  # one iteration, as states before parallel loops held it
    del old["usage"]["device_s"]
    s = LoopState.from_dict(dict(old, some_future_key=1))
    assert s.pending == [{"iteration": 3, "phase": "running"}] and s.usage["device_s"] == 0.0
    assert s.proposer_failures == 0 and s.plateau_stop is None


def test_a_fresh_runs_pages_take_new_names_not_the_earlier_runs(tmp_path):
    """`loop start --fresh` numbers iterations and retrospectives from 1 again: its retrospective 1 and its
    hypothesis 001-<same statement> overwrote the earlier run's pages, which that run's experiments link to."""
    from tools.loop import page_names

    wiki = tmp_path / "wiki"
    (wiki / "analyses").mkdir(parents=True)
    assert page_names.next_retrospective(wiki, "small", 0) == 1
    (wiki / "analyses" / "small-retrospective-1.md").write_text("x")
    (wiki / "analyses" / "small-retrospective-2.md").write_text("x")
    (wiki / "analyses" / "smaller-retrospective-9.md").write_text("x")
    assert page_names.next_retrospective(wiki, "small", 0) == 3
    assert page_names.next_retrospective(wiki, "small", 4) == 5
    rel = "hypotheses/m/l/001-bf16.md"
    assert page_names.free(wiki, rel) == rel
    (wiki / "hypotheses/m/l").mkdir(parents=True)
    (wiki / rel).write_text("x")
    assert page_names.free(wiki, rel) == "hypotheses/m/l/001-bf16-r2.md"


def test_a_budget_written_as_yaml_text_still_counts_and_an_env_knob_of_0_is_exported(tmp_path):
    """A reviewer's: PyYAML reads `1e6` (no dot) and `'10'` as text, which loop files held and the stricter budget
    check refused; an env knob's value 0 was never exported (`0 in (None, "", False)` is true)."""
    import yaml

    from tools.loop.spec import load as load_spec

    path = tmp_path / "l.yml"
    path.write_text("model: m\nlane: l\nvariant: s/cpu\ncommand: python x.py\n"
                    "budget: {runs: '10', llm_tokens: 1e6, wall_s: 3e3}\n"
                    "knobs:\n  pre: {env: PREALLOC, values: [1, 0], category: memory}\n")
    assert yaml.safe_load(path.read_text())["budget"]["llm_tokens"] == "1e6"  # text, as YAML 1.1 reads it
    spec = load_spec(path)
    assert spec.budget == {"runs": 10.0, "llm_tokens": 1e6, "wall_s": 3000.0}
    assert spec.env_for({"pre": 0}) == {"PREALLOC": "0"} and spec.env_for({"pre": ""}) == {}
    from tools.errors import InputError

    for bad in ("nan", ".inf", "'nan'", "0", "-3"):  # a NaN budget never stops a loop
        path.write_text(path.read_text().split("budget:")[0] + f"budget: {{wall_s: {bad}}}\n")
        with pytest.raises(InputError, match="budget `wall_s` is a positive number"):
            load_spec(path)


def test_the_runs_a_fresh_start_replaced_keep_their_own_model_and_lane_and_odd_rows_are_skipped():
    """A reviewer's: the earlier run's observations were linked under the new loop file's model and lane (broken
    links after an edit), a hand-edited row that is no mapping crashed the fresh start, and a run that kept
    nothing named its baseline as its best."""
    from tools.loop import report

    old = LoopState("l", "llama-old", "cpu", "v", started="2026-12-01T00:00:00Z",
                    history=[{"exp_id": "e1"}, "junk"], retrospectives=[{"page": "analyses/r1.md"}, 5],
                    frontier=[{"exp_id": "e0", "gain_pct": 0.0}])
    (e,) = old.as_earlier()
    assert e["model"] == "llama-old" and e["observations"] == ["e1"] and e["retrospectives"] == ["analyses/r1.md"]
    assert e["best"] is None
    text = report._earlier(SPEC, {"earlier": [e, {"observations": 5}]}, "loops/l.md")
    assert "observations/llama-old/cpu/e1.md" in text and "best e0" not in text, text
