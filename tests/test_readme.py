"""The README's main job as written: the line is read from the README, run in a fresh clone of this repository from
a fresh virtual environment, and must keep what the README promises while leaving the clone's git state alone."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from tools import pages

REPO = Path(__file__).resolve().parent.parent


def main_job_line(readme: str) -> str:
    """The command block under the README's **Main job** paragraph."""
    section = readme.split("**Main job**", 1)[1]
    return re.search(r"```bash\n(.+?)\n```", section, re.S).group(1).strip()


def test_the_main_job_line_is_the_one_install_and_demo():
    line = main_job_line((REPO / "README.md").read_text(encoding="utf-8"))
    assert line.startswith("pip install -e '.[") and "tools demo " in line
    extras = re.search(r"\.\[([^\]]+)\]", line).group(1).split(",")
    assert {"site", "exp", "agent"} <= set(extras), "the configs `tools init` writes start `tools mcp`"


def _git_state(repo: Path) -> dict:
    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True).stdout
    return {"branches": git("branch", "-a", "--format=%(refname) %(objectname)"),
            "worktrees": git("worktree", "list", "--porcelain"), "status": git("status", "--porcelain"),
            "head": git("rev-parse", "HEAD"), "stash": git("stash", "list")}


def _venv(where: Path) -> dict[str, str]:
    """A new virtual environment that sees this interpreter's installed packages (a .pth line), so the README's
    `pip install -e` installs the clone itself and nothing is downloaded but the build backend."""
    subprocess.run([sys.executable, "-m", "venv", str(where)], check=True, timeout=300)
    site = next(where.glob("lib/python*/site-packages"))
    outer = dict.fromkeys(p for p in (sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"],
                                      *sys.path) if p.endswith("site-packages") and Path(p).is_dir())
    (site / "outer-packages.pth").write_text("\n".join(outer) + "\n")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "AUTORESEARCH_ROOT")
           and not k.startswith(("JAX_COMPILATION_CACHE", "JAX_PERSISTENT_CACHE"))}  # a fresh machine has none
    env.update(VIRTUAL_ENV=str(where), PATH=f"{where / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}")
    return env


@pytest.mark.slow
def test_readme_main_job_in_a_fresh_clone(tmp_path):
    line = main_job_line((REPO / "README.md").read_text(encoding="utf-8"))
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(REPO), str(clone)], check=True, timeout=300)
    before = _git_state(clone)
    env = _venv(tmp_path / "venv")
    r = subprocess.run(["bash", "-c", line], cwd=clone, env=env, capture_output=True, text=True, timeout=2400)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out[-6000:]
    kb = clone / re.search(r"tools demo (\S+)", line).group(1)
    assert f"knowledge base: {kb}" in out, out[-3000:]
    assert _git_state(clone) == before, "the clone's branches, work trees and status are untouched"

    # the promise: a baseline and three experiments, each with an honest verdict, kept or discarded
    tools = [str(tmp_path / "venv" / "bin" / "tools"), "--root", str(kb)]
    status = json.loads(subprocess.run([*tools, "loop", "status", "llama-cpu", "--json"], env=env,
                                       capture_output=True, text=True, timeout=120, check=True).stdout)
    assert status["status"] == "stopped" and status["stop_reason"].startswith("budget: runs 3 of 3"), status
    assert len(status["history"]) == 3, status["history"]
    assert all(h["verdict"] in pages.VERDICTS and h["verdict"] != "crash" for h in status["history"])
    assert status["retrospectives"], "the stop leaves a retrospective"
    kept = [h for h in status["history"] if h["kept"]]
    assert status["trunk"]["exp_id"] == (kept[-1]["exp_id"] if kept else status["frontier"][0]["exp_id"])
    filed = sorted((kb / "wiki/experiments/llama/cpu-loop").glob("20*.md"))
    verdicts = [pages.split(p.read_text())[0]["verdict"] for p in filed]
    assert verdicts[0] == "baseline" and len(verdicts) == 4, verdicts
    assert any((kb / ".tools-cache" / "jax-compile").iterdir()), "the timed rounds share JAX's compile cache"
    profiled = [pages.split(p.read_text())[0].get("hlo_fingerprint") for p in filed]
    assert all(profiled), "each run's profiled run compiled and dumped its optimized HLO"
    assert (kb / "wiki" / "loops" / "llama-cpu.md").is_file()
    index = (kb / "wiki" / "index.md").read_text()
    assert "loops/llama-cpu.md" in index
    assert "lint: 0 errors" in out
    lint = subprocess.run([*tools, "lint"], env=env, capture_output=True, text=True, timeout=300)
    assert lint.returncode == 0, lint.stdout + lint.stderr
    # the agent configs it wrote start this venv's `tools` on this knowledge base
    mcp = json.loads((kb / ".mcp.json").read_text())["mcpServers"]["autoresearch-wiki"]
    assert mcp["command"] == tools[0] and mcp["args"] == ["--root", str(kb), "mcp"]
