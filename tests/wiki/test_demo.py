"""`tools demo` run again on its folder: a loop that ran there before is not run again, nor reported as this run."""

from __future__ import annotations


def test_demo_again_on_its_folder_says_the_loop_ran_before_and_keeps_the_report(tmp_path):
    """Run again, the demo's loop "ran" nothing (its budget was spent), printed the whole earlier loop's device time
    as the baseline's, ignored --loop-runs, and wrote a demo-report.json mixing the old loop with the new seconds."""
    src = tmp_path / "src" / "pkg"
    src.mkdir(parents=True)
    (src / "__init__.py").write_text("def f():\n    return 1\n")
    root = tmp_path / "kb"
    from tools.demo import run_demo

    first = run_demo(root, source=src, loop_runs=0)
    assert not first.loop_ran_before and (root / "demo-report.json").is_file()
    report = (root / "demo-report.json").read_text()
    from tools.loop import state as st
    from tools.loop.spec import load
    from tools.project import Project

    paths = st.LoopPaths(Project(root), "llama-cpu")
    s = st.LoopState.new(load(paths.spec))
    s.history, s.status, s.stop_reason = [{"iteration": 1, "kept": True}], "stopped", "budget: runs 3 of 3 used"
    s.usage["device_s"] = 421.4
    st.save(paths, s)
    said: list[str] = []
    again = run_demo(root, source=src, loop_runs=2, say=said.append)
    assert again.loop_ran_before and again.loop["stop_reason"] == "budget: runs 3 of 3 used"
    assert any("loop llama-cpu ran here before (1 experiments, budget: runs 3 of 3 used): not run again" in m
               and "--fresh" in m for m in said), said
    assert not any("421.4" in m for m in said)
    assert (root / "demo-report.json").read_text() == report


def test_a_snapshot_cut_short_by_ctrl_c_is_made_whole_by_the_next_run(tmp_path):
    """Ctrl-C during the copy of the package left part of it in raw/code/jax, and every later run took that part
    for the whole package (367 of 622 files, no kernels): the copy is made beside it and renamed when whole."""
    import os
    import signal
    import subprocess
    import sys
    import time

    src = tmp_path / "src" / "pkg"
    for i in range(40):
        (src / f"m{i}").mkdir(parents=True)
        for j in range(60):
            (src / f"m{i}" / f"f{j}.py").write_text(f"def f{j}():\n    return {j}\n" + "# padding\n" * 200)
    root = tmp_path / "kb"
    code = (f"from pathlib import Path\nfrom tools.demo import run_demo\n"
            f"run_demo(Path({str(root)!r}), source=Path({str(src)!r}), loop_runs=0)\n")
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    copying = [root / "raw/code/jax/.pkg.partial", root / "raw/code/jax/pkg"]
    deadline = time.monotonic() + 120
    while not any(d.is_dir() and any(d.iterdir()) for d in copying) and time.monotonic() < deadline:
        time.sleep(0.005)
    os.kill(p.pid, signal.SIGINT)
    p.wait(timeout=120)
    from tools.demo import run_demo

    run_demo(root, source=src, loop_runs=0)
    copied = sorted(f.relative_to(root / "raw/code/jax/pkg") for f in (root / "raw/code/jax/pkg").rglob("*.py"))
    assert copied == sorted(f.relative_to(src) for f in src.rglob("*.py"))
    assert not (root / "raw/code/jax/.pkg.partial").exists()
