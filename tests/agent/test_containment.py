"""The agent surface stays inside the knowledge base when links planted in it lead out: a loop folder, the search
index, a lock file, a page's links, a folder swapped for a link while a file in it is read, and names too long for
the file system. Each case is an attack an agent (or a file it wrote) can mount through the registry's operations."""

from __future__ import annotations

import os
import shutil
import sqlite3
import threading
import time
from pathlib import Path

import pytest

from tools import scaffold, safeio
from tools.agent.registry import AgentError, call
from tools.errors import InputError
from tools import lint
from tools.project import Project
from tools.writer import locked

SECRET = "sk-OUTSIDE-VALUE-42"


@pytest.fixture()
def kb(tmp_path) -> Project:
    root = tmp_path / "kb"
    scaffold.init(root, site_name="containment")
    (tmp_path / "outside").mkdir()
    return Project(root)


def outside(kb: Project) -> Path:
    return kb.root.parent / "outside"


def test_a_gap_analysis_reads_a_loop_by_name_never_a_path(kb):
    spec = outside(kb) / "svc.yaml"
    spec.write_text(f"model: a\nlane: b\nvariant: c\ncommand: x\nbudget: {{runs: 1}}\nstatistic: {SECRET}\n")
    for loop in (str(spec), "../outside/svc.yaml", "/etc/hostname"):
        with pytest.raises(AgentError) as e:
            call(kb, "gap.analyze", {"ours": "a", "ref": "b", "file": False, "loop": loop})
        assert SECRET not in str(e.value) and "letters, digits" in str(e.value), loop
    for name in ("absent", "svc.yaml"):  # a name: only ever loops/<name>.yml
        with pytest.raises(AgentError, match=f"no loop file loops/{name}.yml"):
            call(kb, "gap.analyze", {"ours": "a", "ref": "b", "file": False, "loop": name})


def test_a_loop_folder_linked_out_is_neither_read_nor_written(kb):
    folder = outside(kb) / "loopx"
    folder.mkdir()
    (folder / "state.json").write_text('{"history": [], "secret": "%s"}' % SECRET)
    (kb.root / "loops").mkdir(exist_ok=True)
    os.symlink(folder, kb.root / "loops" / "evil")
    for op in ("loop.status", "loop.retrospective", "loop.stop"):
        with pytest.raises(InputError, match="links outside the knowledge base") as e:
            call(kb, op, {"name": "evil"})
        assert SECRET not in str(e.value)
    assert sorted(p.name for p in folder.iterdir()) == ["state.json"]  # no STOP, no driver.log written there


def test_a_loops_folder_linked_out_is_refused(kb):
    (outside(kb) / "loops" / "x").mkdir(parents=True)
    (outside(kb) / "loops" / "x" / "state.json").write_text('{"history": []}')
    shutil.rmtree(kb.root / "loops", ignore_errors=True)
    os.symlink(outside(kb) / "loops", kb.root / "loops")
    with pytest.raises(InputError, match="links outside the knowledge base"):
        call(kb, "loop.status", {"name": "x"})


def test_a_search_never_writes_through_a_link_to_another_database(kb):
    db = outside(kb) / "app.sqlite"
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE pages (x TEXT)")
    con.execute("INSERT INTO pages VALUES ('keep me')")
    con.commit()
    con.close()
    before = db.read_bytes()
    kb.cache.mkdir(parents=True, exist_ok=True)
    os.symlink(db, kb.cache / "search.sqlite")
    with pytest.raises(InputError, match="search.sqlite: a link"):
        call(kb, "wiki.search", {"query": "remat"})
    assert db.read_bytes() == before
    os.unlink(kb.cache / "search.sqlite")
    kb.cache.rmdir()
    os.symlink(outside(kb), kb.cache)  # the whole cache folder linked out
    with pytest.raises(InputError, match="links outside the knowledge base"):
        call(kb, "wiki.search", {"query": "remat"})
    assert sorted(p.name for p in outside(kb).iterdir()) == ["app.sqlite"]


def test_a_search_in_a_plain_cache_still_works(kb):
    out = call(kb, "wiki.search", {"query": "knowledge"})
    assert (kb.cache / "search.sqlite").is_file() and isinstance(out["hits"], list)


def test_a_lock_file_link_is_not_followed(kb):
    target = outside(kb) / "created-by-lock"
    (kb.wiki / ".write.lock").unlink(missing_ok=True)
    os.symlink(target, kb.wiki / ".write.lock")
    with pytest.raises(InputError, match="a link is not followed"):
        with locked(kb.wiki / ".write.lock"):
            pass
    assert not target.exists()


def test_a_lane_folder_linked_out_gets_no_lock_file_there(kb):
    """`wiki/experiments/m/l` linked to a folder outside: the lane lock (O_NOFOLLOW guards its own name only) was
    created there, and the run filed through the link."""
    import sys

    from click.testing import CliRunner

    from tools.cli import cli

    (kb.wiki / "experiments" / "m").mkdir(parents=True)
    os.symlink(outside(kb), kb.wiki / "experiments" / "m" / "l")
    script = outside(kb).parent / "fake.py"
    script.write_text("print('{\"step_times_s\": [1.0, 0.01, 0.01], \"tokens_per_step\": 8}')\n")
    res = CliRunner().invoke(cli, ["--root", str(kb.root), "exp", "run", "--model", "m", "--lane", "l", "--variant",
                                   "s/cpu", "-q", "--", sys.executable, str(script)])
    assert res.exit_code == 1 and "wiki/experiments/m/l: the lane's folder is a link out of wiki/" in res.output, \
        res.output
    assert sorted(p.name for p in outside(kb).iterdir()) == []
    # ... or a link higher up: `wiki/experiments/m2` linked out, its lane folder not made yet
    os.symlink(outside(kb), kb.wiki / "experiments" / "m2")
    res = CliRunner().invoke(cli, ["--root", str(kb.root), "exp", "run", "--model", "m2", "--lane", "l", "--variant",
                                   "s/cpu", "-q", "--", sys.executable, str(script)])
    assert res.exit_code == 1 and "the lane's folder is a link out of wiki/" in res.output, res.output
    assert sorted(p.name for p in outside(kb).iterdir()) == []


def test_the_lint_never_asks_whether_a_file_outside_the_project_exists(kb):
    page = kb.wiki / "concepts" / "probe.md"
    page.parent.mkdir(parents=True, exist_ok=True)
    (kb.raw / "code").mkdir(parents=True, exist_ok=True)
    os.symlink("/etc", kb.raw / "code" / "etc-link")
    page.write_text("---\ntype: concept\ntitle: Probe\n---\n# Probe\n\n"
                    "[a](../../../../../../../../etc/passwd) [b](../../../../../../../../etc/no-such-file) "
                    "[c](../../raw/code/etc-link/passwd) [d](../../raw/code/etc-link/no-such-file) "
                    "[e](../../mkdocs.yml) [f](../../no-such-file.md)\n")
    found = [(i.code, i.message) for i in lint.run(kb).issues if i.path == "wiki/concepts/probe.md"
             and i.code in ("outside-link", "broken-link")]
    codes = sorted(code for code, _ in found)
    # a, b, c and d alike (whether the file exists is never looked at); e exists inside; f is broken
    assert codes == ["broken-link"] + ["outside-link"] * 4, found
    assert any("no-such-file.md" in m for c, m in found if c == "broken-link")


def test_a_folder_swapped_for_a_link_while_a_file_is_opened_is_caught(tmp_path):
    raw = tmp_path / "raw"
    (raw / "code" / "real").mkdir(parents=True)
    (raw / "code" / "real" / "f.txt").write_text("inside")
    away = tmp_path / "away"
    away.mkdir()
    (away / "f.txt").write_text(SECRET)
    link = raw / "code" / "race"
    os.symlink(raw / "code" / "real", link)
    stop = time.monotonic() + 1.5

    def swap():
        flip = False
        while time.monotonic() < stop:
            tmp = raw / "code" / ".race-tmp"
            os.symlink(away if flip else raw / "code" / "real", tmp)
            os.replace(tmp, link)
            flip = not flip

    t = threading.Thread(target=swap)
    t.start()
    got = {"inside": 0, "refused": 0, "leaked": 0}
    while time.monotonic() < stop:
        try:
            data = safeio.read_bytes(link / "f.txt", within=raw)
        except (safeio.Refused, FileNotFoundError):
            got["refused"] += 1
            continue
        got["leaked" if data == SECRET.encode() else "inside"] += 1
    t.join()
    assert got["leaked"] == 0 and got["inside"] > 0 and got["refused"] > 0, got


def test_names_too_long_for_the_file_system_are_refused_with_a_reason(kb):
    for op, args in (("raw.read", {"path": "code/" + "a" * 300}), ("kernels.selection", {"codebase": "b" * 300}),
                     ("wiki.read", {"path": "c" * 300 + ".md"})):
        with pytest.raises(AgentError, match="longer than the file system allows"):
            call(kb, op, args)


@pytest.mark.slow
def test_a_wiki_or_raw_folder_that_is_itself_a_link_out_is_refused_by_every_face(kb, tmp_path):
    """A cloned knowledge base can ship `raw -> /` or `wiki -> /etc`: each path was checked against the folder's
    own target, so `raw read path=etc/passwd` and the resource `wiki://hostname` answered any file on the machine."""
    import asyncio
    import subprocess
    import sys

    from mcp import Client, StdioServerParameters

    (outside(kb) / "secret.md").write_text(f"---\ntitle: S\ntype: concept\n---\n{SECRET}\n")
    shutil.move(kb.raw, kb.root / "raw.real")
    os.symlink(outside(kb), kb.raw)
    shutil.move(kb.wiki, kb.root / "wiki.real")
    os.symlink(outside(kb), kb.wiki)
    for args in (["raw", "read", "path=secret.md"], ["wiki", "read", "path=secret.md"], ["wiki", "list"]):
        r = subprocess.run([sys.executable, "-m", "tools", "--root", str(kb.root), *args, "--json"],
                           capture_output=True, text=True, timeout=120)
        assert r.returncode != 0 and SECRET not in r.stdout + r.stderr, (args, r.stdout, r.stderr)
        assert "links outside the knowledge base" in r.stderr and "wiki" in r.stderr, r.stderr

    async def over_mcp():
        params = StdioServerParameters(command=sys.executable, args=["-m", "tools", "--root", str(kb.root), "mcp"])
        async with Client(params) as c:
            r = await c.call_tool("raw_read", {"path": "secret.md"})
            assert r.is_error and SECRET not in str(r.content), r
            with pytest.raises(Exception, match="links outside the knowledge base") as e:
                await c.read_resource("wiki://secret.md")
            assert SECRET not in str(e.value)

    asyncio.run(over_mcp())
    os.unlink(kb.wiki)
    shutil.move(kb.root / "wiki.real", kb.wiki)
    os.unlink(kb.raw)
    os.symlink("raw.real", kb.raw)  # a link that stays inside the knowledge base is its own business
    assert call(kb, "wiki.list", {})["total"] >= 1


def test_hidden_files_are_not_read(kb):
    """`raw read path=code/x/.git/config` answered a clone's credential URL, and `.env` a service password: what
    ingest and the wiki's scan skip, an agent's read does too."""
    repo = kb.raw / "code" / "x"
    (repo / ".git").mkdir(parents=True)
    (repo / ".git" / "config").write_text(f"[remote]\n  url = https://oauth2:{SECRET}@gitlab.com/o/r.git\n")
    (repo / ".env").write_text(f"DB_PASSWORD={SECRET}\n")
    (repo / "model.py").write_text("x = 1\n")
    os.symlink(".git/config", repo / "notes.txt")  # a repository can ship such a link: git checks it out as one
    for path in ("code/x/.git/config", "code/x/.env", "code/x/./.env", "code/x/notes.txt"):
        with pytest.raises(AgentError, match="is hidden") as e:
            call(kb, "raw.read", {"path": path})
        assert SECRET not in str(e.value)
    assert "x = 1" in call(kb, "raw.read", {"path": "code/x/./model.py"})["text"]
    (kb.wiki / ".obsidian").mkdir()
    (kb.wiki / ".obsidian" / "app.md").write_text(SECRET)
    with pytest.raises(AgentError, match="is hidden"):
        call(kb, "wiki.read", {"path": ".obsidian/app.md"})


def test_a_hand_kept_page_with_a_list_where_text_goes_leaves_the_listings_answering(kb):
    """`backend: [tpu, gpu]` on one kernel page and `author: [alice, bob]` on one hypothesis made `kernels list`,
    `kernels get` and `hypotheses list` end in a pydantic traceback (over MCP: "Error executing tool"), for the
    whole catalog."""
    (kb.wiki / "kernels/x").mkdir(parents=True)
    (kb.wiki / "kernels/x/k1.md").write_text("---\ntype: kernel\ntitle: k1\nrepo: x\nbackend: [tpu, gpu]\n---\n# k1\n")
    (kb.wiki / "hypotheses/m/l").mkdir(parents=True)
    (kb.wiki / "hypotheses/m/l/h1.md").write_text(
        "---\ntype: hypothesis\ntitle: h1\nstatus: open\nmodel: m\nlane: l\nauthor: [alice, bob]\n---\n# h1\n")
    listed = call(kb, "kernels.list", {})["kernels"]
    assert [(k["title"], k["backend"]) for k in listed] == [("k1", '["tpu", "gpu"]')]
    assert call(kb, "kernels.get", {"path": "kernels/x/k1.md"})["backend"] == '["tpu", "gpu"]'
    assert call(kb, "hypotheses.list", {})["hypotheses"][0]["author"] == '["alice", "bob"]'


def test_an_export_to_a_repository_outside_says_nothing_of_what_is_there(kb, tmp_path):
    """A user's report: `exp_export` ran git on the path an agent gave before it checked the path, and its errors
    told what lay outside: "not a git repository", or a repository's top folder."""
    import subprocess

    repo = outside(kb) / "code" / "model"
    repo.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(outside(kb) / "code")], check=True)
    for given in (str(repo), "../outside/code/model", "/root/.ssh", "../outside/nothing-here"):
        with pytest.raises(InputError, match="outside the knowledge base") as e:
            call(kb, "exp.export", {"exp_ids": ["2026-01-01-v001-x"], "name": "x", "repo": given})
        assert "git" not in str(e.value) and str(outside(kb) / "code") + ":" not in str(e.value), str(e.value)


def test_a_long_kernel_page_and_retrospective_are_answered_in_parts_that_say_where_to_go_on(kb):
    """A user's report: `kernels_get` on a 526 KB page answered 399,951 characters, cut with no word of it, and
    `loop_retrospective` cut a 40 KB page at 20,000 characters, losing its "Untried ideas" with no `next_offset`."""
    import json

    body = "".join(f"- launch site {i}: `kernels/x/k.py:{i}`\n" for i in range(14_000))
    (kb.wiki / "kernels/x").mkdir(parents=True)
    (kb.wiki / "kernels/x/long.md").write_text(f"---\ntype: kernel\ntitle: long\nrepo: x\n---\n# long\n\n{body}")
    got = call(kb, "kernels.get", {"path": "kernels/x/long.md"})
    assert len(got["body"]) <= 20_000 and got["total_chars"] > 500_000 and got["next_offset"], got["total_chars"]
    more = call(kb, "wiki.read", {"path": "kernels/x/long.md", "offset": got["next_offset"]})
    assert (got["body"] + more["body"]).startswith("# long\n\n- launch site 0:")
    assert "- launch site 1000:" in got["body"] + more["body"]

    retro = "analyses/l-retrospective-1.md"
    (kb.wiki / "analyses").mkdir(exist_ok=True)
    (kb.wiki / retro).write_text("---\ntype: analysis\ntitle: r\n---\n# r\n\n" + "x " * 15_000
                                 + "\n\n## Untried ideas, best first\n\n- bf16\n")
    (kb.root / "loops/l").mkdir(parents=True)
    (kb.root / "loops/l.yml").write_text("model: m\nlane: l\nvariant: v\ncommand: x\nbudget: {runs: 1}\n")
    (kb.root / "loops/l/state.json").write_text(json.dumps({"name": "l", "model": "m", "lane": "l", "variant": "v",
                                                            "history": [], "retrospectives": [{"page": retro}]}))
    r = call(kb, "loop.retrospective", {"name": "l"})
    assert r["next_offset"] and r["total_chars"] > 30_000 and "Untried ideas" not in r["body"], r["next_offset"]
    rest = call(kb, "wiki.read", {"path": retro, "offset": r["next_offset"]})
    assert "## Untried ideas, best first" in rest["body"]


def test_the_status_of_a_long_loop_is_its_last_iterations_and_the_state_file_only_when_asked(kb):
    """A user's report: `loop_status` of a loop of 800 iterations answered 2.2 MB: the whole state file beside its
    history, twice, with no way to ask for less."""
    import json

    hist = [{"iteration": i, "exp_id": f"e{i}", "category": "shape", "describe": f"batch={i}", "verdict": "refuted",
             "gain_pct": -1.0, "kept": False, "change": {"kind": "knobs", "knobs": {"batch": i}},
             "statement": "s" * 1000} for i in range(1, 801)]
    (kb.root / "loops/big").mkdir(parents=True)
    (kb.root / "loops/big.yml").write_text("model: m\nlane: l\nvariant: v\ncommand: x\nbudget: {runs: 900}\n")
    (kb.root / "loops/big/state.json").write_text(json.dumps(
        {"name": "big", "model": "m", "lane": "l", "variant": "v", "iteration": 800, "status": "stopped",
         "usage": {"runs": 800}, "history": hist}))
    got = call(kb, "loop.status", {"name": "big"})
    assert got["state"] is None and got["history_total"] == 800 and len(got["history"]) == 50
    assert [h["iteration"] for h in got["history"]] == list(range(751, 801))
    assert len(json.dumps(got)) < 100_000, len(json.dumps(got))
    whole = call(kb, "loop.status", {"name": "big", "history": 0, "state": True})
    assert len(whole["history"]) == 800 and len(whole["state"]["history"]) == 800


@pytest.mark.slow
def test_a_hand_edited_huge_value_or_title_is_cut_in_every_answer(kb):
    """A user's report: a 3 MB `notes:` on an experiment page made `exp_get` answer 3 MB, and a 1 MB title made
    `wiki_list`, `wiki_search` and `hypotheses_list` answer 1 MB each (only `wiki_read` bounded frontmatter)."""
    import json

    import yaml

    big = "slow " * 200_000
    exp = {"type": "experiment", "title": "run", "exp_id": "2026-01-01-v001-x", "model": "m", "lane": "l",
           "variant": "v", "version": 1, "status": "filed", "verdict": "inconclusive", "notes": big,
           "metrics": {"tokens_per_s": 10.0}, "losses": list(range(5000))}
    (kb.wiki / "experiments/m/l").mkdir(parents=True)
    (kb.wiki / "experiments/m/l/2026-01-01-v001-x.md").write_text(f"---\n{yaml.safe_dump(exp)}---\n# run\n")
    got = call(kb, "exp.get", {"model": "m", "lane": "l", "exp_id": "2026-01-01-v001-x"})
    assert got["cut"] and len(json.dumps(got)) < 20_000, len(json.dumps(got))
    assert got["record"]["metrics"] == {"tokens_per_s": 10.0} and got["record"]["notes"].startswith("slow slow")
    (kb.wiki / "hypotheses/m/l").mkdir(parents=True)
    (kb.wiki / "hypotheses/m/l/h.md").write_text(
        f"---\ntype: hypothesis\ntitle: {'slow ' * 200_000}\nstatus: open\nmodel: m\nlane: l\n---\n# slow\n")
    for op, args in (("wiki.list", {}), ("wiki.search", {"query": "slow"}), ("hypotheses.list", {})):
        assert len(json.dumps(call(kb, op, args))) < 50_000, op


def test_a_misspelt_hypothesis_status_is_refused_not_answered_with_nothing(kb):
    """A user's report: `hypotheses_list status=opne` answered an empty list, as if no hypothesis were open."""
    with pytest.raises(AgentError, match="'opne' is no hypothesis status: open, testing"):
        call(kb, "hypotheses.list", {"status": "opne"})
    assert call(kb, "hypotheses.list", {"status": None})["total"] == 0
