"""Latency of the agent surface: each read operation called through the MCP SDK's client over stdio (`tools mcp`
as a subprocess, as a harness connects) against the same call in-process, on a generated 4,000-page wiki.

    python bench/mcp_latency.py [--pages 4000] [--calls 20]

Targets: under 100 ms per call after start-up (median), server start under 1.5 s. Prints a card, then one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

CALLS = {
    "wiki_search": {"query": "flash attention", "limit": 10},
    "wiki_read": {"path": "concepts/concept-00001.md"},
    "wiki_list": {"type": "kernel", "limit": 50},
    "wiki_backlinks": {"path": "concepts/concept-00001.md"},
    "kernels_list": {"backend": "tpu", "limit": 50},
    "hypotheses_list": {},
}


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


async def over_stdio(root: Path, calls: int) -> tuple[float, dict]:
    from mcp import Client, StdioServerParameters

    params = StdioServerParameters(command=sys.executable, args=["-m", "tools", "--root", str(root), "mcp"])
    t0 = time.perf_counter()
    async with Client(params) as c:
        await c.list_tools()
        start = time.perf_counter() - t0
        out = {}
        for name, args in CALLS.items():
            times = []
            for _ in range(calls):
                t = time.perf_counter()
                r = await c.call_tool(name, args)
                times.append(time.perf_counter() - t)
                assert not r.is_error, (name, r.content)
            out[name] = times
    return start, out


def in_process(root: Path, calls: int) -> dict:
    from tools.agent.registry import call
    from tools.project import Project

    project = Project(root)
    out = {}
    for name, args in CALLS.items():
        times = []
        for _ in range(calls):
            t = time.perf_counter()
            call(project, name.replace("_", ".", 1), args)
            times.append(time.perf_counter() - t)
        out[name] = times
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pages", type=int, default=4000)
    ap.add_argument("--calls", type=int, default=20)
    a = ap.parse_args()
    from tools import scaffold
    from tools.sitegen.synthetic import synthetic_wiki, write_wiki

    root = Path(tempfile.mkdtemp(prefix="mcp-bench-")) / "kb"
    scaffold.init(root, site_name="bench")
    write_wiki(root / "wiki", synthetic_wiki(a.pages))
    inproc = in_process(root, a.calls)
    start, remote = asyncio.run(over_stdio(root, a.calls))
    print(f"{a.pages} pages, {a.calls} calls each; server start (spawn + initialize + list_tools): {start:.2f} s")
    print(f"{'operation':18} {'in-process ms':>14} {'MCP stdio ms':>13} {'p95 ms':>8}")
    res = {}
    for name in CALLS:
        i, r = statistics.median(inproc[name]) * 1e3, statistics.median(remote[name]) * 1e3
        p95 = pct(remote[name], 0.95) * 1e3
        res[name] = {"in_process_ms": round(i, 1), "mcp_ms": round(r, 1), "mcp_p95_ms": round(p95, 1)}
        print(f"{name:18} {i:14.1f} {r:13.1f} {p95:8.1f}")
    worst = max(v["mcp_ms"] for v in res.values())
    print(f"worst median {worst:.0f} ms (target < 100 ms: {'met' if worst < 100 else 'MISSED'}); "
          f"start {start:.2f} s (target < 1.5 s: {'met' if start < 1.5 else 'MISSED'})")
    print(json.dumps({"bench": "mcp_latency", "pages": a.pages, "start_s": round(start, 2), "ops": res}))


if __name__ == "__main__":
    main()
