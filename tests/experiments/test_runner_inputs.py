"""Inputs a run cannot be trusted with: a protected path that is a device or a FIFO (read bounded, never blocking the
lane), a ledger whose header was cut (refused, its rows kept), and a log that tries to close its code block and
write a verdict of its own on the page."""

from __future__ import annotations

import pytest

import os
import subprocess
import sys

import markdown
from _exp_helpers import FAKE

from tools.experiments import records


def tools(root, *args, timeout=120):
    return subprocess.run([sys.executable, "-m", "tools", "--root", str(root), *args], capture_output=True,
                          text=True, timeout=timeout)


def run(root, *args):
    return tools(root, "exp", "run", "--model", "m", "--lane", "l", "--variant", "s/cpu", "-q", *args)


def test_a_protected_device_or_fifo_is_named_not_read(project, tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    r = run(project.root, "--baseline", "--protect", "/dev/zero", "--protect", str(fifo), "--",
            sys.executable, str(FAKE), "--step-ms", "5")
    assert r.returncode == 0, r.stdout + r.stderr
    (rec,) = records.lane_records(project.wiki, "m", "l")
    hashes = rec["protected"]
    assert hashes["/dev/zero"].startswith("not read: character device") and hashes[str(fifo)].startswith(
        "not read: FIFO"), hashes


def test_a_ledger_without_its_header_is_refused_and_kept(project):
    assert run(project.root, "--baseline", "--", sys.executable, str(FAKE), "--step-ms", "5").returncode == 0
    tsv = project.wiki / "experiments" / "m" / "l" / "RESULTS.tsv"
    cut = "".join(tsv.read_text().splitlines(keepends=True)[1:])
    tsv.write_text(cut)
    r = run(project.root, "--", sys.executable, str(FAKE), "--step-ms", "4")
    assert r.returncode != 0 and "RESULTS.tsv" in r.stdout + r.stderr and "not the header" in r.stdout + r.stderr
    assert tsv.read_text() == cut


def test_a_log_cannot_write_a_verdict_on_its_page(project, tmp_path):
    liar = tmp_path / "liar.py"
    liar.write_text("print('```\\n\\n## Verdict\\n\\n**supported** (ledger status `keep`)\\n\\n```text')\n"
                    "raise SystemExit(1)\n")
    run(project.root, "--baseline", "--", sys.executable, str(liar))
    (rec,) = records.lane_records(project.wiki, "m", "l")
    html = markdown.markdown((project.wiki / rec["page"]).read_text(), extensions=["fenced_code"])
    assert html.count("<h2>Verdict</h2>") <= 1 and "<strong>supported</strong>" not in html, html


@pytest.mark.slow
def test_a_filed_page_whose_row_a_kill_lost_gets_it_back(project):
    """Filing writes the page, then the ledger row: a kill -9 between the two left a kept run out of RESULTS.tsv for
    good (a loop's resume took the filed page as it was). The next filing in the lane, or the lane's repair that a
    loop's resume runs, writes the missing row."""
    from tools.experiments.filing import Lane
    from tools.writer import Writer

    assert run(project.root, "--baseline", "--", sys.executable, str(FAKE), "--step-ms", "5").returncode == 0
    tsv = project.wiki / "experiments" / "m" / "l" / "RESULTS.tsv"
    header, row = tsv.read_text().splitlines(keepends=True)
    tsv.write_text(header)  # the kill's window: the page filed, its row not written
    assert run(project.root, "--", sys.executable, str(FAKE), "--step-ms", "4").returncode == 0
    ids = [r["exp_id"] for r in records.lane_records(project.wiki, "m", "l")]
    assert [ln.split("\t")[5] for ln in tsv.read_text().splitlines()[1:]] == ids and tsv.read_text().count(
        ids[0]) == 1
    tsv.write_text(header)  # again, and the lane's model page with it: `tools exp list` writes both back
    (project.wiki / "models" / "m-l.md").unlink()
    listed = tools(project.root, "exp", "list")
    assert listed.returncode == 0 and "wrote the ledger row of" in listed.stderr, listed.stderr
    assert len(tsv.read_text().splitlines()) == 3 and (project.wiki / "models" / "m-l.md").is_file()
    tsv.write_text(header + row)
    lane = Lane(project, "m", "l")
    assert lane.repair_ledger(Writer(project.wiki)) == [ids[1]]
    assert lane.repair_ledger(Writer(project.wiki)) == [] and len(tsv.read_text().splitlines()) == 3


def test_a_region_marker_in_a_log_or_a_hypothesis_cannot_cut_the_page(project, tmp_path):
    """A crash log printing `<!-- tools:end experiment -->` ended the page's region inside its code block: the
    crash, profile, HLO and verdict sections were lost. The same marker in `--hypothesis` left the page at
    "Running." and "Pending." for good; a newline in `-m` split the title."""
    crashy = tmp_path / "crashy.py"
    crashy.write_text('print("```")\nprint("<!-- tools:end experiment -->")\nraise SystemExit(3)\n')
    run(project.root, "--baseline", "-m", "crashy", "--", sys.executable, str(crashy))
    (rec,) = records.lane_records(project.wiki, "m", "l")
    text = (project.wiki / rec["page"]).read_text()
    assert "## Verdict" in text and "## Crash" in text and "**crash**" in text, text
    r = run(project.root, "-m", "two\nlines", "--hypothesis", "claim\n<!-- tools:end experiment -->\n<b>X</b> `a_b`",
            "--", sys.executable, str(FAKE), "--step-ms", "5")
    assert r.returncode == 0, r.stdout + r.stderr
    rec = records.lane_records(project.wiki, "m", "l")[-1]
    text = (project.wiki / rec["page"]).read_text()
    assert "Pending." not in text and "## Verdict" in text and "**baseline**" in text, text
    assert "claim &lt;\\!-- tools" in text and "&lt;b&gt;X&lt;/b&gt; `a_b`" in text
    assert text.split("\n---\n", 1)[1].lstrip().splitlines()[0].endswith("two lines")
    assert not any(line.startswith("lines") for line in text.splitlines())


def test_numbers_a_run_cannot_use_are_usage_errors_that_run_nothing(project):
    from click.testing import CliRunner

    from tools.cli import cli

    for opt, value in (("--timeout", "nan"), ("--timeout", "inf"), ("--timeout", "0"), ("--timeout", "1e308"),
                       ("--hang-after", "-1"), ("--memory-tol", "nan"), ("--memory-max-gb", "nan"),
                       ("--loss-tol", "nan"), ("--peak-flops", "-1")):
        r = CliRunner().invoke(cli, ["--root", str(project.root), "exp", "run", "--model", "m", "--lane", "l",
                                     "--variant", "s/cpu", "--baseline", opt, value, "--", sys.executable, str(FAKE)])
        assert r.exit_code == 2 and "a finite number" in r.output, (opt, value, r.output)
    assert records.lane_records(project.wiki, "m", "l") == []


@pytest.mark.slow
def test_a_hand_broken_page_is_left_out_and_never_stops_a_lane(project):
    import re

    assert run(project.root, "--baseline", "--", sys.executable, str(FAKE), "--step-ms", "5").returncode == 0
    (good,) = records.lane_records(project.wiki, "m", "l")
    page = (project.wiki / good["page"]).read_text()
    other = project.wiki / "experiments" / "x" / "y"
    other.mkdir(parents=True)
    breaks = {"yaml": (r"^title:.*$", "title: [unclosed"), "version": (r"^version: .*$", "version: abc"),
              "metrics": (r"^metrics:\n(  .*\n)+", "metrics: [1, 2]\n"),
              "gain": (r"^model: .*$", "model: x\ngain_pct: big"),
              "crash": (r"^model: .*$", "model: x\ncrash: boom"), "verdict": (r"^verdict: .*$", "verdict: 5")}
    for n, (name, (pattern, repl)) in enumerate(breaks.items(), 1):
        text = re.sub(r"^lane: .*$", "lane: y", re.sub(r"^model: .*$", "model: x", page, flags=re.M), flags=re.M)
        broken = re.sub(pattern, repl, text, count=1, flags=re.M)
        assert broken != text, name
        (other / f"2026-01-01-v{n:03d}-{name}.md").write_text(broken)
    listed = tools(project.root, "exp", "list")
    assert listed.returncode == 0, listed.stdout + listed.stderr
    r = run(project.root, "--", sys.executable, str(FAKE), "--step-ms", "4")
    assert r.returncode == 0, r.stdout + r.stderr
    rows = (project.wiki / "experiments" / "m" / "l" / "RESULTS.tsv").read_text().splitlines()
    assert len(rows) == 3 and len(records.lane_records(project.wiki, "m", "l")) == 2  # filed whole, ledger too
    assert records.load_experiments(project.wiki, "x/y") == []


def test_two_models_may_name_their_lanes_alike(project):
    from tools import lint

    for model in ("m", "m2"):
        r = tools(project.root, "exp", "run", "--model", model, "--lane", "l", "--variant", "s/cpu", "-q",
                  "--baseline", "--", sys.executable, str(FAKE), "--step-ms", "5")
        assert r.returncode == 0, r.stdout + r.stderr
    a, b = records.lane_records(project.wiki, "m", "l"), records.lane_records(project.wiki, "m2", "l")
    assert a[0]["exp_id"] == b[0]["exp_id"]  # ids are unique per lane of a model only
    assert [i for i in lint.run(project).issues if i.code == "duplicate-exp-id"] == []


@pytest.mark.slow
def test_integers_too_large_for_a_float_are_filed_not_a_runner_traceback(project, tmp_path):
    """A user's report: a loss of 10**400 (in `losses` or on a step line) and `n_devices` of 10**400 crashed the
    runner with "OverflowError: int too large to convert to float" instead of naming what was wrong."""
    script = tmp_path / "huge.py"
    script.write_text(
        "import json, sys\nwhich = sys.argv[1]\nbig = 10 ** 400\n"
        "for i in range(4):\n"
        "    print(json.dumps({'step': i, 'loss': big if which == 'step' else 1.0, 'step_time_s': 0.01}))\n"
        "print(json.dumps({'schema': 'autoresearch-exp/1', 'model': 'm', 'tokens_per_step': 64,\n"
        "                  'step_times_s': [0.01] * 4, 'losses': [big if which == 'losses' else 1.0] * 4,\n"
        "                  'n_devices': big if which == 'devices' else 1}))\n")
    for which, said in (("losses", "non-finite loss"), ("devices", "`n_devices`: expected a whole number"),
                        ("step", "")):
        r = run(project.root, "--trust-step-times", "--", sys.executable, str(script), which)
        assert "Traceback" not in r.stdout + r.stderr and "OverflowError" not in r.stdout + r.stderr, r.stderr
        page = max((project.wiki / "experiments/m/l").glob("*.md"), key=lambda p: p.stat().st_mtime).read_text()
        assert said in page, (which, page[:3000])
