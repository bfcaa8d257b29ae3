"""A command wrapped in a shell (`bash -c "ulimit -v ...; exec python train.py"`, as docs/crashes.md suggests for a
memory limit) is a Python script run like any other: hashed and copied when filed, its saved copy rerun as the
baseline after an edit in place, its crash frames linked to that copy."""

from __future__ import annotations

import shlex
import shutil

import yaml
from _exp_helpers import FAKE, exp_run

from tools.experiments import records


def _wrapped(script: str, flags: str = "") -> list[str]:
    return ["bash", "-c", f"ulimit -c 0; exec python {script} --step-ms 10 {flags}".strip()]


def _meta(project, exp_id: str) -> dict:
    rec = next(r for r in records.lane_records(project.wiki, "m", "l") if r["exp_id"] == exp_id)
    return yaml.safe_load((project.wiki / rec["page"]).read_text().split("---\n")[1])


def test_a_shell_wrapped_baseline_is_hashed_copied_and_its_copy_rerun_after_an_edit(project, tmp_path):
    """The baseline arm reran the edited script (+13 % for a real 4x slowdown, inconclusive): nothing was hashed."""
    shutil.copy(FAKE, tmp_path / "train.py")
    exp_run(project, "--baseline", "-m", "base", command=_wrapped("train.py"), trust=True)
    base = records.lane_records(project.wiki, "m", "l")[0]
    assert base.get("script_sha256") and (project.root / base["script_copy"]).is_file(), base
    text = (tmp_path / "train.py").read_text()
    slow = text.replace("step_s = a.step_ms / 1e3 / speedup", "step_s = 4 * a.step_ms / 1e3 / speedup")
    assert slow != text
    (tmp_path / "train.py").write_text(slow)  # edited in place: four times slower a step
    exp_run(project, "--repeats", "2", "-m", "slower", command=_wrapped("train.py"), trust=True)
    var = records.lane_records(project.wiki, "m", "l")[-1]
    assert var["verdict"] == "refuted" and var["gain_pct"] < -50, (var["verdict"], var["gain_pct"])
    body = (project.wiki / var["page"]).read_text()
    assert f"its saved copy `{base['script_copy']}` was rerun" in body


def test_a_shell_wrapped_crash_links_its_frames_to_the_run_s_copy(project, tmp_path):
    exp_run(project, "--baseline", "-m", "base", command=_wrapped(FAKE))
    (tmp_path / "boom.py").write_text("def deep():\n    raise ValueError('bad shape')\n\n\ndeep()\n")
    exp_run(project, "-m", "boom", command=["bash", "-c", "exec python boom.py"], code=1)
    crashed = records.lane_records(project.wiki, "m", "l")[-1]
    assert crashed["verdict"] == "crash" and crashed.get("script_copy"), crashed
    body = (project.wiki / crashed["page"]).read_text()
    row = next(ln for ln in body.splitlines() if ln.startswith("| 2 | `boom.py:2` | `deep`"))
    assert f"`{crashed['script_copy']}` (the run's copy of boom.py)" in row, row


def test_the_saved_copy_replaces_the_script_python_runs_in_any_shell_quoting(tmp_path):
    """`cp train.py bak.py && python3 train.py` had its `cp` argument swapped (the edited script ran, the page said
    the copy did); `bash -c "bash -c 'python3 train.py'"` lost its closing quote. Each command is run for real."""
    import subprocess

    from tools.experiments.sides import record_side
    from tools.project import Project

    project = Project(tmp_path / "kb")
    copy = project.root / "raw/profiles/x y/code/train.py"  # a path that needs quoting in a shell
    copy.parent.mkdir(parents=True)
    copy.write_text("print('COPY')\n")
    work = tmp_path / "work"
    work.mkdir()
    (work / "train.py").write_text("print('EDITED')\n")
    for script in ("cp train.py bak.py && python3 train.py", "bash -c 'python3 train.py'",
                   'bash -c "exec python3 -u train.py"', 'python3 "train.py"', "bash -c 'python3 \"train.py\"'",
                   "python3 train.py && python3 train.py"):
        rec = {"exp_id": "e1", "command": shlex.join(["bash", "-c", script]), "cwd": str(work),
               "script_copy": str(copy.relative_to(project.root)), "script_sha256": "0" * 64}
        side, notes = record_side(project, rec, None, None)
        ran = subprocess.run(side.command, cwd=work, capture_output=True, text=True, timeout=60)
        assert set(ran.stdout.split()) == {"COPY"}, (script, side.command, ran.stdout, ran.stderr)
        assert "its saved copy" in notes[0] and "was rerun" in notes[0], notes
