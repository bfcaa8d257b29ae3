"""The prompt is built by code from the priors (deterministic), and the tool schema suits strict endpoints."""

from __future__ import annotations

import subprocess
import sys

import pytest
from llm_helpers import GUIDANCE, LOOP, good, priors

from tools.loop.prompt import render, tool_input_to_dict, tool_schema
from tools.loop.proposal import Proposal, ProposalError


def test_render_is_deterministic_and_holds_the_priors():
    a, b = render(priors(avoid_category="compiler")), render(priors(avoid_category="compiler"))
    assert a == b and a.markdown() == b.markdown()
    assert GUIDANCE in a.stable and "`remat` (memory; flag --remat)" in a.stable
    assert "splash_attention" in a.stable and "Rematerialization" in a.stable
    refuted, tried = a.state.split("## Already tried")
    assert "fingerprint 10bb4877a32b824d" in refuted and "fingerprint c5c2af9802b7e3b2" in refuted
    assert "2026-12-01-llama-cpu-loop-001" in tried and "loop-003" not in tried  # refuted ones listed once
    assert "Do NOT propose a `compiler` change" in a.ask and "Do NOT" not in render(priors()).ask
    assert "Precision paid off" in a.state and "dot.211" in a.state


def test_stable_block_does_not_move_with_the_loop_state():
    """The first cache breakpoint stays a hit across iterations: results and budgets live in later blocks."""
    p1, p2 = priors(), priors(budget_left={"llm_tokens": 10})
    p2.attempts, p2.refuted, p2.retrospective = p2.attempts[:1], [], "new"
    assert render(p1).stable == render(p2).stable
    assert render(p1).state != render(p2).state and render(p1).ask != render(p2).ask


def test_no_code_surface_drops_patches():
    loop = {k: v for k, v in LOOP.items() if k != "code"}
    p = priors(loop=loop)
    change = tool_schema(p.spec)["properties"]["change"]
    assert change["properties"]["kind"]["enum"] == ["knobs", "env"] and "patch" not in change["properties"]
    assert "no code surface" in render(p).ask


def _objects(schema, path="$"):
    if isinstance(schema, dict):
        if schema.get("type") == "object":
            yield path, schema
        for k, v in schema.items():
            yield from _objects(v, f"{path}.{k}")
    elif isinstance(schema, list):
        for i, v in enumerate(schema):
            yield from _objects(v, f"{path}[{i}]")


def test_tool_schema_has_no_free_form_objects():
    """Strict tool use has no free-form objects: every object lists its properties and forbids others."""
    anthropic = pytest.importorskip("anthropic")
    schema = tool_schema(priors().spec)
    for path, obj in _objects(schema):
        assert obj.get("additionalProperties") is False, path
        assert obj.get("properties"), path
    strict = anthropic.transform_schema(schema)
    knobs = strict["properties"]["change"]["properties"]["knobs"]["properties"]
    assert set(knobs) == set(LOOP["knobs"]) and knobs["scan"]["enum"] == [False, True]


def test_tool_input_maps_back_to_a_proposal():
    d = tool_input_to_dict(good())
    assert Proposal.from_dict(d).change.env == {"XLA_FLAGS": "--xla_cpu_experimental_ynn_fusion_type=dot"}
    shape = good(change={"kind": "knobs", "knobs": {"shape": {"batch": 32, "seq_len": 64}}}, category="shape")
    assert Proposal.from_dict(tool_input_to_dict(shape)).change.knobs == {"shape": {"batch": 32, "seq_len": 64}}
    with pytest.raises(ProposalError, match="name, value"):
        tool_input_to_dict(good(change={"kind": "env", "env": [{"XLA_FLAGS": "--x"}]}))


def test_importing_the_proposer_leaves_the_sdks_out():
    code = ("import sys, tools.loop.proposers.llm, tools.llm, tools.loop.prompt; "
            "print(sorted(m for m in ('anthropic', 'openai', 'httpx2') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_screened_moves_reach_the_prompt_ranked_with_what_ruled_each_out():
    p = priors()
    assert "Screened moves" not in render(p).state
    p.screens = {
        '{"remat": "dots"}': {"change": {"kind": "knobs", "knobs": {"remat": "dots"}}, "gain_pct": -9.5,
                              "interval_pct": [-12.0, -7.0], "losses": "ok", "outcome": "slower",
                              "why": "the screen before iteration 3: slower than the trunk"},
        '{"batch": 32}': {"change": {"kind": "knobs", "knobs": {"batch": 32}}, "gain_pct": 6.25,
                          "interval_pct": [1.0, 11.5], "losses": "unchecked", "outcome": "confirm", "why": ""}}
    state = render(p).state
    lines = [ln for ln in state.split("## Screened moves")[1].splitlines() if ln.startswith("- {")]
    assert lines[0].startswith('- {"batch": 32}: +6.2 % [+1.0, +11.5], losses unchecked, to confirm'), lines
    assert lines[1].endswith("ruled out: the screen before iteration 3: slower than the trunk"), lines
