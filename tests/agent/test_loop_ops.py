"""Loops through the MCP SDK's client: status and the latest retrospective read-only; start and resume offered only
with --allow-run, each launching a detached `tools loop` driver that outlives the call; stop as a write."""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

import pytest

from tools.project import Project

sys.path.insert(0, str(Path(__file__).parents[1] / "loop"))

from loop_helpers import make_kb  # noqa: E402


async def _session(server, body):
    from mcp import Client

    async with Client(server) as c:
        return await body(c)


def _wait_idle(c, name: str, timeout: float = 90.0):
    async def go():
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            r = await c.call_tool("loop_status", {"name": name})
            if not r.is_error and not r.structured_content["driver_running"]:
                return r.structured_content
            await asyncio.sleep(0.2)
        raise AssertionError(f"loop {name} still running after {timeout} s")
    return go()


def test_loop_start_status_resume_and_retrospective_over_mcp(tmp_path):
    pytest.importorskip("mcp")
    from tools.agent.server import build

    root = tmp_path / "kb"
    make_kb(root, budget={"runs": 3})
    (root / "wiki").mkdir(exist_ok=True)

    async def read_only(c):
        names = {t.name for t in (await c.list_tools()).tools}
        assert {"loop_status", "loop_retrospective"} <= names
        assert not names & {"loop_start", "loop_resume", "loop_stop"}  # no runs, no writes by default
        r = await c.call_tool("loop_status", {"name": "fake-loop"})
        assert r.is_error and "has not started" in r.content[0].text
        r = await c.call_tool("loop_status", {"name": "../etc"})
        assert r.is_error and "letters, digits" in r.content[0].text

    asyncio.run(_session(build(Project(root)), read_only))

    async def runs(c):
        names = {t.name for t in (await c.list_tools()).tools}
        assert {"loop_start", "loop_resume"} <= names and "loop_stop" not in names  # runs without writes
        r = await c.call_tool("loop_start", {"name": "no-such-loop"})
        assert r.is_error and "no loop file loops/no-such-loop.yml" in r.content[0].text
        r = await c.call_tool("loop_start", {"name": "fake-loop", "iterations": 1})
        assert not r.is_error, r.content
        launched = r.structured_content
        assert launched["log"] == "loops/fake-loop/driver.log" and "--iterations=1" in launched["command"]
        first = await _wait_idle(c, "fake-loop")
        assert first["state"]["iteration"] == 1 and len(first["state"]["history"]) == 1
        r = await c.call_tool("loop_resume", {"name": "fake-loop"})  # to the budget: 3 runs, then a retrospective
        assert not r.is_error, r.content
        done = await _wait_idle(c, "fake-loop")
        assert done["state"]["status"] == "stopped" and "budget" in done["state"]["stop_reason"]
        assert len(done["state"]["history"]) == 3
        retro = (await c.call_tool("loop_retrospective", {"name": "fake-loop"})).structured_content
        assert retro["page"] == done["state"]["retrospectives"][-1]["page"]
        assert retro["meta"]["type"] == "analysis" and "untried" in retro["body"].lower()
        return launched

    launched = asyncio.run(_session(build(Project(root), allow_run=True), runs))
    log = (root / launched["log"]).read_text()
    assert log.count("\n== ") == 2  # one header per launch: start, then resume

    async def stop(c):
        r = await c.call_tool("loop_stop", {"name": "fake-loop"})
        assert not r.is_error and r.structured_content["driver_running"] is False

    asyncio.run(_session(build(Project(root), allow_write=True), stop))
    assert (root / "loops/fake-loop/STOP").is_file()
