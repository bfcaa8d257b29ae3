"""A whole loop with the `llm` proposer: the real anthropic SDK over real HTTP to a stub Messages API."""

from __future__ import annotations

import json

import pytest
from llm_helpers import KEY
from loop_helpers import make_kb
from messages_stub import MESSAGES, Stub, rate_limited, tool_use

from tools.loop import state as st
from tools.loop.engine import start
from tools.project import Project

pytest.importorskip("anthropic")


def proposal(change: dict, category: str, statement: str) -> dict:
    return {"statement": statement, "mechanism": "m", "predicted_signal": "tokens/s up", "falsification": "no gain",
            "change": change, "category": category, "expected_gain_pct": 10, "confidence": 0.5, "effort": 1}


BF16 = proposal({"kind": "knobs", "knobs": {"dtype": "bf16"}}, "precision", "bf16 is faster")
FAST = proposal({"kind": "env", "env": [{"name": "FAKE_FAST", "value": "1"}]}, "compiler", "the env flag is faster")
BROKEN = proposal({"kind": "knobs", "knobs": {"warp": 9}}, "precision", "an unknown knob")


@pytest.fixture
def stub(monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    with Stub() as s:
        yield s


@pytest.mark.slow
def test_llm_loop_files_prompts_counts_tokens_and_survives_bad_replies(tmp_path, stub):
    root = tmp_path / "kb"
    make_kb(root, proposer={"name": "llm", "base_url": stub.url, "max_retries": 2},
            budget={"runs": 2, "llm_tokens": 100000})
    stub.push(MESSAGES, tool_use(BF16, input_tokens=1000, output_tokens=200, n=1))
    stub.push(MESSAGES, tool_use(BROKEN, n=2)).push(MESSAGES, tool_use(BROKEN, n=3))  # unusable twice
    body, status, headers = rate_limited()
    stub.push(MESSAGES, body, status, headers)                                         # then a 429, retried
    stub.push(MESSAGES, tool_use(FAST, input_tokens=1000, output_tokens=200, n=4))
    s = start(Project(root), "fake-loop")
    assert s["stop_reason"].startswith("budget: runs 2 of 2")
    assert [h["describe"] for h in s["history"]] == ["dtype=bf16", "FAKE_FAST='1'"]
    assert all(h["proposer"] == "llm" for h in s["history"])
    assert s["history"][0]["verdict"] == "supported" and s["history"][0]["kept"]
    assert s["usage"]["llm_tokens"] >= 2400  # both good replies and the two unusable ones are charged
    folder = st.LoopPaths(Project(root), "fake-loop").folder / "iterations"
    assert (folder / "001" / "prompt.md").is_file() and (folder / "001" / "response.json").is_file()
    assert list((folder / "002").glob("proposer-error-1.txt"))
    assert len(stub.bodies()) == 5
    # the key went out on the wire only
    leaked = [p for p in root.rglob("*") if p.is_file() and KEY.encode() in p.read_bytes()]
    assert leaked == []


def test_exhausted_token_budget_stops_the_loop_without_a_request(tmp_path, stub):
    root = tmp_path / "kb"
    make_kb(root, proposer={"name": "llm", "base_url": stub.url}, budget={"runs": 5, "llm_tokens": 50})
    s = start(Project(root), "fake-loop")
    assert s["stop_reason"].startswith("budget: the next proposal would exceed llm_tokens")
    assert s["history"] == [] and stub.requests == []


def test_exhausted_cost_budget_stops_the_loop(tmp_path, stub):
    root = tmp_path / "kb"
    make_kb(root, proposer={"name": "llm", "base_url": stub.url}, budget={"runs": 5, "cost_usd": 0.001})
    s = start(Project(root), "fake-loop")
    assert s["stop_reason"].startswith("budget: the next proposal would exceed cost_usd")
    assert stub.requests == []


def test_a_proposer_that_cannot_work_is_said_before_anything_runs_and_an_error_stop_exits_1(tmp_path, stub,
                                                                                              monkeypatch):
    """No API key, or a misspelt option: the baseline (and a calibration) ran first, the proposer then failed three
    times, and `tools loop start` exited 0 with "stopped: error: ..."."""
    from loop_helpers import lane, tools

    root = tmp_path / "kb"
    make_kb(root, proposer={"name": "llm", "base_url": stub.url, "modle": "x"}, budget={"runs": 2})
    out = tools(root, "loop", "start", "fake-loop", "-q", code=1)
    assert "fake-loop.yml" in out and "modle" in out and lane(root) == [] and stub.requests == []
    make_kb(root, proposer={"name": "llm", "base_url": stub.url}, budget={"runs": 2})
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    out = tools(root, "loop", "start", "fake-loop", "-q", code=1)
    assert "ANTHROPIC_API_KEY" in out and lane(root) == [] and stub.requests == []
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    for n in range(3):  # three unusable replies in a row: the loop stops on an error, and says so by its exit code
        stub.push(MESSAGES, tool_use(BROKEN, n=n + 1)).push(MESSAGES, tool_use(BROKEN, n=n + 10))
        stub.push(MESSAGES, tool_use(BROKEN, n=n + 20))
    out = tools(root, "loop", "start", "fake-loop", "-q", code=1)
    assert "error: the proposer failed" in out


def test_every_response_of_an_iteration_is_kept_when_the_proposer_is_asked_again(tmp_path, stub):
    """A proposer that failed (unusable replies) is asked again in the same iteration: its second ask wrote
    prompt.md and response.json over the first's, so only the last attempt's files were left."""
    root = tmp_path / "kb"
    make_kb(root, proposer={"name": "llm", "base_url": stub.url, "max_retries": 0}, budget={"runs": 1})
    for n in range(4):  # two failed asks of two unusable replies each, then a good one
        stub.push(MESSAGES, tool_use(BROKEN, n=n + 1))
    stub.push(MESSAGES, tool_use(BF16, n=5))
    s = start(Project(root), "fake-loop")
    assert [h["describe"] for h in s["history"]] == ["dtype=bf16"], s["stop_reason"]
    folder = st.LoopPaths(Project(root), "fake-loop").folder / "iterations" / "001"
    saved = sorted(p.name for p in folder.iterdir() if p.name.startswith(("response", "refused")) and "response"
                   in p.name)
    assert len(saved) == len(stub.bodies()) == 5, saved
    assert len([p for p in folder.iterdir() if "prompt" in p.name]) >= 2


@pytest.mark.slow
def test_an_overloaded_or_trickling_endpoint_is_waited_out_and_the_loop_runs_to_its_budget(tmp_path, stub):
    """Seconds of 529s ended the loop with 0 runs ("the proposer failed 3 times in a row"), and an endpoint that
    trickled its answer a piece a second held it 44 s past `timeout_s: 3` (the SDK's timeout bounds reads)."""
    from messages_stub import TRICKLE, overloaded

    root = tmp_path / "kb"
    make_kb(root, proposer={"name": "llm", "base_url": stub.url, "max_retries": 0, "timeout_s": 1,
                            "unavailable_wait_s": 0.05}, budget={"runs": 2})
    for _ in range(5):
        body, status, headers = overloaded()
        stub.push(MESSAGES, body, status, headers)
    stub.push(MESSAGES, tool_use(BF16, n=1))
    # 6 s of trickle, each piece well inside the SDK's 1 s read timeout: only the whole-call deadline can end it
    stub.push(MESSAGES, tool_use(FAST, n=2), headers={TRICKLE: "0.3"})
    stub.push(MESSAGES, tool_use(FAST, n=3))
    s = start(Project(root), "fake-loop")
    assert s["stop_reason"].startswith("budget: runs 2 of 2"), s["stop_reason"]
    assert [h["describe"] for h in s["history"]] == ["dtype=bf16", "FAKE_FAST='1'"]
    folder = st.LoopPaths(Project(root), "fake-loop").folder / "iterations"
    waits = sorted(p.name for p in folder.rglob("proposer-unavailable-*.txt"))
    assert len(waits) == 6 and not list(folder.rglob("proposer-error-*.txt")), waits
    assert any("no whole answer within 1 s" in p.read_text() for p in folder.rglob("proposer-unavailable-*.txt"))
    assert s["proposer_waits"] == 0 and len(stub.bodies()) == 8


def test_a_huge_answer_is_sent_back_cut_and_saved_cut(tmp_path, stub):
    """An 8 MB statement went back whole in the repair request (and a token budget of 1,000,000 stopped the loop
    as exhausted after 1,200 spent); a 40 MB text block was saved twice, 84 MB an iteration."""
    root = tmp_path / "kb"
    make_kb(root, proposer={"name": "llm", "base_url": stub.url, "max_retries": 0},
            budget={"runs": 1, "llm_tokens": 1_000_000})
    stub.push(MESSAGES, tool_use(dict(BF16, statement="s" * 8_000_000), n=1))
    stub.push(MESSAGES, tool_use(BF16, n=2, text="t" * 3_000_000))
    s = start(Project(root), "fake-loop")
    assert s["stop_reason"].startswith("budget: runs 1 of 1") and len(s["history"]) == 1, s["stop_reason"]
    repair = stub.bodies()[1]
    assert len(json.dumps(repair)) < 100_000 and "characters cut" in json.dumps(repair)
    saved = st.LoopPaths(Project(root), "fake-loop").folder / "iterations" / "001"
    sizes = {p.name: p.stat().st_size for p in saved.glob("response*.json")}
    assert sizes and max(sizes.values()) < 1_000_000, sizes
