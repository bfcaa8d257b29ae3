"""`tools exp run` end to end with a fast stand-in script: verdicts, crash, timeout, concurrency."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest
from _exp_helpers import HERE, PY, exp_run, fake
from click.testing import CliRunner

from tools import pages
from tools.cli import cli
from tools.errors import InputError
from tools.experiments import ledger, records, report
from tools.experiments.context import RunContext
from tools.experiments.runner import RunSpec, run_experiment


run = exp_run


def lane(project):
    return records.lane_records(project.wiki, "m", "l")


def rows(project):
    return ledger.read((project.wiki / "experiments/m/l/RESULTS.tsv").read_text())


def test_baseline_then_interleaved_variants(project):
    run(project, "-m", "baseline", command=fake("--step-ms", "10"))
    out = run(project, "-m", "faster", "--repeats", "2", "--hypothesis", "halving the step time doubles tokens/s",
              command=fake("--step-ms", "5"))
    assert ": supported (keep)" in out
    run(project, "-m", "decoy", "--repeats", "2", command=fake("--step-ms", "4", "--loss-shift", "-0.5"))
    run(project, "-m", "slower", "--repeats", "2", command=fake("--step-ms", "20"))
    recs = lane(project)
    assert [r["version"] for r in recs] == [1, 2, 3, 4]
    assert [r["verdict"] for r in recs] == ["baseline", "supported", "invalid", "refuted"]
    assert recs[0]["role"] == "baseline"
    faster = recs[1]
    assert faster["interleaved"] is True and faster["gain_pct"] == pytest.approx(100.0, rel=1e-3)
    assert faster["runs_tokens_per_s"]["baseline"] == [pytest.approx(1024 / 0.01)] * 2
    assert faster["runs_tokens_per_s"]["variant"] == [pytest.approx(1024 / 0.005)] * 2
    assert faster["timing"]["rounds"] == 2 and faster["timing"]["interval_pct"][0] > 0
    # MFU checkable by hand from the page: FLOPs per step / step time / (peak per device x devices)
    m = faster["metrics"]
    assert m["flops_per_step_causal"] == 1e9 and m["step_time_ms"] == 5.0 and m["n_devices"] == 4
    assert m["mfu_causal_percent"] == round(100 * 1e9 / 0.005 / (197e12 * 4), 3)
    page = (project.wiki / faster["page"]).read_text()
    assert "1e+09 FLOP / 0.005 s / (1.97e+14 FLOP/s × 4) = 0.025 % (causal)" in page
    assert faster["semantics"]["status"] == "ok" and faster["semantics"]["tol"] == 0.025
    assert faster["metrics"]["mfu_basis"] == "causal" and faster["metrics"]["mfu_causal_percent"] > 0
    assert recs[2]["semantics"]["status"] == "changed"
    # the decoy's trajectory broke on its first round: no more rounds were spent on it
    assert sorted(p.name for p in (project.root / recs[2]["raw_dir"]).glob("*.log")) == ["baseline-1.log", "run-1.log"]
    # every timed run of both arms left a log
    raw = project.root / recs[1]["raw_dir"]
    assert sorted(p.name for p in raw.glob("*.log")) == ["baseline-1.log", "baseline-2.log", "run-1.log", "run-2.log"]
    # ledger: one row per run, autoresearch statuses
    assert [r["status"] for r in rows(project)] == ["keep", "keep", "discard", "discard"]
    assert [r["verdict"] for r in rows(project)] == ["baseline", "supported", "invalid", "refuted"]
    assert float(rows(project)[1]["gain_pct"]) == pytest.approx(100.0, rel=1e-3)
    assert float(rows(project)[1]["flops_per_step_causal"]) == 1e9 and rows(project)[1]["rounds"] == "2"
    # pages validate and have the sections; the model page's best is the supported run
    for r in recs:
        text = (project.wiki / r["page"]).read_text()
        meta, body = pages.split(text)
        assert [p for p in pages.validate(r["page"], meta, body) if p.severity == "error"] == []
        for s in ("## Hypothesis under test", "## Setup", "## Results", "## Profile", "## HLO", "## Verdict"):
            assert s in body
    model = (project.wiki / "models/m-l.md").read_text()
    meta, body = pages.split(model)
    assert meta["type"] == "model" and meta["model"] == "m"
    variants = pages.regions(body)["variants"]
    assert recs[0]["exp_id"] in variants and recs[1]["exp_id"] in variants and "+100.0 %" in variants
    # the model page written from the records in hand equals one recomputed from the pages on disk
    assert pages.regions(body) == pages.regions(report.model_page("m", "l", recs).body)
    assert "exp run | m/l" in (project.wiki / "log.md").read_text()


def test_crash_is_filed_with_log_tail(project):
    run(project, "-m", "oom", command=fake("--crash"), code=1)  # a crashed run: `tools exp run` exits 1
    (r,) = lane(project)
    assert r["verdict"] == "crash" and r["status"] == "filed"
    body = (project.wiki / r["page"]).read_text()
    assert "RESOURCE_EXHAUSTED" in body and "exit code 3" in body
    assert r["reasons"] == ["out of memory (RESOURCE_EXHAUSTED in the log), exit code 3"]
    assert rows(project)[0]["status"] == "crash"
    # a crash is not a baseline: the next good run becomes it
    run(project, "-m", "good", command=fake())
    assert lane(project)[1]["role"] == "baseline"


def test_hang_hits_timeout(project):
    run(project, "--timeout", "1.5", "-m", "hang", command=fake("--hang"), code=1)
    (r,) = lane(project)
    assert r["verdict"] == "crash"
    assert "timed out after 1.5 s" in (project.wiki / r["page"]).read_text()


def test_concurrent_runs_get_distinct_versions_and_rows(project):
    env = dict(os.environ, AUTORESEARCH_ROOT=str(project.root))
    procs = [subprocess.Popen([PY, "-m", "tools", "exp", "run", "--model", "m", "--lane", "l", "--variant", "s/tpu",
                               "-q", "-m", f"run {i}", "--", *fake()], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT) for i in range(3)]
    outs = [p.communicate(timeout=120)[0].decode() for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    recs = lane(project)
    assert sorted(r["version"] for r in recs) == [1, 2, 3]
    assert len(rows(project)) == 3 and len({r["exp_id"] for r in rows(project)}) == 3
    assert sum(r["role"] == "baseline" for r in recs) == 1


def test_a_run_filed_while_an_explicit_baseline_runs_does_not_take_its_place(project):
    """A loop's `--baseline` run still running, a plain run filed meanwhile in its lane became the variant's baseline
    too (the first good run of a variant does); being later by version, it was the one every later run compared
    with, measured under the contention."""
    env = dict(os.environ, AUTORESEARCH_ROOT=str(project.root))
    slow = subprocess.Popen([PY, "-m", "tools", "exp", "run", "--model", "m", "--lane", "l", "--variant", "s/tpu",
                             "-q", "--baseline", "--trust-step-times", "-m", "explicit", "--", "sh", "-c",
                             'sleep 4; exec "$0" "$@"', *fake()], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while not lane(project) and time.monotonic() < deadline:  # its page reserves v001 ("in_progress")
        time.sleep(0.05)
    assert lane(project) and lane(project)[0]["status"] == "in_progress"
    run(project, "-m", "intruder", command=fake())
    assert slow.wait(timeout=120) == 0, slow.communicate()[0]
    roles = {r["description"]: r["role"] for r in lane(project)}
    assert roles == {"explicit": "baseline", "intruder": "variant"}, roles
    assert records.baseline_for(lane(project), "s/tpu")["description"] == "explicit"


def _sabotaged(project, slug: str, action: str) -> dict:
    """A baseline of the stand-in script, then a variant that does ``action`` (Python source) from its own process
    before it runs the same script faster: the variant's filed record."""
    import shutil

    shutil.copy(HERE / "fake_train.py", project.root / "train.py")
    (project.root / "variant.py").write_text(
        f"import runpy, sys\n{action}\nsys.argv = ['train.py', '--step-ms', '5']\n"
        f"runpy.run_path({str(HERE / 'fake_train.py')!r}, run_name='__main__')\n")
    run(project, "--baseline", "-m", f"base-{slug}", command=[PY, "train.py"])
    run(project, "--repeats", "2", "-m", slug, command=[PY, "variant.py"], trust=True)
    return lane(project)[-1]


def test_a_variant_that_rewrites_the_baselines_script_is_invalid(project, monkeypatch):
    """A variant that rewrote the baseline's script from its own process (slowing every later baseline arm) was
    `supported` +69.7 % for a program that computes exactly what the baseline does."""
    monkeypatch.chdir(project.root)
    rec = _sabotaged(project, "sabotage", "with open('train.py', 'a') as f:\n    f.write('\\n# and a sleep, say\\n')")
    assert rec["verdict"] == "invalid", rec["reasons"]
    assert any("baseline-changed" in r and "train.py" in r for r in rec["reasons"]), rec["reasons"]
    # a red team's: the script left alone, a module planted beside it that its imports find first (Python puts the
    # script's folder first on sys.path), slowing the baseline's arms: `supported` +214 % with integrity ok
    plant = "import sys, time\ndel sys.modules['argparse']\nsys.path.pop(0)\ntime.sleep(0.3)\nimport argparse\n"
    rec = _sabotaged(project, "planted", f"open('argparse.py', 'w').write({plant!r})")
    assert rec["verdict"] == "invalid", rec["reasons"]
    assert any("baseline-changed" in r and "`argparse.py` (" in r and ") appeared" in r for r in rec["reasons"]), \
        rec["reasons"]


def test_a_module_taking_over_the_standard_library_before_the_run_starts_is_baseline_changed(project, monkeypatch):
    """A red team's, the second round: the variant's patch ships a `statistics.py` beside the script (there before
    the first arm, so no change during the rounds), which slows only the baseline's reruns: `supported` +153 %."""
    import shutil

    monkeypatch.chdir(project.root)
    shutil.copy(HERE / "fake_train.py", project.root / "train.py")
    run(project, "--baseline", "-m", "base", command=[PY, "train.py"])
    assert lane(project)[0]["import_shadows"] == []
    (project.root / "statistics.py").write_text("import sys\nsys.path.pop(0)\ndel sys.modules['statistics']\n"
                                                "import statistics\n")
    run(project, "--repeats", "2", "-m", "shipped", command=[PY, "train.py", "--step-ms", "5"], trust=True)
    rec = lane(project)[-1]
    assert rec["verdict"] == "invalid" and rec["import_shadows"] == ["statistics"], rec["reasons"]
    assert any("baseline-changed" in r and "standard library's `statistics`" in r for r in rec["reasons"]), \
        rec["reasons"]


@pytest.mark.slow
def test_a_baseline_slowed_by_a_file_its_command_sources_gives_no_supported_gain(project, monkeypatch):
    """A red team's: the baseline's command sources `env.sh`, which the variant's change rewrote before its run to
    slow only the baseline's shell (a no-op variant, its flags as the baseline's): `supported` at +220 %, integrity
    ok. A file the command names is now hashed when it is filed; one it does not name (sourced in turn) is left to
    the baseline's speed against its record."""
    import shutil

    monkeypatch.chdir(project.root)
    shutil.copy(HERE / "fake_train.py", project.root / "train.py")
    (project.root / "env.sh").write_text(". ./inner.sh\n")
    (project.root / "inner.sh").write_text("# the job's environment\n")
    command = ["bash", "-c", f"source ./env.sh && exec {PY} train.py"]
    run(project, "--baseline", "-m", "base", command=command)
    assert lane(project)[0]["command_files"] == {"./env.sh": lane(project)[0]["command_files"]["./env.sh"]}
    slow_base = ('case "$BASH_EXECUTION_STRING" in *"--steps 8"*) ;;\n'
                 '  *) export XLA_FLAGS=--fake_speedup=0.3 ;;\nesac\n')
    noop = ["bash", "-c", f"source ./env.sh && exec {PY} train.py --steps 8"]
    (project.root / "env.sh").write_text(". ./inner.sh\n" + slow_base)  # the file the command names
    run(project, "--repeats", "3", "-m", "steps-said", command=noop, trust=True)
    rec = lane(project)[-1]
    assert rec["verdict"] == "inconclusive" and rec["gain_pct"] > 100, (rec["verdict"], rec["reasons"])
    assert any("`./env.sh`, which the baseline's command names, is not as it was" in r for r in rec["reasons"]), \
        rec["reasons"]
    (project.root / "env.sh").write_text(". ./inner.sh\n")
    (project.root / "inner.sh").write_text(slow_base)  # a file it does not name: its speed against its record
    run(project, "--repeats", "3", "-m", "steps-said-again", command=noop, trust=True)
    rec = lane(project)[-1]
    assert rec["verdict"] == "inconclusive" and rec["gain_pct"] > 100, (rec["verdict"], rec["reasons"])
    assert any("x the tokens/s its record" in r and "find what changed" in r for r in rec["reasons"]), \
        rec["reasons"]
    # a machine slowed for both sides (a loop's parallel iterations) is no sign of it: a real gain is still kept
    (project.root / "inner.sh").write_text("export XLA_FLAGS=--fake_speedup=0.3\n")
    run(project, "--repeats", "3", "-m", "faster", command=["bash", "-c", f"source ./env.sh && exec {PY} "
                                                            "train.py --step-ms 5"], trust=True)
    rec = lane(project)[-1]
    assert rec["verdict"] == "supported", rec["reasons"]


def test_what_a_baselines_imports_read_first_is_watched_wherever_it_is(tmp_path):
    """From a review: a rerun of the baseline's saved copy imports its siblings from the checkout (PYTHONPATH), where
    a planted module went unseen; 2,000 junk files beside the script pushed a planted one past the cap; a rewritten
    module inside a package beside the script was not read."""
    from tools.experiments.sides import importable_beside, importable_changed

    code, checkout = tmp_path / "raw" / "code", tmp_path / "checkout"
    for d in (code, checkout / "model"):
        d.mkdir(parents=True)
    (code / "train.py").write_text("import model\n")
    (checkout / "model" / "__init__.py").write_text("")
    (checkout / "model" / "layers.py").write_text("X = 1\n")
    for i in range(2_000):
        (code / f"m{i:04d}").write_text("")
    env = {"PYTHONPATH": str(checkout)}
    before = importable_beside(code / "train.py", env)
    (checkout / "statistics.py").write_text("import time; time.sleep(1)\n")
    assert "statistics.py" in importable_changed(before, importable_beside(code / "train.py", env))
    (checkout / "statistics.py").unlink()
    (code / "statistics.py").write_text("")
    assert "statistics.py" in importable_changed(before, importable_beside(code / "train.py", env))
    (code / "statistics.py").unlink()
    (checkout / "model" / "__pycache__").mkdir()  # what an honest import compiles is no change
    (checkout / "model" / "__pycache__" / "layers.cpython-311.pyc").write_bytes(b"\0")
    assert importable_changed(before, importable_beside(code / "train.py", env)) == ""
    (checkout / "model" / "layers.py").write_text("X = 2\n")
    assert "layers.py" in importable_changed(before, importable_beside(code / "train.py", env))


def test_filed_pages_are_immutable(project):
    out = run_experiment(project, RunSpec(model="m", lane="l", variant="s/tpu", command=fake()))
    rec = lane(project)[0]
    w_page = report.experiment_page(dict(rec, verdict="supported"), RunContext())
    from tools.experiments.filing import refuse_filed
    from tools.writer import Writer
    with pytest.raises(InputError, match="immutable"):
        refuse_filed(Writer(project.wiki), w_page.path)
    assert out.page == rec["page"]


def test_list_and_load_experiments(project):
    run(project, "-m", "one", command=fake())
    recs = records.load_experiments(project.wiki)
    assert recs[0]["page"].startswith("experiments/m/l/") and recs[0]["model"] == "m"
    res = CliRunner().invoke(cli, ["--root", str(project.root), "exp", "list"])
    assert res.exit_code == 0 and "m/l v001" in res.output


def test_bad_names_are_refused(project):
    res = CliRunner().invoke(cli, ["--root", str(project.root), "exp", "run", "--model", "../x", "--lane", "l",
                                   "--variant", "v/cpu", "--", sys.executable, "-c", "pass"])
    assert res.exit_code == 1 and "--model" in res.output


def test_profile_without_a_trace_says_so(project):
    run(project, "--profile", "-m", "no trace", command=fake())
    (r,) = lane(project)
    assert r["verdict"] != "crash"
    assert "No profile summary" in (project.wiki / r["page"]).read_text()


def test_a_profiled_run_that_crashes_keeps_only_the_hlo_text_of_its_dump(project, tmp_path):
    """The dump of a profiled run is pruned to its HLO text (the CPU backend also writes LLVM IR and object files,
    megabytes a run); a profiled run that crashed kept all of it."""
    crashy = tmp_path / "crashy.py"
    crashy.write_text("import os, re, sys\nd = re.search(r'--xla_dump_to=(\\S+)', os.environ['XLA_FLAGS']).group(1)\n"
                      "os.makedirs(d, exist_ok=True)\n"
                      "for n in ('m.ir-no-opt.ll', 'm.o', 'm.cpu_after_optimizations.txt'):\n"
                      "    open(os.path.join(d, n), 'w').write('x' * 1000)\n"
                      "sys.exit('RuntimeError: RESOURCE_EXHAUSTED: out of memory')\n")
    run(project, "--profile", "-m", "crashes", command=[PY, str(crashy)], code=1)
    (r,) = lane(project)
    assert r["verdict"] == "crash"
    left = sorted(p.name for p in (project.root / r["raw_dir"] / "hlo").rglob("*") if p.is_file())
    assert left == ["m.cpu_after_optimizations.txt"], left


def test_edited_script_baseline_reruns_its_saved_copy(project, tmp_path):
    script = tmp_path / "train.py"
    script.write_text((HERE / "fake_train.py").read_text())
    run(project, "-m", "base", command=[PY, str(script), "--step-ms", "10"], trust=True)
    # autoresearch style: edit the script itself; the interleaved baseline must still be the old code
    script.write_text(script.read_text().replace('a.step_ms / 1e3', 'a.step_ms / 2e3'))
    out = run(project, "-m", "edited", "--repeats", "2", command=[PY, str(script), "--step-ms", "10"], trust=True)
    assert ": supported" in out
    page = (project.wiki / lane(project)[1]["page"]).read_text()
    assert "its saved copy" in page and lane(project)[1]["gain_pct"] == pytest.approx(100.0, rel=1e-3)
    # moved away since (a renamed file, another branch checked out): the saved copy is the baseline, not a crash
    moved = tmp_path / "sub" / "train2.py"
    moved.parent.mkdir()
    script.rename(moved)
    out = run(project, "-m", "moved", "--repeats", "2", command=[PY, str(moved), "--step-ms", "10"], trust=True)
    rec = lane(project)[2]
    assert ": supported" in out and rec["gain_pct"] == pytest.approx(100.0, rel=1e-3), out
    assert "is gone from where it ran: its saved copy" in (project.wiki / rec["page"]).read_text()


def test_lint_is_clean_right_after_a_run(project):
    """The index counts the new pages and the experiment links its lane's model page (no drift, no orphan)."""
    run(project, "-m", "baseline", command=fake("--step-ms", "10"))
    res = CliRunner().invoke(cli, ["--root", str(project.root), "lint", "--json"])
    import json

    codes = {(p["code"], p["path"]) for p in json.loads(res.output)["problems"]}
    assert not {c for c, _ in codes} & {"index-drift", "index-stale", "index-missing"}, codes
    assert ("orphan", "wiki/models/m-l.md") not in codes, codes


@pytest.mark.slow
def test_a_gain_no_clock_checked_is_at_most_inconclusive(project):
    """fake_train reports step times it never spent (no step lines, not profiled): nothing the program cannot move
    confirms them, so its 2x is no `supported` unless the run is declared a simulation (--trust-step-times), and
    then its reasons say the times were taken as reported."""
    run(project, "-m", "baseline", command=fake("--step-ms", "10"), trust=False)
    run(project, "-m", "liar", "--repeats", "2", command=fake("--step-ms", "5"), trust=False)
    liar = lane(project)[-1]
    assert liar["verdict"] == "inconclusive" and liar["gain_pct"] == pytest.approx(100.0, rel=1e-3), liar
    assert any("checked against no clock it cannot move" in r and "print a line per step" in r
               for r in liar["reasons"]), liar["reasons"]
    assert liar["integrity"]["checks"]["clock"].startswith("unchecked"), liar["integrity"]
    run(project, "-m", "simulated", "--repeats", "2", command=fake("--step-ms", "5"), trust=True)
    sim = lane(project)[-1]
    assert sim["verdict"] == "supported" and any("taken as reported (trust_step_times)" in r for r in sim["reasons"])
