"""The reference model at tiny size on CPU through `tools exp run`, with a real profile."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from _exp_helpers import LLAMA, PY
from click.testing import CliRunner

from tools import pages
from tools.cli import cli
from tools.experiments import ledger, records
from tools.project import Project

pytestmark = pytest.mark.slow
TINY = ["--preset", "tiny", "--steps", "12"]


@pytest.fixture(scope="module")
def filed(profiled_llama):
    """Two real runs: a profiled baseline and a changed knob (remat full); the session's shared pair."""
    root, ids = profiled_llama
    return Project(root), ids


def test_pages_ledger_and_model_page(filed):
    project, _ = filed
    recs = records.lane_records(project.wiki, "llama", "cpu")
    assert [r["version"] for r in recs] == [1, 2]
    base, var = recs
    assert base["role"] == "baseline" and var["role"] == "variant"
    assert var["verdict"] in ("supported", "refuted", "inconclusive")  # timing-dependent, never crash/invalid
    for r in recs:
        m = r["metrics"]
        assert m["tokens_per_s"] > 0 and m["step_time_ms"] > 0 and m["platform"] == "cpu"
        assert m["mfu_percent"] is None and "CPU" in m["mfu_note"]  # no peak FLOP/s on CPU
        assert len(r["loss_trajectory"]) == 12 and r["config"]["n_layers"] == 2
    # remat recomputes but does not change the math: the semantics check holds
    assert var["semantics"]["status"] == "ok" and var["semantics"]["max_abs_delta"] <= 0.025
    assert var["baseline"] == base["exp_id"] and "noise band" in (project.wiki / var["page"]).read_text()
    tsv = ledger.read((project.wiki / "experiments/llama/cpu/RESULTS.tsv").read_text())
    assert [r["exp_id"] for r in tsv] == [base["exp_id"], var["exp_id"]]
    assert json.loads(tsv[1]["config"])["remat"] == "full"
    meta, body = pages.split((project.wiki / "models/llama-cpu.md").read_text())
    assert meta["type"] == "model" and base["exp_id"] in pages.regions(body)["variants"]


def test_profile_attributes_time_to_model_lines(filed):
    project, _ = filed
    base = records.lane_records(project.wiki, "llama", "cpu")[0]
    raw = project.root / base["raw_dir"]
    assert (raw / "run.log").is_file() and list(raw.glob("trace/plugins/profile/*/*.xplane.pb"))
    assert list((raw / "hlo").glob("*after_optimizations.txt"))
    assert not list((raw / "hlo").glob("*.o")) and not list((raw / "hlo").glob("*.ll"))  # pruned
    s = json.loads((raw / "summary.json").read_text())
    assert s["steps"]["count"] == 11 and s["attributed_pct"] > 50
    src = Path(LLAMA).read_text().splitlines()
    top = s["source_lines"][:5]
    assert all(r["location"].startswith("llama_train.py:") for r in top)
    funcs = {r["function"] for r in s["source_lines"]}
    assert {"block", "attention_naive"} <= funcs
    for r in top:  # each attributed line is real code in the model script
        assert src[r["line"] - 1].strip() and not src[r["line"] - 1].strip().startswith("#")
    page = (project.wiki / base["page"]).read_text()
    assert "llama_train.py:" in page and "xprof --logdir=" in page and "after_optimizations.txt" in page
    assert re.search(r"`jit_train_step` after optimizations: \d+ instructions", page)
    res = CliRunner().invoke(cli, ["profile", "summary", str(raw), "--no-xprof"])
    assert res.exit_code == 0 and "Source lines" in res.output and "llama_train.py:" in res.output
    res = CliRunner().invoke(cli, ["--root", str(project.root), "profile", "summary", "no-such-exp"])
    assert res.exit_code == 1 and "neither a folder nor a known experiment id" in res.output
    # the same trace cut short (a run killed while its profiler wrote): named, not a traceback
    (xplane,) = raw.glob("trace/plugins/profile/*/*.xplane.pb")
    cut = project.root.parent / "cut" / xplane.relative_to(raw)
    cut.parent.mkdir(parents=True)
    cut.write_bytes(xplane.read_bytes()[:20000])
    res = CliRunner().invoke(cli, ["profile", "summary", str(project.root.parent / "cut"), "--no-xprof"])
    assert res.exit_code == 1 and f"{cut}: not a readable jax.profiler trace (truncated" in res.output, res.output
    # xprof answers nothing for it, as for a backend without device data: that was reported as "no data on this
    # backend", exit 0
    pytest.importorskip("xprof")
    from tools.errors import InputError
    from tools.profiling.xprof_tools import tool_data

    with pytest.raises(InputError, match="not a readable jax.profiler trace"):
        tool_data(project.root.parent / "cut", "overview_page")
    assert tool_data(raw / "trace", "overview_page")["tool"] == "overview_page"  # the whole trace still reads


def test_profile_diff_between_two_experiments(filed):
    project, _ = filed
    a, b = (r["exp_id"] for r in records.lane_records(project.wiki, "llama", "cpu"))
    res = CliRunner().invoke(cli, ["--root", str(project.root), "profile", "diff", a, b])
    assert res.exit_code == 0, res.output
    assert "Source lines" in res.output and re.search(r"`llama_train\.py:\d+` \| [\d.]+ \| [\d.]+ \| [+-]", res.output)


FLAG = "--xla_dump_hlo_as_text"  # a real XLA flag that changes nothing without --xla_dump_to


@pytest.fixture(scope="module")
def loop_like(tmp_path_factory):
    """A profiled baseline, then what a loop asks of the runner: a variant with more --steps and its own
    XLA_FLAGS (interleaved), and the same program again with the baseline's HLO fingerprint as its parent."""
    from tools.experiments.runner import RunSpec, run_experiment

    root = tmp_path_factory.mktemp("loop")
    (root / "wiki").mkdir()
    project = Project(root)
    kw = dict(model="llama", lane="cpu", variant="tiny/cpu")
    # a person's own persistent compile cache, as TPU setups often have: the base's profiled run fills it with the
    # very program the no-op run profiles again, which must still compile (a cache hit dumps no optimized HLO)
    cache = {"JAX_COMPILATION_CACHE_DIR": str(root / "user-jax-cache"), "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0",
             "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES": "0"}
    saved = {k: os.environ.get(k) for k in cache}
    os.environ.update(cache)
    try:
        base = run_experiment(project, RunSpec(command=[PY, LLAMA, *TINY], baseline=True, profile=True, **kw))
        longer = [PY, LLAMA, "--preset", "tiny", "--steps", "16"]
        var = run_experiment(project, RunSpec(command=longer, repeats=2, env={"XLA_FLAGS": FLAG},
                                              compile_cache=True, **kw))
        noop = run_experiment(project, RunSpec(command=longer, repeats=2, profile=True, compile_cache=True,
                                               parent_fingerprint=base.hlo_fingerprint, **kw))
    finally:
        for k, v in saved.items():
            os.environ.pop(k) if v is None else os.environ.__setitem__(k, v)
    return project, base, var, noop


def _json_line(project, rec, log):
    return json.loads((project.root / rec["raw_dir"] / log).read_text().strip().splitlines()[-1])


def test_more_steps_keep_the_same_early_losses(loop_like):
    project, base, var, _ = loop_like
    assert var.verdict != "invalid" and var.record["semantics"]["status"] == "ok"
    assert var.record["semantics"]["max_abs_delta"] == 0.0  # the data of step i depends on (seed, i, shape) only
    assert var.record["loss_trajectory"] == base.record["loss_trajectory"]
    assert len(_json_line(project, var.record, "run-1.log")["losses"]) == 16


def test_the_baseline_arm_never_gets_the_variants_xla_flags(loop_like):
    project, base, var, _ = loop_like
    assert var.record["interleaved"] and var.record["env"]["XLA_FLAGS"] == FLAG
    assert "XLA_FLAGS" not in base.record["env"]
    for i in (1, 2):
        assert _json_line(project, var.record, f"baseline-{i}.log")["xla_flags"] == ""
        assert _json_line(project, var.record, f"run-{i}.log")["xla_flags"] == FLAG
    m = var.metrics
    assert m["flops_per_step_causal"] > 0 and "MFU by hand" not in (project.wiki / var.page).read_text()  # CPU


def test_timed_runs_share_the_compile_cache_and_the_profiled_run_never_does(loop_like):
    project, base, var, noop = loop_like
    assert var.record["compile_cache"] is True and base.record.get("compile_cache") is None
    assert any((project.root / "user-jax-cache").iterdir())  # a cache the environment names is the one used
    assert not (project.cache / "jax-compile").exists()
    assert "JAX_COMPILATION_CACHE_DIR" not in var.record["env"]  # the timed arms' setting, never replayed
    dumped = list((project.root / noop.record["raw_dir"] / "hlo").rglob("*train_step*after_optimizations.txt"))
    assert dumped and noop.hlo_fingerprint == base.hlo_fingerprint


def test_an_identical_program_is_a_no_op(loop_like):
    project, base, _, noop = loop_like
    assert base.hlo_fingerprint and noop.hlo_fingerprint == base.hlo_fingerprint
    assert noop.verdict == "inconclusive" and noop.reasons[0].startswith("no-op: the optimized HLO is identical")
    assert sorted(p.name for p in (project.root / noop.record["raw_dir"]).glob("*.log")) == ["profile-run.log"]
    from tools.profiling import diff

    note = getattr(diff, "attribution_note", None)
    if note is not None:  # both runs were profiled: the page carries the note when there is one
        bs, vs = (json.loads((project.root / r.record["raw_dir"] / "summary.json").read_text()) for r in (base, noop))
        assert noop.record.get("attribution_note") == (note(bs, vs, noop.record["gain_pct"], True) or None)
        if noop.record.get("attribution_note"):  # the same program: no line of it explains a gain
            assert noop.record["attribution_note"].startswith("Both runs compiled the same optimized HLO")


def test_the_reference_model_counts_the_devices_its_step_runs_on():
    """A user's report: on a host of 4 devices the unsharded step ran on one, the model said `n_devices: 4`, and
    MFU and tokens/s per chip came out divided by 4 (on a v5e-8 host, 8x too low)."""
    import subprocess

    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=4")
    out = subprocess.run([PY, LLAMA, "--preset", "tiny", "--steps", "2"], capture_output=True, text=True, env=env,
                         timeout=300, check=True).stdout
    probe = subprocess.run([PY, "-c", "import jax; print(jax.device_count())"], capture_output=True, text=True,
                           env=env, timeout=120, check=True).stdout
    assert int(probe) == 4 and json.loads(out.strip().splitlines()[-1])["n_devices"] == 1
