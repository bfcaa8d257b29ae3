"""The reference model at tiny size on CPU through `tools exp run`, with a real profile."""

from __future__ import annotations

import json
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
def filed(tmp_path_factory):
    """Two real runs: a profiled baseline and a changed knob (remat full)."""
    root = tmp_path_factory.mktemp("proj")
    (root / "wiki").mkdir()
    runner = CliRunner()
    outs = []
    for extra, flags in (([], ["--baseline", "--profile", "-m", "baseline"]),
                         (["--remat", "full"], ["--profile", "-m", "remat full",
                                                "--hypothesis", "full remat slows a compute-bound step"])):
        res = runner.invoke(cli, ["--root", str(root), "exp", "run", "--model", "llama", "--lane", "cpu",
                                  "--variant", "tiny/cpu", "-q", *flags, "--", PY, LLAMA, *TINY, *extra])
        assert res.exit_code == 0, res.output + repr(res.exception)
        outs.append(res.output)
    return Project(root), outs


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


def test_profile_diff_between_two_experiments(filed):
    project, _ = filed
    a, b = (r["exp_id"] for r in records.lane_records(project.wiki, "llama", "cpu"))
    res = CliRunner().invoke(cli, ["--root", str(project.root), "profile", "diff", a, b])
    assert res.exit_code == 0, res.output
    assert "Source lines" in res.output and re.search(r"`llama_train\.py:\d+` \| [\d.]+ \| [\d.]+ \| [+-]", res.output)
