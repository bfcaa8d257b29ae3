"""LLMProposer over the real anthropic SDK and real HTTP to a stub Messages API on 127.0.0.1."""

from __future__ import annotations

import json

import pytest
from llm_helpers import GUIDANCE, KEY, Recorder, good, priors
from messages_stub import COUNT, MESSAGES, Stub, rate_limited, text_only, tool_use

from tools.llm import LLMError
from tools.loop.proposal import Proposal
from tools.loop.proposers import BudgetExhausted
from tools.loop.proposers import get as get_proposer
from tools.loop.proposers.llm import LLMProposer, MalformedProposal

pytest.importorskip("anthropic")


@pytest.fixture
def stub(monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    with Stub() as s:
        yield s


@pytest.fixture
def rec(tmp_path):
    return Recorder(tmp_path / "experiments" / "2026-12-02-llama-cpu-loop-004")


def proposer(stub: Stub, **opts) -> LLMProposer:
    return get_proposer("llm", {"base_url": stub.url, "max_retries": 2, **opts})


def key_absent(root) -> None:
    leaked = [p for p in root.rglob("*") if p.is_file() and KEY.encode() in p.read_bytes()]
    assert not leaked, leaked


def test_forced_tool_call_gives_a_proposal(stub, rec, tmp_path):
    stub.push(MESSAGES, tool_use(good(), input_tokens=400, cache_write=1500, cache_read=0, output_tokens=250))
    p = proposer(stub, price_in_per_mtok=5.0, price_out_per_mtok=25.0).propose(priors(), rec)
    assert isinstance(p, Proposal) and p.proposer == "llm" and p.category == "compiler"
    assert p.change.kind == "env" and p.change.env == {"XLA_FLAGS": "--xla_cpu_experimental_ynn_fusion_type=dot"}
    # usage: all input counted; cost = (400*5 + 1500*5*1.25 + 250*25) / 1e6
    assert p.usage["input_tokens"] == 1900 and p.usage["output_tokens"] == 250
    assert p.usage["cache_write_tokens"] == 1500 and p.usage["requests"] == 1
    assert p.usage["cost_usd"] == pytest.approx((400 * 5 + 1500 * 6.25 + 250 * 25) / 1e6)
    assert rec.names == ["prompt.md", "response.json"]
    saved = json.loads(rec.text("response.json"))
    assert saved["tool_input"]["statement"] == good()["statement"] and saved["response"]["id"] == "msg_01"
    assert stub.requests[0].headers["authorization"] == f"Bearer {KEY}"  # the key went out, only on the wire
    key_absent(tmp_path)


def test_request_body_carries_tool_choice_cache_guidance_and_refuted(stub, rec):
    stub.push(MESSAGES, tool_use(good()))
    proposer(stub).propose(priors(avoid_category="memory"), rec)
    body = stub.bodies()[0]
    assert body["tool_choice"] == {"type": "tool", "name": "propose", "disable_parallel_tool_use": True}
    (tool,) = body["tools"]
    assert tool["name"] == "propose" and tool["strict"] is True
    knobs = tool["input_schema"]["properties"]["change"]["properties"]["knobs"]
    assert set(knobs["properties"]) == {"compute_dtype", "scan", "remat", "shape"}
    assert knobs["additionalProperties"] is False
    cached = [b for b in body["system"] if b.get("cache_control") == {"type": "ephemeral"}]
    assert len(cached) == 2 and "cache_control" not in body["system"][0]
    context = "\n".join(b["text"] for b in cached)
    assert GUIDANCE in context
    refuted = context.split("## Refuted")[1].split("##")[0]
    assert "2026-12-01-llama-cpu-loop-003" in refuted and '{"remat": "full"}' in refuted
    assert '{"scan": true}' in refuted
    ask = body["messages"][0]["content"][0]["text"]
    assert "Do NOT propose a `memory` change" in ask
    assert rec.text("prompt.md").count(GUIDANCE) == 1


@pytest.mark.parametrize("bad, error", [
    ({k: v for k, v in good().items() if k != "falsification"}, "missing fields: falsification"),
    (good(change={"kind": "env", "env": [{"name": "XLA_FLAGS", "value": "--x"}], "knobs": {"remat": "none"}}),
     "one mechanism per run"),
])
def test_malformed_proposal_gets_one_repair_round_trip(stub, rec, bad, error):
    stub.push(MESSAGES, tool_use(bad, input_tokens=1000, output_tokens=100, n=1))
    stub.push(MESSAGES, tool_use(good(), input_tokens=100, cache_read=1000, output_tokens=120, n=2))
    p = proposer(stub).propose(priors(), rec)
    assert p.change.kind == "env" and p.usage["requests"] == 2
    assert p.usage["input_tokens"] == 2100 and p.usage["output_tokens"] == 220
    assert p.usage["cache_read_tokens"] == 1000  # the repair re-reads the cached priors
    assert p.usage["cost_usd"] == pytest.approx((1100 * 5 + 1000 * 0.5 + 220 * 25) / 1e6)
    second = stub.bodies()[1]["messages"]
    assert [m["role"] for m in second] == ["user", "assistant", "user"]
    assert second[1]["content"][-1] == {"type": "tool_use", "id": "toolu_01", "name": "propose", "input": bad}
    result = second[2]["content"][0]
    assert result["type"] == "tool_result" and result["tool_use_id"] == "toolu_01" and result["is_error"] is True
    assert error in result["content"]
    assert rec.names == ["prompt.md", "response.json", "prompt-2.md", "response-2.json"]
    assert error in rec.text("prompt-2.md")


def test_answer_without_tool_call_is_repaired_in_plain_text(stub, rec):
    stub.push(MESSAGES, text_only("Let me think about the profile first"))
    stub.push(MESSAGES, tool_use(good(), n=2))
    assert proposer(stub).propose(priors(), rec).category == "compiler"
    second = stub.bodies()[1]["messages"]
    assert second[1]["content"] == [{"type": "text", "text": "Let me think about the profile first"}]
    assert "no `propose` tool call (cut at max_tokens=2048)" in second[2]["content"][0]["text"]


def test_malformed_twice_is_a_clear_error(stub, rec):
    stub.push(MESSAGES, tool_use(good(category="vibes"), n=1))
    stub.push(MESSAGES, tool_use(good(change={"kind": "knobs", "knobs": {"warp_drive": True}}), n=2))
    with pytest.raises(MalformedProposal) as e:
        proposer(stub).propose(priors(), rec)
    msg = str(e.value)
    assert "twice" in msg and "category 'vibes'" in msg and "unknown knob 'warp_drive'" in msg
    assert e.value.usage["requests"] == 2 and len(stub.bodies()) == 2


def test_rate_limit_is_retried_by_the_sdk(stub, rec):
    body, status, headers = rate_limited(retry_after_ms=20)
    stub.push(MESSAGES, body, status, headers)
    stub.push(MESSAGES, tool_use(good()))
    p = proposer(stub).propose(priors(), rec)
    assert p.category == "compiler"
    assert len(stub.bodies()) == 2
    assert [r.headers["x-stainless-retry-count"] for r in stub.requests] == ["0", "1"]


def test_rate_limit_past_retries_is_an_llm_error(stub, rec):
    for _ in range(2):
        body, status, headers = rate_limited(retry_after_ms=10)
        stub.push(MESSAGES, body, status, headers)
    with pytest.raises(LLMError, match="HTTP 429"):
        proposer(stub, max_retries=1).propose(priors(), rec)
    assert len(stub.requests) == 2


@pytest.mark.parametrize("left, what", [({"llm_tokens": 3000}, "llm_tokens"), ({"cost_usd": 0.01}, "cost_usd")])
def test_exhausted_budget_raises_before_any_request(stub, rec, left, what):
    with pytest.raises(BudgetExhausted) as e:
        proposer(stub, max_tokens=2048).propose(priors(budget_left=left), rec)
    assert e.value.what == what and f"budget.{what}" in str(e.value)
    assert stub.requests == []


def test_count_tokens_asks_the_endpoint(stub, rec):
    stub.push(COUNT, {"input_tokens": 9000})
    with pytest.raises(BudgetExhausted, match="9000 input tokens"):
        proposer(stub, count_tokens=True).propose(priors(budget_left={"llm_tokens": 10000}), rec)
    assert [r.path for r in stub.requests] == [COUNT]
    assert stub.requests[0].body["tool_choice"]["name"] == "propose"


def test_no_budget_keys_means_no_budget_check(stub, rec):
    stub.push(MESSAGES, tool_use(good()))
    assert proposer(stub).propose(priors(budget_left={"runs": 3}), rec) is not None


def test_duplicate_gets_one_retry_saying_so(stub, rec):
    dup = good(change={"kind": "knobs", "knobs": {"remat": "full"}}, category="memory")
    other = good(change={"kind": "knobs", "knobs": {"remat": "dots_saveable"}}, category="memory")
    stub.push(MESSAGES, tool_use(dup, n=1)).push(MESSAGES, tool_use(other, n=2))
    p = proposer(stub).propose(priors(), rec)
    assert p.change.knobs == {"remat": "dots_saveable"} and p.usage["requests"] == 2
    feedback = stub.bodies()[1]["messages"][2]["content"][0]["content"]
    assert "duplicates 2026-12-01-llama-cpu-loop-003" in feedback and "refuted" in feedback


def test_duplicate_twice_is_returned_anyway(stub, rec):
    dup = good(change={"kind": "knobs", "knobs": {"scan": True}}, category="compiler")
    stub.push(MESSAGES, tool_use(dup, n=1)).push(MESSAGES, tool_use(dup, n=2))
    p = proposer(stub).propose(priors(), rec)
    assert p.change.knobs == {"scan": True} and "duplicate of 2026-12-01-llama-cpu-loop-002" in p.notes
    assert len(stub.bodies()) == 2


def test_asked_again_after_a_refusal(stub, rec):
    """The engine refuses a proposal and asks again in the same iteration: the refusal is in the ask, and the
    second prompt and response are saved beside the first."""
    stub.push(MESSAGES, tool_use(good(), n=1)).push(MESSAGES, tool_use(good(category="other"), n=2))
    prop, pri = proposer(stub), priors()
    prop.propose(pri, rec)
    pri.refusals = [{"change": "XLA_FLAGS='--xla_cpu_experimental_ynn_fusion_type=dot'", "category": "compiler",
                     "why": "same run as 2026-12-01-llama-cpu-loop-001"}]
    assert prop.propose(pri, rec).category == "other"
    assert rec.names == ["prompt.md", "response.json", "refused-1.prompt.md", "refused-1.response.json"]
    ask = stub.bodies()[1]["messages"][0]["content"][0]["text"]
    assert "Already refused in this iteration" in ask and "same run as 2026-12-01-llama-cpu-loop-001" in ask


def test_missing_key_is_a_clear_error(monkeypatch, rec):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("MY_KEY", raising=False)
    with pytest.raises(LLMError, match="set MY_KEY"):
        LLMProposer(api_key_env="MY_KEY", base_url="http://127.0.0.1:9").propose(priors(), rec)


def test_custom_key_variable(monkeypatch, rec, tmp_path):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.setenv("TEAM_CLAUDE_KEY", KEY)
    with Stub() as s:
        s.push(MESSAGES, tool_use(good()))
        LLMProposer(api_key_env="TEAM_CLAUDE_KEY", base_url=s.url).propose(priors(), rec)
        assert s.requests[0].headers["authorization"] == f"Bearer {KEY}"
    key_absent(tmp_path)


def test_refused_request_names_the_status(stub, rec):
    stub.push(MESSAGES, {"type": "error", "error": {"type": "invalid_request_error", "message": "bad schema"}}, 400)
    with pytest.raises(LLMError, match="HTTP 400.*bad schema"):
        proposer(stub).propose(priors(), rec)


def test_an_endpoint_that_echoes_the_key_leaves_it_out_of_the_error(stub, rec, tmp_path, monkeypatch):
    gateway_key = "gw0123456789abcdefgh"  # a gateway's key has no provider's shape: only its value can find it
    monkeypatch.setenv("ANTHROPIC_API_KEY", gateway_key)
    stub.push(MESSAGES, {"type": "error", "error": {"type": "authentication_error",
                                                    "message": f"invalid x-api-key: Bearer {gateway_key}"}}, 401)
    with pytest.raises(LLMError) as e:
        proposer(stub, max_retries=0).propose(priors(), rec)
    assert "HTTP 401" in str(e.value) and "[redacted]" in str(e.value) and gateway_key not in str(e.value)
    leaked = [p for p in tmp_path.rglob("*") if p.is_file() and gateway_key.encode() in p.read_bytes()]
    assert not leaked, leaked


@pytest.mark.parametrize("body", [
    b'{"id": "msg_1", "type": "mess',                                   # cut short
    b"<html>gateway error</html>",                                      # not JSON at all
    {"id": "m", "type": "message", "role": "assistant", "model": "x", "content": None, "stop_reason": "end_turn",
     "usage": {"input_tokens": 1, "output_tokens": 1}},                 # no content
    {"id": "m", "type": "message", "role": "assistant", "model": "x", "stop_reason": "tool_use",
     "content": [{"type": "tool_use", "id": "t", "name": "propose", "input": {}}]},  # no usage
])
def test_a_malformed_answer_is_an_llm_error_not_a_traceback(stub, rec, body):
    stub.push(MESSAGES, body)
    with pytest.raises(LLMError, match="malformed answer"):
        proposer(stub, max_retries=0).propose(priors(), rec)


@pytest.mark.parametrize("bad", [{"expected_gain_pct": "nan"}, {"expected_gain_pct": "1e999"},
                                 {"change": {"kind": "env", "env": "XLA_FLAGS=--x"}},
                                 {"change": {"kind": "knobs", "knobs": ["scan"]}}])
def test_a_nan_gain_or_a_change_of_the_wrong_type_is_sent_back_for_repair(stub, rec, bad):
    """`expected_gain_pct: "nan"` was taken (a page of `priority: .nan`, `--json` not JSON); `env: "A=1"` was a
    traceback out of the proposer that ended the loop."""
    stub.push(MESSAGES, tool_use(good(**bad)))
    stub.push(MESSAGES, tool_use(good(), n=2))
    p = proposer(stub).propose(priors(), rec)
    assert p.expected_gain_pct == good()["expected_gain_pct"] and len(stub.bodies()) == 2
    assert stub.bodies()[1]["messages"][-1]["content"][0]["is_error"] is True

