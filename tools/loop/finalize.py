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

import shlex
from pathlib import Path

from ..errors import InputError, ToolsError
from ..experiments import branches as br
from ..gitrun import git
from ..project import Project
from ..redact import redact
from ..writer import atomic_write
from . import state as st
from .spec import load as load_spec
from .workspace import Workspace


MAKER = "tools loop finalize"  # in every commit it makes: its branches are its own to move


def kept_changes(state: dict) -> list[dict]:
    """The frontier's moves in order, each joined with its history entry (the change, the hypothesis, the
    interval) and the trunk it was measured against."""
    by_exp = {h["exp_id"]: h for h in state.get("history") or []}
    frontier = state.get("frontier") or []
    out = []
    for before, row in zip(frontier, frontier[1:]):
        h = by_exp.get(row["exp_id"], {})
        out.append({"n": len(out) + 1, "row": row, "history": h, "before": before,
                    "change": h.get("change") or {}, "slug": br.slug(row.get("description") or h.get("describe"))})
    return out


def _message(name: str, c: dict, note: str = "") -> str:
    row, h = c["row"], c["history"]
    return br.evidence_message(name, row.get("description") or h.get("describe") or "kept change", row["exp_id"],
                               row.get("page"), statement=h.get("statement"), verdict=h.get("verdict"),
                               gain_pct=row.get("step_gain_pct"), interval=h.get("interval_pct"),
                               rounds=h.get("repeats"), before=c["before"], after=row,
                               maker=MAKER, hypothesis_page=h.get("hypothesis_page"), note=note)


def finalize(project: Project, name: str, patches_dir: Path | None = None, pr: bool = False,
             remote: str = "origin", base: str = "main", verify: bool = True) -> dict:
    paths = st.LoopPaths(project, name)
    state = st.load(paths)
    if not state:
        raise InputError(paths.state, "no loop state: start the loop first")
    spec = load_spec(paths.spec)
    changes = kept_changes(state)
    out: dict = {"loop": name, "kept": len(changes), "branches": [], "settings": [], "prs": [], "patches": []}
    if not changes:  # an earlier finalize's branches and patch series no longer say what this loop kept
        if spec.code:
            out["removed"] = _clear_earlier(project, spec, paths, patches_dir)
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
    makes_branch = [c for c in changes if c["change"].get("kind") == "patch"
                    or (config_file and (c["change"].get("knobs") or {}))]
    if config_file and any(c["change"].get("kind") != "patch" for c in makes_branch):
        br.check_config(repo, start, config_file)
    if patches_dir is not None:  # everything checked before a branch moves
        br.check_patches_dir(patches_dir)
    if pr:
        br.check_gh()
        br.check_remote(repo, remote, base)
    combined = f"perf/{name}/all"
    names = [f"perf/{name}/{c['n']}-{c['slug']}" for c in makes_branch] + [combined]
    old = br.owned_tips(repo, names, f"perf/{name}/", MAKER)
    br.check_not_checked_out(repo, [*names, *old])
    work = paths.folder / "finalize"
    br.drop_worktrees(repo, work)  # a killed or failed run's work trees
    try:
        _branches(project, spec, state, changes, repo, ws, start, work, out)
        when = br.dates([c["row"]["exp_id"] for c in changes], git(repo, "log", "-1", "--format=%cI", start))
        # every change together once before any is verified: a whole that cannot be made fails before the runs
        br.combine(repo, work / "all", start, out["branches"], combined, "", "probe\n", when, MAKER, config_file)
        if verify:  # each branch alone against the baseline's code, interleaved, on the loop's runner
            for b in out["branches"]:
                b["verified"] = _verify(project, spec, state, repo, start, b, work)
        held = [b for b in out["branches"] if b.get("verified", {"holds": True})["holds"]]
        out["not_holding"] = [b["branch"] for b in out["branches"] if b not in held]
        # every change together, and PERF.md
        tip = br.combine(repo, work / "all", start, out["branches"], combined,
                         _perf_md(paths, spec, state, changes, out),
                         f"perf({name}): PERF.md, every kept change and what it measured\n", when, MAKER,
                         config_file)
        out["combined"] = combined
        out["removed"] = br.set_branches(repo, {**{b["branch"]: b["commit"] for b in out["branches"]}, combined: tip},
                                         old)
        if patches_dir is not None:
            out["patches"] = br.format_patches(repo, start, combined, patches_dir)
        if pr:  # a branch whose gain does not hold alone is reported, not offered, nor the whole that holds it
            offer = held + ([{"branch": combined, "n": "all"}] if not out["not_holding"] else [])
            out["prs"] = br.pull_requests(repo, offer, remote, base, old)
    finally:
        br.drop_worktrees(repo, work)
    return out


def _clear_earlier(project: Project, spec, paths: st.LoopPaths, patches_dir: Path | None) -> list[str]:
    """Nothing kept: the branches an earlier finalize of this loop made (perf/<name>/..., its own commits on top)
    deleted and its patch series in ``patches_dir`` removed, as a finalize that makes branches replaces them."""
    repo = Workspace(project.root, (project.root / spec.code).resolve(), paths.folder, spec.name, spec.cwd).repo()
    old = br.owned_tips(repo, [], f"perf/{spec.name}/", MAKER)
    br.check_not_checked_out(repo, list(old))
    if patches_dir is not None:
        br.check_patches_dir(patches_dir)
        br.clear_patches(patches_dir, spec.name)  # this loop's series: another's in the folder stays
    return br.set_branches(repo, {}, old) if old else []


def _branches(project: Project, spec, state: dict, changes: list[dict], repo: Path, ws, start: str, work: Path,
              out: dict) -> None:
    """A commit per kept change (its branch not moved yet), or a setting listed."""
    name, config_file = spec.name, spec.config_file
    fallback = git(repo, "log", "-1", "--format=%cI", start)
    tips: list[str] = []
    for c in changes:
        ch, row = c["change"], c["row"]
        branch = f"perf/{name}/{c['n']}-{c['slug']}"
        tree = work / str(c["n"])
        note, parent, written = "", start, {}
        if ch.get("kind") == "patch":
            kept = _kept_commit(repo, ws.trunk_branch, row["exp_id"])
            diff = git(repo, "diff", f"{kept}^", kept) + "\n"
            if not br.applies(repo, start, diff, work / "probe") and tips:
                parent, note = tips[-1], (f"Stacked on {out['branches'][-1]['branch']}: applied alone to the "
                                          f"baseline's commit {start[:12]}, this patch does not apply.")
            br.worktree(repo, tree, parent)
            git(tree, "apply", "--whitespace=nowarn", "-", input=diff)
        else:
            knobs = {**(ch.get("knobs") or {})}
            # a knob the loop sets through the environment is no flag of the config file: a setting to apply
            by_env = {k: v for k, v in knobs.items() if k in spec.knobs and spec.knobs[k].env}
            env = {**(ch.get("env") or {}), **spec.env_for(by_env)}
            flags = {k: v for k, v in knobs.items() if k not in by_env}
            if flags and config_file:
                br.worktree(repo, tree, start)
                # a launch script takes the knob's own flags (`flag: --pad-sleep-ms`, a `flags:` mapping, --no-x)
                edits = flags if config_file.endswith((".yml", ".yaml")) else {
                    k: spec.knobs[k].args(v) if k in spec.knobs else v for k, v in flags.items()}
                missing = br.edit_config(tree, config_file, edits)
                written = {k: v for k, v in flags.items() if k not in missing}
                edits = {k: v for k, v in edits.items() if k in written}
            rest = {k: v for k, v in knobs.items() if k not in written}
            if rest or env or not written:
                flags_left = [k for k in rest if k not in by_env]
                why = (f"not in {config_file}" if flags_left and config_file else "no config_file" if flags_left
                       else "an environment")
                out["settings"].append({"n": c["n"], "exp_id": row["exp_id"], "knobs": rest, "env": env, "why": why,
                                        "command": spec.command_for({**(c["history"].get("config") or {})})})
            if not written:  # nothing of it is code: no branch (an empty one would be offered as a change)
                continue
            if rest or env:
                note = (f"Not in {config_file}: {', '.join(sorted(rest))} (set them in the launch command). "
                        if rest else "") + ("Environment: " + " ".join(f"{k}={v}" for k, v in env.items())
                                            if env else "")
                note = note.strip()
        tip = br.commit(tree, _message(name, c, note), br.dates([row["exp_id"]], fallback))
        tips.append(tip)
        out["branches"].append({"n": c["n"], "branch": branch, "commit": tip, "exp_id": row["exp_id"],
                                "kind": ch.get("kind"), "stacked_on": parent if parent != start else None,
                                "note": note, **({"knobs": written, "edits": edits} if written else {})})


def _verify(project: Project, spec, state: dict, repo: Path, start: str, b: dict, work: Path) -> dict:
    """The branch's change alone: its code (and its knob, for a knob branch) measured interleaved against the
    loop's baseline run rerun from the baseline's commit. ``holds`` when that run is ``supported``."""
    from ..experiments.runner import run_experiment
    from . import runs

    base_tree, tree = work / f"verify-base-{b['n']}", work / f"verify-{b['n']}"
    br.worktree(repo, base_tree, start)
    br.worktree(repo, tree, b["commit"])
    baseline = state["frontier"][0]
    # the branch alone: the knobs it wrote into the config file; never the ones it could not write, nor the
    # environment (measuring those made an empty branch "hold"). Where the command runs or reads that file, the
    # knobs are left off the command (the loop's command gives every knob's flag: given there, the flag was
    # measured, not the edit, and an edit that did nothing held); else, as the loop's command takes them
    cfg = spec.start_config()
    written = b.get("knobs") or {}
    if spec.config_file and any(Path(w).name == Path(spec.config_file).name for w in spec.command):
        cfg = {k: v for k, v in cfg.items() if k not in written}
    else:
        cfg.update(written)
    env: dict[str, str] = {}
    rs = runs.runspec(spec, cfg, env, (tree / spec.cwd).resolve(), description=f"verify {b['branch']} alone",
                      slug=f"verify-{b['n']}", hypothesis=f"{b['branch']} alone is faster than the baseline",
                      extra={"loop": spec.name, "finalize_of": b["exp_id"]}, compare_to=baseline["exp_id"],
                      compare_cwd=(base_tree / spec.cwd).resolve(), compare_checkout=True)
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


def _perf_md(paths: st.LoopPaths, spec, state: dict, changes: list[dict], out: dict) -> str:
    stat = spec.statistic if spec.statistic != "median" else "median step"
    rows = ["| # | change | kind | tokens/s before → after (each run's median) | step gain (interleaved rounds, "
            f"{stat}) | alone vs baseline | branch | experiment |", "|---|---|---|---|---|---|---|---|"]
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
    checked = [v for v in alone.values() if v]
    held = sum(1 for v in checked if v.get("holds"))
    # the loop's total counts every kept change; said with how many of them were measured alone, and held
    verified = ("nothing kept" if not changes else
                "no branch to verify: every kept change is a setting" if not out["branches"] else
                "not verified alone (--no-verify)" if not checked else
                f"each branch verified alone: all {held} hold" if held == len(checked) == len(out["branches"]) else
                f"verified alone, {held} of {len(out['branches'])} branches hold: the total is the loop's, not a "
                "verified whole")
    text = [f"# Performance changes from loop {spec.name}", "",
            f"{spec.model} / {spec.lane} / {spec.variant}: {len(changes)} kept change(s), "
            f"{total:+.2f} % tokens/s over the baseline in the loop (gains chained from each interleaved "
            f"comparison); {verified}.", "", *rows, ""]
    if out.get("settings"):
        text += ["## Settings to apply", "", "Kept changes the config file does not hold: give them on the launch "
                 "command or in the environment.", ""]
        text += [f"- #{s['n']} ({s['exp_id']}): {_as_typed(spec, s)}" for s in out["settings"]]
        text += [""]
    if refuted:
        text += ["## Tried and refuted", ""] + [f"- {h.get('describe')}: {h.get('gain_pct')} % (wiki/{h.get('page')})"
                                                 for h in refuted] + [""]
    perf = redact("\n".join(text))
    atomic_write(paths.folder / "PERF.md", perf)
    return perf


def _as_typed(spec, setting: dict) -> str:
    """A setting as a user types it: a knob's own flags (`--pad-sleep-ms 0`, not `pad_sleep=0`), then the
    environment (which holds the knobs the loop sets through it)."""
    flags = [shlex.join(spec.knobs[k].args(v)) if k in spec.knobs else f"{k}={v}"
             for k, v in setting["knobs"].items() if not (k in spec.knobs and spec.knobs[k].env)]
    return " ".join([f"`{f}`" for f in flags] + [f"`{k}={shlex.quote(str(v))}`" for k, v in setting["env"].items()])


def _alone(v: dict | None) -> str:
    if not v:
        return "not measured"
    g = v.get("gain_pct")
    return f"{v['verdict']}{'' if g is None else f', {g:+.2f} %'}{'' if v['holds'] else ' (does not hold alone)'}"
