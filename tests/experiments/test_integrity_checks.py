"""The integrity checks on their own: the runner's clock on step lines, the compiled step's facts, learning,
protected hashes, evidence a baseline had; and the loop's refusal of a patch to protected files."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from tools.experiments import clocks, integrity
from tools.loop.admission import patch_files, protected_touched


def _log(tmp_path, steps: list[tuple[float, float, float]], result: dict):
    """A log and the runner's clock: one step line per (arrival time, loss, reported time), then the result. Lines
    arriving at one time came in one chunk (one read of the pipe)."""
    log = tmp_path / "run.log"
    clock, data = [], b""
    for i, (t, loss, dt) in enumerate(steps):
        data += json.dumps({"step": i, "loss": loss, "step_time_s": dt}).encode() + b"\n"
        if clock and clock[-1][0] == t:
            clock.pop()
        clock.append((t, len(data)))
    data += json.dumps(result).encode() + b"\n"
    clock.append((steps[-1][0] + 0.001, len(data)))
    log.write_bytes(data)
    return log, clock


def _result(times, losses):
    return {"step_times_s": times, "losses": losses, "tokens_per_step": 128, "warmup_steps": 1}


def test_step_lines_are_timed_by_the_chunk_that_carried_them(tmp_path):
    log, clock = _log(tmp_path, [(1.0, 5.0, 0.5), (1.01, 4.9, 0.01), (1.02, 4.8, 0.01)], {"x": 1})
    lines = clocks.step_lines(log, clock)
    assert [(ln.step, ln.loss, ln.t) for ln in lines] == [(0, 5.0, 1.0), (1, 4.9, 1.01), (2, 4.8, 1.02)]


def _check(tmp_path, arrivals, reported, losses=None):
    losses = losses or [5.0 - 0.1 * i for i in range(len(arrivals))]
    log, clock = _log(tmp_path, list(zip(arrivals, losses, reported)), {})
    out = integrity.Integrity()
    clocks.clock_check(_result(reported, losses), clocks.step_lines(log, clock), out)
    return out


def test_an_honest_clock_passes_and_a_scaled_one_is_caught(tmp_path):
    arrivals = [1.0 + 0.02 * i for i in range(12)]
    honest = _check(tmp_path, arrivals, [0.5] + [0.0195] * 11)
    assert honest.checks == {"clock": "ok"} and honest.facts["clock"]["run"]["median_ratio"] > 0.95
    scaled = _check(tmp_path, arrivals, [0.3] + [0.012] * 11)
    assert [f.signature for f in scaled.findings] == ["clock-slow"]
    assert "at least 200.0 ms apart" in scaled.findings[0].detail


def _untimed(tmp_path, name, step_s, timer=1.0, gap_s=0.00008, n=40):
    """An arm whose steps take ``step_s`` with ``gap_s`` of host work between them, timed by a clock at ``timer``x."""
    folder = tmp_path / name
    folder.mkdir()
    arrivals = [1.0 + (step_s + gap_s) * i for i in range(n)]
    reported = [0.5] + [timer * step_s] * (n - 1)
    losses = [5.0 - 0.01 * i for i in range(n)]
    log, clock = _log(folder, list(zip(arrivals, losses, reported)), {})
    return clocks.arm_untimed(_result(reported, losses), clocks.step_lines(log, clock), "run")


def test_a_timer_scaled_inside_the_slow_bound_is_caught_against_the_baseline_and_a_faster_step_is_not(tmp_path):
    """`time.perf_counter` at 0.85x passed `clock-slow` (0.8, the bound a loaded machine needs) and was `supported`
    +20 %: each of its steps leaves 15 % untimed, where the baseline's leave only the step line's 0.08 ms."""
    base = [_untimed(tmp_path, f"b{i}", 0.005) for i in range(2)]
    for name, var, caught in (("timer-0.85", [_untimed(tmp_path, f"v{i}", 0.0042, timer=0.85) for i in range(2)], True),
                              ("3x faster", [_untimed(tmp_path, f"f{i}", 0.0017, n=120) for i in range(2)], False),
                              ("10x faster", [_untimed(tmp_path, f"g{i}", 0.0005, n=300) for i in range(2)], False),
                              ("slower", [_untimed(tmp_path, f"s{i}", 0.009) for i in range(2)], False)):
        assert None not in var, name
        out = integrity.Integrity()
        clocks.untimed_check(base, var, out)
        assert [f.signature for f in out.findings] == (["clock-share"] if caught else []), (name, out.facts)


def test_a_trajectory_that_agrees_early_and_drifts_later_is_caught():
    """Half the work skipped from step 13 on (the semantics check reads 12 steps) was `supported` +38.9 %."""
    ref = [6.0 - 4.0 * (1 - 0.97 ** i) for i in range(100)]
    honest = [x + 0.015 * ((-1) ** i) for i, x in enumerate(ref)]      # another dtype: close at every step
    late = ref[:13] + [x + 0.15 for x in ref[13:]]                      # the same early, then worse
    for losses, caught in ((honest, False), (late, True)):
        out = integrity.Integrity()
        integrity.drift_check(integrity.loss_windows(ref), "v001", losses, 12, out)
        assert [f.signature for f in out.findings] == (["loss-drift"] if caught else []), out.facts
    out = integrity.Integrity()
    integrity.drift_check(integrity.loss_windows(ref[:50]), "v001", late, 12, out)  # another length: no comparison
    assert out.checks["drift"].startswith("unchecked") and not out.findings
    assert integrity.loss_windows([1.0, float("nan")] * 20) is None


def test_a_step_computed_outside_the_steps_is_caught_by_its_op_rate():
    """Every step computed before the timed loop, the losses replayed inside it: the compiled step and its FLOPs are
    real, the losses too, and the profiled steps' ops ran 2.4e-05 s: `supported` +1818 %."""
    base = {"metrics": {"device_kind": "cpu"}, "integrity": {"facts": {
        "hlo": {"matmul_flops": 9.4e7}, "trace": {"ops_s_per_step": 0.0042}}}}

    def check(flops, ops_s, device="cpu"):
        out = integrity.Integrity()
        out.facts.update(hlo={"matmul_flops": flops}, trace={"ops_s_per_step": ops_s})
        integrity.ops_rate_check(out, base, device)
        return [f.signature for f in out.findings]
    assert check(9.4e7, 2.4e-5) == ["ops-rate"]
    assert check(9.4e7, 0.0021) == [] and check(4.7e7, 0.0011) == []   # 2x faster; half the FLOPs, as fast
    assert check(9.4e7, 2.4e-5, device="TPU v5e") == []                 # another device: no comparison


def test_lines_printed_at_once_are_a_replay(tmp_path):
    out = _check(tmp_path, [1.0 + 0.00001 * i for i in range(12)], [0.5] + [0.01] * 11)
    assert [f.signature for f in out.findings] == ["clock-replay"]


def test_more_steps_reported_than_printed_and_losses_that_differ(tmp_path):
    log, clock = _log(tmp_path, [(1.0 + 0.01 * i, 5.0, 0.01) for i in range(5)], {})
    out = integrity.Integrity()
    clocks.clock_check(_result([0.005] * 10, [5.0] * 10), clocks.step_lines(log, clock), out)
    assert out.findings[0].signature == "step-count" and "10 step times" in out.findings[0].detail
    out = integrity.Integrity()
    clocks.clock_check(_result([0.01] * 5, [5.0, 5.0, 4.0, 5.0, 5.0]), clocks.step_lines(log, clock), out)
    assert out.findings[0].signature == "step-losses" and "step 2" in out.findings[0].detail


def test_no_step_lines_is_unchecked_and_losing_them_since_the_baseline_is_a_finding(tmp_path):
    out = integrity.Integrity()
    clocks.clock_check(_result([0.01] * 5, [5.0] * 5), [], out)
    assert out.checks["clock"].startswith("unchecked") and out.status == "partial"
    integrity.evidence_check(out, {"checks": {"clock": "ok"}})
    assert [f.signature for f in out.findings] == ["evidence-lost"] and out.status == "violated"


def _facts(token="s32[1,4,33]", flops=None, custom=()):
    return {"stage": "optimized", "modules": ["jit_train_step"], "module": "jit_train_step", "token_input": token,
            "matmul_flops": flops or {"f32": 100.0}, "requested_flops": flops or {"f32": 100.0},
            "custom_calls": list(custom)}


def _hlo(result_extra, facts, baseline_had_hlo=True):
    out = integrity.Integrity()
    r = {"tokens_per_step": 128, "flops_per_step": {"causal": 90.0, "noncausal": 100.0}, "n_devices": 1,
         "config": {"compute_dtype": "bfloat16"}} | result_extra
    integrity.hlo_check(r, facts, out, baseline_had_hlo)
    return out


def test_the_compiled_step_against_what_was_reported():
    assert _hlo({}, _facts()).checks == {"hlo": "ok"}
    assert _hlo({"tokens_per_step": 256}, _facts()).findings[0].signature == "hlo-tokens"
    assert _hlo({}, _facts(token="s32[1,2,33]")).findings[0].signature == "hlo-tokens"
    assert _hlo({}, _facts(flops={"f32": 60.0})).findings[0].signature == "hlo-flops"
    # a block-causal attention that skips the masked blocks computes fewer FLOPs than the non-causal count, and no
    # fewer than the causal one: honest (a red team's real 2x was `invalid` at 0.77 of the non-causal count)
    assert _hlo({}, _facts(flops={"f32": 77.0})).findings == []
    assert _hlo({"flops_per_step": {"causal": 100.0, "noncausal": 130.0}}, _facts(flops={"f32": 77.0})
                ).findings[0].signature == "hlo-flops"
    assert _hlo({}, _facts(flops={"f32": 60.0}, custom=[{"kernel": "flash"}])).findings == []  # hidden in a kernel
    narrow = _hlo({}, _facts(flops={"f32": 50.0, "s8": 50.0}))
    assert [f.signature for f in narrow.findings] == ["precision"] and "50 %" in narrow.findings[0].detail
    assert _hlo({"config": {"compute_dtype": "int8"}}, _facts(flops={"s8": 100.0})).findings == []
    # bf16 matmuls where the run declares float32: the speed of a precision change, undeclared
    half = _hlo({"config": {"compute_dtype": "float32"}}, _facts(flops={"f32": 20.0, "bf16": 80.0}))
    assert [f.signature for f in half.findings] == ["precision"] and "80 % of the matmul FLOPs run in bf16" in \
        half.findings[0].detail
    assert _hlo({"config": {"compute_dtype": "float32"}}, _facts(flops={"f32": 90.0, "bf16": 10.0})).findings == []
    assert _hlo({}, _facts(flops={"bf16": 100.0})).findings == []  # bf16 declared
    nothing = dict(_facts(), matmul_flops={}, requested_flops={})  # no dot: none of the model's FLOPs computed
    assert [f.signature for f in _hlo({}, nothing).findings] == ["hlo-flops"]
    assert "no matmul at all" in _hlo({}, nothing).findings[0].detail
    assert _hlo({}, dict(nothing, gemm_calls=12)).findings == []  # cuBLAS GEMMs: matmuls the dot count misses
    assert _hlo({}, dict(nothing, custom_calls=[{"kernel": "flash"}])).findings == []
    none = {"stage": "none", "modules": []}
    assert _hlo({}, none).findings[0].signature == "no-program"
    assert _hlo({}, none, baseline_had_hlo=False).checks["hlo"].startswith("unchecked")


def test_learning_needs_the_loss_to_fall_as_the_references_does():
    ref = [6.0, 5.8, 5.6, 5.5, 5.4]
    out = integrity.Integrity()
    integrity.learning_check(ref, [6.0, 5.81, 5.61, 5.52, 5.41], 12, out)
    assert out.checks == {"learning": "ok"}
    out = integrity.Integrity()
    integrity.learning_check(ref, [6.0, 6.1, 5.95, 6.02, 5.99], 12, out)
    assert out.findings[0].signature == "frozen"


def test_protected_hashes_hold_a_function_and_see_it_change(tmp_path):
    f = tmp_path / "train.py"
    f.write_text("def report(x):\n    return x\n\n\ndef step(x):\n    return x + 1\n")
    before = integrity.protected_hashes(["train.py::report", "train.py", "gone.py", "train.py::nope"], tmp_path)
    assert before["gone.py"] == before["train.py::nope"] == "missing"
    f.write_text("def report(x):\n    return x\n\n\ndef step(x):\n    return x + 2\n")
    after = integrity.protected_hashes(["train.py::report", "train.py"], tmp_path)
    assert after["train.py::report"] == before["train.py::report"] and after["train.py"] != before["train.py"]
    out = integrity.Integrity()
    integrity.protected_check(after, before, out)
    assert out.findings[0].signature == "protected" and "train.py changed" in out.findings[0].detail


@pytest.mark.parametrize("shadow", [
    "_report = report\n\n\ndef report(x):\n    return _report([t * 0.85 for t in x])\n",  # a second def
    "report = lambda x: [t * 0.85 for t in x]\n",                                          # an assignment
    "globals()['report'] = print\n",                                                      # by its name as text
    "import sys\nsetattr(sys.modules[__name__], 'report', print)\n",
    "import sys\n\n\ndef patch():\n    sys.modules[__name__].report = print\n",       # the module by another road
    "from os import path as report\n",                                                    # an import over it
    "def main():\n    global report\n    report = print\n",                                # from inside a function
])
def test_a_protected_function_rebound_later_in_its_file_is_a_change(tmp_path, shadow):
    """`def report` left as it was and a second `def report` wrapping it (the step times scaled by 0.85) below:
    the first definition's hash held, and the run was `supported` +21.8 %."""
    f = tmp_path / "train.py"
    body = "def report(x):\n    return x\n\n\ndef main(y):\n    return report(y)\n"
    f.write_text(body)
    before = integrity.protected_hashes(["train.py::report"], tmp_path)
    f.write_text(body + "\n\ndef helper():\n    report_all = 1\n    return report_all\n")  # an honest change
    assert integrity.protected_hashes(["train.py::report"], tmp_path) == before
    # names that are not the module's: a method, a local variable, a nested function, a local import; each edited
    for other in ("class Timer:\n    def report(self):\n        return 'a'\n",
                  "def summary(r):\n    report = str(r)\n    return report\n",
                  "def outer():\n    def report():\n        return 1\n    return report\n",
                  "def lazy():\n    from os import path as report\n    return report\n",
                  "x = {'report': 1}\ny = vars(object)\n"):
        f.write_text(body + "\n\n" + other)
        first = integrity.protected_hashes(["train.py::report"], tmp_path)
        f.write_text(body + "\n\n" + other.replace("1", "2").replace("'a'", "'b'").replace("str(r)", "repr(r)"))
        assert integrity.protected_hashes(["train.py::report"], tmp_path) == first == before, other
    f.write_text(body + "\n\n" + shadow)
    after = integrity.protected_hashes(["train.py::report"], tmp_path)
    out = integrity.Integrity()
    integrity.protected_check(after, before, out)
    assert out.findings and out.findings[0].signature == "protected", shadow


def test_the_loop_refuses_a_patch_to_the_runner_or_a_protected_file():
    patch = ("--- a/tools/experiments/metrics.py\n+++ b/tools/experiments/metrics.py\n@@ -1 +1 @@\n-a\n+b\n"
             "--- a/train.py\n+++ b/train.py\n@@ -1 +1 @@\n-a\n+b\n")
    assert patch_files(patch) == ["tools/experiments/metrics.py", "train.py"]
    assert protected_touched(patch, []) == ["tools/experiments/metrics.py"]
    assert protected_touched(patch, ["train.py"]) == ["tools/experiments/metrics.py", "train.py"]
    assert protected_touched(patch.split("--- a/train.py")[0].replace("tools/experiments/metrics.py", "m.py"),
                             ["train.py::report"]) == []


@pytest.mark.slow
def test_the_reference_model_prints_a_step_line_per_step(tmp_path):
    from pathlib import Path

    script = Path(integrity.__file__).parents[1] / "templates" / "llama_train.py"
    p = subprocess.run([sys.executable, str(script), "--preset", "tiny", "--steps", "3"], capture_output=True,
                       text=True, timeout=300)
    lines = [json.loads(ln) for ln in p.stdout.splitlines() if ln.startswith('{"step"')]
    result = json.loads(p.stdout.strip().splitlines()[-1])
    assert [ln["step"] for ln in lines] == [0, 1, 2]
    assert [ln["loss"] for ln in lines] == result["losses"]


def test_a_script_logging_every_few_steps_is_timed_between_its_lines(tmp_path):
    """Other people's scripts log every k steps: sparse lines are no step-count finding, and the steps between two
    lines are timed against the clock between them."""
    def check(every_step_s):
        log = tmp_path / "run.log"
        data, clock = b"", []
        for i in range(0, 41, 5):
            data += json.dumps({"step": i, "loss": 5.0}).encode() + b"\n"
            clock.append((1.0 + i * 0.01, len(data)))
        log.write_bytes(data)
        out = integrity.Integrity()
        clocks.clock_check(_result([every_step_s] * 41, [5.0] * 41), clocks.step_lines(log, clock), out)
        return out
    assert check(0.01).findings == [] and check(0.01).checks["clock"] == "ok"
    assert [f.signature for f in check(0.006).findings] == ["clock-slow"]


def test_late_reads_on_a_loaded_machine_convict_no_honest_program(tmp_path):
    """Seen on a loaded 2-core CI machine: the runner reads the pipe late, so lines arrive in bunches and single-step
    intervals look long or short (a median per step of 0.77 once convicted an honest baseline). A read drains the
    pipe, so a line was printed between the read before the one carrying it and that one: bounds no late read can
    make damning. A timer running at 0.7x loses 30 % of every step, more over enough steps than any read is late."""
    import random

    def arrivals(printed, seed):
        rng, out, j = random.Random(seed), [], 0
        while j < len(printed):  # the reader wakes a while after the first unread line, and drains the pipe
            r = printed[j] + rng.choice([0.0, 0.004, 0.012, 0.03, 0.05])
            while j < len(printed) and printed[j] <= r:
                out.append(r)
                j += 1
        return out

    steps = [0.5] + [0.01] * 39
    printed = [1.0 + sum(steps[:i + 1]) for i in range(len(steps))]
    for seed in range(20):
        late = arrivals(printed, seed)
        assert _check(tmp_path, late, steps).findings == [], seed
        assert [f.signature for f in _check(tmp_path, late, [t * 0.7 for t in steps]).findings] == ["clock-slow"]
        assert [f.signature for f in _check(tmp_path, late, [t * 1.5 for t in steps]).findings] == ["clock-replay"]


def _traced(times, steps):
    out = integrity.Integrity()
    clocks.trace_check({"step_times_s": times, "warmup_steps": 1}, steps, out)
    return out


def test_the_profilers_clock_and_the_ops_busy_time_bound_the_reported_steps():
    """Figures as the tiny preset's profiled runs gave them (CPU): honest 10.2 ms reported, annotated steps 10.3 ms
    each and 10.4 ms apart, ops 8.3 ms a step; a clock stopped at dispatch 0.66 ms (the annotation around the
    dispatch too) against 6.3 ms of ops and steps 8.2 ms apart; a clock at 0.6x."""
    honest = _traced([0.5] + [0.0102] * 29, {"count": 29, "span_busy_ms": 29 * 8.3, "period_ms": 10.4,
                                             "median_ms": 10.3})
    assert honest.findings == [] and honest.checks == {"trace": "ok"}
    assert honest.facts["trace"]["annotated_steps"] == 29
    dispatch = _traced([0.5] + [0.00066] * 29, {"count": 29, "span_busy_ms": 29 * 6.3, "period_ms": 8.2,
                                                "median_ms": 0.7})
    assert [f.signature for f in dispatch.findings] == ["device-busy", "trace-clock"]
    assert "6.30 ms a step" in dispatch.findings[0].detail and "8.20 ms apart" in dispatch.findings[1].detail
    scaled = _traced([0.5] + [0.006] * 29, {"count": 29, "span_busy_ms": 29 * 7.0, "period_ms": 10.0,
                                            "median_ms": 9.9})
    assert [f.signature for f in scaled.findings] == ["trace-clock"] and scaled.checks["trace"] == "violated"
    assert "annotated steps took 9.90 ms" in scaled.findings[0].detail
    unnamed = _traced([0.5] + [0.006] * 29, {"count": 29, "span_busy_ms": 29 * 7.0, "period_ms": 10.0})
    assert [f.signature for f in unnamed.findings] == ["trace-clock"]  # a summary without the steps' own time


# A real profiled baseline of the tiny preset, run while the suite's other workers held both cores (2026-12-06):
# its steps took 2.2 ms or 7 ms. Its mean reported step (5.41 ms) against the median period (7.08 ms) had filed it
# invalid; the medians agree (6.63 ms reported, 6.62 ms annotated).
BUSY_TIMES = [0.134335, 0.008452, 0.003803, 0.002719, 0.006801, 0.007132, 0.007267, 0.002222, 0.007468, 0.006626,
              0.002181, 0.004844]
BUSY_STEPS = {"count": 11, "median_ms": 6.6191, "min_ms": 2.1682, "max_ms": 8.4384, "span_busy_ms": 36.617,
              "period_ms": 7.0798}


def test_an_honest_run_on_a_busy_machine_passes_and_a_slow_clock_on_it_is_still_caught():
    honest = _traced(BUSY_TIMES, BUSY_STEPS)
    assert honest.findings == [], [f.detail for f in honest.findings]
    assert honest.facts["trace"]["reported_median_s"] == 0.006626
    scaled = _traced([t * 0.6 for t in BUSY_TIMES], BUSY_STEPS)
    assert [f.signature for f in scaled.findings] == ["trace-clock"], [f.detail for f in scaled.findings]
    half = _traced([t * 0.75 for t in BUSY_TIMES], BUSY_STEPS)  # a quarter of every step left off the clock
    assert [f.signature for f in half.findings] == ["trace-clock"], [f.detail for f in half.findings]


# Another, from a suite run at one worker per core (2026-12-06): steps 1-5 took 11.9, 4.9, 4.2, 13.2, 2.8 ms, each
# beginning 0.05-0.08 ms after the last ended. Its median reported step (4.87 ms, five steps) against its median
# period (8.47 ms, the first four) had filed it invalid.
BUSY2_TIMES = [0.147609, 0.011948, 0.00487, 0.004254, 0.013223, 0.002788]
BUSY2_SPANS = [(0.06, 11.934), (12.071, 4.857), (16.996, 4.243), (21.291, 13.213), (34.559, 2.779)]  # start, span


def _steps_of(spans: list[tuple[float, float]], first: int = 1, nums: list[int] | None = None) -> dict:
    """The trace summary's step figures of annotated steps (start ms, span ms; numbered from ``first``, or
    ``nums``), from the summary's own code."""
    from tools.profiling import summary, trace

    nums = nums or list(range(first, first + len(spans)))
    tr = trace.Trace(ops=[], steps=[trace.StepEvent(n, a * 1e3, d * 1e3) for n, (a, d) in zip(nums, spans)],
                     source="test", planes=[])
    return summary._steps(tr)


def test_the_reported_steps_are_summed_against_the_same_steps_on_the_profilers_clock():
    steps = _steps_of(BUSY2_SPANS)
    assert steps["period_ms"] == 8.468 and (steps["first_step"], steps["last_step"]) == (1, 5)
    honest = _traced(BUSY2_TIMES, steps)
    assert honest.findings == [], [f.detail for f in honest.findings]
    assert honest.facts["trace"]["summed"] == {"steps": [1, 4], "reported_s": 0.034295, "seen_s": 0.034499}
    from tools.experiments import report

    assert "steps 1-4 reported 0.034295 s where 0.034499 s passed" in \
        "\n".join(report.integrity_section(honest.as_record()))
    # without numbered steps (a summary made before), the medians of different steps: the old false finding
    unnumbered = {k: v for k, v in steps.items() if k not in ("first_step", "last_step", "first_to_last_start_ms")}
    assert [f.detail for f in _traced(BUSY2_TIMES, unnumbered).findings] == [
        "the profiled run reports 4.87 ms a step (median); on the profiler's clock its annotated steps began 8.47 ms "
        "apart"]
    # the same run timing and annotating 60 % of each step: the rest still runs before the next step starts
    part = _steps_of([(a, d * 0.6) for a, d in BUSY2_SPANS])
    cut = _traced([BUSY2_TIMES[0]] + [t * 0.6 for t in BUSY2_TIMES[1:]], part)
    assert [f.signature for f in cut.findings] == ["trace-clock"], [f.detail for f in cut.findings]
    assert "reports 20.6 ms for steps 1-4; on the profiler's clock 34.5 ms passed" in cut.findings[0].detail


def test_untimed_work_in_a_few_gaps_is_caught_and_an_honest_gap_or_a_wider_timer_is_not():
    """Steps timed and annotated at 1 ms, with 9 ms of other work after two of them: every median says 1 ms, the
    sum of the same steps does not. Fast honest steps with a fixed 0.07 ms gap, and a timer around the whole step
    with the annotation around the dispatch alone, pass."""
    spans = [(0, 1), (1, 1), (2, 1), (12, 1), (22, 1), (23, 1), (24, 1)]
    hidden = _traced([0.5] + [0.001] * 7, _steps_of(spans, first=1))
    assert [f.signature for f in hidden.findings] == ["trace-clock"], [f.detail for f in hidden.findings]
    for n in (30, 200):  # the gap allowed per step, not only over the whole window
        fast = _traced([0.5] + [0.00025] * n, _steps_of([(i * 0.32, 0.25) for i in range(n)], first=1))
        assert fast.findings == [], (n, [f.detail for f in fast.findings])
    wide = _traced([0.5] + [0.010] * 20, _steps_of([(i * 10.1, 0.7) for i in range(20)], first=1) | {"span_busy_ms": 0})
    assert wide.findings == [], [f.detail for f in wide.findings]
    # numbers that are not the reported steps' indices fall back to the median period: a window reaching the
    # warm-up step (whose compile would hide the untimed work) ...
    cheat = _traced([0.3] + [0.005] * 10, _steps_of([(i * 15.0, 5.0) for i in range(10)], first=0))
    assert [f.detail for f in cheat.findings] == [
        "the profiled run reports 5.00 ms a step (median); on the profiler's clock its annotated steps began 15.00 ms "
        "apart"]
    # ... and numbering from 1 with the compiling step 0 traced: annotations longer than the steps under their
    # numbers (an honest run, passed)
    shifted = _steps_of([(0, 300.0)] + [(300.5 + 10.0 * i, 9.9) for i in range(9)], first=1)
    assert _traced([0.3] + [0.010] * 10, shifted | {"span_busy_ms": 0}).findings == []
    # a number far from the rest (a global counter) is not a run of steps, and builds nothing that large
    assert "first_step" not in _steps_of([(0, 1), (2, 1)], nums=[0, 10 ** 18])
    # one step annotated three times counts once, from its first start
    repeated = _steps_of([(0, 4), (4, 0.001), (8, 0.001), (10, 4), (14, 0.001), (18, 0.001), (20, 4)],
                         nums=[1, 1, 1, 2, 2, 2, 3])
    assert (repeated["first_step"], repeated["last_step"], repeated["first_to_last_start_ms"]) == (1, 3, 20.0)
    faked = _traced([0.5, 0.004, 0.004, 0.004], repeated)
    assert "reports 8.0 ms for steps 1-2; on the profiler's clock 20.0 ms passed" in \
        " ".join(f.detail for f in faked.findings)
    # ... and the ops' busy time is shared among its 3 steps, not its 7 annotations: 9 ms of ops a step
    busy = _traced([0.5, 0.004, 0.004, 0.004], repeated | {"span_busy_ms": 27.0})
    assert "saw its XLA ops run 9.00 ms a step" in " ".join(f.detail for f in busy.findings)


def test_steps_reported_short_fewer_than_half_of_them_are_caught_by_the_fastest_step():
    """A median does not move when 30 of 99 steps are reported at 1 ms, but a run read by its fastest step is made
    of them: the fastest reported step against the fastest annotated one."""
    steps = {"count": 99, "median_ms": 10.3, "min_ms": 10.1, "span_busy_ms": 99 * 8.3, "period_ms": 10.4}
    honest = _traced([0.5] + [0.0102] * 99, steps)
    assert honest.findings == [] and honest.facts["trace"]["annotated_min_s"] == 0.0101
    faked = _traced([0.5] + [0.001] * 30 + [0.0102] * 69, steps)
    assert [f.signature for f in faked.findings] == ["trace-clock"], [f.detail for f in faked.findings]
    assert "a step of 1.00 ms" in faked.findings[0].detail and "fastest annotated step took 10.10 ms" in \
        faked.findings[0].detail


def test_a_profile_without_step_annotations_is_unchecked_and_losing_them_is_a_finding():
    out = _traced([0.5] + [0.01] * 9, {"count": 0})
    assert out.findings == [] and out.checks["trace"].startswith("unchecked: no step annotations")
    integrity.evidence_check(out, {"checks": {"trace": "ok"}})
    assert [f.signature for f in out.findings] == ["evidence-lost"]
    unprofiled = integrity.Integrity()
    unprofiled.add("trace", None, "the run was not profiled")
    integrity.evidence_check(unprofiled, {"checks": {"trace": "ok"}})
    assert unprofiled.findings == []


def test_a_late_runner_never_places_a_line_after_it_was_printed(tmp_path):
    """The runner's bounds on a real child: it prints its own monotonic time on each line (the clock
    ``perf_counter`` reads, shared by processes), and every line must lie in (after, t]. A line not in one chunk
    was printed after that chunk's read *began*: the read's return may be stamped late (the runner waiting for a CPU
    or the GIL), which the next test pins down."""
    import time

    from tools.runners.process import run_command

    child = ("import json, time\nfor i in range(60):\n"
             "    print(json.dumps({'step': i, 'loss': 1.0, 'at': time.perf_counter()}), flush=True)\n"
             "    time.sleep(0.002)\n")
    t0 = time.perf_counter()
    proc = run_command([sys.executable, "-c", child], tmp_path / "run.log", {}, 60, None, False)
    assert proc.rc == 0 and proc.clock and all(len(e) == 3 and e[2] <= e[0] for e in proc.clock), proc
    printed = {json.loads(ln)["step"]: json.loads(ln)["at"] for ln in (tmp_path / "run.log").read_text().splitlines()}
    lines = clocks.step_lines(proc.log, proc.clock)
    assert len(lines) == 60
    # the command's clock starts a moment after t0 (its own t0); the slack only ever helps the bound below
    early = [(ln.step, round((printed[ln.step] - t0 - ln.after) * 1e3, 2)) for ln in lines
             if printed[ln.step] - t0 < ln.after - 0.002]
    assert not early, f"lines printed before the runner's lower bound (step, ms): {early[:5]}"
    late = [ln for ln in lines if printed[ln.step] - t0 > ln.t + 0.002]
    assert not late, late[:3]


def test_a_lines_lower_bound_is_when_the_read_before_it_began(tmp_path):
    """Clock entries are (read returned, log bytes, read began): a line in one chunk was printed after the previous
    chunk's read began, not after it returned (a late return stamp would push the bound past the print)."""
    log, _ = _log(tmp_path, [(1.0, 5.0, 0.5), (1.01, 4.9, 0.01), (1.02, 4.8, 0.01)], {"x": 1})
    sizes = [len(ln) + 1 for ln in log.read_bytes().split(b"\n")[:4]]
    ends = [sum(sizes[:i + 1]) for i in range(4)]
    clock = [(1.0, ends[0], 0.99), (1.03, ends[1], 1.0), (1.05, ends[2], 1.04), (1.06, ends[3], 1.055)]
    lines = clocks.step_lines(log, clock)
    assert [(ln.step, ln.t, ln.after) for ln in lines] == [(0, 1.0, 0.0), (1, 1.03, 0.99), (2, 1.05, 1.0)]


def test_lines_that_arrived_together_bound_nothing_and_are_not_lost_evidence(tmp_path):
    """All of a run's step lines in one read of the pipe (printed at the end): the runner's clock has no lower
    bound on any of them, so the check proves nothing and says so. It recorded `ok` (a window from -9.95 s). Not
    `evidence-lost` either: the lines were printed, the reader was late or the printer waited."""
    out = _check(tmp_path, [10.0] * 10, [0.5] + [0.001] * 9)
    assert out.findings == [] and out.checks["clock"] == f"unchecked: {clocks.TOGETHER}", out.checks
    integrity.evidence_check(out, {"checks": {"clock": "ok"}})
    assert out.findings == []


def test_each_timed_arm_is_judged_on_its_own_lines():
    """A profiled run that behaves is no evidence for timed runs that print no step lines; lines that arrived
    together in one arm do not spoil another arm's bounds; no arm with bounds at all is no evidence."""
    from types import SimpleNamespace as NS

    from tools.experiments.comparison import _unverified

    def verdict_on(statuses: dict, traced=False, trace="unchecked: x"):
        arms = [NS(name=n, ok=True, kind="var", pairs="", proc=NS(clock=[(0.1, 10, 0.0)])) for n in statuses]
        r = NS(var=arms, all_arms=arms, traced=traced)
        check = integrity.Integrity(checks={"clock": "ok", "trace": trace},
                                    facts={"clock_arms": dict(statuses, profile="ok")})
        return _unverified(check, r)

    assert verdict_on({"run-1": "ok", "run-2": "ok"}) == ""
    assert "no step lines" in verdict_on({"run-1": "unchecked: the command printed no step lines", "run-2": "ok"})
    assert verdict_on({"run-1": f"unchecked: {clocks.TOGETHER}", "run-2": "ok"}) == ""
    assert "arrived together" in verdict_on({"run-1": f"unchecked: {clocks.TOGETHER}"})
    assert verdict_on({"run-1": "unchecked: no step lines"}, traced=True, trace="ok") == ""


def test_tokens_and_windows_of_a_stored_record_are_read_as_kept_never_rebuilt():
    """A stored baseline's tokens per step was rebuilt as median tokens/s × median step time: over two runs 22 %
    apart that is 1.4 % off, and an unchanged command was filed invalid (`shape-tokens`). A hand-edited
    `loss_windows` (`mean:` for `means:`) made every later comparison in the lane a traceback."""
    from tools.experiments import comparison
    from tools.experiments.rounds import Runs

    key = json.dumps({"batch": 4}, sort_keys=True)
    old = {"exp_id": "v001", "shape": {"batch": 4}, "metrics": {"tokens_per_s": 46367.35, "step_time_ms": 2.799}}
    assert comparison.reference_tokens(key, Runs(base_rec=old), []) == (None, "")  # before it was kept: no check
    kept = dict(old, metrics={**old["metrics"], "tokens_per_step": 128.0})
    assert comparison.reference_tokens(key, Runs(base_rec=kept), []) == (128.0, "v001")
    bad = dict(old, loss_windows={"steps": 100, "mean": [1.0] * 10})
    assert comparison.reference_windows(key, Runs(base_rec=bad), []) == (None, "")
    out = integrity.Integrity()
    integrity.drift_check({"steps": 100, "means": "x"}, "v001", [1.0] * 100, 12, out)
    assert out.checks["drift"].startswith("unchecked") and not out.findings


def test_timed_steps_far_shorter_than_the_profiled_ops_ran_are_no_run_of_that_program():
    """A red team's hack: the first (profiled) run computed and cached its losses, every timed run read them back in
    microseconds a step, on a runner's clock that agreed: `supported` at +5,537 %."""
    import types

    from tools.experiments import clocks

    def arm(name, step_s):
        return types.SimpleNamespace(name=name, result={"step_times_s": [0.5] + [step_s] * 20, "warmup_steps": 1})

    out = integrity.Integrity()
    out.facts["trace"] = {"ops_s_per_step": 0.0068}
    clocks.timed_ops_check([arm("run-1", 0.0036), arm("run-2", 0.0041)], out)  # profiling slowed the tiny ops
    assert out.findings == []
    clocks.timed_ops_check([arm("run-1", 0.0036), arm("run-2", 0.00007)], out)
    assert [f.signature for f in out.findings] == ["timed-ops"] and "run-2 reports 0.070 ms" in out.findings[0].detail
    quiet = integrity.Integrity()  # no trace read: nothing to compare with
    clocks.timed_ops_check([arm("run-1", 0.00007)], quiet)
    assert quiet.findings == []
    # from a review: 40 of 99 steps from the cache left the median honest and the fastest step 100x (what a run read
    # by its fastest step is judged on); 10 steps of a 1 ms program, all cached, passed an absolute slack
    few = integrity.Integrity()
    few.facts["trace"] = {"ops_s_per_step": 0.0068}
    few_arm = types.SimpleNamespace(name="run-1", result={"step_times_s": [0.5] + [0.0036] * 59 + [0.00007] * 40,
                                                          "warmup_steps": 1})
    clocks.timed_ops_check([few_arm], few)
    assert [f.signature for f in few.findings] == ["timed-ops"] and "(fastest)" in few.findings[0].detail
    short = integrity.Integrity()
    short.facts["trace"] = {"ops_s_per_step": 0.001}
    clocks.timed_ops_check([types.SimpleNamespace(name="run-1", result={"step_times_s": [0.00002] * 10})], short)
    assert [f.signature for f in short.findings] == ["timed-ops"]


def test_a_patch_to_a_protected_file_is_refused_in_every_form_git_applies(tmp_path):
    """`x/` and `y/` prefixes, C-quoted names and a `diff --git` rename ran instead of being refused (+200 %,
    caught only by the file's hash at run time; the runner's own files have no such backstop). Each form is
    checked against what `git apply --numstat` itself names, in a real repository."""
    from tools.loop import patchfiles

    repo = tmp_path / "repo"
    (repo / "tools/loop").mkdir(parents=True)
    (repo / "fake_model.py").write_text("speed = 1.0\n")
    (repo / "tools/loop/engine.py").write_text("a\n")
    (repo / "old.py").write_text("a\n")
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
    forms = {
        "x/ y/": "--- x/fake_model.py\n+++ y/fake_model.py\n@@ -1 +1 @@\n-speed = 1.0\n+speed = 3.0\n",
        "quoted": '--- "a/fake_model.py"\n+++ "b/fake_model.py"\n@@ -1 +1 @@\n-speed = 1.0\n+speed = 3.0\n',
        "no prefix": "--- fake_model.py\n+++ fake_model.py\n@@ -1 +1 @@\n-speed = 1.0\n+speed = 3.0\n",
        "rename": "diff --git a/old.py b/tools/loop/engine.py\nsimilarity index 100%\nrename from old.py\n"
                  "rename to tools/loop/engine.py\n",
        "after a removed `-- ` line": "--- a/old.py\n+++ b/old.py\n@@ -1 +1 @@\n--- a/x\n+b\n"
                                      "--- a/fake_model.py\n+++ b/fake_model.py\n@@ -1 +1 @@\n-speed = 1.0\n+x\n",
    }
    for what, patch in forms.items():
        numstat = subprocess.run(["git", "apply", "--numstat", "-z", "-"], cwd=repo, input=patch, text=True,
                                 capture_output=True, check=True).stdout
        by_git = {p for p in re.split(r"[\t\0]", numstat) if p and not p.isdigit() and p != "-"}
        assert by_git <= set(patch_files(patch)), (what, by_git, patch_files(patch))
        assert protected_touched(patch, ["fake_model.py"]), what
    binary = ("diff --git a/fake_model.py b/fake_model.py\nindex 1..2 100644\nGIT binary patch\nliteral 12\n"
              "TcmXR)$jdLu&C4vwNKH(^\n\nliteral 0\nKcmV+b0RR6000031\n\n")
    assert patchfiles.is_binary(binary) and protected_touched(binary, ["fake_model.py"])


def test_the_same_lines_in_another_file_are_another_change():
    """Writing `1.25` into docs/SPEED was refused as a duplicate of writing it into SPEED (a real +25 %)."""
    from tools.loop.proposal import Change

    def patch(path: str) -> str:
        return f"--- a/{path}\n+++ b/{path}\n@@ -1 +1 @@\n-1.0\n+1.25\n"
    assert Change("patch", patch=patch("SPEED")).fingerprint() != Change("patch", patch=patch("docs/SPEED")).fingerprint()
    assert Change("patch", patch=patch("SPEED")).fingerprint() == \
        Change("patch", patch=patch("SPEED").replace("a/", "x/").replace("b/", "y/")).fingerprint()
