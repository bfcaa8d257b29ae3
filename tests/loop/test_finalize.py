"""`tools loop finalize`: a loop that kept a code patch and a knob change becomes one branch per change from the
baseline's commit, each commit carrying its evidence, a combined branch with PERF.md, a format-patch series, and
draft pull requests through a stub `gh` on PATH (the real git pushes to a local bare repository)."""

from __future__ import annotations

import pytest

import json
import os
import stat
import subprocess
import sys

from click.testing import CliRunner
from loop_helpers import KNOBS, make_kb

from tools.cli import cli
from tools.loop.workspace import git

FASTER = "--- /dev/null\n+++ b/SPEED\n@@ -0,0 +1 @@\n+1.6\n"


def tools(root, *args, code=0, env=None):
    r = CliRunner().invoke(cli, ["--root", str(root), *args], env=env)
    assert r.exit_code == code, r.output + repr(r.exception)
    return r.output


def _hypothesis(root, name, patch, priority=3):
    import yaml

    meta = {"title": f"patch {name}", "type": "hypothesis", "model": "fake", "lane": "loop", "status": "open",
            "author": "ada", "priority": priority, "category": "code", "change": {"kind": "patch", "patch": patch},
            "statement": "a faster kernel file"}
    page = root / "wiki" / "hypotheses" / f"{name}.md"
    page.parent.mkdir(parents=True, exist_ok=True)
    page.write_text(f"---\n{yaml.safe_dump(meta, sort_keys=False)}---\n\n# patch {name}\n\n## Statement\n\n{name}\n")


@pytest.mark.slow
def test_kept_patch_and_knob_become_reviewable_branches_patches_and_draft_prs(tmp_path):
    kb = tmp_path / "kb"
    make_kb(kb, knobs={"dtype": KNOBS["dtype"]}, budget={"runs": 2}, config_file="launch.sh")
    (kb / "model" / "launch.sh").write_text("#!/bin/sh\nexec python fake_model.py --dtype f32 --steps 14\n")
    _hypothesis(kb, "faster", FASTER)
    tools(kb, "loop", "start", "fake-loop", "-q")
    state = json.loads((kb / "loops/fake-loop/state.json").read_text())
    kept = [h for h in state["history"] if h["kept"]]
    assert [h["change"]["kind"] for h in kept] == ["patch", "knobs"], state["history"]

    repo = kb / "loops" / "fake-loop" / "repo"
    bare = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", str(bare)], check=True)
    git(repo, "remote", "add", "origin", str(bare))
    git(repo, "push", "-q", "origin", f"{git(repo, 'rev-list', '--max-parents=0', 'HEAD')}:refs/heads/main")
    stub = tmp_path / "bin"
    stub.mkdir()
    calls = tmp_path / "gh-calls.jsonl"
    (stub / "gh").write_text(f"#!{sys.executable}\nimport json, sys\n"
                             f"open({str(calls)!r}, 'a').write(json.dumps(sys.argv[1:]) + '\\n')\n"
                             "if sys.argv[1:3] == ['pr', 'create']:\n"
                             "    print('https://github.invalid/o/r/pull/' + str(sum(1 for _ in open("
                             f"{str(calls)!r}))))\n"
                             "if sys.argv[1:3] == ['pr', 'list']:  # the PR of a head created before\n"
                             f"    sent = [json.loads(x) for x in open({str(calls)!r})]\n"
                             "    head = sys.argv[sys.argv.index('--head') + 1]\n"
                             "    if any(c[:2] == ['pr', 'create'] and head in c for c in sent):\n"
                             "        print('https://github.invalid/o/r/pull/existing')\n")
    (stub / "gh").chmod((stub / "gh").stat().st_mode | stat.S_IEXEC)
    head_before = git(repo, "rev-parse", "HEAD")
    out = json.loads(tools(kb, "loop", "finalize", "fake-loop", "--patches", str(tmp_path / "patches"), "--pr",
                           "--json", env={"PATH": f"{stub}{os.pathsep}{os.environ['PATH']}"}))

    (patch_b, knob_b) = out["branches"]
    start = state["start_commit"]
    # each branch was measured alone against the baseline's commit, interleaved, and holds
    assert patch_b["verified"]["holds"] and knob_b["verified"]["holds"] and out["not_holding"] == []
    assert patch_b["verified"]["gain_pct"] > 30 and knob_b["verified"]["gain_pct"] > 30
    assert patch_b["branch"].startswith("perf/fake-loop/1-") and knob_b["branch"].startswith("perf/fake-loop/2-")
    # each change alone from the baseline's commit: the patch adds SPEED, the knob edits the launch script
    assert git(repo, "rev-parse", f"{patch_b['branch']}^") == start == git(repo, "rev-parse", f"{knob_b['branch']}^")
    assert git(repo, "diff", "--name-only", start, patch_b["branch"]) == "SPEED"
    assert git(repo, "diff", "--name-only", start, knob_b["branch"]) == "launch.sh"
    assert "--dtype bf16 --steps 14" in git(repo, "show", f"{knob_b['branch']}:launch.sh")
    # the evidence in the commit message
    msg = git(repo, "log", "-1", "--format=%B", patch_b["branch"])
    assert f"exp: {kept[0]['exp_id']}" in msg and "Verdict: supported" in msg and "tokens/s:" in msg
    assert "Hypothesis: faster" in msg and "95 % interval" in msg
    # every change together, with PERF.md listing both
    combined = out["combined"]
    assert set(git(repo, "diff", "--name-only", start, combined).split()) == {"SPEED", "launch.sh", "PERF.md"}
    perf = git(repo, "show", f"{combined}:PERF.md")
    assert kept[0]["exp_id"] in perf and kept[1]["exp_id"] in perf and patch_b["branch"] in perf
    assert "each branch verified alone: all 2 hold" in perf, perf  # the total is said with what held alone
    # a format-patch series, and draft PRs through gh, each branch pushed first
    assert len(out["patches"]) == 3 and all(p.endswith(".patch") for p in out["patches"])
    sent = [json.loads(x) for x in calls.read_text().splitlines()]
    creates = [c for c in sent if c[:2] == ["pr", "create"]]
    assert len(creates) == 3 and all("--draft" in c and c[c.index("--base") + 1] == "main" for c in creates)
    assert [c[c.index("--head") + 1] for c in creates] == [patch_b["branch"], knob_b["branch"], combined]
    assert git(bare, "rev-parse", patch_b["branch"]) == patch_b["commit"]
    assert [p["url"] for p in out["prs"]][0].startswith("https://github.invalid/")
    # the loop's own trunk and checkout did not move
    assert git(repo, "rev-parse", "HEAD") == head_before
    assert not (kb / "model" / "SPEED").exists() and "f32" in (kb / "model" / "launch.sh").read_text()

    # run again, after a run killed half-way left a work tree registered but gone: it converges. The same changes
    # make the same commits; PERF.md's fresh verification moves `all`, pushed over the tools' own earlier push;
    # every pull request open for its branch is found, none opened twice
    git(repo, "worktree", "add", "-q", "--detach", str(kb / "loops/fake-loop/finalize/1"), start)
    subprocess.run(["rm", "-rf", str(kb / "loops/fake-loop/finalize")], check=True)
    again = json.loads(tools(kb, "loop", "finalize", "fake-loop", "--pr", "--json",
                             env={"PATH": f"{stub}{os.pathsep}{os.environ['PATH']}"}))
    assert [b["commit"] for b in again["branches"]] == [patch_b["commit"], knob_b["commit"]]
    assert git(bare, "rev-parse", combined) == git(repo, "rev-parse", combined)
    assert [p["url"] for p in again["prs"]] == ["https://github.invalid/o/r/pull/existing"] * 3
    assert len([c for c in map(json.loads, calls.read_text().splitlines()) if c[:2] == ["pr", "create"]]) == 3
    assert "finalize" not in git(repo, "worktree", "list")
    # a run without --pr moves `all` here only; the next --pr replaces the tools' own push on the remote
    tools(kb, "loop", "finalize", "fake-loop", "--json")
    tools(kb, "loop", "finalize", "fake-loop", "--pr", "--json",
          env={"PATH": f"{stub}{os.pathsep}{os.environ['PATH']}"})
    assert git(bare, "rev-parse", combined) == git(repo, "rev-parse", combined)
    # a branch a reviewer committed to is never moved, locally or on the remote
    tree = git(repo, "rev-parse", f"{combined}^{{tree}}")
    theirs = subprocess.run(["git", "-C", str(repo), "commit-tree", tree, "-p", combined, "-m", "review fix"],
                            capture_output=True, text=True, check=True,
                            env=dict(os.environ, GIT_AUTHOR_NAME="ada", GIT_AUTHOR_EMAIL="ada@example.org",
                                     GIT_COMMITTER_NAME="ada", GIT_COMMITTER_EMAIL="ada@example.org")).stdout.strip()
    git(repo, "branch", "-f", combined, theirs)
    out = tools(kb, "loop", "finalize", "fake-loop", "--no-verify", code=1)
    assert "made by someone else" in out and git(repo, "rev-parse", combined) == theirs


def test_without_gh_pr_is_refused_before_pushing(tmp_path):
    kb = tmp_path / "kb"
    make_kb(kb, knobs={"dtype": KNOBS["dtype"]}, budget={"runs": 1})
    tools(kb, "loop", "start", "fake-loop", "-q")
    empty = tmp_path / "empty"
    empty.mkdir()
    out = tools(kb, "loop", "finalize", "fake-loop", "--pr", code=1,
                env={"PATH": f"{empty}{os.pathsep}{os.path.dirname(sys.executable)}{os.pathsep}/usr/bin"})
    assert "no `gh` on PATH" in out


def test_a_patch_that_needs_the_one_before_is_stacked_on_it_and_says_why(tmp_path):
    kb = tmp_path / "kb"
    make_kb(kb, knobs={"dtype": {"flag": "--dtype", "values": ["f32"], "category": "precision"}}, budget={"runs": 2})
    _hypothesis(kb, "faster", FASTER, priority=5)  # runs first; the second patch edits the file it made
    _hypothesis(kb, "fastest", "--- a/SPEED\n+++ b/SPEED\n@@ -1 +1 @@\n-1.6\n+2.2\n")
    tools(kb, "loop", "start", "fake-loop", "-q")
    state = json.loads((kb / "loops/fake-loop/state.json").read_text())
    assert [h["hypothesis_page"] for h in state["history"] if h["kept"]] == ["hypotheses/faster.md",
                                                                             "hypotheses/fastest.md"]
    out = json.loads(tools(kb, "loop", "finalize", "fake-loop", "--json", "--no-verify"))
    first, second = out["branches"]
    assert "verified" not in first
    assert first["stacked_on"] is None and second["stacked_on"] == first["commit"]
    assert "does not apply" in second["note"]
    repo = kb / "loops" / "fake-loop" / "repo"
    assert git(repo, "rev-parse", f"{second['branch']}^") == first["commit"]
    assert "Stacked on perf/fake-loop/1-" in git(repo, "log", "-1", "--format=%B", second["branch"])
    assert git(repo, "show", f"{out['combined']}:SPEED").strip() == "2.2"
    # the same through the registry (what the MCP tool calls, with --allow-run)
    from tools.agent.registry import call
    from tools.project import Project

    again = call(Project(kb), "loop.finalize", {"name": "fake-loop", "verify": False, "patches": True})
    assert [b["branch"] for b in again["branches"]] == [first["branch"], second["branch"]]
    assert len(again["patches"]) == 3 and (kb / "loops/fake-loop/patches" / again["patches"][0]).is_file()


def test_a_kept_environment_knob_is_a_setting_not_an_empty_branch(tmp_path):
    """An env knob was written into the config file as `--fast` ("not in launch.sh"), committed as an empty branch,
    and verified as holding because the verification set the variable itself."""
    kb = tmp_path / "kb"
    make_kb(kb, knobs={"dtype": KNOBS["dtype"], "fast": {"env": "FAKE_FAST", "values": ["", "1"],
                                                          "category": "compiler"}},
            budget={"runs": 3}, config_file="launch.sh")
    (kb / "model" / "launch.sh").write_text("#!/bin/sh\nexec python fake_model.py --dtype f32 --steps 14\n")
    tools(kb, "loop", "start", "fake-loop", "-q")
    state = json.loads((kb / "loops/fake-loop/state.json").read_text())
    kept = {k for h in state["history"] if h["kept"] for k in (h["change"].get("knobs") or {})}
    assert {"dtype", "fast"} <= kept, state["history"]
    out = json.loads(tools(kb, "loop", "finalize", "fake-loop", "--json", "--no-verify"))
    assert [b["knobs"] for b in out["branches"]] == [{"dtype": "bf16"}]  # only the flag knob is code
    fast = [s for s in out["settings"] if s["env"]]
    assert fast and fast[0]["env"] == {"FAKE_FAST": "1"} and fast[0]["knobs"] == {"fast": "1"}
    assert fast[0]["why"] == "an environment"
    assert "FAKE_FAST=1" in (kb / "loops/fake-loop/PERF.md").read_text()


def test_two_kept_flags_on_one_line_of_the_launch_script_are_both_in_all(tmp_path):
    """Each knob branch rewrites the launch script's one line from the baseline's commit: picking the second onto
    the first conflicted, and finalize failed (after verifying every branch) with "does not apply"."""
    kb = tmp_path / "kb"
    make_kb(kb, knobs={"dtype": KNOBS["dtype"], "accum": KNOBS["accum"]}, budget={"runs": 2},
            config_file="launch.sh")
    (kb / "model" / "launch.sh").write_text("#!/bin/sh\nexec python fake_model.py --dtype f32 --accum 1 --steps 14\n")
    tools(kb, "loop", "start", "fake-loop", "-q")
    state = json.loads((kb / "loops/fake-loop/state.json").read_text())
    assert [h["change"]["kind"] for h in state["history"] if h["kept"]] == ["knobs", "knobs"], state["history"]
    out = json.loads(tools(kb, "loop", "finalize", "fake-loop", "--json", "--no-verify",
                           "--patches", str(tmp_path / "patches")))
    repo = kb / "loops" / "fake-loop" / "repo"
    one, two = out["branches"]
    assert {**one["knobs"], **two["knobs"]} == {"dtype": "bf16", "accum": 2}
    line = "exec python fake_model.py --dtype bf16 --accum 2 --steps 14"
    assert line in git(repo, "show", f"{out['combined']}:launch.sh")
    for b in (one, two):  # each branch still holds its own change alone
        (knob, value), = b["knobs"].items()
        alone = {"dtype": "--dtype bf16 --accum 1", "accum": "--dtype f32 --accum 2"}[knob]
        assert f"fake_model.py {alone} --steps" in git(repo, "show", f"{b['branch']}:launch.sh")
    # the series applies to the baseline's commit with git am, as a reviewer would take it
    review = tmp_path / "review"
    subprocess.run(["git", "clone", "-q", str(repo), str(review)], check=True)
    git(review, "checkout", "-q", "--detach", state["start_commit"])
    patches = sorted(str(tmp_path / "patches" / p) for p in out["patches"])
    subprocess.run(["git", "-C", str(review), "-c", "user.name=r", "-c", "user.email=r@x", "am", "-q", *patches],
                   check=True)
    assert line in (review / "launch.sh").read_text()


def test_a_kept_flag_the_config_file_does_not_hold_is_said_so_not_that_there_is_no_config_file(tmp_path):
    """`--accum` kept where launch.sh has no such flag was listed as "(no config_file: see PERF.md)", with
    `config_file: launch.sh` named in the loop file."""
    kb = tmp_path / "kb"
    make_kb(kb, knobs={"accum": KNOBS["accum"]}, budget={"runs": 1}, config_file="launch.sh")
    (kb / "model" / "launch.sh").write_text("#!/bin/sh\nexec python fake_model.py --dtype f32 --steps 14\n")
    tools(kb, "loop", "start", "fake-loop", "-q")
    state = json.loads((kb / "loops/fake-loop/state.json").read_text())
    assert any(h["kept"] for h in state["history"]), state["history"]  # accum 2: 1.2x faster, by construction
    said = tools(kb, "loop", "finalize", "fake-loop")
    assert "(not in launch.sh: see PERF.md)" in said and "no config_file" not in said, said
    perf = (kb / "loops/fake-loop/PERF.md").read_text()  # as it is typed (`accum=2` is no flag)
    setting = perf.split("## Settings to apply")[1]
    assert "`--accum 2`" in setting and "accum=2" not in setting, perf
    # verification was on, with no branch to verify: said so (it said "--no-verify", a user's report)
    assert "no branch to verify: every kept change is a setting" in perf and "--no-verify" not in perf, perf


@pytest.mark.slow
def test_a_knob_named_otherwise_than_its_flag_and_a_switch_are_written_as_their_flags(tmp_path):
    """A helper's: `precision: {flag: --dtype}` was looked for as `--precision` in launch.sh and left out of the
    branches (PERF.md claiming the gain all the same); a kept switch was written `--fuse false`, eating the
    `"$@"` after it, and the launch script failed; and verifying a knob branch gave the knob on the command line
    too, measuring the flag and not the edit."""
    kb = tmp_path / "kb"
    knobs = {"precision": {**KNOBS["dtype"]}, "fused": {"flag": "--fuse", "values": [False, True],
                                                        "category": "compiler"}}
    make_kb(kb, knobs=knobs, budget={"runs": 2}, config_file="launch.sh", command=["sh", "launch.sh"])
    (kb / "model" / "launch.sh").write_text(f'#!/bin/sh\nexec {sys.executable} fake_model.py --dtype f32 --tile '
                                            '--no-fuse --steps 14 "$@"\n')
    tools(kb, "loop", "start", "fake-loop", "-q")
    state = json.loads((kb / "loops/fake-loop/state.json").read_text())
    assert [h["change"]["kind"] for h in state["history"] if h["kept"]] == ["knobs", "knobs"], state["history"]
    out = json.loads(tools(kb, "loop", "finalize", "fake-loop", "--json", "--patches", str(tmp_path / "patches")))
    repo = kb / "loops" / "fake-loop" / "repo"
    assert out["settings"] == [] and out["not_holding"] == [], out
    line = git(repo, "show", f"{out['combined']}:launch.sh").splitlines()[1]
    assert line.endswith('fake_model.py --dtype bf16 --tile --fuse --steps 14 "$@"'), line
    from tools.experiments import records

    filed = {r["exp_id"]: r for r in records.lane_records(kb / "wiki", "fake", "loop")}
    for b in out["branches"]:  # measured from the edited file alone: the flag is not on the verify command
        assert b["verified"]["holds"], b["verified"]
        command = filed[b["verified"]["exp_id"]]["command"]
        assert "--fuse" not in command and "bf16" not in command, command


@pytest.mark.slow
def test_a_finalize_that_kept_nothing_removes_the_earlier_branches_and_patch_series(tmp_path):
    """A user's report: a loop run again (`start --fresh`) that kept nothing printed "0 kept change(s)" and left the
    earlier finalize's perf/<name>/* branches, its PERF.md claiming +79 %, and its patch series in place."""
    kb = tmp_path / "kb"
    make_kb(kb, knobs={"dtype": KNOBS["dtype"]}, budget={"runs": 2}, config_file="launch.sh")
    (kb / "model" / "launch.sh").write_text("#!/bin/sh\nexec python fake_model.py --dtype f32 --steps 14\n")
    subprocess.run(["git", "init", "-q", str(kb / "model")], check=True)  # the user's own repository
    git(kb / "model", "add", "-A")
    git(kb / "model", "-c", "user.name=ada", "-c", "user.email=ada@example.com", "commit", "-qm", "model")
    tools(kb, "loop", "start", "fake-loop", "-q")
    patches = tmp_path / "patches"
    (patches).mkdir()
    (patches / "0001-mine.patch").write_text("From: ada <ada@example.com>\nmy own patch\n")  # a person's: kept
    first = json.loads(tools(kb, "loop", "finalize", "fake-loop", "--patches", str(patches), "--json", "--no-verify"))
    repo = kb / "model"
    made = git(repo, "for-each-ref", "--format=%(refname:short)", "refs/heads/perf/").split()
    assert first["kept"] == 1 and len(made) == 2 and len(first["patches"]) >= 1, (first, made)
    assert (patches / "0001-mine.patch").is_file()

    from tools.experiments.branches import GIT_ENV

    other = patches / "0009-perf-other.patch"  # another loop's series in the same folder, made by the tools too
    other.write_text(f"From 0 Mon Sep 17 00:00:00 2001\nFrom: {GIT_ENV['GIT_AUTHOR_NAME']} "
                     f"<{GIT_ENV['GIT_AUTHOR_EMAIL']}>\nSubject: [PATCH 1/1] perf(other-loop): x\n\n")
    make_kb(kb, knobs={"remat": KNOBS["remat"]}, budget={"runs": 2}, config_file="launch.sh")  # nothing to keep
    tools(kb, "loop", "start", "fake-loop", "--fresh", "-q")
    again = json.loads(tools(kb, "loop", "finalize", "fake-loop", "--patches", str(patches), "--json"))
    assert again["kept"] == 0 and sorted(again["removed"]) == sorted(made), again
    assert git(repo, "for-each-ref", "refs/heads/perf/") == ""
    assert sorted(p.name for p in patches.iterdir()) == ["0001-mine.patch", "0009-perf-other.patch"]
