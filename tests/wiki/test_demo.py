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
