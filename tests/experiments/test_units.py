"""Pure parts: metrics, peak table, verdicts, ledger, HLO metadata in both forms."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tools.experiments import devices, ledger, metrics, verdict
from tools.profiling import hlo


def _result(**kw):
    r = {"step_times_s": [2.0, 0.1, 0.1, 0.1, 0.1], "tokens_per_step": 1000, "device_kind": "TPU v4",
         "platform": "tpu", "n_devices": 4, "flops_per_step": {"causal": 1e14, "noncausal": 1.2e14}}
    r.update(kw)
    return r


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


def test_decide():
    ok = verdict.Semantics("ok", 0.001, 12)
    kw = dict(crashed=False, is_baseline=False, sem=ok, memory_delta_pct=0.0)
    assert verdict.decide(gain_pct=10, band_pct=2, **kw).verdict == "supported"
    assert verdict.decide(gain_pct=1, band_pct=2, **kw).verdict == "inconclusive"
    assert verdict.decide(gain_pct=-10, band_pct=2, **kw).verdict == "refuted"
    # interleaved arms that overlap are never a verdict, whatever the medians say
    assert verdict.decide(gain_pct=10, band_pct=2, separated=0, **kw).verdict == "inconclusive"
    assert verdict.decide(gain_pct=-10, band_pct=2, separated=0, **kw).verdict == "inconclusive"
    assert verdict.decide(gain_pct=10, band_pct=2, separated=1, **kw).verdict == "supported"
    assert verdict.separation([1, 2], [3, 4]) == 1 and verdict.separation([3, 4], [1, 2]) == -1
    assert verdict.separation([1, 3], [2, 4]) == 0
    assert verdict.decide(gain_pct=10, band_pct=2, **{**kw, "memory_delta_pct": 30}).verdict == "inconclusive"
    bad = verdict.Semantics("changed", 0.1, 12, reason="x")
    assert verdict.decide(gain_pct=30, band_pct=2, **{**kw, "sem": bad}).verdict == "invalid"
    assert verdict.decide(crashed=True, is_baseline=False, gain_pct=None, band_pct=None, sem=None,
                          memory_delta_pct=None).status == "crash"


def test_noise_band_uses_repeats_and_floors():
    band, how = verdict.noise_band([100, 110], [120, 121], interleaved=True)
    assert band == pytest.approx(100 * 10 / 2 / 105, rel=1e-2) and "interleaved" in how
    assert verdict.noise_band([100, 100.1], [120, 120.1], interleaved=True)[0] == verdict.RUN_TO_RUN_FLOOR_PCT
    assert verdict.noise_band([100], [120], interleaved=False)[0] == verdict.STALE_BASELINE_PCT


def test_ledger_round_trip_keeps_autoresearch_columns_first():
    rows = [{"commit": "abc", "metric": 1.5, "memory_gb": 2, "status": "keep", "description": "a\tb",
             "config": {"x": 1}}]
    text = ledger.render(rows)
    assert text.splitlines()[0].startswith("commit\tmetric\tmemory_gb\tstatus\tdescription\t")
    back = ledger.read(text)
    assert back[0]["description"] == "a b" and back[0]["config"] == '{"x":1}'


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
