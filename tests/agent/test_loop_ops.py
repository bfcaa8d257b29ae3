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


@pytest.mark.slow
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
        assert first["iteration"] == 1 and len(first["history"]) == first["history_total"] == 1
        r = await c.call_tool("loop_resume", {"name": "fake-loop"})  # to the budget: 3 runs, then a retrospective
        assert not r.is_error, r.content
        done = await _wait_idle(c, "fake-loop")
        assert done["status"] == "stopped" and "budget" in done["stop_reason"] and done["state"] is None
        assert len(done["history"]) == 3
        retro = (await c.call_tool("loop_retrospective", {"name": "fake-loop"})).structured_content
        assert retro["page"] == done["retrospectives"][-1]
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


def test_a_loop_started_over_the_registry_is_the_installed_driver_and_answers_at_once(tmp_path):
    """A `tools/` package at the knowledge base's root ran instead of the driver (`python -m` searched the root
    first) and `loop_start` said success; two starts at once both said success (one driver dead at once); right after
    a start, `loop_status` and `loop_stop` said "has not started"; a patch to a protected file was filed, to be
    refused by the loop later."""
    import json
    import threading

    from tools.agent.registry import AgentError, call

    root = tmp_path / "kb"
    make_kb(root, budget={"runs": 3}, protected=["fake_model.py"])
    (root / "wiki").mkdir(exist_ok=True)
    marker = tmp_path / "HIJACKED"
    (root / "tools").mkdir()
    (root / "tools" / "__init__.py").write_text("")
    (root / "tools" / "__main__.py").write_text(f"open({str(marker)!r}, 'w').write('x')\n")
    kb = Project(root)
    answers: list = []

    def start():
        try:
            answers.append(call(kb, "loop.start", {"name": "fake-loop", "iterations": 1}))
        except AgentError as e:
            answers.append(str(e))
    threads = [threading.Thread(target=start) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    started = [a for a in answers if isinstance(a, dict)]
    assert len(started) == 1 and any("already running" in str(a) for a in answers), answers
    status = call(kb, "loop.status", {"name": "fake-loop"})  # at once: the driver holds the loop, its state is there
    assert status["driver_running"] or status["iteration"] >= 1, status
    end = time.monotonic() + 90
    while call(kb, "loop.status", {"name": "fake-loop"})["driver_running"] and time.monotonic() < end:
        time.sleep(0.2)
    assert not marker.exists() and call(kb, "loop.status", {"name": "fake-loop"})["iteration"] == 1
    patch = "--- a/fake_model.py\n+++ b/fake_model.py\n@@ -1 +1 @@\n-a\n+b\n"
    hyp = {"model": "fake", "lane": "loop", "loop": "fake-loop", "statement": "s", "mechanism": "m",
           "predicted_signal": "p", "falsification": "f", "change": {"kind": "patch", "patch": patch},
           "category": "kernel"}
    spec = json.loads(json.dumps(hyp))
    with pytest.raises(AgentError, match="touches protected files"):
        call(kb, "hypotheses.file", spec)
