"""Measured changes as reviewable git branches, shared by `tools loop finalize` and `tools exp export`: the commit
message that carries a change's evidence, a knob written into the model's own launch script or config file, work
trees of their own (the user's checkout is never touched), and draft pull requests through the `gh` on PATH.

Run twice, they converge: each commit is dated by the run it carries (the date in its experiment id), so the same
changes make the same commits and a second push moves nothing. Branch refs are set only once every commit is made
(a failure half-way leaves the branches as they were), never over a branch whose last commit someone else made,
and the work trees are removed whatever happens."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path

from ..errors import InputError, ToolsError
from ..gitrun import GIT_ENV, git, git_ok
from ..redact import redact
from ..writer import atomic_write

SLUG = re.compile(r"[^a-z0-9]+")
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")  # an export's name: one perf/<name>/ and one exports/<name>/
DAY = re.compile(r"\d{4}-\d{2}-\d{2}")


def check_name(name: str) -> str:
    if not NAME.fullmatch(name or "") or ".." in name or name.endswith((".", ".lock")):
        raise InputError("--name", f"{name!r}: letters, digits, '.', '_' and '-' only (at most 64), starting with a "
                                   "letter or digit: it names the branches perf/<name>/... and the folder "
                                   "exports/<name>/")
    return name


def dates(exp_ids: list[str], fallback: str) -> dict[str, str]:
    """Author and committer dates for a commit carrying these runs: the latest day in their experiment ids
    (``fallback``, a git date, when none has one), so the same changes make the same commit."""
    days = sorted(m.group(0) for e in exp_ids if (m := DAY.match(e or "")))
    when = f"{days[-1]}T12:00:00+00:00" if days else fallback
    return {"GIT_AUTHOR_DATE": when, "GIT_COMMITTER_DATE": when}


def config_path(tree: Path, config_file: str) -> Path:
    """``config_file`` inside the work tree ``tree``: a relative path in the repository, never out of it."""
    rel = Path(config_file)
    if rel.is_absolute() or ".." in rel.parts or not config_file.strip():
        raise InputError(config_file, "the config file must be a path inside the model's repository, relative to "
                                      "its top (the user's own checkout is never edited)")
    path = tree / rel
    if not path.resolve().is_relative_to(tree.resolve()):
        raise InputError(config_file, "leads out of the model's repository (a link); not edited")
    if not path.is_file():
        raise InputError(config_file, "no such file in the model's repository at the commit the change starts from")
    return path


def check_config(repo: Path, commit: str, config_file: str) -> None:
    """``config_file`` is a file of ``repo`` at ``commit`` (checked before any branch is made)."""
    rel = Path(config_file)
    if rel.is_absolute() or ".." in rel.parts or not config_file.strip():
        config_path(repo, config_file)  # raises with the reason
    if git(repo, "cat-file", "-t", f"{commit}:{rel.as_posix()}", check=False) != "blob":
        raise InputError(config_file, f"no such file in {repo} at {commit[:12]} (a path relative to the repository's "
                                      "top)")


def made_by(repo: Path, commit: str) -> str:
    """``tools loop finalize`` or ``tools exp export`` when the tools made ``commit`` (their identity and their
    ``made-by:`` line), else ""."""
    if git(repo, "log", "-1", "--format=%ce", commit, check=False) != GIT_ENV["GIT_COMMITTER_EMAIL"]:
        return ""
    m = MADE_BY.search(git(repo, "log", "-1", "--format=%B", commit, check=False))
    return m.group(1).strip() if m else ""


MADE_BY = re.compile(r"^made-by: (.+)$", re.M)
OURS = re.compile(r"(\d+-[a-z0-9-]+|all)")  # what follows perf/<name>/ in a branch the tools make


def owned_tips(repo: Path, names: list[str], prefix: str, maker: str) -> dict[str, str]:
    """The current tips of the branches this run will set (``names``) and of ``maker``'s older branches under
    ``prefix`` (perf/<name>/<n>-<change> and perf/<name>/all); InputError when one of ``names`` exists and
    ``maker`` did not make its last commit (someone's work, or the other tool's: never moved)."""
    for name in names:  # git keeps branches as paths: a branch perf/x leaves no room for perf/x/all
        parts = name.split("/")
        for i in range(1, len(parts)):
            above = "/".join(parts[:i])
            if git(repo, "rev-parse", "-q", "--verify", f"refs/heads/{above}", check=False):
                raise InputError(above, f"a branch of this name exists, so git cannot make {name} (a branch "
                                        "cannot also be a folder of branches): rename it, or choose another name")
    listed = git(repo, "for-each-ref", "--format=%(refname:short)", f"refs/heads/{prefix}", check=False).split()
    out = {}
    for b in dict.fromkeys([*names, *listed]):
        tip = git(repo, "rev-parse", "-q", "--verify", f"refs/heads/{b}", check=False)
        if not tip:
            continue
        who = made_by(repo, tip)
        if who != maker:
            if b in names:
                raise InputError(b, f"this branch exists and its last commit ({tip[:12]}) was made "
                                    + (f"by `{who}`" if who else "by someone else")
                                    + ": it is never moved; rename or delete it, or choose another name")
            continue
        if b in names or OURS.fullmatch(b[len(prefix):]):
            out[b] = tip
    return out


def check_not_checked_out(repo: Path, branches: list[str]) -> None:
    """InputError when one of ``branches`` is checked out in a work tree of ``repo``: git will not move it, and
    moving the others would leave them out of step."""
    listed = git(repo, "worktree", "list", "--porcelain", check=False)
    out = {line.removeprefix("branch refs/heads/"): where for where, line in _worktree_branches(listed)}
    for b in branches:
        if b in out:
            raise InputError(b, f"checked out in {out[b]}: switch that work tree to another branch first (nothing "
                                "was moved)")


def _worktree_branches(porcelain: str) -> list[tuple[str, str]]:
    pairs, where = [], ""
    for line in porcelain.splitlines():
        if line.startswith("worktree "):
            where = line.removeprefix("worktree ")
        elif line.startswith("branch refs/heads/"):
            pairs.append((where, line))
    return pairs


def set_branches(repo: Path, tips: dict[str, str], old: dict[str, str]) -> list[str]:
    """Point each branch at its tip (every commit made first) and delete the older branches of this maker under the
    same name that this run did not make again, in one transaction: all move, or none. The branches deleted."""
    gone = [b for b in old if b not in tips]
    lines = ["start"]
    for branch, tip in tips.items():
        lines.append(f"update refs/heads/{branch} {tip} {old.get(branch) or '0' * len(tip)}")  # 0…: must not exist
    for b in gone:
        lines.append(f"delete refs/heads/{b} {old[b]}")
    git(repo, "update-ref", "--stdin", input="\n".join([*lines, "prepare", "commit", ""]))
    return gone


def check_patches_dir(patches_dir: Path) -> None:
    """InputError when the patch series could not be written at ``patches_dir`` (checked before a branch moves)."""
    try:
        patches_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise InputError(str(patches_dir), f"cannot hold the patch series: {e.strerror}") from None
    if not os.access(patches_dir, os.W_OK):
        raise InputError(str(patches_dir), "cannot hold the patch series: not writable")


def slug(text: str | None) -> str:
    return SLUG.sub("-", (text or "").lower()).strip("-")[:40] or "change"


def evidence_message(name: str, title: str, exp_id: str, page: str, *, statement: str | None, verdict: str | None,
                     gain_pct: float | None, interval: list | None, rounds, before: dict, after: dict,
                     maker: str, hypothesis_page: str | None = None, note: str = "") -> str:
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
    return "\n".join(lines + ["", f"made-by: {maker}", f"exp: {exp_id}"]) + "\n"


def edit_config(tree: Path, config_file: str, knobs: dict) -> list[str]:
    """Set each knob in a launch script (``--knob value`` / ``--knob=value``) or a YAML file (``knob: value``) at
    ``config_file`` of the work tree ``tree``; the knobs not found are returned."""
    path = config_path(tree, config_file)
    text, missing = with_knobs(path.read_text(encoding="utf-8"), path.suffix in (".yml", ".yaml"), knobs)
    atomic_write(path, text)
    return missing


def with_knobs(text: str, yaml_file: bool, knobs: dict) -> tuple[str, list[str]]:
    """``text`` with each knob set, and the knobs not found (or not settable without guessing). YAML: ``knob: value``
    where exactly one line holds the key with a value. A launch script: a knob's value is the arguments that set it
    (``Knob.args``: ``["--pad-sleep-ms", "0"]``, ``["--no-scan"]``), or a value set as ``--knob-name value``
    (booleans: ``--knob`` / ``--no-knob``); each flag's value replaced where it is a plain word, never shell syntax
    (``"$@"``, a line's continuation ``\\``, ``&&``)."""
    missing = []
    for key, value in knobs.items():
        if yaml_file and isinstance(value, dict):  # a `flags:` knob (a shape): each of its keys set, or none
            new = text
            for k, v in value.items():
                new = None if new is None or isinstance(v, (dict, list)) else _yaml_set(new, str(k), v)
        elif yaml_file:
            new = None if isinstance(value, list) else _yaml_set(text, key, value)
        else:
            new = _script_set(text, value if isinstance(value, list) else flag_args(key, value))
        if new is None:
            missing.append(key)
        else:
            text = new
    return text, missing


def flag_args(key: str, value) -> list[str]:
    flag = "--" + key.replace("_", "-")
    if isinstance(value, bool):
        return [flag] if value else ["--no-" + flag[2:]]
    return [flag, str(value)]


_WORD = r"[^\s\\;&|$'\"`<>()]+"  # a plain value word: not "$@", a continuation, an operator or a quote


def _yaml_set(text: str, key: str, value) -> str | None:
    import yaml

    # as YAML writes the scalar: the string "yes" stays a string, "#fff" is quoted, not a comment
    v = yaml.safe_dump(value, default_flow_style=True, width=1 << 30).removesuffix("\n...\n").strip()
    rx = re.compile(rf"^([ \t]*{re.escape(key)}[ \t]*:[ \t]*)(?![\s#|>])[^\n]*?((?:[ \t]+#[^\n]*)?)$", re.M)
    if len(rx.findall(text)) != 1:  # absent, a block, or at two places (model.dtype and optimizer.dtype): which?
        return None
    return rx.sub(lambda m: m.group(1) + v + m.group(2), text)


def _script_set(text: str, args: list[str]) -> str | None:
    """``text`` with each flag of ``args`` set, or None where one is not on exactly one line outside comments (a
    comment's example, an `echo` of it, a second command's flag: which one launches the run?)."""
    if not args:  # a knob whose value gives no argument: nothing to write, and no empty edit counted as one
        return None
    i = 0
    while i < len(args):
        flag = args[i]
        value = args[i + 1] if i + 1 < len(args) and not args[i + 1].startswith("--") else None
        i += 1 if value is None else 2
        if value is None:  # a switch: --flag and --no-flag are one setting, the token swapped
            base = flag[2:].removeprefix("no-")
            rx = re.compile(rf"(?<![\w-])--(?:no-)?{re.escape(base)}(?![\w=-])")
            put = (lambda m, flag=flag: flag)
        else:
            rx = re.compile(rf"(?<![\w-])({re.escape(flag)})(=|[ \t]+)(?!--){_WORD}")
            put = (lambda m, value=value: m.group(1) + m.group(2) + shlex.quote(value))
        lines = text.splitlines(keepends=True)
        hits = [n for n, line in enumerate(lines) if not line.lstrip().startswith("#") for _ in rx.finditer(line)]
        if len(hits) != 1:
            return None
        lines[hits[0]] = rx.sub(put, lines[hits[0]])
        text = "".join(lines)
    return text


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


def commit(tree: Path, message: str, when: dict[str, str]) -> str:
    """Commit everything in ``tree`` (empty allowed) with the dates ``when``; the commit (no branch moved yet)."""
    git(tree, "add", "-A")
    git(tree, "commit", "-q", "--allow-empty", "-m", redact(message), env=when)
    return git(tree, "rev-parse", "HEAD")


def combine(repo: Path, tree: Path, start: str, branches: list[dict], combined: str, perf_md: str,
            subject: str, when: dict[str, str], maker: str, config_file: str | None = None) -> str:
    """Every branch's tip commit picked in order onto ``start``, then PERF.md; the commit that ``combined`` will
    point at. A branch's ``knobs`` (the flags it wrote into ``config_file``) are written again into the file as
    combined so far where its pick conflicts there: two flags on one line of a launch script are two changes,
    not a conflict."""
    worktree(repo, tree, start)
    for b in branches:  # a stacked branch's tip is its own change alone: its parent is already in
        if git_ok(tree, "cherry-pick", "--allow-empty", "--keep-redundant-commits", b["commit"], env=when):
            continue
        knobs = (b.get("edits") or b.get("knobs")) if config_file else None  # the arguments it wrote
        clash = git(tree, "diff", "--name-only", "--diff-filter=U").splitlines()
        if knobs and clash == [Path(config_file).as_posix()] and _only_knobs(tree, b["commit"], config_file, knobs):
            git(tree, "checkout", "--ours", "--", config_file)  # the file as combined so far, then its flags
            if not edit_config(tree, config_file, knobs):
                git(tree, "add", "--", config_file)
                if git_ok(tree, "cherry-pick", "--continue", env={**when, "GIT_EDITOR": "true"}):
                    continue
        git_ok(tree, "cherry-pick", "--abort")
        raise ToolsError(f"{b['branch']} does not apply on top of the changes before it in {combined}")
    atomic_write(tree / "PERF.md", redact(perf_md))
    git(tree, "add", "PERF.md")
    git(tree, "commit", "-q", "-m", f"{subject.rstrip()}\n\nmade-by: {maker}\n", env=when)
    return git(tree, "rev-parse", "HEAD")


def _only_knobs(tree: Path, commit: str, config_file: str, knobs: dict) -> bool:
    """Whether ``commit``'s change to the config file is exactly ``knobs`` set in its parent's version: then it can
    be made again on any version; a change holding more (other flags, code) is no knob edit to redo."""
    before = git(tree, "show", f"{commit}^:{Path(config_file).as_posix()}", check=False)
    after = git(tree, "show", f"{commit}:{Path(config_file).as_posix()}", check=False)
    redone, missing = with_knobs(before, Path(config_file).suffix in (".yml", ".yaml"), knobs)
    return bool(before) and not missing and redone == after


PATCH = re.compile(r"\d{4}-.*\.patch")


def clear_patches(patches_dir: Path, name: str | None = None) -> list[str]:
    """Remove an earlier series of the tools' from ``patches_dir`` (a numbered patch whose commits the tools
    made; a person's patches stay), only ``perf(<name>)``'s when ``name`` is given; the names removed."""
    patches_dir.mkdir(parents=True, exist_ok=True)
    gone = []
    for old in sorted(patches_dir.iterdir()):
        head = old.read_text(encoding="utf-8", errors="replace")[:4000] if PATCH.fullmatch(old.name) \
            and old.is_file() and not old.is_symlink() else ""
        head = re.sub(r"\n[ \t]+", " ", head)  # a long subject is folded onto the next line
        ours = rf"^Subject: (?:\[PATCH[^\]]*\]\s+)?perf\({re.escape(name or '')}\):"
        if f"From: {GIT_ENV['GIT_AUTHOR_NAME']} <{GIT_ENV['GIT_AUTHOR_EMAIL']}>" in head and \
                (name is None or re.search(ours, head, re.M)):
            old.unlink()
            gone.append(old.name)
    return gone


def format_patches(repo: Path, start: str, combined: str, patches_dir: Path) -> list[str]:
    """A ``git format-patch`` series of ``start..combined`` in ``patches_dir``; an earlier series of the tools'
    there (a numbered patch whose commits the tools made) is removed first, so the folder holds one series."""
    clear_patches(patches_dir)
    made = git(repo, "format-patch", "-o", str(patches_dir.resolve()), f"{start}..{combined}")
    return sorted(Path(p).name for p in made.splitlines() if p.strip())


def pull_requests(repo: Path, branches: list[dict], remote: str, base: str,
                  old: dict[str, str] | None = None) -> list[dict]:
    """Push each branch to ``remote`` and open a draft pull request against ``base`` with the `gh` on PATH (its
    title and body: the branch's last commit message), or find the one open for it. ``old``: each branch's tip
    before this run. Refused before anything is pushed when `gh` is missing or not logged in."""
    gh = check_gh()
    out = []
    for b in branches:
        _push(repo, remote, b["branch"], (old or {}).get(b["branch"]))
        title = git(repo, "log", "-1", "--format=%s", b["branch"])
        body = git(repo, "log", "-1", "--format=%b", b["branch"])
        open_pr = subprocess.run([gh, "pr", "list", "--head", b["branch"], "--state", "open", "--json", "url",
                                  "--jq", ".[0].url // empty"], cwd=repo, capture_output=True, text=True, timeout=120)
        if open_pr.returncode == 0 and open_pr.stdout.strip():  # one pull request a branch: the push updated it
            out.append({"branch": b["branch"], "url": open_pr.stdout.strip().splitlines()[-1], "existing": True})
            continue
        r = subprocess.run([gh, "pr", "create", "--draft", "--base", base, "--head", b["branch"], "--title", title,
                            "--body", body], cwd=repo, capture_output=True, text=True, timeout=120)
        if r.returncode != 0:
            raise ToolsError(f"gh pr create for {b['branch']}: {(r.stderr or r.stdout).strip()[:400]}")
        out.append({"branch": b["branch"], "url": r.stdout.strip().splitlines()[-1] if r.stdout.strip() else ""})
    return out


def check_gh() -> str:
    """The `gh` on PATH, logged in; InputError otherwise (checked before a branch moves)."""
    gh = shutil.which("gh")
    if gh is None:
        raise InputError("--pr", "no `gh` on PATH: install the GitHub CLI and `gh auth login`, or leave out --pr")
    if subprocess.run([gh, "auth", "status"], capture_output=True, text=True, timeout=60).returncode != 0:
        raise InputError("--pr", "`gh auth status` failed: run `gh auth login` first")
    return gh


def check_remote(repo: Path, remote: str, base: str) -> None:
    """``remote`` must be one of the repository's remotes and ``base`` a branch name: a value starting with ``-``
    reached git as an option (``--upload-pack=<command>`` ran a command an agent chose)."""
    if base.startswith("-") or not base.strip():
        raise InputError("--base", f"{base!r} is not a branch name")
    remotes = git(repo, "remote").split()
    if remote not in remotes:
        raise InputError("--remote", f"{remote!r} is not a remote of {repo} (it has: {', '.join(remotes) or 'none'}; "
                                     "add one with `git remote add`)")
    # the pull requests' target, asked of the remote before any branch is pushed there (after it, `gh pr create`
    # failed with every branch pushed)
    there = subprocess.run(["git", "-C", str(repo), "ls-remote", "--exit-code", "--heads", remote,
                            f"refs/heads/{base}"],
                           capture_output=True, text=True, timeout=120, check=False, env=dict(os.environ, **GIT_ENV))
    if there.returncode == 2:
        raise InputError("--base", f"{remote} has no branch {base!r} for the pull requests to target")
    if there.returncode != 0:
        raise InputError("--remote", f"cannot read {remote}'s branches: {there.stderr.strip()[:300]}")


def _push(repo: Path, remote: str, branch: str, old: str | None) -> None:
    """Push ``branch``; the remote's copy is replaced only where it holds what the tools made before (``old``, the
    local tip before this run, or any commit of theirs this repository holds), never a commit someone pushed there
    since. The same changes make the same commits,
    so a re-run moves nothing."""
    tip = git(repo, "rev-parse", branch)
    there = (git(repo, "ls-remote", remote, f"refs/heads/{branch}").split() or [""])[0]
    if there == tip:
        return
    if there and there != old and not made_by(repo, there):  # a commit this repository does not hold, or a person's
        raise ToolsError(f"{remote}'s {branch} is at {there[:12]}, which this knowledge base did not make: not "
                         "overwritten (merge it by hand, or delete the remote branch)")
    lease = [f"--force-with-lease=refs/heads/{branch}:{there}"] if there else []
    git(repo, "push", "-q", *lease, remote, f"{branch}:refs/heads/{branch}")
