"""Crash pages that teach for the failures a training command meets besides an exception: a script that does not
parse, an exit with only a printed line, native code dying under Python, a hang under a launcher, a run silent
until its timeout, a run the user stopped. Real processes through `tools exp run`."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from _exp_helpers import PY, exp_run

from tools.experiments import crash_facts, records


def _crashes(project) -> list[dict]:
    return [r for r in records.lane_records(project.wiki, "m", "l") if r.get("verdict") == "crash"]


def _tips(project, rec: dict) -> str:
    return (project.wiki / rec["page"]).read_text().split("What to try:")[1].split("\n## ")[0]


def test_a_script_that_does_not_parse_and_an_exit_with_a_printed_line_each_get_their_own_signature(project, tmp_path):
    """A missing colon, a bad indent and `print("fatal: ..."); sys.exit(1)` were all kind `other`, message "exit code
    1, no JSON result line", no frame, one shared signature."""
    (tmp_path / "colon.py").write_text("import sys\ndef f()\n    return 1\n")
    (tmp_path / "indent.py").write_text("x = 1\n    y = 2\n")
    (tmp_path / "fatal.py").write_text("import sys\nprint('fatal: data dir /data/c4 missing')\nsys.exit(1)\n")
    for name in ("colon", "indent", "fatal"):
        exp_run(project, "-m", name, command=[PY, str(tmp_path / f"{name}.py")], code=1)
    colon, indent, fatal = _crashes(project)
    assert colon["crash"]["kind"] == indent["crash"]["kind"] == "syntax", (colon["crash"], indent["crash"])
    assert colon["crash"]["message"] == "SyntaxError: expected ':'"
    assert [(f["rel"], f["line"]) for f in colon["crash"]["frames"]] == [("colon.py", 2)]
    assert "does not parse at `colon.py:2" in _tips(project, colon)
    assert indent["crash"]["message"].startswith("IndentationError: unexpected indent")
    assert fatal["crash"]["kind"] == "other" and fatal["crash"]["message"].startswith("fatal: data dir /data/c4")
    assert len({r["crash"]["signature"] for r in (colon, indent, fatal)}) == 3


def test_native_code_dying_under_python_is_a_signal_with_python_s_own_frame(project, tmp_path):
    """A segmentation fault got "Read the innermost frames below: no frame..." and no frame: the runner now sets
    PYTHONFAULTHANDLER for every local run, so Python says where it stood."""
    (tmp_path / "segv.py").write_text("import ctypes\n\nctypes.string_at(0)\n")
    exp_run(project, "-m", "segv", command=[PY, str(tmp_path / "segv.py")], code=1)
    (rec,) = _crashes(project)
    assert rec["crash"]["kind"] == "signal" and "SIGSEGV" in rec["crash"]["message"], rec["crash"]
    assert ("segv.py", 3) in [(f.get("rel"), f["line"]) for f in rec["crash"]["frames"]], rec["crash"]["frames"]
    assert "Native code died under Python" in _tips(project, rec)


@pytest.mark.parametrize("how", ["py-spy", "faulthandler"])
def test_a_python_process_hung_under_a_launcher_gives_its_stack(project, tmp_path, monkeypatch, how):
    """`bash launch.sh` starting `python hang.py`: py-spy was pointed at bash and SIGABRT went to bash alone, yet
    the reason said its stack was taken."""
    if how == "py-spy" and not shutil.which("py-spy"):
        pytest.skip("py-spy is not installed")
    if how == "faulthandler":
        monkeypatch.setenv("PATH", os.pathsep.join(d for d in os.environ["PATH"].split(os.pathsep)
                                                   if not (Path(d) / "py-spy").exists()))
    (tmp_path / "hang.py").write_text("import time\nprint('loading', flush=True)\n\ndef wait_forever():\n"
                                      "    time.sleep(600)\n\nwait_forever()\n")
    (tmp_path / "launch.sh").write_text(f"{PY} hang.py\n")
    exp_run(project, "--hang-after", "2", "--timeout", "60", "-m", "stuck", command=["bash", "launch.sh"], code=1)
    (rec,) = _crashes(project)
    assert rec["crash"]["kind"] == "hang" and "its stack was taken" in rec["reasons"][0], rec["reasons"]
    frames = [(f.get("rel"), f["line"], f["func"]) for f in rec["crash"]["frames"]]
    assert ("hang.py", 5, "wait_forever") in frames, frames


def test_a_python_process_slower_to_dump_than_its_launcher_to_die_still_gives_its_stack(project, tmp_path,
                                                                                       monkeypatch):
    """CI: bash died of the SIGABRT at once and the runner stopped reading when its leader ended, before the Python
    process under it had written its dump ("its stack was taken", no frame). Here the dump comes a second late."""
    monkeypatch.setenv("PATH", os.pathsep.join(d for d in os.environ["PATH"].split(os.pathsep)
                                               if not (Path(d) / "py-spy").exists()))
    (tmp_path / "hang.py").write_text(
        "import faulthandler, os, signal, sys, time\n\n"
        "def late_dump(*_):\n    time.sleep(1)\n    faulthandler.dump_traceback(sys.stdout, all_threads=True)\n"
        "    sys.stdout.flush()\n    os._exit(134)\n\n"
        "signal.signal(signal.SIGABRT, late_dump)\nprint('loading', flush=True)\n\n"
        "def wait_forever():\n    time.sleep(600)\n\nwait_forever()\n")
    (tmp_path / "launch.sh").write_text(f"{PY} hang.py\n")
    exp_run(project, "--hang-after", "2", "--timeout", "60", "-m", "late", command=["bash", "launch.sh"], code=1)
    (rec,) = _crashes(project)
    assert rec["crash"]["kind"] == "hang", rec["crash"]
    frames = [(f.get("rel"), f["line"], f["func"]) for f in rec["crash"].get("frames", [])]
    assert ("hang.py", 13, "wait_forever") in frames, frames


def test_a_shell_hung_with_no_python_in_it_does_not_claim_a_stack(project, tmp_path):
    exp_run(project, "--hang-after", "2", "--timeout", "60", "-m", "sleepy",
            command=["bash", "-c", "echo start; sleep 600"], code=1)
    (rec,) = _crashes(project)
    assert rec["crash"]["kind"] == "hang" and "no Python process in it gave a stack" in rec["reasons"][0]


def test_a_run_silent_until_its_timeout_is_told_it_looks_hung(project, tmp_path):
    """The advice said "It was still printing when its time ran out" of a run that printed nothing."""
    (tmp_path / "silent.py").write_text("import time\ntime.sleep(600)\n")
    exp_run(project, "--timeout", "3", "-m", "silent", command=[PY, str(tmp_path / "silent.py")], code=1)
    (rec,) = _crashes(project)
    assert rec["crash"]["kind"] == "timeout" and "printed nothing" in rec["reasons"][0], rec["reasons"]
    tips = _tips(project, rec)
    assert "looks hung, not slow" in tips and "still printing" not in tips


def test_a_stopped_run_is_kind_stopped_not_a_failure():
    facts = crash_facts.analyze("step 1\n", "stopped by SIGTERM: the command's process group was killed", -15)
    assert facts.kind == "stopped" and facts.signature.startswith("stopped-")
    assert crash_facts.analyze("", "killed by signal SIGTERM, no JSON result line", -15).kind == "killed"


def test_a_run_printing_until_its_timeout_or_a_remote_one_is_not_called_silent(project, tmp_path):
    """The silence was read off the runner's clock, which keeps its first 100,000 chunks only and which a remote
    runner does not keep: every remote timeout, and a chatty local one past the cap, was "printed nothing"."""
    from pathlib import Path

    from tools.experiments.arms import crash_reason
    from tools.runners.process import Proc

    (tmp_path / "chatty.py").write_text("import time\nwhile True:\n    print('.', flush=True)\n    time.sleep(0.02)\n")
    exp_run(project, "--timeout", "3", "-m", "chatty", command=[PY, str(tmp_path / "chatty.py")], code=1)
    (rec,) = _crashes(project)
    assert rec["reasons"][0] == "timed out after 3 s" and "still printing" in _tips(project, rec), rec["reasons"]
    remote = Proc(None, True, 600.0, Path("x.log"), "step 599\n")  # as tools/runners/remote.py builds it
    assert crash_reason(remote, 600) == "timed out after 600 s"


def test_a_crash_without_a_traceback_is_advised_from_what_it_said():
    """A user's report: `bash -c "echo failing; exit 3"` got "Read the innermost frames below" and no frame table
    followed; a program that does not exist (exit 127) was not said to be missing."""
    from tools.experiments.crash_advice import what_to_try

    said = what_to_try({"kind": "other", "message": "failing (exit code 3)", "frames": []}, {}, {})
    assert said == ["- It printed no traceback; the last it said was `failing (exit code 3)`: start from there."]
    missing = what_to_try({"kind": "other", "frames": [],
                           "message": "bash: line 1: no_such_prog: command not found (exit code 127)"}, {}, {})
    assert "was not found" in missing[0] and "PATH" in missing[0]
    framed = what_to_try({"kind": "other", "message": "x", "frames": [{"role": "framework", "file": "f.py"}]}, {}, {})
    assert framed[0].startswith("- Read the innermost frames below")
