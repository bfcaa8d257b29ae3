"""The registry through the MCP SDK's own client (in-process, stdio, streamable HTTP on 127.0.0.1) and the CLI:
every read operation once on a real knowledge base, the same answer from both faces, traversal refused."""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tools.project import Project

from .conftest import tools

CALLS = {  # one call per read operation
    "wiki.search": {"query": "remat"},
    "wiki.read": {"path": "concepts/rematerialization.md"},
    "wiki.list": {"type": "concept"},
    "wiki.backlinks": {"path": "codebases/tiny/overview.md"},
    "wiki.lint": {"limit": 5},
    "kernels.list": {"backend": "tpu"},
    "kernels.get": {"path": "kernels/tiny/fused_rms.md"},
    "kernels.selection": {"codebase": "tiny"},
    "exp.history": {"model": "m", "lane": "l"},
    "exp.best": {"model": "m", "lane": "l"},
    "exp.crashes": {"model": "m"},
    "hypotheses.list": {},
    "raw.read": {"path": "code/tiny/tinymodel/layers.py", "line": 2, "context": 1},
}


def run(coro):
    return asyncio.run(coro)


async def _session(target, body):
    from mcp import Client

    async with Client(target) as c:
        return await body(c)


@pytest.mark.slow
def test_every_read_operation_over_mcp_equals_the_cli(kb):
    from tools.agent.registry import load
    from tools.agent.server import build
    from tools.cli.agent import OPS

    ops = load()
    # The CLI's index is what scripts/ops_index.py generates from the registry: every operation, the loop's too
    # (`tools loop start/resume/status/stop` are the CLI's own foreground commands; the rest come from the index)
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
    import ops_index

    assert OPS == ops_index.index(), "run `python scripts/ops_index.py`"
    assert {f"{g}.{o.replace('-', '_')}" for g, names in OPS.items() for o in names} == set(ops)
    loop_ops = {o for o in ops if o.startswith("loop.")}
    assert loop_ops == {"loop.status", "loop.retrospective", "loop.start", "loop.resume", "loop.stop",
                        "loop.finalize"}
    from tools.cli import cli

    assert {"retrospective", "retro", "status"} <= set(cli.commands["loop"].commands)
    assert set(CALLS) | {"exp.get", "exp.export", "hypotheses.file"} == \
        {o for o in ops if not o.startswith(("profile.", "loop.", "gap."))}
    assert {o for o in ops if ops[o].runs} == {"loop.start", "loop.resume", "loop.finalize", "exp.export"}

    async def body(c):
        listed = {t.name: t for t in (await c.list_tools()).tools}
        assert "hypotheses_file" not in listed  # writes are not offered without --allow-write
        out = {}
        for name, args in CALLS.items():
            tool = listed[name.replace(".", "_")]
            assert tool.output_schema and tool.input_schema["type"] == "object"
            r = await c.call_tool(tool.name, args)
            assert not r.is_error, (name, r.content)
            out[name] = r.structured_content
        return out

    results = run(_session(build(Project(kb)), body))
    for name, args in CALLS.items():
        group, op = name.split(".")
        cli = tools(kb, group, op.replace("_", "-"), "--args", json.dumps(args), "--json")
        assert cli.returncode == 0, cli.stderr
        assert json.loads(cli.stdout) == results[name], name
    assert results["kernels.list"]["kernels"][0]["title"] == "fused_rms"
    assert [h["path"] for h in results["wiki.search"]["hits"]][:1] == ["concepts/rematerialization.md"]
    hist = results["exp.history"]
    assert hist["filed"] == 2 and hist["verdicts"]["supported"] == 1 and hist["keep_rate"] == 1.0
    assert [r["verdict"] for r in hist["frontier"]][1:] == ["supported"] and hist["frontier"][0]["role"] == "baseline"
    assert hist["plateau"] == 0
    assert results["raw.read"]["start"] == 1 and results["raw.read"]["path"] == "code/tiny/tinymodel/layers.py"
    assert results["exp.best"]["best"]["s/cpu"]["verdict"] == "supported"


@pytest.mark.parametrize("path", ["../raw/code/tiny/README.md", "/etc/passwd", "concepts/passwd.md",
                                  "concepts/../../mkdocs.yml", "wiki/\x00x.md"])
def test_traversal_is_refused(kb, path):
    from tools.agent.server import build

    async def body(c):
        r = await c.call_tool("wiki_read", {"path": path})
        return r.is_error, r.content[0].text
    is_error, text = run(_session(build(Project(kb)), body))
    assert is_error and ("not a path inside" in text or "leaves wiki/" in text or "symlink" in text), text
    cli = tools(kb, "wiki", "read", "--args", json.dumps({"path": path}))
    assert cli.returncode == 1 and "root:x:0:0" not in cli.stdout + cli.stderr


@pytest.mark.parametrize("path", ["../wiki/index.md", "/etc/passwd", "code/tiny/../../mkdocs.yml", "code/passwd",
                                  "raw/\x00x.py"])
def test_raw_reads_stay_in_raw(kb, path):
    import os

    from tools.agent.server import build

    if not (kb / "raw/code/passwd").is_symlink():
        os.symlink("/etc/passwd", kb / "raw/code/passwd")

    async def body(c):
        r = await c.call_tool("raw_read", {"path": path})
        return r.is_error, r.content[0].text
    is_error, text = run(_session(build(Project(kb)), body))
    assert is_error and ("not a path inside" in text or "leaves raw/" in text), text
    assert "root:x:0:0" not in text


def test_resource_template_reads_pages_and_refuses_traversal(kb):
    from tools.agent.server import build

    async def body(c):
        templates = (await c.list_resource_templates()).resource_templates
        assert [t.uri_template for t in templates] == ["wiki://{+path}"]
        page = await c.read_resource("wiki://concepts/rematerialization.md")
        bad = None
        try:
            await c.read_resource("wiki://../mkdocs.yml")
        except Exception as e:  # noqa: BLE001 - the SDK raises MCPError for a refused resource
            bad = str(e)
        long = (await c.read_resource("wiki://concepts/long-resource.md")).contents[0].text
        return page.contents[0].text, bad, long
    # a page of 3 MB: a resource brought 3.5 MB into an agent's context at once (a user's report); it is cut
    # where it says, and wiki_read goes on from there
    (kb / "wiki/concepts/long-resource.md").write_text(
        "---\ntype: concept\ntitle: Long\n---\n# Long\n\n"
        + "".join(f"line {i} of a long page\n" for i in range(130_000)))
    try:
        text, bad, long = run(_session(build(Project(kb)), body))
    finally:
        (kb / "wiki/concepts/long-resource.md").unlink()
    assert '"type": "concept"' in text and "Rematerialization" in text
    assert bad is not None
    assert len(long) < 250_000 and "line 1000 of" in long and "line 129999 of" not in long, len(long)
    assert "the tool wiki_read with path=concepts/long-resource.md offset=" in long[-300:], long[-300:]


def test_stdio_server_and_filing_a_hypothesis_with_writes_allowed(kb):
    from mcp import StdioServerParameters

    params = StdioServerParameters(command=sys.executable, args=["-m", "tools", "--root", str(kb), "mcp",
                                                                  "--allow-write"])
    hyp = {"model": "m", "lane": "l", "loop": "m-l", "statement": "bf16 compute halves the step time",
           "mechanism": "bf16 matmuls run at twice the fp32 rate", "predicted_signal": "tokens/s +30 %",
           "falsification": "tokens/s within the noise band", "change": {"kind": "knobs",
                                                                          "knobs": {"compute_dtype": "bfloat16"}},
           "category": "precision", "expected_gain_pct": 30, "confidence": 0.6, "effort": 1, "author": "agent"}

    async def body(c):
        names = {t.name for t in (await c.list_tools()).tools}
        assert "hypotheses_file" in names
        filed = await c.call_tool("hypotheses_file", hyp)
        assert not filed.is_error, filed.content
        bad = await c.call_tool("hypotheses_file", {**hyp, "change": {"kind": "knobs", "env": {"A": "1"}}})
        listed = await c.call_tool("hypotheses_list", {"model": "m"})
        return filed.structured_content, bad, listed.structured_content
    filed, bad, listed = run(_session(params, body))
    assert filed["status"] == "open" and (kb / "wiki" / filed["path"]).is_file()
    assert bad.is_error and "one mechanism per run" in bad.content[0].text
    assert [h["path"] for h in listed["hypotheses"]] == [filed["path"]]
    # the loop's queue proposer reads it back as a proposal
    from tools.loop.hypotheses import hypothesis_from_page
    from tools.loop.proposal import Proposal
    from tools.pages import split

    meta, body_text = split((kb / "wiki" / filed["path"]).read_text())
    p = Proposal.from_dict(hypothesis_from_page(meta, body_text))
    assert p.change.knobs == {"compute_dtype": "bfloat16"} and p.category == "precision"


@pytest.mark.slow
def test_the_harness_configs_connect_from_another_folder_without_the_venv_on_path(kb, tmp_path):
    """What `tools init` wrote is what a harness runs: the absolute `tools`, --root, from anywhere."""
    import tomllib

    from mcp import StdioServerParameters

    claude = json.loads((kb / ".mcp.json").read_text())["mcpServers"]["autoresearch-wiki"]
    gemini = json.loads((kb / ".gemini/settings.json").read_text())["mcpServers"]["autoresearch-wiki"]
    codex = tomllib.loads((kb / ".codex/config.toml").read_text())["mcp_servers"]["autoresearch-wiki"]
    assert claude["command"].startswith("/") and claude["args"][-3:] == ["--root", str(kb), "mcp"]
    assert (gemini["command"], gemini["args"], gemini["cwd"]) == (claude["command"], claude["args"], str(kb))
    assert (codex["command"], codex["args"]) == (claude["command"], claude["args"])
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    params = StdioServerParameters(command=claude["command"], args=claude["args"], cwd=str(elsewhere),
                                   env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})

    async def body(c):
        return await c.call_tool("wiki_search", {"query": "rematerialization"})
    found = run(_session(params, body))
    assert not found.is_error and found.structured_content["hits"], found.content


def test_without_the_sdk_tools_mcp_says_what_to_install(kb):
    code = ("import sys; sys.modules['mcp'] = None; from tools.cli import main; "
            f"sys.argv = ['tools', '--root', {str(kb)!r}, 'mcp']; main()")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    assert "pip install 'autoresearch-wiki[agent]'" in r.stderr


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_streamable_http_on_loopback(kb):
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "tools", "--root", str(kb), "mcp", "--http", "--port", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        end = time.monotonic() + 120  # importing the MCP SDK alone took 7-8 s on a loaded CI machine
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > end:
                    proc.kill()
                    pytest.fail(f"the server never listened: {proc.communicate()[1][-2000:]!r}")
                time.sleep(0.1)

        async def body(c):
            r = await c.call_tool("exp_history", {"model": "m", "lane": "l"})
            return r.structured_content
        hist = run(_session(f"http://127.0.0.1:{port}/mcp", body))
        assert hist["filed"] == 2
        listening = subprocess.run(["ss", "-ltnH", f"sport = :{port}"], capture_output=True, text=True).stdout
        local = [ln.split()[3] for ln in listening.splitlines() if ln.strip()]
        assert local and all(addr.startswith("127.0.0.1:") for addr in local), listening  # loopback only
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def test_a_nan_on_a_page_is_null_in_the_cli_json_as_over_mcp(tmp_path):
    """A hand-kept hypothesis page of `priority: .nan` made `tools hypotheses list --json` print NaN: not JSON."""
    from tools import scaffold

    root = tmp_path / "kb"
    scaffold.init(root, site_name="nan")
    page = root / "wiki/hypotheses/llama/cpu-loop/nan.md"
    page.parent.mkdir(parents=True)
    page.write_text("---\ntype: hypothesis\ntitle: x\nstatus: open\nmodel: llama\nlane: cpu-loop\npriority: .nan\n"
                    "---\n# x\n")
    r = tools(root, "hypotheses", "list", "--json")
    assert r.returncode == 0, r.stderr
    listed = json.loads(r.stdout, parse_constant=lambda c: pytest.fail(f"{c} is not JSON"))
    assert [h["priority"] for h in listed["hypotheses"]] == [None]


def test_a_misspelt_argument_over_mcp_is_refused_as_the_cli_refuses_it(kb):
    """`wiki_list {"typ": "hypothesis"}` answered every page, unfiltered: the SDK dropped the unknown key."""
    from tools.agent.server import build

    async def body(c):
        tools_listed = {t.name: t for t in (await c.list_tools()).tools}
        bad = await c.call_tool("wiki_list", {"typ": "hypothesis"})
        good = await c.call_tool("wiki_list", {"type": "concept"})
        return tools_listed["wiki_list"].input_schema, bad, good
    schema, bad, good = run(_session(build(Project(kb)), body))
    assert schema.get("additionalProperties") is False
    assert bad.is_error and "typ" in bad.content[0].text
    assert not good.is_error and good.structured_content["pages"]


def test_a_page_resource_longer_than_it_carries_says_where_the_rest_is(tmp_path):
    """`wiki://` of a 530 kB page gave its first 400,000 characters, the rest silently gone. A resource carries
    200,000 characters at most (4 MB whole crowded out an agent's context): it says where `wiki_read` goes on, and
    the rest read from there ends the page."""
    from tools import scaffold
    from tools.agent.server import build

    root = tmp_path / "kb"
    scaffold.init(root, site_name="big")
    body = "".join(f"line {i}: " + "x" * 60 + "\n" for i in range(8000)) + "THE-END-MARKER\n"
    (root / "wiki/concepts/big.md").write_text("---\ntype: concept\ntitle: Big\n---\n" + body)

    async def read(c):
        return (await c.read_resource("wiki://concepts/big.md")).contents[0].text
    text = run(_session(build(Project(root)), read))
    head, note = text.rsplit("\n\n[cut at ", 1)
    offset = int(note.split("offset=")[1].split()[0])
    assert len(body) > 400_000 and body.startswith(head.split("---\n", 2)[2]) and len(head) < 210_000
    from tools.agent.registry import call

    rest, nxt = "", offset
    while nxt is not None:
        part = call(Project(root), "wiki.read", {"path": "concepts/big.md", "offset": nxt, "limit": 400_000})
        rest, nxt = rest + part["body"], part["next_offset"]
    assert head.split("---\n", 2)[2] + rest == body


@pytest.mark.slow
def test_mcp_list_names_a_cli_command_that_runs(kb):
    """`tools mcp --list` said gap_analyze is `tools gap analyze`, which is no command (`tools gap OURS REF` is)."""
    r = tools(kb, "mcp", "--list")
    assert r.returncode == 0, r.stderr
    rows = list(map(json.loads, r.stdout.splitlines()))
    listed = {d["tool"]: d["cli"] for d in rows}
    assert listed["gap_analyze"] == "tools gap" and listed["wiki_read"] == "tools wiki read"
    # and how each is called: `tools loop status name=x` failed ("loop 'name=x': letters..."), the name is its own
    usage = {d["tool"]: d["usage"] for d in rows}
    assert usage["loop_status"] == "tools loop status [OPTIONS] NAME" and usage["gap_analyze"].endswith("OURS REF")
    assert usage["wiki_read"] == "tools wiki read [OPTIONS] [PAIRS]..."
    for tool, cli in listed.items():  # each names a command whose --help answers
        h = tools(kb, *cli.split()[1:], "--help")
        assert h.returncode == 0 and "Usage:" in h.stdout, (tool, cli, h.stderr)


def test_tool_hints_say_what_may_destroy_or_reach_out_and_a_refused_resource_says_why(kb):
    """Every tool was listed `destructiveHint=False, openWorldHint=False`, `loop_start` (fresh discards a loop's
    state) and `exp_export` (pushes and opens pull requests) included: clients auto-approve by these hints. A page
    resource that does not exist answered only "Error creating resource from template"."""
    from tools.agent.server import build

    async def body(c):
        listed = {t.name: t.annotations for t in (await c.list_tools()).tools}
        errors = []
        for uri in ("wiki://concepts/nope.md", "wiki://../mkdocs.yml"):
            try:
                await c.read_resource(uri)
            except Exception as e:  # noqa: BLE001 - the SDK raises MCPError for a refused resource
                errors.append(str(e))
        return listed, errors
    hints, errors = run(_session(build(Project(kb), allow_write=True, allow_run=True), body))
    for name in ("loop_start", "loop_stop", "loop_finalize", "exp_export", "gap_analyze"):
        assert hints[name].destructive_hint is True, name
    for name in ("loop_finalize", "exp_export"):
        assert hints[name].open_world_hint is True, name
    for name in ("wiki_read", "hypotheses_file", "loop_resume", "exp_history"):
        assert hints[name].destructive_hint is False and hints[name].open_world_hint is False, name
    assert hints["wiki_read"].read_only_hint is True and hints["hypotheses_file"].read_only_hint is False
    assert "no such page" in errors[0] and "Error creating resource" not in errors[0], errors
    assert "Error creating resource" not in errors[1], errors


@pytest.mark.slow
def test_null_on_the_command_line_is_null_as_over_mcp_and_a_port_out_of_range_is_a_usage_error(kb):
    """`wiki list type=null` looked for pages of the type "null" (0) where the MCP tool given null lists them all;
    `tools mcp --http --port 70000` printed its address, then a traceback."""
    def total(*args):
        r = tools(kb, "wiki", "list", *args, "--json")
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout)["total"]
    every = total()
    assert every > 0 and total("type=null") == every == total("--args", '{"type": null}')
    assert total("type=concept") < every
    r = tools(kb, "mcp", "--http", "--port", "70000")
    assert r.returncode == 2 and "70000" in r.stderr and "Traceback" not in r.stderr


def test_a_huge_argument_is_refused_in_a_short_answer_and_a_long_query_is_bounded(kb):
    """A 10 MB argument came back whole in the error (`exp_history` model, `raw_read` symbol, `wiki_read` section):
    all of it in the agent's context. A 64,000-word search took 17 s and grew as its square."""
    from tools import search
    from tools.agent.server import build

    huge = "x" * 1_000_000
    calls = (("exp_history", {"model": huge, "lane": "l"}),
             ("raw_read", {"path": "code/tiny/tinymodel/layers.py", "symbol": huge}),
             ("wiki_read", {"path": "concepts/rematerialization.md", "section": huge}),
             ("wiki_search", {"query": huge}))

    async def body(c):
        return [await c.call_tool(name, args) for name, args in calls]
    for (name, _), r in zip(calls, run(_session(build(Project(kb)), body))):
        assert r.is_error and len(r.content[0].text) < 3_000, (name, len(r.content[0].text))
    words = " ".join(f"w{i}" for i in range(40_000))
    assert [g[0] for g in search.query_groups(words)] == [f"w{i}" for i in range(search.MAX_WORDS)]
    r = tools(kb, "search", words[:1_999], "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["query"] == words[:1_999], r.stderr


@pytest.mark.slow
def test_a_text_argument_over_mcp_is_the_text_given_as_on_the_command_line(kb):
    """A user's report: the SDK read a text argument as JSON when its field was optional text: `wiki_list
    {"type": "null"}` listed every page and `{"type": "[1]"}` was a validation error, where `--args` with the same
    JSON answered 0 pages (no page has the type "null")."""
    from tools.agent.server import build

    args = ({"type": "null"}, {"type": "[1]"}, {"type": '{"a": 1}'}, {"type": "concept"})

    async def body(c):
        return [await c.call_tool("wiki_list", a) for a in args]
    *answers, where = run(_session(build(Project(kb)), lambda c: _both(c, body)))
    for a, r in zip(args, answers):
        cli = tools(kb, "wiki", "list", "--args", json.dumps(a), "--json")
        assert not r.is_error and cli.returncode == 0, (a, r.content, cli.stderr)
        assert r.structured_content["total"] == json.loads(cli.stdout)["total"], a
    # a mapping sent as a JSON string (as Claude Desktop sends one) is still read as the mapping
    assert not where.is_error and where.structured_content["total"] > 0, where.content


async def _both(c, body):
    return [*await body(c), await c.call_tool("wiki_list", {"where": '{"type": "concept"}'})]
