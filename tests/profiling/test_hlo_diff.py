"""`tools profile hlo-diff` on real dumps of the reference model: did a change reach the compiler?"""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from tools.cli import cli
from tools.errors import InputError
from tools.profiling import hlo
from tools.profiling.hlo_diff import fingerprint, hlo_diff

pytestmark = pytest.mark.slow


def test_two_compiles_of_the_same_program_are_identical(profiles):
    d = hlo_diff(profiles["fp32"], profiles["fp32_again"])
    assert d["identical"] and d["modules"][0]["module"] == "jit_train_step"
    assert not d["modules"][0]["added"] and not d["modules"][0]["excerpt"]
    assert fingerprint(profiles["fp32"] / "hlo") == fingerprint(profiles["fp32_again"] / "hlo")
    res = CliRunner().invoke(cli, ["profile", "hlo-diff", str(profiles["fp32"]), str(profiles["fp32_again"])])
    assert res.exit_code == 0 and "Identical optimized HLO" in res.output


def test_a_constant_change_shows_as_constants_only(profiles):
    d = hlo_diff(profiles["fp32"], profiles["fp32_lr"])
    m = d["modules"][0]
    assert not d["identical"] and m["instructions"][0] == m["instructions"][1]
    assert set(m["added"]) == {"constant"} == set(m["removed"]) and m["added"] == m["removed"]
    assert "constant(0.002)" in m["excerpt"] and "constant(0.001)" in m["excerpt"]


def test_remat_adds_instructions_and_the_excerpt_stays_short(profiles):
    d = hlo_diff(profiles["fp32"], profiles["fp32_remat"])
    m = d["modules"][0]
    assert not d["identical"] and m["instructions"][1] > m["instructions"][0]
    assert m["added"].get("dot", 0) > 0  # the recomputed forward matmuls
    lines = m["excerpt"].splitlines()
    assert m["diff_lines"] > 100 and len(lines) <= 41 and max(map(len, lines)) <= 160
    res = CliRunner().invoke(cli, ["profile", "hlo-diff", str(profiles["fp32"]), str(profiles["fp32_remat"]),
                                   "--json"])
    assert res.exit_code == 0 and json.loads(res.output)["modules"][0]["added"] == m["added"]
    assert fingerprint(profiles["fp32"] / "hlo") != fingerprint(profiles["fp32_remat"] / "hlo")


def test_a_folder_without_a_dump_is_named(profiles, tmp_path):
    with pytest.raises(InputError) as e:
        hlo_diff(profiles["fp32"], tmp_path)
    assert str(tmp_path) in str(e.value) and "no optimized HLO dump" in str(e.value)
    res = CliRunner().invoke(cli, ["profile", "hlo-diff", str(profiles["fp32"]), str(tmp_path)])
    assert res.exit_code == 1 and "no optimized HLO dump" in res.output
