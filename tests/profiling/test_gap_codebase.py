"""`tools gap` when the reference is an ingested codebase: the knob defaults its overview lists (knobs.json), as its
command overrides them, join the HLO's evidence; a setting both sides name with different values is a config item
that maps to a loop knob of that name; a codebase never ingested is a clear error."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from _prof_helpers import REPO
from click.testing import CliRunner

from tools import scaffold
from tools.cli import cli
from tools.errors import InputError
from tools.gap import compare, config, page, sides
from tools.loop import reference, spec as spec_mod
from tools.project import Project

pytestmark = pytest.mark.slow
# The shape of MaxText's configs/base.yml (labelled facts: keys and default values as that file writes them).
BASE_YML = ("# defaults\nscan_layers: True\nremat_policy: 'full'\nici_fsdp_parallelism: -1\n"
            "logical_axis_rules: [['batch', ['data', 'fsdp']], ['embed', 'fsdp']]\n")
MODEL_YML = "remat_policy: 'minimal'\nscan_layers: False\n"


@pytest.fixture(scope="module")
def kb(tmp_path_factory):
    kb = tmp_path_factory.mktemp("gapcb") / "kb"
    scaffold.init(kb, site_name="kb")
    repo = kb / "raw/code/refcode"
    (repo / "configs/models").mkdir(parents=True)
    (repo / "configs/base.yml").write_text(BASE_YML)
    (repo / "configs/models/small.yml").write_text(MODEL_YML)
    (repo / "train.py").write_text("import sys\n\n\ndef main(argv):\n    return argv\n\n\nif __name__ == '__main__':\n"
                                   "    main(sys.argv)\n")
    res = CliRunner().invoke(cli, ["--root", str(kb), "ingest", "raw/code/refcode", "-q"], catch_exceptions=False)
    assert res.exit_code in (0, 3), res.output
    return kb


def test_the_ingest_writes_the_knob_table(kb):
    knobs = {k["key"]: k for k in json.loads((kb / "wiki/codebases/refcode/knobs.json").read_text())}
    assert knobs["remat_policy"]["default"] == "full" and knobs["remat_policy"]["default_at"] == "configs/base.yml:3"
    assert set(knobs["remat_policy"]["values"]) == {"full", "minimal"}
    assert knobs["scan_layers"]["concept"] == "scan-over-layers" and knobs["scan_layers"]["default"] == "True"
    assert "[knobs.json](knobs.json)" in (kb / "wiki/codebases/refcode/overview.md").read_text()


def test_the_reference_codebase_speaks_on_the_hlo_items(kb, profiles):
    project = Project(kb)
    ours, ref = sides.from_folder(profiles["fp32"]), sides.from_folder(profiles["fp32_remat"])
    sides.with_codebase(project, ref, "refcode", "python raw/code/refcode/train.py configs/base.yml scan_layers=False")
    got = {s["key"]: s for s in ref.config}
    assert got["remat_policy"] == {"key": "remat_policy", "concept": "rematerialization", "value": "full",
                                   "source": "default", "where": "raw/code/refcode/configs/base.yml:3"}
    assert got["scan_layers"]["value"] == "False" and got["scan_layers"]["source"] == "command"
    remat = next(d for d in compare.differences(ours, ref) if d["kind"] == "remat")
    assert remat["basis"] == "hlo" and remat["property"] == {"remat": "full"}
    said = [e for e in remat["evidence"] if e["text"].startswith("config `remat_policy")]
    assert said == [{"side": "ref", "text": "config `remat_policy: full` (the base config's default)",
                     "where": "raw/code/refcode/configs/base.yml:3"}]
    out = compare.analyze(ours, ref)
    assert out["codebases"]["ref"]["codebase"] == "refcode" and "ours" not in out["codebases"]
    text = page.render(out, {}).body
    assert "## Configuration of the reference: codebase `refcode`" in text
    assert "| `remat_policy` | rematerialization | `full` | default, `raw/code/refcode/configs/base.yml:3` |" in text


def test_a_setting_both_codebases_name_maps_to_a_knob(kb, profiles, tmp_path):
    project = Project(kb)
    ours, ref = sides.from_folder(profiles["fp32"]), sides.from_folder(profiles["fp32_remat"])
    sides.with_codebase(project, ours, "refcode", "python raw/code/refcode/train.py remat_policy=minimal")
    sides.with_codebase(project, ref, "refcode", "python raw/code/refcode/train.py")
    items = [d for d in compare.differences(ours, ref) if d["kind"] == "config_knob"]
    assert [d["property"] for d in items] == [{"setting": "remat_policy", "value": "full"}]
    assert items[0]["basis"] == "config" and items[0]["category"] == "memory"
    spec = spec_mod.parse({"model": "m", "lane": "cpu", "variant": "tiny/cpu", "command": "python train.py",
                           "budget": {"runs": 3},
                           "knobs": {"remat_policy": {"flag": "--remat-policy", "values": ["minimal", "full"]}}},
                          tmp_path / "cpu.yml")
    assert reference.knob_change(items[0], spec, {"remat_policy": "minimal"}) == {"remat_policy": "full"}


def test_the_codebase_is_found_from_the_command_and_an_unknown_one_is_named(kb):
    project = Project(kb)
    rec = {"command": "python raw/code/refcode/train.py configs/base.yml", "cwd": "."}
    assert sides.codebase_of(project, rec) == "refcode"
    assert sides.codebase_of(project, {"command": "python train.py", "cwd": "raw/code/refcode"}) == "refcode"
    assert sides.codebase_of(project, {"command": "python experiments/llama_train.py", "cwd": "."}) == ""
    with pytest.raises(InputError, match=r"wiki/codebases/nothere/knobs.json.*tools ingest raw/code/nothere"):
        sides.codebase_knobs(project, "nothere")
    with pytest.raises(InputError, match="not a codebase name"):
        sides.codebase_knobs(project, "../etc")
    assert config.command_settings("python t.py --remat-policy=full remat_policy=minimal x=1 --scan") == {
        "remat_policy": "minimal", "scan": "true", "x": "1"}


def test_the_cli_takes_the_reference_codebase(kb, profiles):
    res = subprocess.run([sys.executable, "-m", "tools", "--root", str(kb), "gap", str(profiles["fp32"]),
                          str(profiles["fp32_remat"]), "--ref-codebase", "refcode", "--no-file", "--json"],
                         capture_output=True, text=True, cwd=REPO, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    out = json.loads(res.stdout)
    assert {s["key"] for s in out["codebases"]["ref"]["settings"]} >= {"remat_policy", "scan_layers"}
    bad = subprocess.run([sys.executable, "-m", "tools", "--root", str(kb), "gap", str(profiles["fp32"]),
                          str(profiles["fp32_remat"]), "--ref-codebase", "nothere", "--no-file"],
                         capture_output=True, text=True, cwd=REPO, timeout=300)
    assert bad.returncode != 0 and "tools ingest raw/code/nothere" in bad.stderr


def test_a_codebase_with_many_settings_of_one_concept_speaks_briefly():
    """MaxText names 28 sharding settings: a collective item gets the first few (the command's first), not all."""
    ref = compare.Side("ref", {}, config=[{"key": f"ici_axis{n}_parallelism", "concept": "sharding", "value": "1",
                                           "source": "default", "where": f"raw/code/x/base.yml:{n}"} for n in range(28)]
                       + [{"key": "ici_fsdp_parallelism", "concept": "sharding", "value": "8", "source": "command",
                           "where": ""}])
    ours = compare.Side("ours", {})
    item = {"kind": "collective", "evidence": [], "property": {}}
    config.attach_evidence([item], ours, ref)
    assert len(item["evidence"]) == config.EVIDENCE_PER_SIDE
    assert item["evidence"][0]["text"] == "config `ici_fsdp_parallelism: 8` (set by the command)"
