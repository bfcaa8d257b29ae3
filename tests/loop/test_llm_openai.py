"""The OpenAI-compatible adapter over the real openai SDK and real HTTP to a stub /v1/chat/completions."""

from __future__ import annotations

import json

import pytest
from llm_helpers import GUIDANCE, KEY, Recorder, good, priors
from messages_stub import CHAT, Stub, chat_tool_call

from tools.loop.proposers.llm import LLMProposer

pytest.importorskip("openai")


@pytest.fixture
def stub(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    with Stub() as s:
        yield s


def proposer(stub: Stub, **opts) -> LLMProposer:
    return LLMProposer(provider="openai", model="qwen3-32b", base_url=stub.url + "/v1", price_in_per_mtok=1.0,
                       price_out_per_mtok=2.0, **opts)


def test_tool_call_gives_a_proposal(stub, tmp_path):
    stub.push(CHAT, chat_tool_call(good(), prompt_tokens=1000, completion_tokens=200, cached=600))
    rec = Recorder(tmp_path / "exp")
    p = proposer(stub).propose(priors(), rec)
    assert p.change.env == {"XLA_FLAGS": "--xla_cpu_experimental_ynn_fusion_type=dot"} and p.proposer == "llm"
    assert p.usage["input_tokens"] == 1000 and p.usage["cache_read_tokens"] == 600
    assert p.usage["cost_usd"] == pytest.approx((400 * 1.0 + 600 * 0.1 + 200 * 2.0) / 1e6)
    (req,) = stub.requests
    assert req.path == CHAT and req.headers["authorization"] == f"Bearer {KEY}"
    body = req.body
    assert body["model"] == "qwen3-32b" and body["max_tokens"] == 2048
    assert body["tool_choice"] == {"type": "function", "function": {"name": "propose"}}
    assert body["parallel_tool_calls"] is False
    assert body["tools"][0]["function"]["name"] == "propose"
    assert body["tools"][0]["function"]["parameters"]["properties"]["change"]["properties"]["env"]["type"] == "array"
    system = body["messages"][0]
    assert system["role"] == "system" and GUIDANCE in system["content"] and "## Refuted" in system["content"]
    assert rec.names == ["prompt.md", "response.json"]
    assert not [f for f in tmp_path.rglob("*") if f.is_file() and KEY.encode() in f.read_bytes()]


def test_bad_arguments_get_a_repair_round_trip_as_a_tool_message(stub, tmp_path):
    stub.push(CHAT, chat_tool_call('{"statement": "oops"', n=1))  # not JSON: cut off
    stub.push(CHAT, chat_tool_call(good(), n=2))
    rec = Recorder(tmp_path / "exp")
    p = proposer(stub, max_tokens=512, max_tokens_field="max_completion_tokens").propose(priors(), rec)
    assert p.category == "compiler" and p.usage["requests"] == 2
    second = stub.bodies(CHAT)[1]
    assert second["max_completion_tokens"] == 512 and "max_tokens" not in second
    roles = [m["role"] for m in second["messages"]]
    assert roles == ["system", "user", "assistant", "tool"]
    assert second["messages"][2]["tool_calls"][0]["function"]["arguments"] == '{"statement": "oops"'
    tool_msg = second["messages"][3]
    assert tool_msg["tool_call_id"] == "call_1" and "not a JSON object" in tool_msg["content"]
    assert json.loads(rec.text("response-2.json"))["tool_input"]["category"] == "compiler"
