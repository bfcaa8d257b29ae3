"""A crashed patch is repaired at most once: the LLM proposer's prompt shows the crash with its linked frames, its
proposal names the crash it repairs (`repair_of`), and the loop's admission refuses a second repair or the repair
of a repair that crashed. The real anthropic SDK over real HTTP to a stub Messages API on 127.0.0.1."""

from __future__ import annotations

import dataclasses

import pytest
from llm_helpers import KEY, Recorder, good, priors
from messages_stub import MESSAGES, Stub, tool_use

from tools.loop.admission import repair_refusal
from tools.loop.priors import Attempt
from tools.loop.prompt import tool_input_to_dict
from tools.loop.proposal import Change, Proposal
from tools.loop.proposers import get as get_proposer

pytest.importorskip("anthropic")

PATCH = ("--- a/llama_train.py\n+++ b/llama_train.py\n@@ -1,3 +1,3 @@\n def rope(x):\n"
         "-    T = x.shape[1]\n+    T = x.shape[2]\n     return x\n")
CRASH = {"kind": "shape", "signature": "shape-0123456789", "message": "TypeError: reshape of (4, 32, 63) to (4, 32, 3, 21)",
         "frames": [{"role": "model", "rel": "llama_train.py", "line": 141, "func": "rope",
                     "code": "x1, x2 = jnp.split(x, 2, axis=-1)"},
                    {"role": "framework", "package": "jax", "rel": "_src/numpy/lax_numpy.py", "line": 3020,
                     "func": "split"}]}


def crashed(exp_id="2026-12-03-v005-rope", repair_of=""):
    c = Change("patch", patch=PATCH)
    return Attempt(exp_id, "kernel", dataclasses.asdict(c), c.fingerprint(), "crash", crash=dict(CRASH),
                   repair_of=repair_of)


def repair(of: str) -> Proposal:
    d = good(change={"kind": "patch", "patch": PATCH.replace("shape[2]", "shape[1] # fixed")}, category="kernel",
             repair_of=of)
    return Proposal.from_dict(tool_input_to_dict(d))


def history(*attempts: Attempt) -> list[dict]:
    return [{"exp_id": a.exp_id, "verdict": a.verdict, "change": a.change, "repair_of": a.repair_of or None}
            for a in attempts]


def test_the_prompt_shows_a_crashed_patch_with_its_frames_and_the_proposal_names_it(monkeypatch, tmp_path):
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    pri = priors()
    pri.attempts.append(crashed())
    with Stub() as stub:
        fixed = PATCH.replace("shape[2]", "shape[1]  # the sequence axis")
        stub.push(MESSAGES, tool_use(good(change={"kind": "patch", "patch": fixed}, category="kernel",
                                          repair_of="2026-12-03-v005-rope")))
        p = get_proposer("llm", {"base_url": stub.url, "max_retries": 0}).propose(pri, Recorder(tmp_path / "r"))
        prompt = str(stub.bodies()[0])
    assert "Crashed patches you may repair once" in prompt
    assert "llama_train.py:141" in prompt and "rope" in prompt and "jax/_src/numpy/lax_numpy.py:3020" in prompt
    assert "what to try, from its figures and knobs" in prompt and "tiles them at `llama_train.py:141 rope`" in prompt
    assert p.repair_of == "2026-12-03-v005-rope"
    tool = [t for t in stub.bodies()[0]["tools"]][0]
    assert "repair_of" in tool["input_schema"]["properties"]


def test_a_crashed_patch_is_repaired_once_and_a_crashed_repair_is_not_repaired():
    first = crashed()
    assert repair_refusal(history(first), repair(first.exp_id)) is None
    fixed = crashed("2026-12-03-v006-rope-fixed", repair_of=first.exp_id)
    fixed.verdict = "refuted"
    assert "repaired once already" in repair_refusal(history(first, fixed), repair(first.exp_id))
    again = crashed("2026-12-03-v006-rope-fixed", repair_of=first.exp_id)  # the repair crashed too
    assert "retried at most once" in repair_refusal(history(first, again), repair(again.exp_id))
    assert "names no crashed patch" in repair_refusal(history(first), repair("2026-12-03-v001-baseline"))
    knob = Proposal.from_dict(tool_input_to_dict(good(repair_of=first.exp_id)))
    assert "only a code patch" in repair_refusal(history(first), knob)


def test_a_repaired_crash_leaves_the_prompt():
    from tools.loop.prompt import repairable

    pri = priors()
    first = crashed()
    pri.attempts += [first, crashed("2026-12-03-v006-rope-fixed", repair_of=first.exp_id)]
    assert repairable(pri) == []
