"""The CI performance gate against a named baseline: an A/A passes, an injected slowdown fails, another shape is
incomparable (exit 3), a crash fails, an unknown baseline is a usage error that runs nothing; the job summary and
the GitHub workflow `tools init --ci github` writes."""

from __future__ import annotations

import pytest

import json

import yaml
from _exp_helpers import exp_run, fake
from click.testing import CliRunner

from tools.cli import cli
from tools.experiments import records


def tools(project, *args):
    return CliRunner().invoke(cli, ["--root", str(project.root), *args])


def gate(project, *command, extra=()):
    r = tools(project, "exp", "gate", "--baseline", "main", "-q", *extra, "--", *command)
    return r.exit_code, json.loads(r.output.strip().splitlines()[-1]) if r.output.strip() else None


def _baseline(project) -> str:
    r = tools(project, "exp", "run", "--model", "m", "--lane", "l", "--variant", "s/tpu", "--baseline", "-q",
              "--", *fake("--step-ms", "20"))
    assert r.exit_code == 0, r.output
    (rec,) = records.lane_records(project.wiki, "m", "l")
    return rec["exp_id"]


@pytest.mark.slow
def test_the_gate_passes_an_a_a_fails_a_slowdown_and_refuses_another_shape(project, tmp_path):
    exp_id = _baseline(project)
    r = tools(project, "exp", "baseline", "tag", "main", exp_id, "--model", "m", "--lane", "l")
    assert r.exit_code == 0 and exp_id in r.output, r.output
    listed = json.loads(tools(project, "exp", "baseline", "list", "--json").output)
    assert listed["main"]["m/l"]["exp_id"] == exp_id and listed["main"]["m/l"]["tokens_per_s"] > 0
    assert json.loads(tools(project, "exp", "baseline", "show", "main").output)["exp_id"] == exp_id

    summary = tmp_path / "summary.md"
    code, v = gate(project, *fake("--step-ms", "20", "--noise-pct", "2"),
                   extra=("--summary", str(summary), "--max-regression", "15"))
    assert code == 0 and v["comparable"] and v["regression"] is False and v["decided"], v
    assert v["interval_pct"][0] >= -15.0 and v["baseline_exp"] == exp_id and v["rounds"] == 4
    assert "## Performance gate passed: no regression" in summary.read_text()

    code, v = gate(project, *fake("--step-ms", "30"))  # 50 % more time per step: an injected regression
    assert code == 1 and v["regression"] and v["interval_pct"][1] < -2.0, v
    assert v["page"].startswith("wiki/experiments/m/l/") and (project.root / v["page"]).is_file()

    code, v = gate(project, *fake("--step-ms", "20", "--batch", "8"))  # another shape: not comparable
    assert code == 3 and v["comparable"] is False and "another shape: batch 4 -> 8" in v["why"], v

    # noisy rounds that cannot decide: passed, said undecided; --strict fails them
    noisy = fake("--step-ms", "20.4", "--noise-pct", "25")
    code, v = gate(project, *noisy)
    if not v["decided"]:
        assert code == 0 and "undecided" in v["why"], v
        code, v = gate(project, *noisy, extra=("--strict",))
    assert v["decided"] or code == 1, v

    code, v = gate(project, *fake("--crash"))
    assert code == 1 and v["verdict"] == "crash", v

    # a tolerance wide enough lets the slowdown through, and says so
    code, v = gate(project, *fake("--step-ms", "22"), extra=("--max-regression", "30"))
    assert code == 0 and v["max_regression_pct"] == 30.0, v


@pytest.mark.slow
def test_a_slowdown_its_first_rounds_cannot_decide_is_measured_until_they_do(project):
    """A user's report: one disturbed experiment inflated the lane's noise model (σ ~80 % a round) and a 5x
    slowdown passed the gate as undecided after its two rounds. The gate adds rounds while its estimate is a
    regression the interval does not decide, and fails it; an A/A on that lane stops at its first look, passes."""
    exp_id = _baseline(project)
    assert tools(project, "exp", "baseline", "tag", "main", exp_id, "--model", "m", "--lane", "l").exit_code == 0
    exp_run(project, "--repeats", "4", command=fake("--step-ms", "20", "--noise-pct", "80"))  # the disturbed one

    code, v = gate(project, *fake("--step-ms", "100"), extra=("--repeats", "2"))
    assert code == 1 and v["regression"] and v["decided"] and v["interval_pct"][1] < -2.0, v
    assert v["rounds"] > 2, v
    # its looks shared the 5 %: each interval wider, and the answer says how wide (it said "95 %" whatever it was)
    assert v["confidence_pct"] > 95 and f"{v['confidence_pct']:g} % interval" in v["why"], v
    code, v = gate(project, *fake("--step-ms", "20"), extra=("--repeats", "2"))
    assert code == 0 and v["regression"] is False and v["rounds"] == 2, v
    # --max-repeats 0: exactly the rounds asked for, as before
    code, v = gate(project, *fake("--step-ms", "100"), extra=("--repeats", "2", "--max-repeats", "0"))
    assert v["rounds"] == 2 and code in (0, 1), v


def test_an_unknown_baseline_is_a_usage_error_that_runs_nothing(project):
    _baseline(project)
    before = len(records.lane_records(project.wiki, "m", "l"))
    r = tools(project, "exp", "gate", "--baseline", "nope", "--", *fake())
    assert r.exit_code == 2 and "no baseline named 'nope'" in r.output, r.output
    assert len(records.lane_records(project.wiki, "m", "l")) == before
    r = tools(project, "exp", "baseline", "tag", "main", "2026-01-01-v999-x", "--model", "m", "--lane", "l")
    assert r.exit_code == 2 and "is not an experiment of m/l" in r.output
    # a baseline whose run is gone (its page removed, the file edited by hand): the file and the way out are named
    exp_id = records.lane_records(project.wiki, "m", "l")[0]["exp_id"]
    assert tools(project, "exp", "baseline", "tag", "main", exp_id, "--model", "m", "--lane", "l").exit_code == 0
    store = project.wiki / "experiments" / "baselines.json"
    store.write_text(store.read_text().replace(exp_id, "2026-01-01-v999-gone"))
    r = tools(project, "exp", "gate", "--baseline", "main", "--", *fake())
    assert r.exit_code == 2 and "baselines.json" in r.output and "tools exp baseline tag main" in r.output, r.output
    # a timeout of 0 or nan filed a crash and failed the job as a regression (exit 1), or raised a traceback
    for bad in ("0", "-1", "nan", "inf"):
        r = tools(project, "exp", "gate", "--baseline", "nope", "--timeout", bad, "--", *fake())
        assert r.exit_code == 2 and "--timeout" in r.output and "a finite number above 0" in r.output, r.output
    assert len(records.lane_records(project.wiki, "m", "l")) == before


def test_init_writes_the_github_workflow(tmp_path):
    r = CliRunner().invoke(cli, ["init", str(tmp_path / "kb"), "--ci", "github", "--ci-runner", "v5e-8",
                                 "--ci-command", "python experiments/llama_train.py --preset tiny --steps 30"])
    assert r.exit_code == 0, r.output
    assert "TOOLS_SPEC is a placeholder" in r.output  # no --ci-tools: the job's install step would fail
    flow = yaml.safe_load((tmp_path / "kb/.github/workflows/perf-gate.yml").read_text())
    job = flow["jobs"]["gate"]
    assert flow[True] == {"pull_request": None} and job["runs-on"] == ["self-hosted", "v5e-8"]
    run = job["steps"][-1]["run"]
    assert "tools exp gate --baseline main" in run and "$GITHUB_STEP_SUMMARY" in run
    assert '--baseline-cwd "$GITHUB_WORKSPACE/.perf-gate-base"' in run
    assert job["steps"][1]["with"]["path"] == ".perf-gate-base" and job["steps"][-1]["working-directory"] == "."
    assert flow["permissions"] == {"contents": "read"} and "head.repo.full_name == github.repository" in job["if"]
    assert all(s_["with"]["persist-credentials"] is False for s_ in job["steps"][:2])
    assert run.strip().endswith("-- python experiments/llama_train.py --preset tiny --steps 30")
    # the command's `python` is the job's environment (the tools and their [exp] packages), which also sees the
    # runner's own packages; it was the runner's bare python, without what was just installed
    install = job["steps"][2]["run"]
    assert "python -m venv --system-site-packages .perf-gate-venv" in install
    assert run.index('export PATH="$GITHUB_WORKSPACE/.perf-gate-venv/bin:$PATH"') < run.index("tools exp gate")
    bad = CliRunner().invoke(cli, ["init", str(tmp_path / "kb2"), "--ci", "github", "--ci-runner", "a b"])
    assert bad.exit_code == 2 and "runner label" in bad.output


def test_a_knowledge_base_in_a_repository_s_subfolder_gets_its_workflow_at_the_repository_s_top(tmp_path):
    """`tools init kb --ci github` from a repository's top wrote kb/.github/workflows/perf-gate.yml, which GitHub
    never reads, and its gate ran at the checkout's top, where there is no wiki/."""
    import subprocess

    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    r = CliRunner().invoke(cli, ["init", str(repo / "team" / "kb"), "--ci", "github", "--ci-command",
                                 "python ../train.py --steps 8"])
    assert r.exit_code == 0, r.output
    assert not (repo / "team/kb/.github").exists()
    flow = yaml.safe_load((repo / ".github/workflows/perf-gate.yml").read_text())
    step = flow["jobs"]["gate"]["steps"][-1]
    assert step["working-directory"] == "team/kb" and '"$GITHUB_WORKSPACE/.perf-gate-base"' in step["run"]


@pytest.mark.slow
def test_the_baseline_runs_its_own_code_with_baseline_cwd(project, tmp_path):
    """A module the script imports got slower in the pull request: with --baseline-cwd (the base commit's
    checkout) the gate sees it; without, both arms run the new module, which the verdict says."""
    from _exp_helpers import FAKE, PY

    for where, ms in (("base", 20), ("head", 40)):
        d = tmp_path / where
        d.mkdir()
        (d / "speed.py").write_text(f"MS = {ms}\n")
        (d / "train.py").write_text("import subprocess, sys\nimport speed\n"
                                    f"sys.exit(subprocess.call([sys.executable, {FAKE!r}, '--step-ms', str(speed.MS)]))\n")
    import os

    here = os.getcwd()
    try:
        os.chdir(tmp_path / "base")
        r = tools(project, "exp", "run", "--model", "m", "--lane", "l", "--variant", "s/tpu", "--baseline", "-q",
                  "--", PY, "train.py")
        assert r.exit_code == 0, r.output
        (rec,) = records.lane_records(project.wiki, "m", "l")
        assert tools(project, "exp", "baseline", "tag", "main", rec["exp_id"], "--model", "m", "--lane", "l").exit_code == 0
        os.chdir(tmp_path / "head")
        code, v = gate(project, PY, "train.py", extra=("--baseline-cwd", str(tmp_path / "base")))
        assert code == 1 and v["regression"] and v["baseline_code"] == str((tmp_path / "base").resolve()), v
        import shutil

        shutil.rmtree(tmp_path / "base")  # as in CI: the folder the baseline ran in is this checkout
        code, v = gate(project, PY, "train.py")
        assert code == 0 and abs(v["gain_pct"]) < 1 and "this checkout" in v["baseline_code"], v
    finally:
        os.chdir(here)


def test_what_the_gate_cannot_compare_with_is_a_usage_error_that_runs_nothing(project, tmp_path):
    exp_id = _baseline(project)
    assert tools(project, "exp", "baseline", "tag", "main", exp_id, "--model", "m", "--lane", "l").exit_code == 0
    before = len(records.lane_records(project.wiki, "m", "l"))
    # nan compares false with everything: the gate would pass whatever it measured
    for limit in ("nan", "-5", "inf", "150"):
        r = tools(project, "exp", "gate", "--baseline", "main", "--max-regression", limit, "--", *fake())
        assert r.exit_code == 2 and "a percent from 0 to 100" in r.output, (limit, r.output)
    r = tools(project, "exp", "gate", "--baseline", "main", "--summary", str(tmp_path / "no-dir" / "sum.md"), "--",
              *fake())
    assert r.exit_code == 2 and "its folder does not exist" in r.output, r.output
    assert len(records.lane_records(project.wiki, "m", "l")) == before
    # a hand-edited baselines.json: the file and the entry named, never a traceback
    store = project.wiki / "experiments" / "baselines.json"
    for junk in ({"main": {"m/l": 5}}, {"main": {"m/l": {}}}, {"main": {"m/l": {"model": "m", "lane": "l"}}}):
        store.write_text(json.dumps(junk))
        for args in (("exp", "gate", "--baseline", "main", "--", *fake()), ("exp", "baseline", "list"),
                     ("exp", "baseline", "show", "main")):
            r = tools(project, *args)
            listed = args[2] == "list"  # the list names it and goes on
            assert r.exit_code == (0 if listed else 2) and "baselines.json: main / m/l: not an entry" in r.output, \
                (junk, args, r.output)
            assert r.exception is None or isinstance(r.exception, SystemExit), repr(r.exception)
    assert len(records.lane_records(project.wiki, "m", "l")) == before
    # the way out the error names works: tagging it again replaces the bad entry
    assert tools(project, "exp", "baseline", "tag", "main", exp_id, "--model", "m", "--lane", "l").exit_code == 0
    assert json.loads(tools(project, "exp", "baseline", "show", "main").output)["exp_id"] == exp_id


def test_the_workflow_quotes_where_the_tools_come_from(tmp_path):
    for n, spec in enumerate(("/opt/tools #v2", "@/opt/x: y", "git+https://example.org/t.git@abc123")):
        r = CliRunner().invoke(cli, ["init", str(tmp_path / f"kb{n}"), "--ci", "github", "--ci-tools", spec])
        assert r.exit_code == 0, r.output
        flow = yaml.safe_load((tmp_path / f"kb{n}/.github/workflows/perf-gate.yml").read_text())
        assert flow["env"]["TOOLS_SPEC"] == spec


@pytest.mark.slow
def test_a_cancelled_gate_and_a_command_that_cannot_start_are_no_regression(project, tmp_path):
    """A CI cancel (SIGTERM) exits as a stopped process does, with no regression claimed; a command that cannot
    start is usage (exit 2), filing nothing; the commands' echo leaves stdout to the one JSON verdict."""
    import os
    import signal
    import subprocess
    import sys
    import time

    exp_id = _baseline(project)
    assert tools(project, "exp", "baseline", "tag", "main", exp_id, "--model", "m", "--lane", "l").exit_code == 0
    code, v = gate(project, *fake("--hang"), extra=("--timeout", "2"))  # a timeout is said as one, not a crash
    assert code == 1 and v["why"] == "the command did not finish: timed out after 2 s" and v["decided"] is True, v
    before = len(records.lane_records(project.wiki, "m", "l"))
    r = tools(project, "exp", "gate", "--baseline", "main", "-q", "--", "pythn-no-such", "train.py")
    assert r.exit_code == 2 and "cannot start 'pythn-no-such'" in r.output, r.output
    assert len(records.lane_records(project.wiki, "m", "l")) == before

    env = dict(os.environ, AUTORESEARCH_ROOT=str(project.root))
    # without -q: the commands' output goes to stderr, stdout is the verdict alone
    p = subprocess.run([sys.executable, "-m", "tools", "exp", "gate", "--baseline", "main", "--", *fake()], env=env,
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    assert json.loads(p.stdout)["regression"] is False and "fake training" in p.stderr
    summary = tmp_path / "summary.md"
    logs = project.root / "raw/profiles"
    earlier = set(logs.glob("*gate-main*/run*.log"))  # the gates above left theirs: wait for this one's
    gate_p = subprocess.Popen([sys.executable, "-m", "tools", "exp", "gate", "--baseline", "main", "-q",
                               "--summary", str(summary), "--", *fake("--hang")], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    end = time.monotonic() + 120  # the command printing: the gate is inside its signal handling by then

    def training() -> bool:
        return any("fake training" in p.read_text(errors="replace") for p in set(logs.glob("*gate-main*/run*.log"))
                   - earlier)
    while not training() and time.monotonic() < end:
        time.sleep(0.2)
    gate_p.send_signal(signal.SIGTERM)
    out, err = gate_p.communicate(timeout=60)
    assert gate_p.returncode == 143, (out, err[-2000:])
    v = json.loads(out)
    assert v["regression"] is None and v["comparable"] is False and "stopped by SIGTERM" in v["why"], v
    assert v["decided"] is False, v  # every answer carries the same keys: `jq .decided` never reads null
    # the job summary says so (it read "## Performance gate 143" and "tokens/s None")
    text = summary.read_text()
    assert "## Performance gate stopped (SIGTERM): nothing was decided" in text and "None" not in text, text


@pytest.mark.slow
def test_a_model_in_a_subfolder_its_protected_code_and_a_lost_script(project, tmp_path, monkeypatch):
    """The baseline ran in model/ of the knowledge base: --baseline-cwd (a checkout of the repository) ran it in the
    checkout's top and failed (exit 3 every time); a saved script copy rerun from raw/profiles could not import its
    sibling module; --protect at the baseline did not protect the gate; and a script changed since, whose saved copy
    is gone (a fresh clone), was gated against itself and passed."""
    import shutil

    from _exp_helpers import FAKE, PY

    model = project.root / "model"
    model.mkdir()
    (model / "speed.py").write_text("MS = 20\n")
    (model / "train.py").write_text("import subprocess, sys\nimport speed\n"
                                    f"sys.exit(subprocess.call([sys.executable, {FAKE!r}, '--step-ms', str(speed.MS)]))\n")
    monkeypatch.chdir(model)
    for lane, extra in (("l", ()), ("p", ("--protect", "train.py"))):
        r = tools(project, "exp", "run", "--model", "m", "--lane", lane, "--variant", "s/tpu", "--baseline", "-q",
                  *extra, "--", PY, "train.py")
        assert r.exit_code == 0, r.output
        (rec,) = records.lane_records(project.wiki, "m", lane)
        assert rec["cwd"] == "model"
        assert tools(project, "exp", "baseline", "tag", f"main-{lane}", rec["exp_id"], "--model", "m",
                     "--lane", lane).exit_code == 0
    checkout = tmp_path / "checkout"  # the base commit's checkout, as CI makes it: the model at model/ there too
    shutil.copytree(model, checkout / "model")

    def gated(name, *extra):
        r = tools(project, "exp", "gate", "--baseline", name, "-q", *extra, "--", PY, "train.py")
        return r.exit_code, json.loads(r.output.strip().splitlines()[-1])

    (model / "speed.py").write_text("MS = 40\n")  # the pull request slows the module down
    code, v = gated("main-l", "--baseline-cwd", str(checkout))
    assert code == 1 and v["regression"], v

    (model / "speed.py").write_text("MS = 20\n")
    (model / "train.py").write_text((model / "train.py").read_text() + "# reviewed\n")
    code, v = gated("main-l")  # the saved copy reruns, and imports speed from where the script is
    assert code == 0 and "saved copy" in " ".join(v["notes"]), v
    code, v = gated("main-p")  # the protected script changed: no speed verdict holds
    assert code == 3 and any("protected" in r for r in v["reasons"]), v

    rec = records.lane_records(project.wiki, "m", "l")[0]
    shutil.rmtree(project.root / rec["raw_dir"] / "code")  # a fresh clone: raw/profiles is not committed
    code, v = gated("main-l", "--summary", str(tmp_path / "summary.md"))
    assert code == 3 and "saved copy is not here" in v["why"] and "--baseline-cwd" in v["why"], v
    assert "nothing was run" in (tmp_path / "summary.md").read_text()
    assert len(records.lane_records(project.wiki, "m", "l")) == 3  # refused before running anything
    code, v = gated("main-l", "--baseline-cwd", str(checkout))  # with the base commit's checkout it runs
    assert code == 0 and v["comparable"], v


def test_only_a_checkout_said_to_be_one_is_trusted_over_the_saved_copy(project, tmp_path):
    """From a review: every folder given to rerun a record in was trusted as its code, so the loop's reference
    check, which reruns the reference in the trunk's work tree, ran the patched trunk script as the reference."""
    import hashlib

    from tools.experiments.sides import record_side

    tree = tmp_path / "trunk"
    tree.mkdir()
    (tree / "train.py").write_text("print('patched')\n")
    saved = project.root / "raw/profiles/ref/code/train.py"
    saved.parent.mkdir(parents=True)
    saved.write_text("print('reference')\n")
    rec = {"exp_id": "ref", "command": "python train.py", "cwd": str(tree), "env": {},
           "script_copy": "raw/profiles/ref/code/train.py",
           "script_sha256": hashlib.sha256(b"print('reference')\n").hexdigest()[:16]}
    side, notes = record_side(project, rec, tree, None)
    assert side.command[-1] == str(saved) and "saved copy" in " ".join(notes)
    side, notes = record_side(project, rec, tree, None, checkout=True)
    assert side.command == ["python", "train.py"] and side.cwd == tree


def test_a_gate_without_a_knowledge_base_is_a_usage_error_not_a_regression(tmp_path):
    """`tools exp gate` where there is no wiki/ (a workflow run from the wrong folder) exited 1, a regression to CI,
    with no verdict."""
    from click.testing import CliRunner

    from tools.cli import cli

    r = CliRunner().invoke(cli, ["--root", str(tmp_path / "none"), "exp", "gate", "--baseline", "main", "--", *fake()])
    assert r.exit_code == 2 and "no wiki/ folder" in r.output, (r.exit_code, r.output)
