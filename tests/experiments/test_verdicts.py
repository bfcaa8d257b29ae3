"""Verdicts a loop can trust, end to end with the stand-in script: no speed verdict without interleaved rounds,
adaptive repeats, calibration, per-shape baselines, the baseline's own environment, specific crash reasons."""

from __future__ import annotations

import json
import os
import subprocess

import pytest
from _exp_helpers import FAKE, PY, fake
from click.testing import CliRunner

from tools import pages
from tools.cli import cli
from tools.errors import InputError, ToolsError
from tools.experiments import metrics, records, stats, verdict
from tools.experiments.runner import RunSpec, run_experiment


def cli_run(project, *args, command=(), code=0):
    res = CliRunner().invoke(cli, ["--root", str(project.root), "exp", "run", "--model", "m", "--lane", "l",
                                   "--variant", "s/tpu", "-q", *args,
                                   *(["--trust-step-times", "--", *command] if command else [])])
    assert res.exit_code == code, res.output + repr(res.exception)
    return res.output


def spec(command, **kw) -> RunSpec:
    kw.setdefault("trust_step_times", FAKE in command)  # fake_train's step times are made up: a simulation
    return RunSpec(model="m", lane="l", variant="s/tpu", command=command, **kw)


def lane(project):
    return records.lane_records(project.wiki, "m", "l")


def logs(project, r) -> list[str]:
    return sorted(p.name for p in (project.root / r["raw_dir"]).glob("*.log"))


def seen_flags(project, r, log) -> str:
    """The XLA_FLAGS an arm saw (the stand-in reports them in its JSON line)."""
    line = (project.root / r["raw_dir"] / log).read_text().strip().splitlines()[-1]
    return json.loads(line)["xla_flags"]


@pytest.mark.slow
def test_the_same_command_is_never_a_speed_verdict(project):
    cli_run(project, "--baseline", "-m", "base", command=fake())
    # single runs against the stored number decide nothing, however large the difference
    cli_run(project, "-m", "faster once", command=fake("--step-ms", "2"))
    cli_run(project, "-m", "slower once", command=fake("--step-ms", "50"))
    # the same command as its own variant, interleaved and adaptive: it runs to the cap and stays inconclusive
    cli_run(project, "-m", "itself", "--repeats", "2", "--max-repeats", "4", command=fake())
    _, once_fast, once_slow, itself = lane(project)
    for r in (once_fast, once_slow):
        assert r["verdict"] == "inconclusive" and "decides nothing" in r["reasons"][1], r["reasons"]
        assert r["interleaved"] is False and "timing" not in r
    assert once_fast["gain_pct"] > 300 and once_slow["gain_pct"] < -75  # still reported
    assert itself["verdict"] == "inconclusive" and itself["gain_pct"] == 0
    assert itself["timing"]["rounds"] == 4 and "(the cap)" in itself["stop"]
    assert logs(project, itself) == [f"{k}-{i}.log" for k in ("baseline", "run") for i in range(1, 5)]
    # the arm order alternates (A B, B A, ...), so a position effect cancels over two rounds
    started = sorted((project.root / itself["raw_dir"]).glob("*.log"), key=lambda p: p.stat().st_mtime_ns)
    assert [p.stem for p in started] == ["baseline-1", "run-1", "run-2", "baseline-2",
                                        "baseline-3", "run-3", "run-4", "baseline-4"]


def test_adaptive_repeats_stop_once_decided(project):
    cli_run(project, "--baseline", "-m", "base", command=fake())
    cli_run(project, "-m", "twice as fast", "--repeats", "2", "--max-repeats", "6", command=fake("--step-ms", "5"))
    r = lane(project)[1]
    assert r["verdict"] == "supported" and 2 <= r["timing"]["rounds"] < 6 and "decided" in r["stop"]
    assert r["timing"]["confidence_pct"] == pytest.approx(100 * (1 - stats.ALPHA / stats.looks(2, 6)), abs=1e-3)
    assert r["timing"]["rounds"] in stats.look_points(2, 6)
    assert len(r["runs_tokens_per_s"]["baseline"]) == len(r["runs_tokens_per_s"]["variant"]) == r["timing"]["rounds"]
    assert r["repeats"] == r["timing"]["rounds"]


def test_the_min_statistic_sees_through_interference(project):
    """Steps delayed at random by another job (delays only): the fastest step of each run still shows a true
    +10 %."""
    cli_run(project, "--baseline", "-m", "base", command=fake("--steps", "12", "--interference-pct", "40"))
    for stat in ("median", "min"):
        cli_run(project, "-m", f"ten pct {stat}", "--repeats", "2", "--max-repeats", "6", "--statistic", stat,
                command=fake("--steps", "12", "--interference-pct", "40", "--step-ms", "9.0909"))
    _, med, best = lane(project)
    assert best["statistic"] == "min" and "statistic" not in med
    assert best["verdict"] == "supported" and best["gain_pct"] == pytest.approx(10, abs=3), best["reasons"]
    assert "fastest steady step" in best["timing"]["how"] and "fastest" not in med["timing"]["how"]
    assert set(best["runs_tokens_per_s_best"]) == {"baseline", "variant"}
    # each run's fastest step is its true step (delays only), so every variant run reads the same
    fast = best["runs_tokens_per_s_best"]["variant"]
    assert max(fast) / min(fast) < 1.05 and best["timing"]["measured_sd_pct"] < 5


@pytest.mark.slow
def test_calibration_feeds_later_verdicts(project):
    cli_run(project, "--baseline", "-m", "base", command=fake())
    # +5 % with three rounds: inside what the uncalibrated σ floor can tell apart
    cli_run(project, "-m", "five pct", "--repeats", "3", command=fake("--step-ms", "9.5238"))
    assert lane(project)[1]["verdict"] == "inconclusive"
    out = cli_run(project, "--calibrate")
    assert ": calibration (discard)" in out
    cal = lane(project)[2]
    assert cal["role"] == "calibration" and cal["baseline"] == lane(project)[0]["exp_id"]
    assert cal["calibration"]["rounds"] == stats.CALIBRATION_ROUNDS and cal["calibration"]["pair_sd_pct"] == 0
    assert cal["command"] == lane(project)[0]["command"]
    assert logs(project, cal) == sorted(f"{k}-{i}.log" for k in ("baseline", "run") for i in range(1, 6))
    cli_run(project, "-m", "five pct again", "--repeats", "3", command=fake("--step-ms", "9.5238"))
    again = lane(project)[3]
    assert again["verdict"] == "supported" and again["calibrated_by"] == cal["exp_id"], again["reasons"]
    assert again["baseline"] == lane(project)[0]["exp_id"]  # a calibration is never the baseline
    model = (project.wiki / "models/m-l.md").read_text()
    assert "| calibration |" in model


def test_calibrate_needs_a_baseline_and_no_command(project):
    res = CliRunner().invoke(cli, ["--root", str(project.root), "exp", "run", "--model", "m", "--lane", "l",
                                   "--variant", "s/tpu", "--calibrate"])
    assert res.exit_code == 1 and "no usable baseline to calibrate" in res.output
    with pytest.raises(InputError, match="give no command"):
        run_experiment(project, spec(fake(), calibrate=True))
    assert lane(project) == []  # nothing reserved


@pytest.mark.slow
def test_invalid_and_other_shape_baselines_are_never_compared_against(project):
    cli_run(project, "--baseline", "-m", "base", command=fake())
    cli_run(project, "--baseline", "-m", "broken base", command=fake("--loss-shift", "-0.5"))
    cli_run(project, "--baseline", "-m", "wide base", command=fake("--batch", "8"))
    cli_run(project, "-m", "faster", "--repeats", "2", command=fake("--step-ms", "5"))
    base, broken, wide, faster = lane(project)
    assert broken["verdict"] == "invalid" and broken["role"] == "baseline"
    assert any("not used as a baseline" in x for x in broken["reasons"])
    assert wide["role"] == "baseline" and wide["verdict"] == "baseline"  # the first of its shape
    # the latest baseline (wide) has another shape: after its first round the run moved to the same-shape one
    assert faster["baseline"] == base["exp_id"] and faster["verdict"] == "supported", faster["reasons"]
    assert faster["gain_pct"] == pytest.approx(100.0, rel=1e-3)
    assert any("same-shape baseline" in n for n in faster["notes"])
    meta, body = pages.split((project.wiki / "models/m-l.md").read_text())
    variants = pages.regions(body)["variants"]
    assert "batch=4" in variants and "batch=8" in variants and wide["exp_id"] in variants
    with pytest.raises(InputError, match="filed invalid"):
        run_experiment(project, spec(fake(), compare_to=broken["exp_id"], repeats=2))
    with pytest.raises(InputError, match="not an experiment"):
        run_experiment(project, spec(fake(), compare_to="2020-01-01-v999-x", repeats=2))
    out = run_experiment(project, spec(fake("--batch", "8", "--step-ms", "5"), compare_to=wide["exp_id"],
                                       repeats=2))
    assert out.verdict == "supported" and out.record["baseline"] == wide["exp_id"]


@pytest.mark.slow
def test_baseline_arms_never_see_the_variants_environment(project):
    cli_run(project, "--baseline", "-m", "base", command=fake())
    assert "XLA_FLAGS" not in lane(project)[0]["env"]
    # RunSpec.env: only the variant's arms get it
    out = run_experiment(project, spec(fake(), repeats=2, env={"XLA_FLAGS": "--fake_speedup=2"}))
    r = out.record
    assert out.verdict == "supported" and r["env"]["XLA_FLAGS"] == "--fake_speedup=2"
    assert seen_flags(project, r, "baseline-1.log") == "" and seen_flags(project, r, "run-1.log") == "--fake_speedup=2"
    # the runner's own environment has the flag: the baseline still reruns as it was filed (without it)
    env = dict(os.environ, AUTORESEARCH_ROOT=str(project.root), XLA_FLAGS="--fake_speedup=2")
    p = subprocess.run([PY, "-m", "tools", "exp", "run", "--model", "m", "--lane", "l", "--variant", "s/tpu", "-q",
                        "--repeats", "2", "-m", "flag from the shell", "--trust-step-times", "--", *fake()], env=env, capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    r = lane(project)[-1]
    assert r["verdict"] == "supported" and r["env"]["XLA_FLAGS"] == "--fake_speedup=2"
    assert seen_flags(project, r, "baseline-2.log") == "" and "unset: XLA_FLAGS" in " ".join(r["notes"])


def test_a_baseline_reruns_with_its_recorded_environment(project):
    run_experiment(project, spec(fake(), baseline=True, env={"XLA_FLAGS": "--fake_speedup=2"}))
    out = run_experiment(project, spec(fake(), repeats=2))  # the same script without the flag: slower
    assert out.verdict == "refuted" and out.record["gain_pct"] == pytest.approx(-50.0, rel=1e-3)
    assert seen_flags(project, out.record, "baseline-1.log") == "--fake_speedup=2"
    assert seen_flags(project, out.record, "run-1.log") == ""


@pytest.mark.parametrize("args, verdict_, reason", [
    (("--exit-after-json", "3"), "crash", "exit code 3 after the JSON line"),
    (("--bad-step-times", "zero"), "crash", "bad JSON field `step_times_s`: step 1 is 0.0"),
    (("--bad-step-times", "empty"), "crash", "bad JSON field `step_times_s`: expected a non-empty list"),
    (("--bad-step-times", "text"), "crash", "bad JSON field `step_times_s`: step 1 is \"fast\""),
    (("--bad-step-times", "nan"), "crash", "bad JSON field `step_times_s`: step 1 is nan"),
    (("--nan",), "invalid", "non-finite loss (nan) at step 2: the math broke"),
])
def test_broken_runs_are_filed_with_their_reason(project, args, verdict_, reason):
    cli_run(project, "-m", "broken", command=fake(*args), code=1 if verdict_ == "crash" else 0)
    (r,) = lane(project)
    assert r["verdict"] == verdict_ and r["reasons"][0].startswith(reason), r["reasons"]
    text = (project.wiki / r["page"]).read_text()
    meta, body = pages.split(text)
    assert metrics.finite(meta) == meta  # never a NaN in frontmatter
    assert reason.split(":")[0] in body
    if verdict_ == "invalid":
        assert r["role"] != "baseline" or "not used as a baseline" in " ".join(r["reasons"])
        assert records.baseline_for(lane(project), "s/tpu") is None


def test_signals_and_missing_json_are_named(project):
    cli_run(project, "-m", "killed", command=[PY, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"],
            code=1)
    cli_run(project, "-m", "silent", command=[PY, "-c", "print('no json here')"], code=1)
    killed, silent = lane(project)
    assert killed["reasons"] == ["killed by signal SIGKILL, no JSON result line"]
    assert silent["reasons"] == ["no JSON result line (exit code 0)"]


def test_a_huge_log_line_stays_off_the_page(project):
    cli_run(project, "-m", "noisy", command=fake("--huge-line", "3000000", "--crash"), code=1)
    (r,) = lane(project)
    page = project.wiki / r["page"]
    assert page.stat().st_size < 20_000 and "line cut at 400 characters" in page.read_text()
    assert (project.root / r["raw_dir"] / "run.log").stat().st_size > 3_000_000  # the log keeps everything


def test_json_outputs(project):
    res = CliRunner().invoke(cli, ["--root", str(project.root), "exp", "run", "--model", "m", "--lane", "l",
                                   "--variant", "s/tpu", "--json", "-m", "one", "--", *fake()])
    assert res.exit_code == 0, res.output
    obj = json.loads(res.output)
    assert obj["verdict"] == "baseline" and obj["role"] == "baseline" and obj["metrics"]["tokens_per_s"] > 0
    assert {"exp_id", "page", "status", "reasons", "gain_pct", "noise_band_pct", "raw_dir"} <= set(obj)
    res = CliRunner().invoke(cli, ["--root", str(project.root), "exp", "run", "--model", "m", "--lane", "l",
                                   "--variant", "s/tpu", "--json", "--", *fake("--crash")])
    assert res.exit_code == 1 and json.loads(res.output)["verdict"] == "crash"
    res = CliRunner().invoke(cli, ["--root", str(project.root), "exp", "list", "--json"])
    lines = [json.loads(x) for x in res.output.splitlines()]
    assert [x["verdict"] for x in lines] == ["baseline", "crash"] and lines[0]["page"].endswith(".md")


def test_extra_keys_and_runner_choice(project):
    out = run_experiment(project, spec(fake(), extra={"loop": "l1", "category": "compiler", "iteration": 3}))
    assert out.record["loop"] == "l1" and out.record["iteration"] == 3 and lane(project)[0]["category"] == "compiler"
    with pytest.raises(InputError, match="verdict"):
        run_experiment(project, spec(fake(), extra={"verdict": "supported"}))
    with pytest.raises(ToolsError, match="unknown runner"):
        run_experiment(project, spec(fake(), runner="nowhere"))
    assert len(lane(project)) == 1  # refused before a version was reserved


@pytest.mark.slow
def test_no_op_is_caught_from_the_hlo_fingerprint(project):
    first = run_experiment(project, spec(fake(), baseline=True, profile=True))
    assert first.hlo_fingerprint and first.record["hlo_fingerprint"] == first.hlo_fingerprint
    same = run_experiment(project, spec(fake("--step-ms", "5"), repeats=2, profile=True,
                                        parent_fingerprint=first.hlo_fingerprint))
    assert same.verdict == "inconclusive" and same.reasons == [verdict.NOOP_REASON]
    assert logs(project, same.record) == ["profile-run.log"]  # the timed rounds were skipped
    runtime = run_experiment(project, spec(fake("--step-ms", "5"), repeats=2, profile=True, runtime_only=True,
                                           parent_fingerprint=first.hlo_fingerprint))
    assert runtime.verdict == "supported"
    assert logs(project, runtime.record) == ["baseline-1.log", "baseline-2.log", "profile-run.log", "run-1.log",
                                             "run-2.log"]
    other = run_experiment(project, spec(fake("--step-ms", "5", "--hlo", "multiply"), repeats=2, profile=True,
                                         parent_fingerprint=first.hlo_fingerprint))
    assert other.verdict == "supported" and other.hlo_fingerprint != first.hlo_fingerprint
    # a step that computes none of the model's matmuls (its dump holds no dot) is caught by the compiled step
    hollow = run_experiment(project, spec(fake("--step-ms", "5", "--no-dot"), repeats=2, profile=True))
    assert hollow.verdict == "invalid" and any("integrity `hlo-flops`" in r and "no matmul at all" in r
                                               for r in hollow.reasons), hollow.reasons


def test_a_shape_change_is_judged_against_a_reference_run(project):
    run_experiment(project, spec(fake(), baseline=True))
    wide = fake("--batch", "8")  # twice the tokens per step at the same step time
    plain = run_experiment(project, spec(wide, repeats=2))
    assert plain.verdict == "inconclusive" and plain.record["semantics"]["status"] == "unchecked"
    judged = run_experiment(project, spec(wide, repeats=2, reference_command=fake("--batch", "8", "--step-ms", "20")))
    r = judged.record
    assert judged.verdict == "supported", judged.reasons
    assert r["semantics"]["status"] == "ok" and "reference run" in r["semantics"]["reference"]
    assert "reference.log" in logs(project, r) and r["reference_run"]["command"].endswith("--step-ms 20")


def test_a_memory_regression_holds_a_gain_back_unless_the_peak_fits_a_declared_limit(project):
    """Twice as fast at twice the memory: inconclusive by default; supported with --memory-max-gb above the peak
    (the reason says so); still inconclusive, naming the limit, when the peak is over it."""
    cli_run(project, "--baseline", "-m", "base", command=fake("--memory-gb", "2"))
    fast = fake("--step-ms", "5", "--memory-gb", "4")
    cli_run(project, "-m", "bigger", "--repeats", "2", "--max-repeats", "4", command=fast)
    cli_run(project, "-m", "bigger, allowed", "--repeats", "2", "--max-repeats", "4", "--memory-max-gb", "8",
            command=fast)
    cli_run(project, "-m", "bigger, over", "--repeats", "2", "--max-repeats", "4", "--memory-max-gb", "3",
            command=fast)
    _, default, allowed, over = lane(project)
    assert default["verdict"] == "inconclusive" and "peak memory regressed +100.0 % (> 5 %)" in default["reasons"]
    assert allowed["verdict"] == "supported", allowed["reasons"]
    assert any("within the declared limit: 4.0 GB ≤ 8 GB" in r for r in allowed["reasons"])
    assert over["verdict"] == "inconclusive" and any("over the declared limit 3 GB" in r for r in over["reasons"])


def test_a_page_compares_with_the_best_s_filed_number_only_where_it_is_not_its_own_baseline(project):
    """A user's report: a run `supported` at +25 % over its baseline also said "against the current best (that same
    baseline): tokens/s -19.79 %": the best's filed number, measured when the machine was quieter."""
    base = run_experiment(project, spec(fake("--step-ms", "20"), baseline=True))
    faster = run_experiment(project, spec(fake("--step-ms", "16"), repeats=4))
    assert faster.record.get("best") == base.exp_id == faster.record.get("baseline")
    assert "against the current best" not in (project.wiki / faster.page).read_text()
    third = run_experiment(project, spec(fake("--step-ms", "18"), repeats=2))  # the best is now another run
    text = (project.wiki / third.page).read_text()
    assert third.record.get("best") == faster.exp_id and "(its filed tokens/s, not measured beside this run)" in text
