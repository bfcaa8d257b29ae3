"""`tools loop finalize NAME`: what a person merges from a loop. Each kept change (the frontier's moves, in order)
becomes its own branch ``perf/<name>/<n>-<slug>`` from the model code's commit at the loop's baseline: a code
patch alone when it applies there, else stacked on the change before it (the reason is said); a knob change as
the edit of the file the loop file names as ``config_file:`` (``--flag value`` in a launch script, ``key: value``
in YAML), else listed in PERF.md as the setting to apply. Then ``perf/<name>/all`` with every change and PERF.md.
Each commit message carries the evidence (hypothesis, verdict, gain and interval, tokens/s and MFU before and
after, the experiment page) and the ``exp:`` footer. Branches are made in the loop's repository (its snapshot, or
the repository ``code`` names) through work trees of their own: the user's checkout is never touched.
``patches_dir`` writes a ``git format-patch`` series of ``all``; ``pr`` pushes each branch to ``remote`` and opens
a draft pull request with the ``gh`` on PATH (nothing is pushed without it)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

from ..errors import InputError, ToolsError
from ..project import Project
from ..writer import atomic_write
from . import state as st
from .spec import load as load_spec
from .workspace import Workspace, git

SLUG = re.compile(r"[^a-z0-9]+")


def _slug(text: str) -> str:
    return SLUG.sub("-", (text or "").lower()).strip("-")[:40] or "change"


def kept_changes(state: dict) -> list[dict]:
    """The frontier's moves in order, each joined with its history entry (the change, the hypothesis, the
    interval) and the trunk it was measured against."""
    by_exp = {h["exp_id"]: h for h in state.get("history") or []}
    frontier = state.get("frontier") or []
    out = []
    for before, row in zip(frontier, frontier[1:]):
        h = by_exp.get(row["exp_id"], {})
        out.append({"n": len(out) + 1, "row": row, "history": h, "before": before,
                    "change": h.get("change") or {}, "slug": _slug(row.get("description") or h.get("describe"))})
    return out


def _message(name: str, c: dict, note: str = "") -> str:
    row, h, before = c["row"], c["history"], c["before"]
    iv = h.get("interval_pct") or []
    interval = f" (95 % interval [{iv[0]:+.2f}, {iv[1]:+.2f}] %)" if len(iv) == 2 else ""
    lines = [f"perf({name}): {row.get('description') or h.get('describe') or 'kept change'}", "",
             f"Hypothesis: {h.get('statement') or '—'}",
             f"Verdict: {h.get('verdict')}, {(row.get('step_gain_pct') or 0):+.2f} % tokens/s against the trunk it "
             f"was measured on{interval}, over {h.get('repeats') or '?'} interleaved rounds",
             f"tokens/s: {before.get('tokens_per_s')} -> {row.get('tokens_per_s')}; "
             f"MFU %: {before.get('mfu_percent')} -> {row.get('mfu_percent')}",
             f"Experiment: wiki/{row.get('page')}" + (f"; hypothesis: wiki/{h['hypothesis_page']}"
                                                      if h.get("hypothesis_page") else "")]
    if note:
        lines += ["", note]
    return "\n".join(lines + ["", f"exp: {row['exp_id']}"]) + "\n"


def _edit_config(path: Path, knobs: dict) -> list[str]:
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


def finalize(project: Project, name: str, patches_dir: Path | None = None, pr: bool = False,
             remote: str = "origin", base: str = "main", verify: bool = True) -> dict:
    paths = st.LoopPaths(project, name)
    state = st.load(paths)
    if not state:
        raise InputError(paths.state, "no loop state: start the loop first")
    spec = load_spec(paths.spec)
    changes = kept_changes(state)
    out: dict = {"loop": name, "kept": len(changes), "branches": [], "settings": [], "prs": [], "patches": []}
    if not changes:
        out["perf_md"] = _perf_md(paths, spec, state, changes, out)
        return out
    if not spec.code:
        raise InputError(paths.spec, "the loop names no `code` folder: its kept changes are settings only, listed in "
                                     "PERF.md (loops/<name>/PERF.md); nothing to put on a branch")
    ws = Workspace(project.root, (project.root / spec.code).resolve(), paths.folder, name, spec.cwd)
    repo = ws.repo()
    start = state.get("start_commit")
    if not start or git(repo, "cat-file", "-t", start, check=False) != "commit":
        raise InputError(paths.state, "the loop recorded no model-code commit at its baseline (start_commit): "
                                      "nothing to branch from")
    config_file = spec.config_file
    work = paths.folder / "finalize"
    shutil.rmtree(work, ignore_errors=True)
    tips: list[str] = []
    for c in changes:
        ch, row = c["change"], c["row"]
        branch = f"perf/{name}/{c['n']}-{c['slug']}"
        tree = work / str(c["n"])
        note, parent = "", start
        if ch.get("kind") == "patch":
            kept = _kept_commit(repo, ws.trunk_branch, row["exp_id"])
            diff = git(repo, "diff", f"{kept}^", kept) + "\n"
            if not _applies(repo, start, diff, work / "probe") and tips:
                parent, note = tips[-1], (f"Stacked on {out['branches'][-1]['branch']}: applied alone to the "
                                          f"baseline's commit {start[:12]}, this patch does not apply.")
            _tree(repo, tree, parent)
            git(tree, "apply", "--whitespace=nowarn", "-", input=diff)
        else:
            knobs = {**(ch.get("knobs") or {})}
            env = ch.get("env") or {}
            target = (Path(spec.code) / config_file) if config_file else None
            if not knobs or target is None:
                out["settings"].append({"n": c["n"], "exp_id": row["exp_id"], "knobs": knobs, "env": env,
                                        "command": spec.command_for({**(c["history"].get("config") or {})})})
                continue
            _tree(repo, tree, start)
            rel = Path(config_file)
            missing = _edit_config(tree / rel, knobs)
            if missing:
                note = f"Not in {config_file}: {', '.join(missing)} (set them in the launch command)."
        git(tree, "add", "-A")
        git(tree, "commit", "-q", "--allow-empty", "-m", _message(name, c, note))
        tip = git(tree, "rev-parse", "HEAD")
        git(repo, "branch", "-f", branch, tip)
        tips.append(tip)
        out["branches"].append({"n": c["n"], "branch": branch, "commit": tip, "exp_id": row["exp_id"],
                                "kind": ch.get("kind"), "stacked_on": parent if parent != start else None,
                                "note": note})
    if verify:  # each branch alone against the baseline's code, interleaved, on the loop's runner
        for b in out["branches"]:
            b["verified"] = _verify(project, spec, state, repo, start, b, work)
        held = [b for b in out["branches"] if b["verified"]["holds"]]
        out["not_holding"] = [b["branch"] for b in out["branches"] if not b["verified"]["holds"]]
    else:
        held = out["branches"]
        out["not_holding"] = []
    # every change together, and PERF.md
    combined = f"perf/{name}/all"
    tree = work / "all"
    _tree(repo, tree, start)
    for b in out["branches"]:  # a stacked branch's tip is its own change alone: its parent is already in
        if not _ok(tree, "cherry-pick", "--allow-empty", "--keep-redundant-commits", b["commit"]):
            _ok(tree, "cherry-pick", "--abort")
            raise ToolsError(f"{b['branch']} does not apply on top of the changes before it in {combined}")
    perf = _perf_md(paths, spec, state, changes, out)
    atomic_write(tree / "PERF.md", perf)
    git(tree, "add", "PERF.md")
    git(tree, "commit", "-q", "-m", f"perf({name}): PERF.md, every kept change and what it measured\n")
    git(repo, "branch", "-f", combined, git(tree, "rev-parse", "HEAD"))
    out["combined"] = combined
    if patches_dir is not None:
        patches_dir.mkdir(parents=True, exist_ok=True)
        made = git(repo, "format-patch", "-q", "-o", str(patches_dir.resolve()), f"{start}..{combined}")
        out["patches"] = sorted(p.name for p in patches_dir.glob("*.patch")) or made.splitlines()
    if pr:  # a branch whose gain does not hold alone is reported, not offered
        out["prs"] = _pull_requests(repo, held + [{"branch": combined, "n": "all"}], remote, base, name)
    for t in sorted(work.glob("*")):
        git(repo, "worktree", "remove", "--force", str(t), check=False)
    shutil.rmtree(work, ignore_errors=True)
    git(repo, "worktree", "prune", check=False)
    return out


def _verify(project: Project, spec, state: dict, repo: Path, start: str, b: dict, work: Path) -> dict:
    """The branch's change alone: its code (and its knob, for a knob branch) measured interleaved against the
    loop's baseline run rerun from the baseline's commit. ``holds`` when that run is ``supported``."""
    from ..experiments.runner import run_experiment
    from . import runs

    base_tree, tree = work / f"verify-base-{b['n']}", work / f"verify-{b['n']}"
    _tree(repo, base_tree, start)
    _tree(repo, tree, b["commit"])
    baseline = state["frontier"][0]
    cfg = spec.start_config()
    h = next((x for x in state.get("history") or [] if x.get("exp_id") == b["exp_id"]), {})
    change = h.get("change") or {}
    if change.get("kind") == "knobs":
        cfg.update(change.get("knobs") or {})
    env = dict(change.get("env") or {}) if change.get("kind") == "env" else {}
    rs = runs.runspec(spec, cfg, env, (tree / spec.cwd).resolve(), description=f"verify {b['branch']} alone",
                      slug=f"verify-{b['n']}", hypothesis=f"{b['branch']} alone is faster than the baseline",
                      extra={"loop": spec.name, "finalize_of": b["exp_id"]}, compare_to=baseline["exp_id"],
                      compare_cwd=(base_tree / spec.cwd).resolve())
    out = run_experiment(project, rs)
    timing = out.record.get("timing") or {}
    for t in (tree, base_tree):
        git(repo, "worktree", "remove", "--force", str(t), check=False)
    return {"exp_id": out.exp_id, "verdict": out.verdict, "gain_pct": out.record.get("gain_pct"),
            "interval_pct": timing.get("interval_pct"), "holds": out.verdict == "supported",
            "page": f"wiki/{out.page}"}


def _kept_commit(repo: Path, trunk: str, exp_id: str) -> str:
    """The trunk commit whose message carries ``exp: <exp_id>``."""
    for line in git(repo, "log", "--format=%H%x00%B%x01", trunk).split("\x01"):
        sha, _, body = line.strip().partition("\x00")
        if f"exp: {exp_id}" in body:
            return sha
    raise ToolsError(f"no commit on {trunk} carries exp: {exp_id}")


def _ok(tree: Path, *args: str) -> bool:
    import os

    from .workspace import GIT_ENV

    return subprocess.run(["git", "-C", str(tree), *args], capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, **GIT_ENV), check=False).returncode == 0


def _tree(repo: Path, where: Path, commit: str) -> None:
    if where.exists():
        git(repo, "worktree", "remove", "--force", str(where), check=False)
        shutil.rmtree(where, ignore_errors=True)
    where.parent.mkdir(parents=True, exist_ok=True)
    git(repo, "worktree", "add", "-q", "--detach", str(where), commit)


def _applies(repo: Path, commit: str, diff: str, probe: Path) -> bool:
    _tree(repo, probe, commit)
    ok = subprocess.run(["git", "-C", str(probe), "apply", "--check", "-"], input=diff, capture_output=True,
                        text=True, timeout=60, check=False).returncode == 0
    git(repo, "worktree", "remove", "--force", str(probe), check=False)
    return ok


def _perf_md(paths: st.LoopPaths, spec, state: dict, changes: list[dict], out: dict) -> str:
    rows = ["| # | change | kind | tokens/s before → after | step gain | alone vs baseline | branch | experiment |",
            "|---|---|---|---|---|---|---|---|"]
    branch_of = {b["exp_id"]: b["branch"] for b in out["branches"]}
    alone = {b["exp_id"]: b.get("verified") for b in out["branches"]}
    for c in changes:
        row, before = c["row"], c["before"]
        rows.append(f"| {c['n']} | {row.get('description')} | {c['change'].get('kind', '—')} | "
                    f"{before.get('tokens_per_s')} → {row.get('tokens_per_s')} | {(row.get('step_gain_pct') or 0):+.2f} % | "
                    f"{_alone(alone.get(row['exp_id']))} | {branch_of.get(row['exp_id'], 'setting (below)')} | "
                    f"wiki/{row.get('page')} |")
    total = (state.get("frontier") or [{}])[-1].get("gain_pct") or 0.0
    refuted = [h for h in state.get("history") or [] if h.get("verdict") == "refuted"]
    text = [f"# Performance changes from loop {spec.name}", "",
            f"{spec.model} / {spec.lane} / {spec.variant}: {len(changes)} kept change(s), "
            f"{total:+.2f} % tokens/s over the baseline (gains chained from each interleaved comparison).", "",
            *rows, ""]
    if out.get("settings"):
        text += ["## Settings to apply", "", "Knob and environment changes with no `config_file:` to edit:", ""]
        text += [f"- #{s['n']} ({s['exp_id']}): " + ", ".join(f"`{k}={v}`" for k, v in {**s['knobs'], **s['env']}.items())
                 for s in out["settings"]]
        text += [""]
    if refuted:
        text += ["## Tried and refuted", ""] + [f"- {h.get('describe')}: {h.get('gain_pct')} % (wiki/{h.get('page')})"
                                                 for h in refuted] + [""]
    perf = "\n".join(text)
    atomic_write(paths.folder / "PERF.md", perf)
    return perf


def _alone(v: dict | None) -> str:
    if not v:
        return "not measured"
    g = v.get("gain_pct")
    return f"{v['verdict']}{'' if g is None else f', {g:+.2f} %'}{'' if v['holds'] else ' (does not hold alone)'}"


def _pull_requests(repo: Path, branches: list[dict], remote: str, base: str, name: str) -> list[dict]:
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
