"""`tools exp export`: runs made by hand become reviewable branches. A changed flag is written into the launch
script, a committed code change is re-applied alone on the baseline's commit, an uncommitted edit comes from the
run's saved script copy and is stacked on the run it was measured against, an environment change is listed; commit
messages carry the evidence; PERF.md, a format-patch series and draft PRs through a stub `gh` (real git pushing to
a local bare repository); the user's checkout never moves."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys

import pytest
from _exp_helpers import FAKE
from click.testing import CliRunner

from tools.agent.registry import call
from tools.cli import cli
from tools.experiments import records
from tools.gitrun import git

FASTER = "a = p.parse_args()\na.step_ms *= 0.5  # the faster kernel\n"


def tools(project, *args, code=0, env=None):
    r = CliRunner().invoke(cli, ["--root", str(project.root), *args], env=env)
    assert r.exit_code == code, r.output + repr(r.exception)
    return r.output


def run(project, *args, command):
    tools(project, "exp", "run", "--model", "m", "--lane", "l", "--variant", "s/cpu", "-q", "--repeats", "3",
          "--trust-step-times", *args, "--", sys.executable, "train.py", *command)  # train.py: fake_train
    return records.lane_records(project.wiki, "m", "l")[-1]


@pytest.fixture
def model(project, monkeypatch):
    repo = project.root / "model"
    repo.mkdir()
    shutil.copy(FAKE, repo / "train.py")
    (repo / "launch.sh").write_text("#!/bin/sh\nexec python train.py --step-ms 40 --steps 8\n")
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "model")
    monkeypatch.chdir(repo)
    return repo


@pytest.mark.slow
def test_runs_made_by_hand_become_branches_with_their_evidence(project, model, tmp_path):
    c0 = git(model, "rev-parse", "HEAD")
    base = run(project, "--baseline", command=["--step-ms", "40"])
    env = run(project, "-m", "a flag", "--env", "FAKE_FLAG=1", command=["--step-ms", "40"])
    knob = run(project, "-m", "shorter steps", "--hypothesis", "shorter steps are faster",
               command=["--step-ms", "20"])
    (model / "train.py").write_text((model / "train.py").read_text().replace("a = p.parse_args()\n", FASTER, 1))
    git(model, "commit", "-qam", "faster kernel")
    patch = run(project, "-m", "faster kernel", command=["--step-ms", "40"])
    # an uncommitted edit, measured against the patch's run
    (model / "train.py").write_text((model / "train.py").read_text().replace("*= 0.5", "*= 0.25"))
    dirty = run(project, "-m", "even faster", "--compare-to", patch["exp_id"], command=["--step-ms", "40"])
    assert [r["verdict"] for r in (knob, patch, dirty)] == ["supported"] * 3, [knob, patch, dirty]
    assert dirty["commit"].endswith("-dirty") and dirty["baseline"] == patch["exp_id"]
    status_before, head_before = git(model, "status", "--porcelain"), git(model, "rev-parse", "HEAD")

    bare = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", str(bare)], check=True)
    git(model, "remote", "add", "origin", str(bare))
    git(model, "push", "-q", "origin", f"{c0}:refs/heads/develop")  # the pull requests' target
    stub, calls = tmp_path / "bin", tmp_path / "gh-calls.jsonl"
    stub.mkdir()
    (stub / "gh").write_text(f"#!{sys.executable}\nimport json, sys\n"
                             f"open({str(calls)!r}, 'a').write(json.dumps(sys.argv[1:]) + '\\n')\n"
                             "if sys.argv[1:3] == ['pr', 'create']:\n"
                             "    print('https://github.invalid/o/r/pull/1')\n")
    (stub / "gh").chmod((stub / "gh").stat().st_mode | stat.S_IEXEC)
    ids = [knob["exp_id"], patch["exp_id"], dirty["exp_id"], env["exp_id"]]
    # a target the remote does not have is refused before anything is pushed (gh failed after every push)
    said = tools(project, "exp", "export", *ids, "--name", "by-hand", "--pr", "--base", "nosuch", code=1,
                 env={"PATH": f"{stub}{os.pathsep}{os.environ['PATH']}"})
    assert "has no branch 'nosuch'" in said and git(bare, "for-each-ref") == c0 + " commit\trefs/heads/develop", said
    out = json.loads(tools(project, "exp", "export", *ids, "--name", "by-hand", "--config-file", "launch.sh",
                           "--patches", str(tmp_path / "patches"), "--pr", "--base", "develop", "--json",
                           env={"PATH": f"{stub}{os.pathsep}{os.environ['PATH']}"}))
    kb, pb, db = out["branches"]  # the environment's run is a setting: no code, no branch
    assert out["start"] == c0 and [b["exp_id"] for b in out["branches"]] == ids[:3]
    # the flag: written into the launch script, alone on the baseline's commit
    assert git(model, "rev-parse", f"{kb['branch']}^") == c0
    assert git(model, "diff", "--name-only", c0, kb["branch"]) == "launch.sh"
    assert "--step-ms 20 --steps 8" in git(model, "show", f"{kb['branch']}:launch.sh")
    # the committed change: alone on the baseline's commit, the launch script untouched
    assert git(model, "rev-parse", f"{pb['branch']}^") == c0 and pb["stacked_on"] is None
    assert git(model, "diff", "--name-only", c0, pb["branch"]) == "train.py"
    assert "*= 0.5" in git(model, "show", f"{pb['branch']}:train.py")
    # the uncommitted edit: the saved copy, stacked on the run it was measured against
    assert db["stacked_on"] == pb["commit"] and git(model, "rev-parse", f"{db['branch']}^") == pb["commit"]
    assert "*= 0.25" in git(model, "show", f"{db['branch']}:train.py")
    msg = git(model, "log", "-1", "--format=%B", db["branch"])
    assert f"Stacked on {pb['branch']}" in msg and "saved copy" in msg and f"exp: {dirty['exp_id']}" in msg
    # the evidence in each commit message
    msg = git(model, "log", "-1", "--format=%B", kb["branch"])
    assert "Hypothesis: shorter steps are faster" in msg and "Verdict: supported" in msg
    assert "95 % interval" in msg and "over 3 interleaved rounds" in msg and f"exp: {knob['exp_id']}" in msg
    assert f"tokens/s: {base['metrics']['tokens_per_s']} -> {knob['metrics']['tokens_per_s']}" in msg
    # the environment: listed, no branch (an empty commit is no patch `git am` takes)
    assert git(model, "branch", "--list", "perf/by-hand/4-*") == ""
    assert out["settings"] == [{"n": 4, "exp_id": env["exp_id"], "knobs": {}, "env": {"FAKE_FLAG": "1"},
                                "command": env["command"], "note": "Environment: FAKE_FLAG=1"}]
    assert out["not_supported"] == []
    # every change together, PERF.md, the patches, the PRs
    combined = out["combined"]
    assert set(git(model, "diff", "--name-only", c0, combined).split()) == {"launch.sh", "train.py", "PERF.md"}
    assert "*= 0.25" in git(model, "show", f"{combined}:train.py")
    perf = (project.root / out["perf_md"]).read_text()
    assert all(i in perf for i in ids) and "FAKE_FLAG=1" in perf
    assert len(out["patches"]) == 4
    review = tmp_path / "review-am"  # the series applies with git am on the baseline's commit
    subprocess.run(["git", "clone", "-q", str(model), str(review)], check=True)
    git(review, "checkout", "-q", "--detach", c0)
    subprocess.run(["git", "-C", str(review), "-c", "user.name=r", "-c", "user.email=r@x", "am", "-q",
                    *sorted(str(tmp_path / "patches" / p) for p in out["patches"])], check=True)
    assert "*= 0.25" in (review / "train.py").read_text() and "FAKE_FLAG=1" in (review / "PERF.md").read_text()
    heads = [c[c.index("--head") + 1] for c in map(json.loads, calls.read_text().splitlines()) if c[:2] == ["pr", "create"]]
    offered = [b["branch"] for b in out["branches"] if b["verdict"] == "supported"]
    # the whole is offered only when every run in it was supported; each against the base branch named
    assert heads == offered + [combined]
    assert {c[c.index("--base") + 1] for c in map(json.loads, calls.read_text().splitlines())
            if c[:2] == ["pr", "create"]} == {"develop"}
    assert git(bare, "rev-parse", kb["branch"]) == kb["commit"]
    # the user's checkout: same HEAD, same uncommitted edit, no work trees left behind
    assert git(model, "rev-parse", "HEAD") == head_before and git(model, "status", "--porcelain") == status_before
    assert git(model, "worktree", "list").count("\n") == 0
    # a re-run converges: the same branches, moved to equal trees
    again = call(project, "exp.export", {"exp_ids": ids[:2], "name": "by-hand", "config_file": "launch.sh"})
    assert git(model, "rev-parse", f"{again['branches'][0]['commit']}^{{tree}}") == \
        git(model, "rev-parse", f"{kb['commit']}^{{tree}}")


@pytest.mark.slow
def test_what_cannot_be_exported_is_a_clear_error(project, model, tmp_path):
    base = run(project, "--baseline", command=["--step-ms", "20"])
    out = tools(project, "exp", "export", base["exp_id"], "--name", "x", code=1)
    assert "was not measured against a baseline" in out and base["page"] in out
    assert "no such experiment" in tools(project, "exp", "export", "m-l-v999", "--name", "x", code=1)
    # the agent's face: only code kept inside the knowledge base
    outside = tmp_path.parent / f"{tmp_path.name}-outside"
    shutil.copytree(model, outside)
    varied = run(project, command=["--step-ms", "10"])
    with pytest.raises(Exception, match="outside the knowledge base"):
        call(project, "exp.export", {"exp_ids": [varied["exp_id"]], "name": "x", "repo": f"../{outside.name}"})
    # a work tree inside the knowledge base of a repository outside it (a copied knowledge base's loop trunk):
    # the branches would be made in the repository outside
    git(outside, "worktree", "add", "-q", "--detach", str(project.root / "trunk"))
    with pytest.raises(Exception, match="outside the knowledge base"):
        call(project, "exp.export", {"exp_ids": [varied["exp_id"]], "name": "x", "repo": "trunk"})
    assert git(outside, "for-each-ref", "refs/heads/perf/") == ""
    # a baseline that ran uncommitted code has no commit to branch from
    (model / "train.py").write_text((model / "train.py").read_text() + "\n# edited\n")
    base2 = run(project, "--baseline", command=["--step-ms", "30", "--batch", "8"])
    var2 = run(project, "--compare-to", base2["exp_id"], command=["--step-ms", "15", "--batch", "8"])
    out = tools(project, "exp", "export", var2["exp_id"], "--name", "x", code=1)
    assert "ran uncommitted edits of its script" in out
    # a baseline whose commit the history no longer holds (amended, the old one collected): said as such (it read
    # "recorded no commit")
    git(model, "commit", "-qam", "edited")
    base3 = run(project, "--baseline", command=["--step-ms", "30", "--batch", "2"])
    var3 = run(project, "--compare-to", base3["exp_id"], command=["--step-ms", "15", "--batch", "2"])
    git(model, "commit", "-q", "--amend", "-m", "edited, reworded")
    git(model, "reflog", "expire", "--expire=now", "--all")
    git(model, "gc", "-q", "--prune=now")
    out = tools(project, "exp", "export", var3["exp_id"], "--name", "x", code=1)
    assert f"recorded commit {base3['commit'][:12]}, which" in out and "does not have" in out, out


def test_an_export_checks_everything_before_a_branch_moves(project, model, tmp_path):
    c0 = git(model, "rev-parse", "HEAD")
    run(project, "--baseline", command=["--step-ms", "40"])
    knob = run(project, "-m", "shorter steps", command=["--step-ms", "20"])
    launch = (model / "launch.sh").read_text()

    def refused(*args):
        out = tools(project, "exp", "export", *args, code=1)
        assert git(model, "for-each-ref", "refs/heads/perf/") == "" and git(model, "worktree", "list").count("\n") == 0
        assert (model / "launch.sh").read_text() == launch and git(model, "rev-parse", "HEAD") == c0
        return out

    # the config file: a path inside the repository, never the user's own checkout
    assert "must be a path inside the model's repository" in refused(knob["exp_id"], "--name", "cf",
                                                                      "--config-file", str(model / "launch.sh"))
    assert "must be a path inside" in refused(knob["exp_id"], "--name", "cf", "--config-file", "../model/launch.sh")
    assert "no such file" in refused(knob["exp_id"], "--name", "cf", "--config-file", "nope.sh")
    # names: one folder, one branch prefix each; a run named twice
    for bad in ("a b", "a/b", "..", "a..b", "x.lock", "-x", "ü", ""):
        assert "letters, digits" in refused(knob["exp_id"], "--name", bad), bad
    assert "named more than once" in refused(knob["exp_id"], knob["exp_id"], "--name", "dup")
    # --remote and --base reach git and gh: an option there ran a command an agent chose (`--upload-pack=...`)
    stub = tmp_path / "bin"
    stub.mkdir()
    (stub / "gh").write_text("#!/bin/sh\nexit 0\n")
    (stub / "gh").chmod(0o755)
    path = {"PATH": f"{stub}{os.pathsep}{os.environ['PATH']}"}
    pwned = tmp_path / "PWNED"
    for flag, value, said in (("--remote", f"--upload-pack=touch {pwned};", "is not a remote of"),
                              ("--remote", "nowhere", "is not a remote of"), ("--base", "--force", "not a branch")):
        out = tools(project, "exp", "export", knob["exp_id"], "--name", "r", "--config-file", "launch.sh", "--pr",
                    flag, value, code=1, env=path)
        assert said in out and not pwned.exists(), out
        assert git(model, "for-each-ref", "refs/heads/perf/") == ""
    # a branch someone committed to is never moved
    tree = git(model, "rev-parse", "HEAD^{tree}")
    mine = subprocess.run(["git", "-C", str(model), "commit-tree", tree, "-p", c0, "-m", "my review fix"],
                          capture_output=True, text=True, check=True,
                          env=dict(os.environ, GIT_AUTHOR_NAME="ada", GIT_AUTHOR_EMAIL="ada@example.org",
                                   GIT_COMMITTER_NAME="ada", GIT_COMMITTER_EMAIL="ada@example.org")).stdout.strip()
    git(model, "branch", "perf/mine/all", mine)
    out = tools(project, "exp", "export", knob["exp_id"], "--name", "mine", "--config-file", "launch.sh", code=1)
    assert "made by someone else" in out and git(model, "rev-parse", "perf/mine/all") == mine
    assert git(model, "for-each-ref", "--format=%(refname:short)", "refs/heads/perf/") == "perf/mine/all"


@pytest.mark.slow
def test_a_run_is_exported_against_its_own_lanes_baseline_and_a_rerun_converges(project, model, tmp_path):
    def other(*args, command):
        tools(project, "exp", "run", "--model", "m2", "--lane", "l2", "--variant", "s/cpu", "-q", "--repeats", "3",
              "--trust-step-times", *args, "--", sys.executable, "train.py", *command)
        return records.lane_records(project.wiki, "m2", "l2")[-1]

    run(project, "--baseline", "-m", "base", command=["--step-ms", "40"])
    (model / "other.txt").write_text("an unrelated change\n")
    git(model, "add", "-A")
    git(model, "commit", "-qm", "unrelated")
    c1 = git(model, "rev-parse", "HEAD")
    b2 = other("--baseline", "-m", "base", command=["--step-ms", "40"])
    v2 = other("-m", "faster", command=["--step-ms", "20"])
    v1 = run(project, "-m", "faster", command=["--step-ms", "20"])
    assert v1["exp_id"] == v2["exp_id"] and b2["exp_id"] == v2["baseline"]  # ids are unique per lane only
    out = tools(project, "exp", "export", v2["exp_id"], "--name", "x", code=1)
    assert "more than one lane" in out and "m2/l2" in out
    patches = tmp_path / "patches"
    out = json.loads(tools(project, "exp", "export", f"m2/l2/{v2['exp_id']}", "--name", "x", "--config-file",
                           "launch.sh", "--patches", str(patches), "--json"))
    assert out["start"] == c1  # its own lane's baseline, not the other lane's of the same id
    assert git(model, "diff", "--name-only", c1, out["branches"][0]["branch"]) == "launch.sh"
    first = {b["branch"]: b["commit"] for b in out["branches"]} | {out["combined"]: git(model, "rev-parse",
                                                                                          out["combined"])}
    assert sorted(p.name for p in patches.iterdir()) == out["patches"] and len(out["patches"]) == 2
    # the same export again makes the same commits: nothing moves
    again = json.loads(tools(project, "exp", "export", f"m2/l2/{v2['exp_id']}", "--name", "x", "--config-file",
                             "launch.sh", "--patches", str(patches), "--json"))
    assert {b["branch"]: b["commit"] for b in again["branches"]} == {b: c for b, c in first.items()
                                                                     if b != out["combined"]}
    assert git(model, "rev-parse", out["combined"]) == first[out["combined"]]
    # another set of runs under the same name: the old branch and the old series go, the user's files and a
    # branch of another name under perf/x/ stay
    (patches / "notes.patch").write_text("mine\n")
    git(model, "branch", "perf/x/keep-for-review", out["combined"])
    v3 = other("-m", "shortest", command=["--step-ms", "10"])
    last = json.loads(tools(project, "exp", "export", f"m2/l2/{v3['exp_id']}", "--name", "x", "--config-file",
                            "launch.sh", "--patches", str(patches), "--json"))
    assert [b["branch"] for b in last["branches"]] == ["perf/x/1-shortest"]
    assert last["removed"] == ["perf/x/1-faster"] and git(model, "branch", "--list", "perf/x/1-faster") == ""
    assert git(model, "branch", "--list", "perf/x/keep-for-review").strip() == "perf/x/keep-for-review"
    # ids spelled two ways are one run
    assert "named more than once" in tools(project, "exp", "export", v3["exp_id"], f"m2/l2/{v3['exp_id']}",
                                           "--name", "y", code=1)
    assert sorted(p.name for p in patches.iterdir()) == sorted(last["patches"] + ["notes.patch"])


@pytest.mark.slow
def test_an_export_says_what_a_config_edit_cannot_and_moves_all_branches_or_none(project, model, tmp_path):
    c0 = git(model, "rev-parse", "HEAD")
    run(project, "--baseline", command=["--step-ms", "40", "--steps", "8"])
    # a flag its baseline had and it did not: no config edit can say it, the launch command must
    dropped = run(project, "-m", "drop steps", command=["--step-ms", "40"])
    out = json.loads(tools(project, "exp", "export", dropped["exp_id"], "--name", "dr", "--config-file",
                           "launch.sh", "--json"))
    assert out["branches"] == []  # the launch script already says --step-ms 40: nothing of it is code
    note = out["settings"][0]["note"]
    assert "Flags its baseline had and it did not: --steps." in note and f"Launch with: {dropped['command']}" in note
    assert out["settings"][0]["command"] == dropped["command"]
    # measured against a run whose command differs from the committed launch script: the file gets every flag the
    # run was measured with, not only the one that changed (before: --step-ms 40 --steps 12, never measured)
    short = run(project, "-m", "short", command=["--step-ms", "20", "--steps", "8"])
    more = run(project, "-m", "more steps", "--compare-to", short["exp_id"],
               command=["--step-ms", "20", "--steps", "12"])
    alone = json.loads(tools(project, "exp", "export", more["exp_id"], "--name", "more", "--config-file",
                             "launch.sh", "--json"))
    assert "--step-ms 20 --steps 12" in git(model, "show", f"{alone['branches'][0]['branch']}:launch.sh")
    # two runs against one baseline, each a flag on the launch script's one line: `all` holds both (the second
    # branch's pick conflicted on that line, and the export failed)
    fewer = run(project, "-m", "fewer steps", command=["--step-ms", "40", "--steps", "6"])
    two = json.loads(tools(project, "exp", "export", short["exp_id"], fewer["exp_id"], "--name", "two",
                           "--config-file", "launch.sh", "--json"))
    assert [b["knobs"] for b in two["branches"]] == [{"step_ms": "20"}, {"steps": "6"}]
    assert git(model, "show", "perf/two/all:launch.sh").endswith("exec python train.py --step-ms 20 --steps 6")
    # a branch whose edit holds more than its own knobs (every flag it was measured with) is not redone: the
    # whole is refused rather than made without part of it (from a review)
    out = tools(project, "exp", "export", fewer["exp_id"], more["exp_id"], "--name", "more-than-knobs",
                "--config-file", "launch.sh", code=1)
    assert "does not apply on top of the changes before it" in out, out
    # named in either order, the run measured against the other stacks on it
    for n, ids in enumerate(([short["exp_id"], more["exp_id"]], [more["exp_id"], short["exp_id"]])):
        got = json.loads(tools(project, "exp", "export", *ids, "--name", f"st{n}", "--config-file", "launch.sh",
                               "--json"))
        assert [b["exp_id"] for b in got["branches"]] == [short["exp_id"], more["exp_id"]]
        assert got["branches"][1]["stacked_on"] == got["branches"][0]["commit"]
    # a target branch checked out in a work tree, a patch folder that cannot be, --pr without gh: refused before
    # anything moves
    tips = git(model, "for-each-ref", "--format=%(refname:short) %(objectname)", "refs/heads/perf/")
    git(model, "worktree", "add", "-q", str(tmp_path / "review"), "perf/st0/all")
    out = tools(project, "exp", "export", short["exp_id"], more["exp_id"], "--name", "st0", "--config-file",
                "launch.sh", code=1)
    assert "perf/st0/all: checked out in" in out and "nothing was moved" in out
    git(model, "worktree", "remove", str(tmp_path / "review"))
    git(model, "branch", "perf/col")  # a branch where the export's folder of branches would go
    out = tools(project, "exp", "export", short["exp_id"], "--name", "col", code=1)
    assert "perf/col: a branch of this name exists, so git cannot make perf/col/1-" in out, out
    git(model, "branch", "-D", "perf/col")
    (tmp_path / "file").write_text("x")
    out = tools(project, "exp", "export", short["exp_id"], "--name", "st0", "--patches", str(tmp_path / "file/pp"),
                code=1)
    assert f"{tmp_path / 'file/pp'}: cannot hold the patch series" in out
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    out = tools(project, "exp", "export", short["exp_id"], "--name", "st0", "--pr", code=1,
                env={"PATH": f"{empty}{os.pathsep}{os.path.dirname(shutil.which('git'))}"})
    assert "no `gh` on PATH" in out
    assert git(model, "for-each-ref", "--format=%(refname:short) %(objectname)", "refs/heads/perf/") == tips
    assert git(model, "rev-parse", "HEAD") == c0


def test_a_knowledge_base_inside_the_model_repository_stays_out_of_the_patches(project, monkeypatch, tmp_path):
    """The README lets the knowledge base live in the model's clone: a run's pages, committed with the code, went
    into the branch and the patch series, which then failed `git apply` on the user's own branch."""
    repo = project.root
    shutil.copy(FAKE, repo / "train.py")
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "model")
    monkeypatch.chdir(repo)
    run(project, "--baseline", command=["--step-ms", "40"])
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "baseline pages")
    (repo / "train.py").write_text((repo / "train.py").read_text().replace("a = p.parse_args()\n", FASTER, 1))
    git(repo, "commit", "-qam", "faster kernel")
    faster = run(project, "-m", "faster", command=["--step-ms", "40"])
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "its pages")
    out = json.loads(tools(project, "exp", "export", faster["exp_id"], "--name", "k", "--patches",
                           str(tmp_path / "patches"), "--json"))
    branch = out["branches"][0]
    assert git(repo, "diff", "--name-only", f"{branch['branch']}^", branch["branch"]) == "train.py"
    series = "".join((tmp_path / "patches" / p).read_text() for p in out["patches"])
    changed = {ln.split()[2] for ln in series.splitlines() if ln.startswith("diff --git ")}
    assert changed == {"a/train.py", "a/PERF.md"}, changed


def test_an_untracked_module_the_run_had_is_named_not_silently_left_out(project, model):
    """A run beside an untracked module (the script imported it) exported to a branch without it, which crashed,
    and nothing said so."""
    run(project, "--baseline", command=["--step-ms", "40"])
    (model / "fastk.py").write_text("K = 1\n")
    knob = run(project, "-m", "shorter", command=["--step-ms", "20"])
    assert knob["uncommitted"] == ["fastk.py"]
    page = (project.root / "wiki" / knob["page"]).read_text()
    assert "uncommitted beside it: `fastk.py`" in page
    r = CliRunner().invoke(cli, ["--root", str(project.root), "exp", "export", knob["exp_id"], "--name", "u",
                                 "--config-file", "launch.sh"])
    assert r.exit_code == 0, r.output
    assert f"warning: {knob['exp_id']} ran with files no commit holds, which its branch leaves out: fastk.py" in \
        r.stderr
    assert "Not in this branch: files that were uncommitted beside the script when it ran (fastk.py)" in \
        git(model, "log", "-1", "--format=%B", "perf/u/1-shorter")
    # a run whose whole change is in such a file (same command, same environment) leaves nothing to export: it said
    # "0 run(s)", exited 0, and PERF.md's row pointed to settings that were not there
    (model / "fastk.py").write_text("K = 2\n")
    same = run(project, "-m", "faster fastk", command=["--step-ms", "40"])
    r = CliRunner().invoke(cli, ["--root", str(project.root), "exp", "export", same["exp_id"], "--name", "v"])
    assert r.exit_code == 1, r.output
    assert f"nothing to export from #1 {same['exp_id']}: its change is in files no commit holds (fastk.py)" in \
        r.stderr
    perf = (project.root / "exports" / "v" / "PERF.md").read_text()
    assert "— (nothing to export, below)" in perf and "## Nothing to export" in perf and "settings below" not in perf
