"""The built-in default job: a knowledge base of the real JAX source this install brings, and a short loop.

No key, no network: copy the installed jax package into raw/code/jax (a snapshot; raw/ is
never modified afterwards), ingest it, rebuild the index, run a short offline autoresearch loop on the
reference model (the `sweep` proposer, a budget of a few minutes on a laptop CPU), and lint the result.
"""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from .errors import ToolsError
from .project import Project


@dataclass
class DemoResult:
    root: Path
    ingest: object
    lint: object
    copied: bool
    loop: dict | None = None
    seconds: float = 0.0
    loop_ran_before: bool = False  # the folder's loop had run already: not run again, no report written

    def report(self) -> dict:
        """What this run did, as figures: written to ``demo-report.json`` in the knowledge base, and what
        ``scripts/figures.py`` fills the README's and the docs' demo figures from (so they cannot drift)."""
        import os
        import platform

        ing, s = self.ingest, self.loop or {}
        hist = s.get("history") or []
        frontier = s.get("frontier") or [{}]
        pages_ = sum(1 for p in (self.root / "wiki").rglob("*.md")) if (self.root / "wiki").is_dir() else 0
        return {
            "date": time.strftime("%Y-%m-%d"), "seconds": round(self.seconds, 1),
            "machine": f"{os.cpu_count()} cores, {platform.machine()}, Python {platform.python_version()}",
            "ingest": {"files": ing.files_scanned, "kernels": ing.kernels, "launch_sites": ing.launch_sites,
                       "pages": ing.created + ing.updated + ing.unchanged, "seconds": round(ing.seconds, 1)},
            "loop": {"experiments": len(hist), "kept": sum(bool(h.get("kept")) for h in hist),
                     "verdicts": [h.get("verdict") for h in hist], "changes": [h.get("describe") for h in hist],
                     "baseline_tokens_per_s": frontier[0].get("tokens_per_s"),
                     "trunk_tokens_per_s": (s.get("trunk") or {}).get("tokens_per_s"),
                     "gain_pct": frontier[-1].get("gain_pct"), "stop_reason": s.get("stop_reason"),
                     "wall_s": (s.get("usage") or {}).get("wall_s")},
            "lint": {"errors": self.lint.errors, "warnings": self.lint.warnings}, "pages": pages_,
        }


def installed_jax() -> Path:
    import importlib.util

    spec = importlib.util.find_spec("jax")  # locate the package without importing it
    if spec is None or not spec.submodule_search_locations:
        raise ToolsError("jax is not installed: pip install 'autoresearch-wiki[exp]' (or pass a tree to ingest)")
    return Path(list(spec.submodule_search_locations)[0])


REPORT = "demo-report.json"
DEMO_LOOP = "llama-cpu"
DEMO_RUNS = 3           # experiments after the baseline: the README's promise
DEMO_MAX_REPEATS = 4    # interleaved rounds per comparison at most (looks at 2 and 4)
WALL_SAFETY = 2.0       # the wall budget: twice what the experiments cost at the baseline's measured pace


def experiment_cost_s(baseline_s: float, max_repeats: int) -> float:
    """An experiment's worst case at the baseline's pace: ``max_repeats`` rounds of two arms, a profiled run and a
    same-shape semantics reference."""
    return baseline_s * (2 * max_repeats + 2)


def run_loop(project: Project, runs: int, say=None) -> dict:
    """The reference model's loop file with the demo's budget (the file itself is left as `tools init` wrote it):
    the baseline first, then a wall budget sized from how long it took, so ``runs`` experiments fit."""
    from .loop.engine import Loop
    from .loop.spec import load
    from .loop.state import LoopPaths

    spec = load(LoopPaths(project, DEMO_LOOP).spec)
    spec.calibrate = 0  # the A/A rounds would take longer than the demo's whole budget; the default floor holds
    spec.max_repeats = min(spec.max_repeats, DEMO_MAX_REPEATS)
    spec.budget = {"runs": runs}
    state = Loop(project, spec, say).run(max_iterations=0)  # the baseline alone: its time sizes the budget
    first = (state.get("frontier") or [{}])[0]  # the baseline's own device time (a resumed loop's usage holds more)
    baseline_s = max(1.0, float(first.get("device_s_total") or state["usage"]["device_s"]))
    wall = state["usage"]["wall_s"] + WALL_SAFETY * runs * experiment_cost_s(baseline_s, spec.max_repeats)
    spec.budget["wall_s"] = round(wall)
    if say:
        say(f"budget: {runs} experiments, wall {wall:.0f} s (the baseline took {baseline_s:.1f} s)")
    return Loop(project, spec, say).run()


def write_provenance(tree: Path, dist: str) -> None:
    """``tree/.tools-provenance.json``: the upstream repository and release tag of an installed distribution (read
    by ingest in place of a .git), when its metadata names a GitHub or GitLab home."""
    import importlib.metadata as md
    import json

    from .gitinfo import PROVENANCE, web_url

    try:
        meta = md.metadata(dist)
    except md.PackageNotFoundError:
        return
    urls = [meta.get("Home-page") or ""] + [u.split(",", 1)[-1].strip() for u in meta.get_all("Project-URL") or []]
    home = next((web_url(u) for u in urls if web_url(u)), None)
    if home:
        ref = f"{dist}-v{meta['Version']}"  # jax tags its releases jax-vX.Y.Z
        (tree / PROVENANCE).write_text(json.dumps({"remote": home, "ref": ref, "package": f"{dist} {meta['Version']}",
                                                   "note": "a copy of the installed package"}) + "\n")


def run_demo(root: Path, source: Path | None = None, loop_runs: int = DEMO_RUNS, say=None) -> DemoResult:
    from .ingest.run import ingest_repo, rebuild_index
    from .lint import run as lint
    from .scaffold import init
    from .writer import Writer

    t0 = time.monotonic()
    init(root, subject=str(root))
    project = Project(Path(root).resolve())
    src = source or installed_jax()
    dest = project.raw_code / "jax" / src.name
    copied = not dest.exists()
    if copied:  # copied beside it, then renamed: a copy a Ctrl-C cut short was taken for the whole package
        partial = dest.with_name(f".{dest.name}.partial")
        shutil.rmtree(partial, ignore_errors=True)
        shutil.copytree(src, partial, symlinks=True, ignore=shutil.ignore_patterns("__pycache__", "*.so", "*.pyc"))
        if source is None:  # the installed release: its pages link to the same files on GitHub at its tag
            write_provenance(dest.parent, "jax")
        os.rename(partial, dest)
    writer = Writer(project.wiki)
    report = ingest_repo(project, "raw/code/jax", writer)
    rebuild_index(project, writer)
    if writer.changed["created"] or writer.changed["updated"] or writer.changed["removed"]:
        writer.log_changes("ingest", "jax")
    before = loop_before(project) if loop_runs > 0 else None
    if before is not None:  # a finished loop is not run again: its figures would be reported as this run's
        if say:
            say(f"loop {DEMO_LOOP} ran here before ({len(before.get('history') or [])} experiments, "
                f"{before.get('stop_reason') or before.get('status')}): not run again, and {REPORT} is left as it "
                f"is; `tools loop start {DEMO_LOOP} --fresh` runs it over, or give the demo a new folder")
        state = before
    else:
        state = run_loop(project, loop_runs, say) if loop_runs > 0 else None
    if state is not None:
        rebuild_index(project, Writer(project.wiki))
    result = DemoResult(project.root, report, lint(project), copied, state, time.monotonic() - t0,
                        before is not None)
    import json

    from .writer import atomic_write

    if before is None:
        atomic_write(project.root / REPORT, json.dumps(result.report(), indent=1) + "\n")
    return result


def loop_before(project: Project) -> dict | None:
    """The demo loop's state when a run of it ended here before (a stopped or finished loop; one cut off midway is
    resumed by running the demo again)."""
    from .loop.state import LoopPaths, load

    try:
        state = load(LoopPaths(project, DEMO_LOOP))
    except ToolsError:
        return None
    done = state and state.get("status") == "stopped" and not state.get("pending") and state.get("history")
    return state if done and not str(state.get("stop_reason") or "").startswith(("paused", "interrupted")) else None
