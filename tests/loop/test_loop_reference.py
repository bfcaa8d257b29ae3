"""A loop with `reference:` on the real reference model (JAX on the CPU): the reference runs once, profiled, on its
own lane; the gap page of the baseline against it names the differences and maps them to the loop's knobs; the
sweep's first move adopts every mapped one at once; the loop page and the model page say how much of the gap is
closed; `target: reference` measures the trunk against the reference interleaved."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from tools import pages
from tools.cli import cli
from tools.experiments import records
from tools.loop.proposers.sweep import ADOPT_NOTE

pytestmark = pytest.mark.slow  # a real loop: the reference model's baseline, reference and experiments, profiled
REPO = Path(__file__).resolve().parents[2]
TINY = ["--preset", "tiny", "--steps", "6"]
REF = ["--compute-dtype", "float32", "--batch", "16"]  # from bfloat16 at batch 4: 4x the tokens per step, +60 % on CPU


def tools(root, *args, code=0):
    res = CliRunner().invoke(cli, ["--root", str(root), *args])
    assert res.exit_code == code, res.output + repr(res.exception)
    return res.output


@pytest.fixture(scope="module")
def ran(tmp_path_factory):
    root = tmp_path_factory.mktemp("gapkb") / "kb"
    tools(root.parent, "init", str(root))
    (root / "experiments").mkdir(exist_ok=True)
    shutil.copy(REPO / "experiments" / "llama_train.py", root / "experiments" / "llama_train.py")
    loop = {"model": "llama", "lane": "cpu", "variant": "tiny/cpu", "code": "experiments",
            "command": [sys.executable, "llama_train.py", *TINY],
            "knobs": {"compute_dtype": {"flag": "--compute-dtype", "values": ["bfloat16", "float32"],
                                        "category": "precision"},
                      "batch": {"flag": "--batch", "values": [4, 16], "category": "shape"},
                      "scan": {"flag": "--scan", "values": [False, True], "category": "compiler"}},
            "budget": {"runs": 1}, "repeats": {"min": 2, "max": 4}, "statistic": "min",
            "reference": [sys.executable, "llama_train.py", *TINY, *REF], "target": {"reference": 95},
            "timeout_s": 600, "memory": {"max_gb": 8}, "compile_cache": True}
    (root / "loops").mkdir(exist_ok=True)
    (root / "loops" / "gap.yml").write_text(yaml.safe_dump(loop, sort_keys=False))
    out = tools(root, "loop", "start", "gap")
    return root, out


def test_the_reference_runs_once_profiled_on_its_own_lane(ran):
    root, out = ran
    refs = records.lane_records(root / "wiki", "llama", "cpu-reference")
    made = [r for r in refs if r.get("loop_role") == "reference"]
    assert len(made) == 1 and made[0]["config"]["compute_dtype"] == "float32"
    assert (root / made[0]["raw_dir"]).is_dir() and "reference" in out


def _skip_unless_the_reference_was_faster(root, state: dict, body: str) -> None:
    """On a loaded 2-core machine the reference's 4x batch can lose its edge (the other test worker holds a core).
    The loop must then say so, measured interleaved, and stop at the target without an experiment; the rest needs a
    gap. Two ways it can show: the baseline's own gap page measured the pair interleaved and found no gap (then
    nothing is filed), or the single profiled runs said the reference was faster but the interleaved check of the
    baseline trunk already put it at the target (the measured figure outranks one noisy pair)."""
    if "None: the reference is not faster" in body:  # the baseline's own gap page
        assert "measured interleaved in" in body  # not one noisy pair of runs
        assert not list((root / "wiki" / "hypotheses").rglob("gap-*.md"))  # nothing filed
        assert state["stop_reason"].startswith("target reached") and not state["history"]
        pytest.skip("the reference measured no faster than the baseline on this run: no gap to close")
    check = (state.get("reference") or {}).get("check") or {}
    if not state["history"] and check.get("trunk_exp") == state["trunk"]["exp_id"] == state["frontier"][0]["exp_id"]:
        assert check.get("exp_id") and check["ratio_pct"] >= 95, check  # an interleaved run, at the target
        checked = [r for r in records.lane_records(root / "wiki", "llama", "cpu-reference")
                   if r.get("loop_role") == "reference-check"]
        assert checked and checked[-1]["interleaved"] and checked[-1]["exp_id"] == check["exp_id"]
        assert state["stop_reason"].startswith("target reached"), state["stop_reason"]
        pytest.skip(f"the baseline measured at {check['ratio_pct']} % of the reference interleaved: no gap to close")


def _baseline_gap(root) -> str:
    base = next(r for r in records.lane_records(root / "wiki", "llama", "cpu") if r.get("role") == "baseline")
    gap = next((root / "wiki" / "analyses").glob(f"gap-*{base['exp_id']}-vs-*.md"))
    return pages.split(gap.read_text())[1]


def test_the_baseline_gap_page_maps_the_differences_and_the_sweep_adopts_them_together(ran):
    root, _ = ran
    body = _baseline_gap(root)
    _skip_unless_the_reference_was_faster(root, yaml.safe_load((root / "loops" / "gap" / "state.json").read_text()),
                                          body)
    assert "compute_dtype=float32" in body and "batch=16" in body
    state = yaml.safe_load((root / "loops" / "gap" / "state.json").read_text())
    (first,) = state["history"]
    assert first["proposer"] == "sweep" and set(first["change"]["knobs"]) == {"compute_dtype", "batch"}
    cands = next((root / "loops" / "gap").rglob("candidates.json")).read_text()
    assert ADOPT_NOTE in cands


def test_the_loop_and_model_pages_say_how_much_of_the_gap_is_closed(ran):
    root, _ = ran
    loop_page = (root / "wiki" / "loops" / "gap.md").read_text()
    assert "## Gap to the reference" in pages.regions(loop_page).get("loop-gap", "")
    model = (root / "wiki" / "models" / "llama-cpu.md").read_text()
    region = pages.regions(model).get("gap-gap", "")
    assert "Gap to reference:" in region and "of the reference's tokens/s" in region
    assert "](../analyses/gap-" in region  # links each gap page, relative to the model page
    assert pages.regions(model).get("variants")  # the generated regions are still there


def test_a_kept_trunk_is_checked_against_the_reference_interleaved(ran):
    root, _ = ran
    state = yaml.safe_load((root / "loops" / "gap" / "state.json").read_text())
    _skip_unless_the_reference_was_faster(root, state, _baseline_gap(root))
    if not state["history"][0]["kept"]:
        pytest.skip(f"the composed move was {state['history'][0]['verdict']} on this run: nothing to check")
    check = state["reference"]["check"]
    assert check["trunk_exp"] == state["trunk"]["exp_id"] and check["ratio_pct"] is not None
    checked = [r for r in records.lane_records(root / "wiki", "llama", "cpu-reference")
               if r.get("loop_role") == "reference-check"]
    assert checked and checked[-1]["interleaved"] and checked[-1]["baseline"] == state["reference"]["exp_id"]
    model = (root / "wiki" / "models" / "llama-cpu.md").read_text()
    assert "measured interleaved in" in pages.regions(model)["gap-gap"]


def test_the_site_draws_each_gap_page_as_a_bar_chart(ran):
    from tools.sitegen.generate import generate

    root, _ = ran
    gaps = [g for g in sorted((root / "wiki" / "analyses").glob("gap-*-vs-*.md"))]
    assert gaps
    files = generate(root / "wiki").files
    for g in gaps:
        meta, _ = pages.split(g.read_text())
        name = g.stem
        data = json.loads(files[f"explore/gaps/{name}/chart.json"])
        assert data["ours"] == meta["ours"] and data["ref"] == meta["reference"]
        assert [c["category"] for c in data["categories"]] == [c["category"] for c in meta["categories_us_per_token"]]
        assert data["categories"] and all(c["ours"] >= 0 and c["ref"] >= 0 for c in data["categories"])
        html = files[f"explore/gaps/{name}/chart.html"]
        assert "Plotly.newPlot" in html and json.dumps(data["categories"][0]["category"]) in html
        assert f"../../../wiki/analyses/{name}.md" in files[f"explore/gaps/{name}/index.md"]
    assert all(g.stem in files["explore/gaps/index.md"] for g in gaps)
