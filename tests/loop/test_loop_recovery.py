"""A loop stopped, killed or fed a bad file converges: a resume of a finished loop files its stop once, a kill
between filing the baseline (or the calibration) and saving the state takes the filed run up instead of running it
again, SIGTERM during the calibration stops the loop (143) and the resume calibrates, the lint finds the index
current after a loop, a typo'd key or a nonsense value is refused before anything runs, `start --fresh` replaces
a state it cannot read, a state of the wrong shape is named, a loop file from elsewhere can be resumed by name, and
a `code:` folder that is not there leaves no state behind."""

from __future__ import annotations

import pytest

import json
import signal
import subprocess
import sys
import time

import yaml
from loop_helpers import KNOBS, lane, make_kb, tools

from tools import lint
from tools.experiments import ledger
from tools.loop import state as st
from tools.project import Project


def rows(root, status):
    return [r for r in ledger.read((root / "wiki" / "experiments" / "fake" / "loop" / "RESULTS.tsv").read_text())
            if r.get("status") == status]


def state(root, name="fake-loop"):
    return st.load(st.LoopPaths(Project(root), name))


def test_a_finished_loop_resumed_files_its_stop_once_and_the_lint_finds_the_index_current(tmp_path):
    root = tmp_path / "kb"
    make_kb(root, knobs={"dtype": KNOBS["dtype"]}, budget={"runs": 1})
    tools(root, "loop", "start", "fake-loop", "-q")
    for _ in range(2):
        tools(root, "loop", "resume", "fake-loop", "-q")
    assert len(rows(root, "stop")) == 1, rows(root, "stop")
    assert (root / "wiki" / "log.md").read_text().count("] loop stop | fake-loop") == 1
    assert not [i for i in lint.run(Project(root)).issues if i.code.startswith("index")]


def test_a_kill_after_the_baseline_and_calibration_were_filed_takes_them_up(tmp_path):
    root = tmp_path / "kb"
    make_kb(root, knobs={"dtype": KNOBS["dtype"]}, budget={"runs": 1}, calibrate=2)
    tools(root, "loop", "start", "fake-loop", "-q", "--iterations", "0")
    s = state(root)
    filed = {r["exp_id"] for r in lane(root)}
    assert s["trunk"] and s["calibration"]["pair_sd_pct"] is not None and len(filed) == 2
    # what a kill between the filing and the state's save leaves: the runs filed, the state not told
    s.update(trunk=None, start_commit=None, frontier=[], calibration=None)
    (root / "loops" / "fake-loop" / "state.json").write_text(json.dumps(s))
    tools(root, "loop", "resume", "fake-loop", "-q", "--iterations", "0")
    again = state(root)
    assert {r["exp_id"] for r in lane(root)} == filed  # nothing ran again
    assert again["trunk"]["exp_id"] in filed and again["calibration"]["exp_id"] in filed
    assert len(rows(root, "keep")) == 1 and len(again["frontier"]) == 1


def _driver(root, *args):
    code = "import sys; from tools.cli import main; sys.argv = ['tools'] + sys.argv[1:]; main()"
    return subprocess.Popen([sys.executable, "-c", code, "--root", str(root), "loop", *args, "-q"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


@pytest.mark.slow
def test_sigterm_during_the_calibration_stops_the_loop_and_the_resume_calibrates(tmp_path):
    root = tmp_path / "kb"
    make_kb(root, knobs={"dtype": KNOBS["dtype"]}, budget={"runs": 1}, calibrate=3,
            command=[sys.executable, "fake_model.py", "--sleep-ms", "80"])
    p = _driver(root, "start", "fake-loop")
    end = time.monotonic() + 90
    while time.monotonic() < end and not any(r.get("status") == "in_progress" and "calibration" in
                                             str(r.get("description")) for r in lane(root)):
        time.sleep(0.05)
    p.send_signal(signal.SIGTERM)
    assert p.wait(timeout=60) == 143
    s = state(root)
    assert s["status"] == "stopped" and "calibration" in s["stop_reason"] and s["calibration"] is None
    assert s["history"] == []  # no iteration ran on an uncalibrated lane
    assert _driver(root, "resume", "fake-loop").wait(timeout=180) == 0
    s = state(root)
    assert s["calibration"]["pair_sd_pct"] is not None and [h["iteration"] for h in s["history"]] == [1]


def test_a_loop_file_is_checked_before_anything_runs(tmp_path):
    root = tmp_path / "kb"
    for bad, said in (({"calibrat": 2}, "unknown key `calibrat` (did you mean `calibrate`?)"),
                      ({"repeat": {"min": 3, "max": 3}}, "unknown key `repeat` (did you mean `repeats`?)"),
                      ({"knobs": {"dtype": dict(KNOBS["dtype"], categry="precision")}},
                       "knob `dtype`: unknown key `categry` (did you mean `category`?)"),
                      ({"timeout_s": -5}, "`timeout_s` is a positive number"),
                      ({"budget": {"runs": -1}}, "budget `runs` is a positive whole number, not -1"),
                      # a user's: these were "a value has the wrong type" with no key named, or 2.5 runs ran 3
                      ({"budget": {"runs": "three"}}, "budget `runs` is a positive whole number, not 'three'"),
                      ({"budget": {"runs": 2.5}}, "budget `runs` is a positive whole number, not 2.5"),
                      ({"budget": {"runs": True}}, "budget `runs` is a positive whole number, not True"),
                      ({"budget": {"wall_s": "10m"}}, "budget `wall_s` is a positive number, not '10m'"),
                      ({"budget": 5}, "`budget` is a mapping such as {runs: 10, wall_s: 3600}, not 5"),
                      ({"budget": {"runs": "2.5"}}, "budget `runs` is a positive whole number, not 2.5"),
                      ({"calibrate": -1}, "`calibrate` is a whole number of at least 0"),
                      ({"trust_step_times": "yes"}, "`trust_step_times` is true or false, not 'yes'"),
                      ({"repeats": "lots"}, "`repeats` is a whole number or a mapping"),
                      # a misspelt key of a `flags` value was dropped from the command, and the page claimed it ran
                      ({"knobs": {"shape": {"category": "shape", "flags": {"batch": "--batch", "seq": "--seq"},
                                            "values": [{"batch": 4, "seq": 128}, {"batch": 8, "sqe": 64}]}}},
                       "knob `shape`: value {'batch': 8, 'sqe': 64} names ['sqe'], which `flags` does not"),
                      ({"knobs": {"dtype": dict(KNOBS["dtype"], values=["f32", "f32"])}}, "a value is listed twice"),
                      ({"profile": "false"}, "`profile` is true or false, not 'false'"),  # was read as true
                      ({"compile_cache": "no"}, "`compile_cache` is true or false"),
                      ({"target": {"tokens_per_s": -5}}, "`target.tokens_per_s` is a positive number"),
                      ({"target": {"tokens_per_s": None}}, "`target.tokens_per_s` is a positive number, not None"),
                      ({"repeats": {"min": 2.7}}, "`repeats` is a whole number or a mapping"),
                      ({"config_file": "/etc/passwd"}, "`config_file` '/etc/passwd': a path inside"),
                      ({"runner": "lokal"}, "`runner`: 'lokal' is not one of local"),
                      ({"proposer": {"name": "sweep", "foo": 1}}, "proposer 'sweep': options {'foo': 1} not taken")):
        make_kb(root, **bad)
        out = tools(root, "loop", "start", "fake-loop", "-q", code=1)
        assert said in out and "fake-loop.yml" in out, (bad, out)
        assert not (root / "loops" / "fake-loop" / "state.json").exists() and lane(root) == []
    # a loop name git refuses for a branch: it failed after the loop's repository was made, with git's own error
    spec = root / "loops" / "fake-loop.yml"
    make_kb(root)
    text = spec.read_text()
    for name in ("x.lock", "a..b"):
        spec.write_text(text + f"name: {name}\n")
        out = tools(root, "loop", "start", "fake-loop", "-q", code=1)
        assert f"the loop name {name!r} must be letters" in out and not (root / "loops" / name).exists(), out
    # a key given twice: YAML kept the last, a knob declared twice lost its first definition in silence
    spec.write_text(text + "budget:\n  runs: 9\n")
    out = tools(root, "loop", "start", "fake-loop", "-q", code=1)
    assert "the key 'budget' is given twice" in out and "fake-loop.yml" in out and lane(root) == []
    spec.write_text(text.replace("budget:\n", "budget: {runs: 5, runs: 50}\nold_budget:\n"))  # on one line
    assert "the key 'runs' is given twice" in tools(root, "loop", "start", "fake-loop", "-q", code=1)


def test_a_bad_state_is_named_and_start_fresh_replaces_it(tmp_path):
    root = tmp_path / "kb"
    make_kb(root, knobs={"dtype": KNOBS["dtype"]}, budget={"runs": 1})
    folder = root / "loops" / "fake-loop"
    folder.mkdir()
    for text, said in (('{"history": []}', "`name` is None, not a name"),
                       ('{"history": [], "name": "fake-loop", "model": "fake", "lane": "loop", "variant": "v", '
                        '"usage": 7}', "`usage` is a int, not a dict"),
                       ('{"history": [', "not valid JSON")):
        (folder / "state.json").write_text(text)
        for args in (("loop", "status", "fake-loop"), ("loop", "status", "fake-loop", "--json"),
                     ("loop", "resume", "fake-loop")):
            out = tools(root, *args, code=1)
            assert said in out and "state.json" in out, (text, args, out)
    tools(root, "loop", "start", "fake-loop", "-q", "--fresh")
    assert state(root)["stop_reason"].startswith("budget")


@pytest.mark.slow
def test_a_loop_file_from_elsewhere_is_resumed_by_name(tmp_path):
    root = tmp_path / "kb"
    make_kb(root, knobs={"dtype": KNOBS["dtype"]}, budget={"runs": 1})
    outside = tmp_path / "ext.yml"
    (root / "loops" / "fake-loop.yml").rename(outside)
    outside.write_text(outside.read_text() + "name: ext\n")
    tools(root, "loop", "start", str(outside), "-q", "--iterations", "0")
    assert (root / "loops" / "ext.yml").read_text() == outside.read_text()
    tools(root, "loop", "resume", "ext", "-q")
    assert state(root, "ext")["stop_reason"].startswith("budget")
    # the copy follows its own file; a loop file of another origin under that name is never replaced
    outside.write_text(outside.read_text().replace("runs: 1", "runs: 2"))
    tools(root, "loop", "start", str(outside), "-q", "--fresh")
    assert (root / "loops" / "ext.yml").read_text() == outside.read_text()
    other = tmp_path / "other" / "ext.yml"
    other.parent.mkdir()
    other.write_text(outside.read_text().replace("runs: 2", "runs: 3"))
    before = state(root, "ext")
    assert "a different loop file of this name" in tools(root, "loop", "start", str(other), "-q", "--fresh", code=1)
    assert (root / "loops" / "ext.yml").read_text() == outside.read_text()
    assert state(root, "ext") == before  # refused before the fresh start reset anything
    # two fresh starts within one second each put the old snapshot aside under a name of its own
    for _ in range(2):
        tools(root, "loop", "start", str(outside), "-q", "--fresh", "--iterations", "0")
    assert len(list((root / "loops" / "ext").glob("repo-before-*"))) >= 2


def test_a_loop_file_from_elsewhere_that_cannot_start_can_be_corrected(tmp_path):
    root = tmp_path / "kb"
    make_kb(root, knobs={"dtype": KNOBS["dtype"]}, budget={"runs": 1}, code="modle")
    outside = tmp_path / "mine.yml"
    (root / "loops" / "fake-loop.yml").rename(outside)
    assert "does not exist" in tools(root, "loop", "start", str(outside), "-q", code=1)
    assert not (root / "loops" / "mine.yml").exists()  # nothing kept from a start that did not start
    outside.write_text(outside.read_text().replace("code: modle", "code: model"))
    tools(root, "loop", "start", str(outside), "-q")
    assert state(root, "mine")["stop_reason"].startswith("budget")


def test_a_code_folder_that_is_not_there_leaves_no_state(tmp_path):
    root = tmp_path / "kb"
    make_kb(root, knobs={"dtype": KNOBS["dtype"]}, budget={"runs": 1}, code="modle")
    assert "does not exist" in tools(root, "loop", "start", "fake-loop", "-q", code=1)
    assert state(root) is None
    spec = yaml.safe_load((root / "loops" / "fake-loop.yml").read_text())
    (root / "loops" / "fake-loop.yml").write_text(yaml.safe_dump(dict(spec, code="model")))
    tools(root, "loop", "start", "fake-loop", "-q")
    assert state(root)["stop_reason"].startswith("budget")


def test_a_loop_file_valid_before_stays_valid():
    """The stricter checks keep what was meant: YAML's `1.2e5` (read as text) is a target of 120,000, and a `flags`
    value that leaves a key out sets only the others (as the command always did)."""
    from pathlib import Path

    from tools.loop import spec as spec_mod

    data = {"model": "m", "lane": "l", "variant": "v", "command": "python x.py", "budget": {"runs": 2},
            "target": {"tokens_per_s": "1.2e5"},
            "knobs": {"shape": {"flags": {"batch": "--batch", "seq": "--seq"}, "category": "shape",
                                "values": [{"batch": 4, "seq": 128}, {"batch": 8}]}}}
    s = spec_mod.parse(data, Path("/tmp/x.yml"))
    assert s.target == {"tokens_per_s": 120_000.0}
    assert s.knobs["shape"].args({"batch": 8}) == ["--batch", "8"]


@pytest.mark.slow
def test_a_fresh_start_keeps_the_earlier_runs_retrospectives_and_hypotheses(tmp_path):
    """`loop start --fresh` numbered its retrospectives and hypothesis pages from 1 again and overwrote the earlier
    run's, which that run's experiment pages link to ("pages and runs stay")."""
    root = tmp_path / "kb"
    make_kb(root, knobs={"dtype": KNOBS["dtype"]}, budget={"runs": 1}, calibrate=0)
    tools(root, "loop", "start", "fake-loop", "-q")
    first = {p.name: p.read_text() for p in (root / "wiki").rglob("*.md")
             if p.parent.name in ("analyses", "loop") and "retrospective" in p.name or "/hypotheses/" in str(p)}
    assert any("retrospective" in n for n in first) and any("retrospective" not in n for n in first), first
    tools(root, "loop", "start", "fake-loop", "-q", "--fresh")
    after = {p.name: p.read_text() for p in (root / "wiki").rglob("*.md")}
    for name, text in first.items():
        assert after[name] == text, name
    assert len([n for n in after if "retrospective" in n]) > len([n for n in first if "retrospective" in n])
    # ... and linked from the loop page, which was made from the new run alone: lint called them orphans
    page = (root / "wiki" / "loops" / "fake-loop.md").read_text()
    assert "## Earlier runs of this loop" in page and "retrospective 1" in page, page[-2000:]
    from tools.agent.registry import call
    from tools.project import Project

    found = call(Project(root), "wiki.lint", {})
    orphans = [f for f in found.get("findings") or found.get("problems") or [] if "orphan" in json.dumps(f)]
    assert not [f for f in orphans if "retrospective" in json.dumps(f) or "observations/" in json.dumps(f)], orphans


def test_the_calibration_says_the_sigma_of_the_loops_own_reading(tmp_path):
    """A user's report: a loop reading runs by their fastest step (`statistic: min`) printed the calibration's σ of
    the median reading (3.3 % where its own was 5.2 %)."""
    root = tmp_path / "kb"
    make_kb(root, knobs={"dtype": KNOBS["dtype"]}, budget={"runs": 1}, calibrate=2, statistic="min")
    said = tools(root, "loop", "start", "fake-loop", "--iterations", "0")
    (cal,) = [r for r in lane(root) if r.get("role") == "calibration"]
    sd = cal["calibration"]["pair_sd_min_pct"]
    assert f"→ σ {sd} % per round (each run read by its fastest step)" in said, (said, cal["calibration"])
