"""Where a loop keeps its branches: its own snapshot unless `code:` names a checkout's top folder, never a repository
the user did not point it at; and `tools loop strays` for what earlier versions left in one."""

from __future__ import annotations

import subprocess
import sys

from click.testing import CliRunner
from loop_helpers import make_kb

from tools.cli import cli
from tools.loop import state as st
from tools.project import Project


def tools(root, *args, code=0):
    res = CliRunner().invoke(cli, ["--root", str(root), *args])
    assert res.exit_code == code, res.output + repr(res.exception)
    return res.output


def git(repo, *args) -> str:
    env = {"GIT_AUTHOR_NAME": "a", "GIT_AUTHOR_EMAIL": "a@b.invalid", "GIT_COMMITTER_NAME": "a",
           "GIT_COMMITTER_EMAIL": "a@b.invalid", "PATH": "/usr/bin:/bin", "HOME": str(repo)}
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True,
                          env=env).stdout


def repo_state(repo) -> tuple[str, str, str, str]:
    return (git(repo, "branch", "-a", "--format=%(refname) %(objectname)"), git(repo, "worktree", "list"),
            git(repo, "status", "--porcelain"), git(repo, "rev-parse", "HEAD"))


def enclosing_repo(tmp_path):
    """A user's repository holding a knowledge base (as a clone of this project holds autoresearch-kb/)."""
    outer = tmp_path / "monorepo"
    kb = outer / "kb"
    make_kb(kb, budget={"runs": 1}, command=[sys.executable, "fake_model.py", "--sleep-ms", "5"])
    (outer / ".gitignore").write_text("kb/\n")
    (outer / "README").write_text("the user's own work\n")
    git(outer, "init", "-q", "-b", "main")
    git(outer, "add", "-A")
    git(outer, "commit", "-q", "-m", "user's commit")
    return outer, kb


def test_a_knowledge_base_inside_a_repository_snapshots_its_model_code(tmp_path):
    outer, kb = enclosing_repo(tmp_path)
    before = repo_state(outer)
    tools(kb, "loop", "start", "fake-loop", "-q")
    s = st.load(st.LoopPaths(Project(kb), "fake-loop"))
    assert s["stop_reason"].startswith("budget: runs 1 of 1") and s["history"][0]["verdict"] != "crash"
    assert repo_state(outer) == before, "no branch, work tree or file of the user's repository changed"
    private = kb / "loops" / "fake-loop" / "repo"
    assert "loop/fake-loop/trunk" in git(private, "branch", "--list")
    assert "no stray" in tools(kb, "loop", "strays")


def test_code_naming_a_checkout_top_works_in_that_repository_and_leaves_its_head(tmp_path):
    kb = tmp_path / "kb"
    make_kb(kb, budget={"runs": 1}, code="../model-repo",
            command=[sys.executable, "fake_model.py", "--sleep-ms", "5"])
    model = tmp_path / "model-repo"
    (kb / "model").rename(model)
    git(model, "init", "-q", "-b", "main")
    git(model, "add", "-A")
    git(model, "commit", "-q", "-m", "model")
    head, status = git(model, "rev-parse", "HEAD"), git(model, "status", "--porcelain")
    tools(kb, "loop", "start", "fake-loop", "-q")
    assert "loop/fake-loop/trunk" in git(model, "branch", "--list")  # the user pointed the loop at this repo
    assert not (kb / "loops" / "fake-loop" / "repo").exists()
    assert (git(model, "rev-parse", "HEAD"), git(model, "status", "--porcelain")) == (head, status)
    assert git(model, "symbolic-ref", "--short", "HEAD").strip() == "main"
    assert "no stray" in tools(kb, "loop", "strays")  # the user chose it: nothing there is stray


def test_strays_of_an_earlier_version_are_listed_refused_and_removed(tmp_path):
    outer, kb = enclosing_repo(tmp_path)
    # what versions before December 2026 made: a trunk branch and a work tree in the enclosing repository
    git(outer, "branch", "loop/fake-loop/trunk", "HEAD")
    git(outer, "branch", "loop/fake-loop-before-20261201T000000/002", "HEAD")
    git(outer, "branch", "loop/someone-elses/trunk", "HEAD")  # not a loop of this knowledge base
    git(outer, "worktree", "add", "-q", "--detach", str(kb / "loops" / "fake-loop" / "trunk"), "loop/fake-loop/trunk")
    listed = tools(kb, "loop", "strays")
    assert listed.count("(loop fake-loop") == 3 and "someone-elses" not in listed and "--remove" in listed
    refused = tools(kb, "loop", "start", "fake-loop", "-q", code=1)
    assert "tools loop strays --remove" in refused and "belongs to the repository" in refused
    removed = tools(kb, "loop", "strays", "--remove")
    assert removed.count(": removed") == 3
    assert sorted(git(outer, "branch", "--format=%(refname:short)").split()) == ["loop/someone-elses/trunk", "main"]
    assert len(git(outer, "worktree", "list").splitlines()) == 1
    tools(kb, "loop", "start", "fake-loop", "--fresh", "-q")
    assert "no stray" in tools(kb, "loop", "strays")
    assert sorted(git(outer, "branch", "--format=%(refname:short)").split()) == ["loop/someone-elses/trunk", "main"]


def test_a_bare_python_in_the_loop_file_is_the_interpreter_running_tools(tmp_path):
    """`tools` started by its path from a venv nobody activated: the first `python` on PATH is another one (here
    one that cannot run anything), and the loop's `python model.py` must still be this interpreter."""
    import os

    kb = tmp_path / "kb"
    make_kb(kb, budget={"runs": 1}, command=["python", "fake_model.py", "--sleep-ms", "5"])
    bin_dir = tmp_path / "elsewhere"
    bin_dir.mkdir()
    for name in ("python", "python3"):
        (bin_dir / name).write_text("#!/bin/sh\necho 'ModuleNotFoundError: no module named jax' >&2\nexit 1\n")
        (bin_dir / name).chmod(0o755)
    env = dict(os.environ, PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    env.pop("VIRTUAL_ENV", None)
    code = "import sys; from tools.cli import main; sys.argv = ['tools'] + sys.argv[1:]; main()"
    r = subprocess.run([sys.executable, "-c", code, "--root", str(kb), "loop", "start", "fake-loop", "-q"], env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    s = st.load(st.LoopPaths(Project(kb), "fake-loop"))
    assert s["trunk"] and len(s["history"]) == 1 and s["history"][0]["verdict"] != "crash", s["history"]


def test_the_work_tree_asks_git_which_files_a_patch_touches_before_applying_it(tmp_path):
    """The backstop behind the admission's own reading of a patch: git's `--numstat` names a rename into the
    runner's files, a protected file under any prefix, and a binary hunk (885 KB of patch wrote a 150 MB file)."""
    from tools.loop.workspace import _refused_by_git

    repo = tmp_path / "r"
    (repo / "tools/loop").mkdir(parents=True)
    (repo / "old.py").write_text("a\n")
    (repo / "f.py").write_text("a\n")
    (repo / "blob.bin").write_bytes(b"\0" * 64)
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
    (repo / "blob.bin").write_bytes(bytes(range(256)) * 8)
    binary = subprocess.run(["git", "diff", "--binary"], cwd=repo, capture_output=True, text=True, check=True).stdout
    subprocess.run(["git", "checkout", "-q", "--", "blob.bin"], cwd=repo, check=True)
    assert "GIT binary patch" in binary
    assert "binary hunk" in _refused_by_git(repo, binary, [])
    rename = "diff --git a/old.py b/tools/loop/x.py\nsimilarity index 100%\nrename from old.py\nrename to tools/loop/x.py\n"
    assert "tools/loop/x.py" in _refused_by_git(repo, rename, [])
    edit = "--- x/f.py\n+++ y/f.py\n@@ -1 +1 @@\n-a\n+b\n"
    assert "protected files (f.py)" in _refused_by_git(repo, edit, ["f.py"]) and _refused_by_git(repo, edit, []) == ""


def test_a_link_in_the_code_folder_is_snapshot_as_a_link(tmp_path):
    """A dangling link in the loop's code folder (a checkpoint path on another machine) crashed `loop start` with a
    shutil traceback; a link leading out of the knowledge base had its target copied into the loop's repository."""
    import os

    from tools.loop.workspace import Workspace

    code = tmp_path / "kb" / "model"
    code.mkdir(parents=True)
    (code / "train.py").write_text("print(1)\n")
    os.symlink("/nonexistent/ckpt", code / "ckpt")
    secret = tmp_path / "outside.txt"
    secret.write_text("outside")
    os.symlink(secret, code / "data.txt")
    ws = Workspace(tmp_path / "kb", code, tmp_path / "kb" / "loops" / "l", "l")
    ws.ensure()
    repo = ws.repo()
    assert (repo / "ckpt").is_symlink() and os.readlink(repo / "ckpt") == "/nonexistent/ckpt"
    assert (repo / "data.txt").is_symlink() and "outside" not in subprocess.run(
        ["git", "-C", str(repo), "show", "HEAD:data.txt"], capture_output=True, text=True).stdout.replace(
        str(secret), "")
