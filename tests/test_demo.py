"""The README's main job, `tools demo`, on a small real tree: ingest, a short loop on the reference model, lint."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from tools import pages
from tools.cli import cli


@pytest.mark.slow
def test_demo_ingests_runs_a_loop_and_lints_clean(tmp_path, jax_pallas):
    kb = tmp_path / "kb"
    from tools.demo import run_demo

    r = run_demo(kb, source=jax_pallas, loop_runs=1)
    assert r.ingest.files_scanned > 10 and r.ingest.kernels > 0
    loop = r.loop
    assert loop["status"] == "stopped" and loop["stop_reason"].startswith("budget: runs 1 of 1")
    (h,) = loop["history"]
    assert h["verdict"] in pages.VERDICTS and h["verdict"] != "crash", h["reasons"]
    assert loop["trunk"]["exp_id"] == (h["exp_id"] if h["kept"] else loop["frontier"][0]["exp_id"])
    assert (kb / "wiki" / "loops" / "llama-cpu.md").is_file() and (kb / "wiki" / h["hypothesis_page"]).is_file()
    assert loop["retrospectives"], "the stop leaves a retrospective"
    assert r.lint.errors == 0
    index = (kb / "wiki" / "index.md").read_text()
    assert "loops/llama-cpu.md" in index
    out = CliRunner().invoke(cli, ["--root", str(kb), "loop", "status", "llama-cpu"])
    assert out.exit_code == 0 and "budget: runs 1 of 1" in out.output
