"""`tools query --llm`: the real anthropic SDK over real HTTP to a local Messages stub; every kept sentence cites
a passage that was given, uncited ones are dropped, the answer is filed as an analysis page, the key is never
written."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from tools import pages
from tools.cli import cli

from .conftest import page, write

sys.path.insert(0, str(Path(__file__).parents[1] / "loop"))

from messages_stub import MESSAGES, Stub, tool_use  # noqa: E402

KEY = "sk-test-query-never-written"


def _kb(kb):
    write(kb.wiki, "concepts/remat.md", page("Rematerialization", "concept",
          "# Rematerialization\n\nIntro text about memory.\n\n## Choosing a policy\n\n"
          "The remat policy dots_saveable keeps matmul outputs and recomputes the rest; on v5e it cut HBM by "
          "31 % for a 4 % slower step.\n"))
    write(kb.wiki, "sources/remat-paper.md", page("A remat paper", "source",
          "# A remat paper\n\n## Results\n\nSelective recomputation of attention keeps 96 % of the matmul "
          "throughput while saving activation memory.\n"))


def _ask(kb, stub, *extra):
    pytest.importorskip("anthropic")
    return CliRunner(env={"ANTHROPIC_API_KEY": KEY}).invoke(
        cli, ["--root", str(kb.root), "query", "which", "remat", "policy", "keeps", "matmul", "outputs", "--llm",
              "--base-url", stub.url, "--model", "claude-stub", *extra])


def test_answer_cites_every_sentence_and_is_filed(kb):
    _kb(kb)
    reply = {"sentences": [
        {"text": "The dots_saveable policy keeps matmul outputs and recomputes the rest.", "cites": ["S1"]},
        {"text": "It is the best policy on every chip.", "cites": ["S99"]},        # cites no given passage
        {"text": "Selective recomputation keeps 96 % of matmul throughput.", "cites": ["S2", "S2"]},
    ]}
    with Stub() as stub:
        stub.push(MESSAGES, tool_use(reply, name="cited_sentences", input_tokens=300, cache_write=900))
        r = _ask(kb, stub, "--json")
        assert r.exit_code == 0, r.output + repr(r.exception)
        (req,) = stub.bodies()
    out = json.loads(r.output)
    assert [s["cites"] for s in out["sentences"]] == [["S1"], ["S2"]]
    assert out["dropped"] == ["It is the best policy on every chip."]
    assert out["usage"] == {"input_tokens": 1200, "output_tokens": 300}
    # the passages went in a cached block, numbered, with their citations; the tool call was forced
    cached = [b for b in req["system"] if b.get("cache_control")]
    assert "[S1] (wiki/concepts/remat.md § Choosing a policy)" in cached[0]["text"]
    assert req["tool_choice"]["name"] == "cited_sentences"
    assert out["page"] == "wiki/analyses/query-which-remat-policy-keeps-matmul-outputs.md"
    meta, body = pages.split((kb.root / out["page"]).read_text())
    assert meta["type"] == "analysis" and meta["question"] == "which remat policy keeps matmul outputs"
    assert set(meta["sources"]) == {"concepts/remat.md", "sources/remat-paper.md"}
    assert meta["llm"]["model"] == "claude-stub"
    assert "best policy on every chip" not in body and "(../concepts/remat.md)" in body
    assert "1 sentence(s) of the model's reply cited no passage" in body
    assert not [p for p in kb.root.rglob("*") if p.is_file() and KEY.encode() in p.read_bytes()]
    # a citation is a link labelled [1], never a [[1]] lint reads as a wikilink no page matches
    assert "[\\[1\\]](../concepts/remat.md)" in body
    from tools import lint

    assert not [i for i in lint.run(kb).issues if i.path.endswith(out["page"].removeprefix("wiki/"))
                and i.code == "wikilink"]


def test_an_answer_that_cites_nothing_gets_one_repair_then_fails_clearly(kb):
    _kb(kb)
    uncited = {"sentences": [{"text": "Remat is good.", "cites": []}]}
    good = {"sentences": [{"text": "dots_saveable keeps matmul outputs.", "cites": ["S1"]}]}
    with Stub() as stub:
        stub.push(MESSAGES, tool_use(uncited, name="cited_sentences", n=1))
        stub.push(MESSAGES, tool_use(good, name="cited_sentences", n=2))
        r = _ask(kb, stub)
        assert r.exit_code == 0, r.output
        first, second = stub.bodies()
    back = second["messages"][-1]["content"][0]
    assert back["type"] == "tool_result" and back["is_error"] and "no sentence cited" in back["content"]
    assert "dots_saveable keeps matmul outputs. [S1]" in r.output
    with Stub() as stub:
        stub.push(MESSAGES, tool_use(uncited, name="cited_sentences", n=1))
        stub.push(MESSAGES, tool_use(uncited, name="cited_sentences", n=2))
        r = _ask(kb, stub)
    assert r.exit_code != 0 and "no usable cited sentences twice" in r.output


def test_no_passage_no_request(kb):
    _kb(kb)
    with Stub() as stub:
        r = CliRunner(env={"ANTHROPIC_API_KEY": KEY}).invoke(
            cli, ["--root", str(kb.root), "query", "zebra", "quagga", "--llm", "--base-url", stub.url])
        assert not stub.requests
    assert r.exit_code != 0 and "nothing to answer from" in r.output
