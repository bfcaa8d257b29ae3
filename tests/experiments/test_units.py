"""Pure parts: metrics, peak table, verdicts, ledger, HLO metadata in both forms."""

from __future__ import annotations

import subprocess
import sys

import statistics

import pytest

from tools.experiments import devices, ledger, metrics, stats, verdict
from tools.profiling import hlo


def _result(**kw):
    r = {"step_times_s": [2.0, 0.1, 0.1, 0.1, 0.1], "tokens_per_step": 1000, "device_kind": "TPU v4",
         "platform": "tpu", "n_devices": 4, "flops_per_step": {"causal": 1e14, "noncausal": 1.2e14}}
    r.update(kw)
    return r


def test_a_small_memory_and_a_wild_figure_read_as_numbers_on_the_page():
    """A CPU run's 200 kB peak was stored as 0.0 GB and a reported 1e300-token step printed some 300 digits."""
    from tools.experiments.report import _metrics_table

    m = metrics.compute(_result(peak_memory_bytes=200_000, tokens_per_step=1e300))
    assert m["memory_gb"] == 0.0002
    table = "\n".join(_metrics_table(m))
    assert "0.0002 GB" in table and "1e+301" in table and "0" * 20 not in table
    assert "10,000.0" in "\n".join(_metrics_table(metrics.compute(_result(peak_memory_bytes=17_500_000_000))))


def test_two_runs_give_a_step_time_and_mfu_that_agree_with_their_tokens_per_s():
    """Two runs (10 ms and 30 ms steps): tokens/s was the mean of the two rates (66,667) and the step time the mean
    of the two times (20 ms, i.e. 50,000 tokens/s): the page's "MFU by hand" did not give its own MFU back.
    And an integer too large for a float in a result line crashed the run with a traceback."""
    from types import SimpleNamespace

    from tools.experiments.comparison import aggregate

    def run(ms):
        return SimpleNamespace(metrics=metrics.compute({"step_times_s": [0.5] + [ms / 1e3] * 4, "tokens_per_step": 1000,
                                                        "flops_per_step": 1e9}, peak_flops=1e12))
    m = aggregate([run(10), run(30)])
    assert m["tokens_per_s"] == pytest.approx(66_666.67, abs=0.01)
    assert m["step_time_ms"] == pytest.approx(1e3 * 1000 / m["tokens_per_s"], rel=1e-6)
    assert m["mfu_percent"] == pytest.approx(100 * 1e9 / (m["step_time_ms"] / 1e3) / 1e12, rel=1e-3)
    assert aggregate([run(10), run(20), run(30)])["step_time_ms"] == 20.0  # odd: the middle run, as before
    slow = SimpleNamespace(metrics=metrics.compute({"step_times_s": [9.0, 3.0, 3.0, 3.0], "tokens_per_step": 1}))
    assert aggregate([slow, slow, slow])["step_time_ms"] == 3000.0  # not 1e3 / 0.33 (a rounded tokens/s)
    assert "not a positive finite number" in metrics.validate({"step_times_s": [1, 10 ** 400], "tokens_per_step": 8})
    assert "expected a positive number" in metrics.validate({"step_times_s": [1, 1], "tokens_per_step": 10 ** 400})


def test_metrics_exclude_compile_and_record_both_mfu_bases():
    m = metrics.compute(_result())
    assert m["step_time_ms"] == pytest.approx(100.0)
    assert m["tokens_per_s"] == pytest.approx(10000.0)
    assert m["tokens_per_s_per_chip"] == pytest.approx(2500.0)
    assert m["mfu_causal_percent"] == pytest.approx(100 * 1e15 / (275e12 * 4), rel=1e-3)
    assert m["mfu_noncausal_percent"] > m["mfu_causal_percent"]
    assert m["mfu_basis"] == "causal" and m["mfu_percent"] == m["mfu_causal_percent"]


def test_cpu_mfu_is_null_with_reason_unless_peak_given():
    m = metrics.compute(_result(device_kind="cpu", platform="cpu", n_devices=1))
    assert m["mfu_percent"] is None and m["mfu_basis"] is None and "CPU" in m["mfu_note"]
    m = metrics.compute(_result(device_kind="cpu", platform="cpu", n_devices=1), peak_flops=1e11)
    assert m["mfu_percent"] is not None and m["peak_flops_source"] == "--peak-flops"


@pytest.mark.parametrize("kind,name,per_chip", [
    ("TPU v4", "TPU v4", 1), ("TPU v5 lite", "TPU v5e", 1), ("TPU v5", "TPU v5p", 1),
    ("TPU v6 lite", "TPU v6e", 1), ("TPU7x", "TPU v7x", 2), ("NVIDIA H100 80GB HBM3", "NVIDIA H100 SXM", 1),
    ("NVIDIA A100-SXM4-40GB", "NVIDIA A100", 1), ("NVIDIA H200", "NVIDIA H200", 1), ("NVIDIA B200", "NVIDIA B200", 1),
    ("NVIDIA L4", "NVIDIA L4", 1)])
def test_peak_table(kind, name, per_chip):
    p = devices.lookup(kind)
    assert p.name == name and p.peak_flops and p.devices_per_chip == per_chip


def test_v7x_counts_two_devices_per_chip():
    m = metrics.compute(_result(device_kind="TPU7x", n_devices=8))
    assert m["n_chips"] == 4


def test_parse_result_takes_last_json_line():
    text = 'card\n{"x": 1}\n{"step_times_s": [1, 2], "tokens_per_step": 3}\nnot json {'
    assert metrics.parse_result(text)["tokens_per_step"] == 3
    assert metrics.parse_result("no json here") is None


def test_semantics_separates_bf16_noise_from_a_decoy():
    ref = [5.0 - 0.1 * i for i in range(12)]
    assert verdict.semantics(ref, [x + 0.011 for x in ref]).status == "ok"
    decoy = verdict.semantics(ref, [x - 0.056 for x in ref])
    assert decoy.status == "changed" and decoy.max_abs_delta == pytest.approx(0.056)
    assert verdict.semantics(None, ref).status == "unchecked"


def _timing(decision, gain=10.0, sep=1):
    return stats.Timing(3, gain, [gain - 5, gain + 5], 2.0, 2.8, 1.0, sep, decision, "")


def test_decide():
    ok = verdict.Semantics("ok", 0.001, 12)
    kw = dict(sem=ok, memory_delta_pct=0.0, gain_pct=10.0, band_pct=2.0)
    assert verdict.decide(timing=_timing("supported"), **kw).verdict == "supported"
    assert verdict.decide(timing=_timing("refuted", -10, -1), **{**kw, "gain_pct": -10}).verdict == "refuted"
    for d in ("within", "undecided"):
        assert verdict.decide(timing=_timing(d), **kw).verdict == "inconclusive"
    # without interleaved rounds nothing about speed is decided, in either direction
    for g in (80.0, -80.0):
        d = verdict.decide(timing=None, **{**kw, "gain_pct": g})
        assert d.verdict == "inconclusive" and "decides nothing" in d.reasons[1]
    assert verdict.decide(timing=_timing("supported"), **{**kw, "memory_delta_pct": 30}).verdict == "inconclusive"
    bad = verdict.Semantics("changed", 0.1, 12, reason="x")
    assert verdict.decide(timing=_timing("supported"), **{**kw, "sem": bad}).verdict == "invalid"
    unchecked = verdict.Semantics("unchecked", reason="no same-shape reference run in this lane")
    assert verdict.decide(timing=_timing("supported"), **{**kw, "sem": unchecked}).verdict == "inconclusive"
    d = verdict.decide(timing=_timing("supported"), noop=True, **kw)
    assert d.verdict == "inconclusive" and d.reasons == [verdict.NOOP_REASON]
    assert verdict.decide(crash="exit code 3", **kw).status == "crash"
    assert verdict.decide(bad_loss="non-finite loss", **kw).verdict == "invalid"
    assert verdict.decide(role="baseline", **kw).status == "keep"
    assert verdict.decide(role="calibration", **kw).status == "discard"


def test_t_quantiles_match_the_tables():
    assert [round(stats.t_quantile(0.975, df), 3) for df in (1, 2, 3, 4, 10, 30)] == \
        [12.706, 4.303, 3.182, 2.776, 2.228, 2.042]
    assert stats.t_quantile(0.995, 4) == pytest.approx(4.604, abs=1e-3)
    assert stats.t_quantile(0.975, 1000) == pytest.approx(1.962, abs=1e-3)


def test_paired_interval_floor_separation_and_looks():
    noise = stats.Noise(2.8, 2.0, "test")
    t = stats.paired([100, 100], [200, 200], noise)
    assert t.decision == "supported" and t.gain_pct == pytest.approx(100.0) and t.sigma_pct == 2.8
    # two rounds that agree by luck: the floor keeps the interval wide
    t = stats.paired([100, 100], [105, 105.01], noise)
    assert t.decision == "undecided" and t.interval_pct[0] < 0
    # drift between rounds moves both arms alike: a gain in every round is decided, though runs of different
    # rounds overlap; one lost round in four may be spared (a round caught by another job), two in six may not
    t = stats.paired([100, 130, 100, 130, 100, 130], [120, 150, 120, 150, 120, 150], stats.Noise(0.1, 2.0))
    assert t.interval_pct[0] > 0 and t.separated == 1 and t.decision == "supported"
    t = stats.paired([100, 130, 100, 130, 100, 130], [120, 150, 120, 125, 120, 150], stats.Noise(0.1, 2.0))
    assert t.separated == 1 and t.decision == "supported"
    t = stats.paired([100, 130, 100, 130, 100, 130], [120, 150, 95, 125, 120, 150], stats.Noise(0.1, 2.0))
    assert t.separated == 0 and t.decision == "undecided"
    t = stats.paired([100, 130, 100], [120, 125, 120], stats.Noise(0.1, 2.0))
    assert t.separated == 0  # three rounds spare none
    assert stats.paired([100, 100, 100], [90, 90, 90], noise).decision == "refuted"
    assert stats.paired([100] * 8, [100.2] * 8, stats.Noise(0.5, 2.0)).decision == "within"
    assert stats.paired([100], [200], noise) is None
    # sharing the error over more looks widens each look's interval
    wide = stats.paired([100, 101, 99], [120, 118, 121], noise, n_looks=4)
    narrow = stats.paired([100, 101, 99], [120, 118, 121], noise)
    assert wide.interval_pct[0] < narrow.interval_pct[0] and wide.confidence_pct == 98.75
    assert stats.looks(2, 5) == 3 and stats.looks(3, 3) == 1 and stats.look_points(2, 5) == [2, 4, 5]
    assert stats.look_points(3, 8) == [4, 6, 8] and stats.looks(2, 6) == 3


def test_first_pairs_process_decides_only_beyond_what_arm_b_is_worth():
    noise = stats.Noise(0.5, 0.5, "test")
    base = [100, 101, 99, 100, 102, 98]
    # +2.5 % in every round: decided on all rounds, not at the first look (arm B alone can be worth 3 %)
    plus = [b * 1.025 for b in base]
    assert stats.paired(base, plus, noise, stats.PAIRS_LOOKS).decision == "supported"
    assert stats.first_process(base, plus, noise) is None
    # +8 % holds with 3 % taken off: the swapped process is not needed; its interval is the shifted one's, at α/2
    t = stats.first_process(base, [b * 1.08 for b in base], noise)
    assert t.decision == "supported" and 4 < t.gain_pct < 5.5 and t.confidence_pct == 97.5
    # slower by 8 %: refuted even with 3 % added; slower by 2 %: not at the first look
    assert stats.first_process(base, [b * 0.92 for b in base], noise).decision == "refuted"
    assert stats.first_process(base, [b * 0.98 for b in base], noise) is None
    # too few rounds for a first look
    assert stats.first_process(base[:5], [b * 1.5 for b in base[:5]], noise) is None
    # a noisy first process is left to both: the interval is too wide at α/2
    noisy = [100 * (1.3 if i % 2 else 0.85) for i in range(6)]
    assert stats.first_process(base, noisy, stats.Noise(2.8, 2.0)) is None


def test_calibration_measures_spread_and_bias():
    c = stats.calibration([100, 102, 98, 101, 99], [101, 103, 99, 102, 100])
    assert c["rounds"] == 5 and c["aa_gain_pct"] == pytest.approx(1.0, abs=0.05) and c["pair_sd_pct"] < 0.1
    # the second arm's +1 % is a position effect: reported, and not a band (later rounds alternate, it cancels)
    assert c["position_bias_pct"] == c["aa_gain_pct"] and c["band_pct"] == stats.MIN_BAND_PCT
    assert "position_bias_pct" not in stats.calibration([100, 102, 98, 101, 99], [101, 101, 99, 100, 99.5])
    old = {"exp_id": "old", "calibration": dict(c, band_pct=18.7)}  # filed before rounds alternated
    assert stats.noise_from_calibration(old).band_pct == stats.MIN_BAND_PCT
    n = stats.noise_from_calibration({"exp_id": "x", "calibration": c})
    assert n.sigma_floor_pct == max(c["pair_sd_pct"], stats.MIN_SIGMA_PCT) and "calibrated by x" in n.source
    assert stats.noise_from_calibration(None) == stats.Noise()


def test_replay_of_one_command_finds_few_false_verdicts():
    import random
    rng = random.Random(7)
    series = [1000 * rng.lognormvariate(0, 0.03) for _ in range(200)]
    out = stats.replay(series, 2, 5)
    assert out["windows"] == 191 and out["false_supported_pct"] <= 2 and out["false_refuted_pct"] <= 2
    fixed_one = sum(abs(series[i + 1] / series[i] - 1) > 0.02 for i in range(0, 198, 2))  # the old single-run band
    assert fixed_one > 10  # a 2 % band on single runs would have called many of these


def test_validate_names_the_field():
    good = _result(losses=[3.0, 2.9])
    assert metrics.validate(good) is None
    for bad, field in ((dict(step_times_s=[]), "step_times_s"), (dict(step_times_s=[1.0, 0]), "step_times_s"),
                       (dict(step_times_s=[1.0, "x"]), "step_times_s"), (dict(step_times_s=[1.0, float("nan")]),
                                                                         "step_times_s"),
                       (dict(tokens_per_step=0), "tokens_per_step"), (dict(losses="low"), "losses"),
                       (dict(flops_per_step={"causal": "many"}), "flops_per_step"), (dict(n_devices=0), "n_devices"),
                       (dict(shape=[1]), "shape"), (dict(warmup_steps=-1), "warmup_steps"),
                       (dict(step_times_s=[5.0, 0.01], warmup_steps=2), "warmup_steps")):
        problem = metrics.validate(_result(**bad))
        assert problem and f"`{field}`" in problem, (bad, problem)
    assert metrics.finite({"a": [1.0, float("nan")], "b": float("inf")}) == {"a": [1.0, None], "b": None}
    one = metrics.validate(_result(step_times_s=[0.5]))  # no warmup_steps field: the message says it is the default
    assert "`warmup_steps` unset: 1 by default" in one and "`warmup_steps: 0`" in one
    assert metrics.validate(_result(step_times_s=[0.5], warmup_steps=0)) is None


def test_crash_reasons(tmp_path):
    from tools.experiments.arms import crash_reason
    from tools.runners.process import Proc

    log = tmp_path / "run.log"
    log.write_text("step 1\n")
    p = lambda rc, **kw: Proc(rc, kw.get("timed_out", False), 1.0, log, "", kw.get("stop"))
    assert crash_reason(p(3), 10, result={"x": 1}) == "exit code 3 after the JSON line"
    assert crash_reason(p(-9), 10) == "killed by signal SIGKILL, no JSON result line"
    assert crash_reason(p(137), 10) == "exit code 137 (128 + SIGKILL), no JSON result line"
    assert crash_reason(p(0), 10) == "no JSON result line (exit code 0)"
    assert crash_reason(p(None, timed_out=True), 10) == "timed out after 10 s"
    assert crash_reason(p(0), 10, "`step_times_s`: bad", {"x": 1}) == "bad JSON field `step_times_s`: bad"
    assert crash_reason(p(0), 10, result={"x": 1}) is None
    log.write_text("jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory\n")
    assert crash_reason(p(1), 10).startswith("out of memory (RESOURCE_EXHAUSTED in the log), exit code 1")


def test_log_tail_is_capped():
    from tools.runners.process import TAIL_BYTES, cap_tail

    tail = cap_tail("start\n" + "x" * 5_000_000 + "\nend\n")
    assert len(tail) < 1000 and tail.endswith("end") and "line cut at 400 characters" in tail
    tail = cap_tail("\n".join("y" * 399 for _ in range(100)))
    assert len(tail.encode()) <= TAIL_BYTES + 100 and tail.startswith("[... earlier lines cut]")


def test_baseline_and_best_are_per_shape_and_never_invalid():
    from tools.experiments import records

    def rec(v, role, verdict_, batch, tps, keep=True):
        return {"exp_id": f"v{v}", "variant": "s/tpu", "role": role, "status": "filed", "verdict": verdict_,
                "ledger_status": "keep" if keep else "discard", "shape": {"batch": batch},
                "metrics": {"tokens_per_s": tps}}

    recs = [rec(1, "baseline", "inconclusive", 4, 100), rec(2, "variant", "supported", 4, 150),
            rec(3, "baseline", "inconclusive", 8, 300), rec(4, "baseline", "invalid", 4, 500, keep=False),
            {**rec(5, "baseline", "inconclusive", 4, 90), "shape": None}]  # filed before shapes were recorded
    k4, k8 = records.shape_key_of(recs[0]), records.shape_key_of(recs[2])
    assert records.baseline_for(recs[:4], "s/tpu", k4)["exp_id"] == "v1"  # never the invalid v4
    assert records.baseline_for(recs[:4], "s/tpu", k8)["exp_id"] == "v3"
    assert records.baseline_for(recs[:4], "s/tpu")["exp_id"] == "v3"
    assert records.baseline_for(recs, "s/tpu", k8)["exp_id"] == "v5"  # an old record matches any shape
    assert records.best_for(recs[:4], "s/tpu", k4)["exp_id"] == "v2"
    assert records.best_for(recs[:4], "s/tpu", k8)["exp_id"] == "v3"


def test_ledger_round_trip_keeps_autoresearch_columns_first():
    rows = [{"commit": "abc", "metric": 1.5, "memory_gb": 2, "status": "keep", "description": "a\tb",
             "config": {"x": 1}}]
    text = ledger.render(rows)
    assert text.splitlines()[0].startswith("commit\tmetric\tmemory_gb\tstatus\tdescription\t")
    back = ledger.read(text)
    assert back[0]["description"] == "a b" and back[0]["config"] == '{"x":1}'
    assert text.splitlines()[0].endswith("\tverdict\tgain_pct\tnoise_band_pct\tflops_per_step_causal\t"
                                         "flops_per_step_noncausal\tpeak_flops_per_device\trounds")


def test_ledger_reads_files_written_before_the_new_columns():
    old = "\t".join(ledger.COLUMNS[:12]) + "\n" + "\t".join(["abc", "1.5", "2", "keep", "old row", "e1", "d"] +
                                                         [""] * 5) + "\n"
    rows = ledger.read(old)
    assert rows[0]["description"] == "old row" and "verdict" not in rows[0]
    rows.append(ledger.row_for({"exp_id": "e2", "verdict": "supported", "gain_pct": 5.0, "ledger_status": "keep",
                                "metrics": {"tokens_per_s": 3.0}}))
    again = ledger.read(ledger.render(rows))
    assert [r["exp_id"] for r in again] == ["e1", "e2"] and again[0]["verdict"] == "" and \
        again[1]["verdict"] == "supported" and again[1]["gain_pct"] == "5.0"


INLINE = """HloModule jit_step, entry_computation_layout={(f32[4]{0})->f32[4]{0}}

%fused_computation (param_0: f32[4]) -> f32[4] {
  %param_0 = f32[4]{0} parameter(0)
  ROOT %multiply.1 = f32[4]{0} multiply(%param_0, %param_0), metadata={op_name="jit(step)/mul" source_file="/m/model.py" source_line=42}
}

ENTRY %main (p: f32[4]) -> f32[4] {
  %p = f32[4]{0} parameter(0)
  ROOT %fusion = f32[4]{0} fusion(%p), kind=kLoop, calls=%fused_computation
}
"""

FRAMES = """HloModule jit_step, entry_computation_layout={(f32[4,4]{1,0})->f32[4,4]{1,0}}

FileNames
1 "/m/model.py"

FunctionNames
1 "outer"
2 "inner"

FileLocations
1 {file_name_id=1 function_name_id=1 line=10 end_line=10 column=1 end_column=5}
2 {file_name_id=1 function_name_id=2 line=20 end_line=20 column=1 end_column=5}

StackFrames
1 {file_location_id=1 parent_frame_id=1}
2 {file_location_id=2 parent_frame_id=2}

ENTRY %main (p: f32[4,4]) -> f32[4,4] {
  %p = f32[4,4]{1,0} parameter(0)
  ROOT %dot.3 = f32[4,4]{1,0} dot(%p, %p), lhs_contracting_dims={1}, rhs_contracting_dims={0}, metadata={op_name="dot_general" stack_frame_id=2}
}
"""


def test_hlo_inline_source_and_fusion_borrowing():
    mod = hlo.parse_hlo(INLINE)
    assert mod.name == "jit_step"
    assert mod.source("fusion") == [("/m/model.py", 42, "?")]
    assert mod.category("fusion") == "elementwise fusion"


def test_hlo_stack_frame_tables_with_parent_plus_one():
    mod = hlo.parse_hlo(FRAMES)
    # frame 2's printed parent_frame_id=2 means real parent 1 (outer, line 10)
    assert mod.source("dot.3") == [("/m/model.py", 20, "inner"), ("/m/model.py", 10, "outer")]
    assert mod.category("dot.3") == "matmul"


def test_cli_import_stays_light():
    code = ("import sys, tools.cli, tools.cli.exp, tools.cli.profile, tools.experiments.runner, "
            "tools.profiling.summary, tools.experiments.explorer; "
            "print([m for m in ('jax', 'plotly', 'xprof', 'mkdocs') if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_xprof_hlo_stats_table_is_read():
    from tools.profiling.summary import parse_hlo_stats

    table = {"cols": [{"id": "rank"}, {"id": "program_id"}, {"id": "hlo_op_name"}, {"id": "occurrences"},
                      {"id": "total_self_time"}],
             "rows": [{"c": [{"v": 1}, {"v": "60"}, {"v": "fusion.3"}, {"v": 11}, {"v": 123.5}]}]}
    rows, note = parse_hlo_stats(__import__("json").dumps(table))
    assert rows == [{"op": "fusion.3", "module": "60", "self_us": 123.5, "count": 11}] and "1 ops" in note
    assert parse_hlo_stats(__import__("json").dumps({"cols": table["cols"], "rows": []}))[0] is None


def test_every_exp_and_profile_command_has_help():
    from click.testing import CliRunner

    from tools.cli import cli

    for args in (["exp"], ["exp", "run"], ["exp", "list"], ["exp", "explorer"], ["profile"],
                 ["profile", "summary"], ["profile", "diff"]):
        res = CliRunner().invoke(cli, [*args, "--help"])
        assert res.exit_code == 0 and len(res.output.splitlines()) > 3, args


def test_one_disturbed_ab_round_does_not_set_the_lanes_noise_floor():
    quiet = stats.calibration([100, 101, 99, 100, 100], [100.5, 100.2, 99.6, 100.4, 99.9])
    disturbed = stats.calibration([100, 101, 99, 100, 125], [100.5, 100.2, 99.6, 100.4, 99.9])
    plain_sd = statistics.stdev(disturbed["log_ratios_pct"])
    assert plain_sd > 9 and disturbed["pair_sd_pct"] < 2 and quiet["pair_sd_pct"] < 2


def test_a_multi_run_page_gives_the_medians_of_the_per_run_figures_beside_the_median_step():
    """A user's report: "5.482 ms (p10-p90 spread 63.95 %, 11 steps)": the spread was run 1's, whose median was
    11.9 ms, beside the median step of all runs."""
    from tools.experiments.arms import ArmResult
    from tools.experiments.comparison import aggregate

    def arm(step_ms, spread, steps):
        a = ArmResult("r", None, {})
        a.metrics = {"tokens_per_s": 1000 / step_ms, "n_chips": 1, "step_time_ms": step_ms, "tokens_per_step": 1.0,
                     "step_time_spread_pct": spread, "steady_steps": steps, "compile_s": 1.0, "n_devices": 1}
        return a
    m = aggregate([arm(11.9, 64.0, 11), arm(5.5, 5.0, 11), arm(5.4, 4.0, 11), arm(5.6, 6.0, 11)])
    assert m["step_time_spread_pct"] == 5.5 and m["steady_steps"] == 11 and m["compile_s"] == 1.0, m
