"""Measured changes as reviewable git branches, shared by `tools loop finalize` and `tools exp export`: the commit
message that carries a change's evidence, a knob written into the model's own launch script or config file, work
trees of their own (the user's checkout is never touched), and draft pull requests through the `gh` on PATH."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

from ..errors import InputError, ToolsError
from ..gitrun import git, git_ok
from ..writer import atomic_write

SLUG = re.compile(r"[^a-z0-9]+")


def slug(text: str | None) -> str:
    return SLUG.sub("-", (text or "").lower()).strip("-")[:40] or "change"


def evidence_message(name: str, title: str, exp_id: str, page: str, *, statement: str | None, verdict: str | None,
                     gain_pct: float | None, interval: list | None, rounds, before: dict, after: dict,
                     hypothesis_page: str | None = None, note: str = "") -> str:
    """``perf(<name>): <title>`` and the evidence: hypothesis, verdict with gain, interval and rounds, tokens/s and
    MFU before and after, the experiment page; the ``exp:`` footer last, so `git log --grep` finds the run."""
    iv = interval or []
    ci = f" (95 % interval [{iv[0]:+.2f}, {iv[1]:+.2f}] %)" if len(iv) == 2 else ""
    lines = [f"perf({name}): {title or 'measured change'}", "",
             f"Hypothesis: {statement or '—'}",
             f"Verdict: {verdict}, {(gain_pct or 0):+.2f} % tokens/s against the run it was measured against{ci}, "
             f"over {rounds or '?'} interleaved rounds",
             f"tokens/s: {before.get('tokens_per_s')} -> {after.get('tokens_per_s')}; "
             f"MFU %: {before.get('mfu_percent')} -> {after.get('mfu_percent')}",
             f"Experiment: wiki/{page}" + (f"; hypothesis: wiki/{hypothesis_page}" if hypothesis_page else "")]
    if note:
        lines += ["", note]
    return "\n".join(lines + ["", f"exp: {exp_id}"]) + "\n"


def edit_config(path: Path, knobs: dict) -> list[str]:
    """Set each knob in a launch script (``--knob value`` / ``--knob=value``) or a YAML file (``knob: value``);
    the knobs not found are returned."""
    text = path.read_text(encoding="utf-8")
    missing = []
    for key, value in knobs.items():
        v = str(value).lower() if isinstance(value, bool) else str(value)
        if path.suffix in (".yml", ".yaml"):
            rx = re.compile(rf"^(\s*{re.escape(key)}\s*:\s*)[^#\n]*", re.M)
            new, n = rx.subn(lambda m: m.group(1) + v, text)
        else:
            flag = "--" + key.replace("_", "-")
            rx = re.compile(rf"({re.escape(flag)}|--{re.escape(key)})(=|\s+)(?!-)\S+")
            new, n = rx.subn(lambda m: f"{m.group(1)}{m.group(2)}{v}", text)
        if n:
            text = new
        else:
            missing.append(key)
    atomic_write(path, text)
    return missing


def worktree(repo: Path, where: Path, commit: str) -> None:
    """A detached work tree of ``repo`` at ``commit`` (an old one there is replaced)."""
    if where.exists():
        git(repo, "worktree", "remove", "--force", str(where), check=False)
        shutil.rmtree(where, ignore_errors=True)
    where.parent.mkdir(parents=True, exist_ok=True)
    git(repo, "worktree", "add", "-q", "--detach", str(where), commit)


def drop_worktrees(repo: Path, work: Path) -> None:
    for t in sorted(work.glob("*")):
        git(repo, "worktree", "remove", "--force", str(t), check=False)
    shutil.rmtree(work, ignore_errors=True)
    git(repo, "worktree", "prune", check=False)


def applies(repo: Path, commit: str, diff: str, probe: Path) -> bool:
    """Whether ``diff`` applies on ``commit`` (checked in a throw-away work tree)."""
    worktree(repo, probe, commit)
    ok = git_ok(probe, "apply", "--check", "-", input=diff)
    git(repo, "worktree", "remove", "--force", str(probe), check=False)
    return ok


def commit_branch(repo: Path, tree: Path, branch: str, message: str) -> str:
    """Commit everything in ``tree`` (empty allowed) and point ``branch`` at it; the commit."""
    git(tree, "add", "-A")
    git(tree, "commit", "-q", "--allow-empty", "-m", message)
    tip = git(tree, "rev-parse", "HEAD")
    git(repo, "branch", "-f", branch, tip)
    return tip


def combine(repo: Path, tree: Path, start: str, branches: list[dict], combined: str, perf_md: str,
            subject: str) -> str:
    """``combined``: every branch's tip commit picked in order onto ``start``, then PERF.md."""
    worktree(repo, tree, start)
    for b in branches:  # a stacked branch's tip is its own change alone: its parent is already in
        if not git_ok(tree, "cherry-pick", "--allow-empty", "--keep-redundant-commits", b["commit"]):
            git_ok(tree, "cherry-pick", "--abort")
            raise ToolsError(f"{b['branch']} does not apply on top of the changes before it in {combined}")
    atomic_write(tree / "PERF.md", perf_md)
    git(tree, "add", "PERF.md")
    git(tree, "commit", "-q", "-m", subject)
    tip = git(tree, "rev-parse", "HEAD")
    git(repo, "branch", "-f", combined, tip)
    return tip


def format_patches(repo: Path, start: str, combined: str, patches_dir: Path) -> list[str]:
    patches_dir.mkdir(parents=True, exist_ok=True)
    made = git(repo, "format-patch", "-q", "-o", str(patches_dir.resolve()), f"{start}..{combined}")
    return sorted(p.name for p in patches_dir.glob("*.patch")) or made.splitlines()


def pull_requests(repo: Path, branches: list[dict], remote: str, base: str) -> list[dict]:
    """Push each branch to ``remote`` and open a draft pull request against ``base`` with the `gh` on PATH (its
    title and body: the branch's last commit message). Refused before anything is pushed when `gh` is missing or
    not logged in."""
    gh = shutil.which("gh")
    if gh is None:
        raise InputError("--pr", "no `gh` on PATH: install the GitHub CLI and `gh auth login`, or leave out --pr")
    if subprocess.run([gh, "auth", "status"], capture_output=True, text=True, timeout=60).returncode != 0:
        raise InputError("--pr", "`gh auth status` failed: run `gh auth login` first")
    out = []
    for b in branches:
        git(repo, "push", "-q", remote, f"{b['branch']}:{b['branch']}")
        title = git(repo, "log", "-1", "--format=%s", b["branch"])
        body = git(repo, "log", "-1", "--format=%b", b["branch"])
        r = subprocess.run([gh, "pr", "create", "--draft", "--base", base, "--head", b["branch"], "--title", title,
                            "--body", body], cwd=repo, capture_output=True, text=True, timeout=120)
        if r.returncode != 0:
            raise ToolsError(f"gh pr create for {b['branch']}: {(r.stderr or r.stdout).strip()[:400]}")
        out.append({"branch": b["branch"], "url": r.stdout.strip().splitlines()[-1] if r.stdout.strip() else ""})
    return out
