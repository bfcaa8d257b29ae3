"""The issue's walk-through, as a harness would do it: two real runs of the reference model on CPU with
--profile, then the MCP client finds the slowest op of the second run, its source line, the diff against the
first run, whether the change reached the compiler, files a hypothesis and reads it back from the wiki."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest

from .conftest import tools

pytestmark = pytest.mark.slow  # two real profiled runs of the reference model (about a minute)

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def profiled(profiled_llama):
    """The session's profiled pair of real runs (tests/conftest.py): the baseline and `--remat full`."""
    pytest.importorskip("mcp")
    return profiled_llama


def test_slowest_op_source_diff_and_hypothesis_over_mcp(profiled):
    from mcp import Client, StdioServerParameters

    root, (first, second) = profiled
    params = StdioServerParameters(command=sys.executable, args=["-m", "tools", "--root", str(root), "mcp",
                                                                  "--allow-write"])

    async def walk(c):
        names = {t.name for t in (await c.list_tools()).tools}
        assert {"profile_overview", "profile_op_source", "profile_compare", "profile_hlo_compare"} <= names
        ov = (await c.call_tool("profile_overview", {"exp": second, "top": 5})).structured_content
        slowest = ov["top_ops"][0]
        src = (await c.call_tool("profile_op_source", {"exp": second, "op": slowest["op"]})).structured_content
        nb = await c.call_tool("profile_hlo_op", {"exp": second, "op": slowest["op"]})
        line = None
        if src["rows"][0]["source"]:
            line = (await c.call_tool("profile_line_ops", {"exp": second, "location": src["rows"][0]["source"]}))
        diff = (await c.call_tool("profile_compare", {"a": first, "b": second})).structured_content
        hlo = (await c.call_tool("profile_hlo_compare", {"a": first, "b": second})).structured_content
        filed = (await c.call_tool("hypotheses_file", {
            "model": "llama", "lane": "cpu-loop", "loop": "llama-cpu",
            "statement": f"fusing around {slowest['op']} removes its share of the step",
            "mechanism": "the op is memory-bound", "predicted_signal": "its self time drops by half",
            "falsification": "no change in tokens/s", "change": {"kind": "env", "env": {"XLA_FLAGS": "--xla_cpu_x"}},
            "category": "compiler"})).structured_content
        page = await c.read_resource(f"wiki://{filed['path']}")
        bad = await c.call_tool("profile_overview", {"exp": "../../etc"})
        return ov, slowest, src, nb, line, diff, hlo, filed, page.contents[0].text, bad

    ov, slowest, src, nb, line, diff, hlo, filed, page, bad = asyncio.run(_run(Client, params, walk))
    assert ov["n_steps"] >= 1 and slowest["self_us"] == max(o["self_us"] for o in ov["top_ops"])
    assert src["rows"][0]["op"] == slowest["op"]
    assert not nb.is_error and nb.structured_content["opcode"]
    if line is not None:
        assert not line.is_error and any(o["op"] == slowest["op"] for o in line.structured_content["ops"])
        # a bare line number is no location: `9` was answered as `llama_train.py:199`
        from tools.agent.registry import AgentError, call
        from tools.project import Project

        last = src["rows"][0]["source"][-1]
        with pytest.raises(AgentError, match=f"no op time is credited to '{last}'"):
            call(Project(root), "profile.line_ops", {"exp": second, "location": last})
        # the longer forms the tools print for it (a crash page's `experiments/...`, hlo-op's absolute path)
        where = src["rows"][0]["source"]
        for longer in (f"experiments/{where}", f"/any/checkout/experiments/{where}"):
            got = call(Project(root), "profile.line_ops", {"exp": second, "location": longer})
            assert got["location"] == where, (longer, got["location"])
    d = diff["diff"]
    assert d["lines"] and d["ops"] and d["categories"] and d["matched"]  # deltas by line, op and category
    assert all(x is not None for x in d["step_ms"])
    assert hlo["diff"]["identical"] is False  # full remat reached the compiler
    assert "fusing around" in page and filed["status"] == "open"
    assert bad.is_error
    # the CLI gives the same overview
    cli = tools(root, "profile", "overview", f"exp={second}", "top=5", "--json")
    assert json.loads(cli.stdout) == ov


def test_xprof_views_say_when_the_backend_has_no_data(profiled):
    """xprof's converters on a real CPU trace: HLO stats need a device plane a CPU run does not have; every tool
    answers (data, or the reason), and raw/ is left as it was (xprof runs on a copy)."""
    pytest.importorskip("xprof")
    from tools.agent.registry import call
    from tools.project import Project

    root, (_, second) = profiled
    before = sorted((p, p.stat().st_mtime_ns) for p in (root / "raw").rglob("*") if p.is_file())
    hlo = call(Project(root), "profile.xprof", {"exp": second, "tool": "hlo_stats"})
    assert hlo["has_data"] is False and "no data on this backend" in hlo["note"] and hlo["data"] is None
    for tool in ("overview_page", "op_profile", "roofline_model", "memory_profile"):
        r = call(Project(root), "profile.xprof", {"exp": second, "tool": tool})
        assert r["tool"] == tool and (r["has_data"] or "no data on this backend" in r["note"]
                                      or "failed" in r["note"]), r["note"]
    assert sorted((p, p.stat().st_mtime_ns) for p in (root / "raw").rglob("*") if p.is_file()) == before
    cli = tools(root, "profile", "xprof", f"exp={second}", "tool=hlo_stats", "--json")
    assert json.loads(cli.stdout) == hlo


async def _run(Client, params, body):
    async with Client(params) as c:
        return await body(c)
