"""`tools exp export EXP… --name NAME`: runs made by hand (`tools exp run`) as reviewable branches, the way `tools loop finalize`
makes them for a loop. Each run was measured interleaved against its baseline run; what changed between the two is
read from the records, never guessed:

- the code: the commits the two runs recorded (``git diff base..run`` of the model's repository), and, when the run
  ran uncommitted edits of its script, the script copy it saved;
- the knobs: the ``--flag value`` arguments that differ between the two commands, written into the file
  ``config_file`` names (a launch script or YAML) when given, else listed as the launch command to use;
- the environment: the variables the run set that its baseline did not (listed: an environment is not code).

Each run becomes ``perf/<name>/<n>-<slug>`` from its baseline's commit, or stacked on the exported run it was
measured against (said in the commit message); ``perf/<name>/all`` has every change and PERF.md. Commit messages
carry the run's evidence. Work trees live under ``.tools-cache/export/``; the user's checkout, its index and HEAD
are never touched, and nothing is pushed without ``pr``. A run that is not ``supported`` is exported (it is the
user's call) but never offered as a pull request."""

from __future__ import annotations

import shlex
from pathlib import Path

from ..errors import InputError
from ..gitrun import git
from ..project import Project
from ..redact import redact
from ..writer import atomic_write
from . import branches as br
from . import records
from .sides import script_of


def export(project: Project, exp_ids: list[str], name: str, repo: Path | None = None, config_file: str | None = None,
           patches_dir: Path | None = None, pr: bool = False, remote: str = "origin", base: str = "main",
           confine: Path | None = None) -> dict:
    """``confine`` (the agent's face): the repository and the config file must lie inside it. Everything is
    checked before a branch moves: the names, the runs (each baseline looked up in its run's own lane), their
    commits, the config file; the branches are set only once every commit is made."""
    if not exp_ids:
        raise InputError("EXP", "name at least one experiment to export")
    br.check_name(name)
    if confine is not None and repo is not None and not (confine / repo).resolve().is_relative_to(confine.resolve()):
        # before any look at it: the answer to a path outside would say what is there (a repository, its top)
        raise InputError(str(repo), "outside the knowledge base: an agent may export only code kept in it")
    every = records.load_experiments(project.wiki)
    runs = [_record(every, e) for e in exp_ids]
    keys = [_key(r) for r in runs]
    if len(set(keys)) != len(keys):
        twice = sorted({"/".join(k) for k in keys if keys.count(k) > 1})
        raise InputError("EXP", f"named more than once: {', '.join(twice)} (one branch a run)")
    pairs = _measured_order([(r, _baseline(every, r)) for r in runs])
    runs = [r for r, _ in pairs]
    repo = _repository(project, runs[0], repo)
    if confine is not None:
        # the git directory too: a work tree inside (a copied knowledge base's loop trunk) may belong to a
        # repository outside, where the branches would be made
        common = git(repo, "rev-parse", "--path-format=absolute", "--git-common-dir", check=False)
        for p in (repo, repo / (config_file or "."), Path(common or repo)):
            if not p.resolve().is_relative_to(confine.resolve()):
                raise InputError(str(p), "outside the knowledge base: an agent may export only code kept in it")
    start = _commit(repo, pairs[0][1], "baseline")
    for run, before in pairs:  # every commit there, and the config file in each, before anything is made
        measured_from = _commit(repo, before, "baseline")
        _commit(repo, run, "exported")
        if config_file:
            br.check_config(repo, measured_from, config_file)
    if patches_dir is not None:
        br.check_patches_dir(patches_dir)
    if pr:
        br.check_gh()
        br.check_remote(repo, remote, base)
    combined = f"perf/{name}/all"
    names = [f"perf/{name}/{n}-{br.slug(run.get('description') or run.get('slug'))}" for n, (run, _) in
             enumerate(pairs, 1)]
    old = br.owned_tips(repo, names + [combined], f"perf/{name}/", MAKER)
    br.check_not_checked_out(repo, [*names, combined, *old])
    work = project.safe_cache() / "export" / name
    br.drop_worktrees(repo, work)  # a killed or failed export's work trees
    out: dict = {"name": name, "repository": str(repo), "start": start, "branches": [], "settings": [], "prs": [],
                 "patches": [], "nothing": []}
    try:
        _commits(project, repo, work, pairs, names, config_file, out)
        out["not_supported"] = [b["branch"] for b in out["branches"] if b["verdict"] != "supported"]
        perf = redact(perf_md(name, pairs, out))
        tip = br.combine(repo, work / "all", start, out["branches"], combined, perf,
                         f"perf({name}): PERF.md, every exported change and what it measured\n",
                         br.dates([r["exp_id"] for r in runs], git(repo, "log", "-1", "--format=%cI", start)), MAKER,
                         config_file)
        out["combined"] = combined
        out["removed"] = br.set_branches(repo, {**{b["branch"]: b["commit"] for b in out["branches"]}, combined: tip},
                                         old)
        perf_path = project.root / "exports" / name / "PERF.md"
        perf_path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(perf_path, perf)
        out["perf_md"] = perf_path.relative_to(project.root).as_posix()
        if patches_dir is not None:
            out["patches"] = br.format_patches(repo, start, combined, patches_dir)
        if pr:  # a run not supported is never offered, nor the whole that holds it
            offered = [b for b in out["branches"] if b["verdict"] == "supported"]
            out["prs"] = br.pull_requests(repo, offered + ([{"branch": combined}] if not out["not_supported"] else []),
                                          remote, base, old)
    finally:
        br.drop_worktrees(repo, work)
    return out


def _commits(project: Project, repo: Path, work: Path, pairs: list[tuple[dict, dict]], names: list[str],
             config_file: str | None, out: dict) -> None:
    """A commit per run (its branch not moved yet): its code and knobs on its baseline's commit, or stacked on the
    exported run it was measured against."""
    tip_of: dict[tuple, str] = {}  # by model, lane and id: ids are unique per lane only
    branch_of: dict[tuple, str] = {}
    for n, ((run, before), branch) in enumerate(zip(pairs, names), 1):
        parent = tip_of.get(_key(before)) or _commit(repo, before, "baseline")
        on = branch_of.get(_key(before))  # the exported branch holding the run it was measured against
        stacked = on is not None
        tree = work / str(n)
        br.worktree(repo, tree, parent)
        notes = [f"Stacked on {on}: measured against that run."] if stacked else []
        notes += _apply_code(project, repo, tree, run, before)
        if run.get("uncommitted"):  # code the run may have used that no commit holds: not in the branch
            files = ", ".join(map(str, run["uncommitted"]))
            notes.append(f"Not in this branch: files that were uncommitted beside the script when it ran ({files}); "
                         "commit them and run again to export them.")
            out.setdefault("warnings", []).append(f"{run['exp_id']} ran with files no commit holds, which its "
                                                  f"branch leaves out: {files}")
        cmd_before, cmd_run = before.get("command") or "", run.get("command") or ""
        knobs, env = changed_flags(cmd_before, cmd_run), changed_env(before, run)
        dropped, other = dropped_flags(cmd_before, cmd_run), _words(cmd_before) != _words(cmd_run)
        missing: list[str] = []
        if knobs and config_file:
            # every flag the run was measured with, not only those that differ from its baseline's command: the
            # file as committed may hold other values than the baseline ran with (a run measured --compare-to)
            missing = [k for k in br.edit_config(tree, config_file, _flags(cmd_run)) if k in knobs]
            if missing:
                notes.append(f"Not in {config_file}: {', '.join(missing)} (set them in the launch command).")
        if dropped:
            notes.append(f"Flags its baseline had and it did not: {', '.join('--' + k for k in dropped)}.")
        if other:
            notes.append("Its command differs from its baseline's in more than flag values (the program, a "
                         "script or a positional argument).")
        unwritten = (knobs and not config_file) or missing or dropped or other
        if unwritten:
            notes.append(f"Launch with: {run.get('command')}")
        if env:
            notes.append("Environment: " + " ".join(f"{k}={shlex.quote(str(v))}" for k, v in env.items()))
        if unwritten or env:
            out["settings"].append({"n": n, "exp_id": run["exp_id"], "knobs": {} if config_file else knobs,
                                    "env": env, "command": run.get("command"), "note": "\n".join(notes)})
        if not git(tree, "status", "--porcelain"):  # nothing of it is code: a setting, no branch (an empty commit
            tip_of[_key(run)], branch_of[_key(run)] = parent, on  # is no patch `git am` takes)
            if not (unwritten or env):  # no setting either: nothing of what it measured can be handed on
                out["nothing"].append({"n": n, "exp_id": run["exp_id"], "why": (
                    f"its change is in files no commit holds ({', '.join(map(str, run['uncommitted']))}): commit "
                    "them and run again" if run.get("uncommitted") else
                    "the same code, flags and environment as its baseline")})
            continue
        tip = br.commit(tree, _message(out["name"], run, before, "\n".join(notes)),
                        br.dates([run["exp_id"]], git(repo, "log", "-1", "--format=%cI", parent)))
        tip_of[_key(run)], branch_of[_key(run)] = tip, branch
        out["branches"].append({"n": n, "branch": branch, "commit": tip, "exp_id": run["exp_id"],
                                "baseline": before["exp_id"], "verdict": run.get("verdict"),
                                "gain_pct": run.get("gain_pct"), "stacked_on": parent if stacked else None,
                                "note": "\n".join(notes),
                                **({"knobs": {k: v for k, v in knobs.items() if k not in missing}}
                                   if knobs and config_file else {})})


def changed_flags(before: str, after: str) -> dict[str, str]:
    """``--flag value`` / ``--flag=value`` / bare ``--flag`` arguments of ``after`` that ``before`` lacks or sets
    otherwise, keyed by the flag's name (``--batch-size`` → ``batch_size``)."""
    b, a = _flags(before), _flags(after)
    return {k: v for k, v in a.items() if b.get(k) != v}


def dropped_flags(before: str, after: str) -> list[str]:
    """Flags ``before`` has and ``after`` does not (a config edit cannot say them: the launch command must)."""
    a = _flags(after)
    return [k for k in _flags(before) if k not in a]


def _words(command: str) -> list[str]:
    """A command's words that are not flags or flag values (the program, its script, positional arguments)."""
    try:
        argv = shlex.split(command)
    except ValueError:
        return command.split()
    out, i = [], 0
    while i < len(argv):
        arg = argv[i]
        if arg.startswith("--") and len(arg) > 2:
            if "=" not in arg and i + 1 < len(argv) and not argv[i + 1].startswith("--"):
                i += 1
        else:
            out.append(arg)
        i += 1
    return out


def _measured_order(pairs: list[tuple[dict, dict]]) -> list[tuple[dict, dict]]:
    """The runs in the order named, except that a run measured against another exported run comes after it (so it
    stacks on it, whatever order the runs were named in)."""
    keys = {_key(r) for r, _ in pairs}
    out: list[tuple[dict, dict]] = []
    placed: set = set()
    left = list(pairs)
    while left:
        ready = next((p for p in left if _key(p[1]) not in keys or _key(p[1]) in placed), left[0])  # a cycle: as named
        out.append(ready)
        placed.add(_key(ready[0]))
        left.remove(ready)
    return out


def _flags(command: str) -> dict[str, str | bool]:
    try:
        argv = shlex.split(command)
    except ValueError:
        return {}
    out, i = {}, 0
    while i < len(argv):
        arg = argv[i]
        if arg.startswith("--") and len(arg) > 2:
            key, eq, value = arg[2:].partition("=")
            if not eq:
                nxt = argv[i + 1] if i + 1 < len(argv) else None
                value = True if nxt is None or nxt.startswith("--") else nxt  # a switch: written back as one
                i += 0 if value is True else 1
            out[key.replace("-", "_")] = value
        i += 1
    return out


def changed_env(before: dict, run: dict) -> dict[str, str]:
    """Variables the run set that its baseline did not set, or set otherwise."""
    b, a = before.get("env") or {}, run.get("env") or {}
    return {k: v for k, v in a.items() if b.get(k) != v}


MAKER = "tools exp export"  # in every commit it makes: its branches are its own to move


def _key(r: dict) -> tuple[str, str, str]:
    return str(r.get("model")), str(r.get("lane")), str(r.get("exp_id"))


def _record(every: list[dict], exp_id: str) -> dict:
    """The run ``exp_id`` names (``MODEL/LANE/EXP_ID`` where lanes share an id: ids are unique per lane)."""
    model, lane, short = exp_id.rsplit("/", 2) if exp_id.count("/") >= 2 else (None, None, exp_id)
    found = [r for r in every if r.get("exp_id") == short and (model is None or (r.get("model"), r.get("lane"))
                                                               == (model, lane))]
    if not found:
        raise InputError(exp_id, "no such experiment in wiki/experiments/")
    if len(found) > 1:
        raise InputError(exp_id, "more than one lane has a run of this id (" + ", ".join(
            f"{r.get('model')}/{r.get('lane')}" for r in found) + f"): name it as MODEL/LANE/{short}")
    r = found[0]
    if not r.get("baseline"):
        raise InputError(r.get("page") or exp_id, "this run was not measured against a baseline: there is no change "
                                                  "to export (run it with --compare-to or after a --baseline run)")
    return r


def _baseline(every: list[dict], run: dict) -> dict:
    """The run's baseline, in the run's own lane (another lane may hold a run of the same id)."""
    b = next((r for r in every if r.get("exp_id") == run["baseline"] and r.get("model") == run.get("model")
              and r.get("lane") == run.get("lane")), None)
    if b is None:
        raise InputError(run.get("page") or run["exp_id"], f"its baseline {run['baseline']} is not filed")
    return b


def _repository(project: Project, run: dict, repo: Path | None) -> Path:
    """The git repository holding the run's model code: ``repo`` when given, else the top of the run's folder."""
    if repo is None:
        cwd = Path(str(run.get("cwd") or ""))
        repo = cwd if cwd.is_absolute() else project.root / cwd
    top = git(repo, "rev-parse", "--show-toplevel", check=False) if repo.is_dir() else ""
    if not top:
        raise InputError(str(repo), f"not a git repository: {run['exp_id']}'s model code must be under git to be "
                                    "exported (name it with --repo)")
    return Path(top)


KB_DATA = ("wiki", "raw", "exports", "loops", ".tools-cache")  # what the tools write into a knowledge base


def _kb_excluded(project: Project, repo: Path) -> list[str]:
    """Pathspecs leaving out the knowledge base's own files when it lives in the model's repository: the pages a
    run filed, committed with the code, are no part of the change."""
    root, top = project.root.resolve(), repo.resolve()
    if not root.is_relative_to(top):
        return []
    rel = root.relative_to(top).as_posix()
    return [f":(exclude){'' if rel == '.' else rel + '/'}{part}" for part in KB_DATA]


def _commit(repo: Path, rec: dict, role: str) -> str:
    """The full commit a run recorded (its ``-dirty`` mark dropped); a clear error when the repository lacks it."""
    short = str(rec.get("commit") or "").removesuffix("-dirty")
    full = git(repo, "rev-parse", "--verify", "-q", f"{short}^{{commit}}", check=False) if short else ""
    if not full and short:  # recorded, and the history no longer holds it (amended, rebased, collected)
        raise InputError(rec.get("page") or rec["exp_id"],
                         f"the {role} run {rec['exp_id']} recorded commit {short}, which {repo} does not have (its "
                         "history rewritten, or another repository): nothing to branch from")
    if not full:
        raise InputError(rec.get("page") or rec["exp_id"],
                         f"the {role} run {rec['exp_id']} recorded no commit of {repo}: nothing to branch from")
    if role == "baseline" and str(rec.get("commit")).endswith("-dirty"):
        raise InputError(rec.get("page") or rec["exp_id"],
                         f"the baseline {rec['exp_id']} ran uncommitted edits of its script on {short}: its code "
                         "is not a commit to branch from (commit it and run the baseline again)")
    return full


def _apply_code(project: Project, repo: Path, tree: Path, run: dict, before: dict) -> list[str]:
    """The run's code on top of its baseline's commit in ``tree``: the commits between them, then the saved script
    when the run's script had uncommitted edits. Notes for the commit message."""
    notes = []
    b, a = _commit(repo, before, "baseline"), _commit(repo, run, "exported")
    if a != b:
        diff = git(repo, "diff", "--binary", b, a, "--", ".", *_kb_excluded(project, repo))
        if diff:
            git(tree, "apply", "--whitespace=nowarn", "-", input=diff + "\n")
    if str(run.get("commit")).endswith("-dirty"):
        copy = project.root / str(run.get("script_copy") or "")
        cwd = Path(str(run.get("cwd") or ""))
        script = script_of(shlex.split(run.get("command") or ""), cwd if cwd.is_absolute() else project.root / cwd)
        if not (run.get("script_copy") and copy.is_file() and script is not None
                and script.resolve().is_relative_to(repo.resolve())):
            raise InputError(run.get("page") or run["exp_id"],
                             "this run ran uncommitted edits of its script and its saved copy is missing: "
                             "its code cannot be exported")
        target = tree / script.resolve().relative_to(repo.resolve())
        target.write_bytes(copy.read_bytes())
        notes.append(f"The script as run (uncommitted on {a[:12]}): the run's saved copy {run['script_copy']}.")
    return notes


def _message(name: str, run: dict, before: dict, note: str) -> str:
    timing = run.get("timing") or {}
    return br.evidence_message(name, run.get("description") or run.get("slug") or "measured change", run["exp_id"],
                               run.get("page"), statement=run.get("hypothesis"), verdict=run.get("verdict"),
                               gain_pct=run.get("gain_pct"), interval=timing.get("interval_pct"),
                               rounds=timing.get("rounds") or run.get("repeats"), before=before.get("metrics") or {},
                               after=run.get("metrics") or {}, maker=MAKER, note=note)


def perf_md(name: str, pairs: list[tuple[dict, dict]], out: dict) -> str:
    rows = ["| # | change | measured against | tokens/s before → after | gain (95 % interval) | verdict | branch | "
            "experiment |", "|---|---|---|---|---|---|---|---|"]
    branch_of = {b["n"]: b["branch"] for b in out["branches"]}
    branch_of.update({x["n"]: "— (nothing to export, below)" for x in out.get("nothing") or []})
    for n, (run, before) in enumerate(pairs, 1):
        iv = (run.get("timing") or {}).get("interval_pct") or []
        ci = f" [{iv[0]:+.2f}, {iv[1]:+.2f}]" if len(iv) == 2 else ""
        rows.append(f"| {n} | {run.get('description') or run.get('slug')} | {before['exp_id']} | "
                    f"{(before.get('metrics') or {}).get('tokens_per_s')} → {(run.get('metrics') or {}).get('tokens_per_s')} | "
                    f"{(run.get('gain_pct') or 0):+.2f} %{ci} | {run.get('verdict')} | "
                    f"{branch_of.get(n, '— (settings below)')} | wiki/{run.get('page')} |")
    text = [f"# Performance changes: {name}", "",
            f"{len(pairs)} run(s) made by hand, exported with `tools exp export`; each gain is the run's own "
            "interleaved comparison against the run named.", "", *rows, ""]
    if out["settings"]:
        text += ["## Settings to apply", ""]
        text += [f"- #{s['n']} ({s['exp_id']}): "
                 + (", ".join(f"`{k}={v}`" for k, v in {**s["knobs"], **s["env"]}.items())
                    or f"launch with `{s['command']}`") for s in out["settings"]] + [""]
    if out.get("nothing"):
        text += ["## Nothing to export", "", *[f"- #{x['n']} ({x['exp_id']}): {x['why']}" for x in out["nothing"]], ""]
    if out.get("not_supported"):
        text += ["## Not offered as pull requests", "",
                 *[f"- {b}: its run was not `supported`" for b in out["not_supported"]], ""]
    return "\n".join(text)
