"""Runner overhead: the same training command bare and through `tools exp run`, interleaved.

    python bench/exp_overhead.py [--preset tiny] [--pairs 3] [--lane-pages 300]

Prints each pair's wall times, the median overhead (target <= 3 % of wall time without --profile),
the runner's own time as the lane grows (a trivial command, a lane seeded with filed pages),
then the cost of one `--profile` run and of `tools profile summary` on its real trace.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "experiments" / "llama_train.py"
# A command that only prints the JSON result line: what is left of the wall time is the runner's own.
TRIVIAL = [sys.executable, "-c", "print({!r})".format(json.dumps({
    "step_times_s": [0.1, 0.01, 0.01], "tokens_per_step": 1024, "warmup_steps": 1, "losses": [3.0, 2.9, 2.8],
    "flops_per_step": {"causal": 1e9, "noncausal": 1.2e9}, "platform": "cpu", "n_devices": 1}))]


def wall(cmd: list[str]) -> float:
    t = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=REPO)
    return time.perf_counter() - t


def lane_growth(tool: list[str], tmp: Path, n_pages: int, runs: int = 3) -> None:
    """The runner's own time on a trivial command, in a fresh lane and in a lane of ``n_pages`` filed pages."""
    if n_pages <= 0:
        return
    tool = list(tool)
    tool[tool.index("--lane") + 1] = "growth"
    wall(tool + ["-m", "seed", "--"] + TRIVIAL)
    folder = tmp / "wiki" / "experiments" / "bench" / "growth"
    page = next(folder.glob("*-v001-*.md"))
    text = page.read_text()
    fresh = [wall(tool + ["-m", f"fresh {i}", "--"] + TRIVIAL) for i in range(runs)]
    top = 1 + runs
    for v in range(top + 1, top + 1 + n_pages):  # copies of the first page, as if filed earlier
        (folder / page.name.replace("-v001-", f"-v{v:03d}-")).write_text(
            re.sub(r"(?m)^version: 1$", f"version: {v}", text.replace("-v001-", f"-v{v:03d}-")))
    grown = [wall(tool + ["-m", f"grown {i}", "--"] + TRIVIAL) for i in range(runs)]
    print(f"runner's own time, trivial command (python start included): {statistics.median(fresh):.3f} s in a fresh lane, "
          f"{statistics.median(grown):.3f} s in a lane of {n_pages + top} filed pages (medians of {runs})")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--preset", default="tiny")
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--lane-pages", type=int, default=300, help="filed pages to seed a lane with (0: skip)")
    a = ap.parse_args()
    train = [sys.executable, str(SCRIPT), "--preset", a.preset]
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "wiki").mkdir()
        tool = [sys.executable, "-m", "tools", "--root", tmp, "exp", "run", "--model", "bench", "--lane", "cpu",
                "--variant", f"{a.preset}/cpu", "-q"]
        wall(train)  # warm the file cache
        bare, tooled = [], []
        for i in range(a.pairs):  # interleaved: bare, tool, bare, tool
            bare.append(wall(train))
            tooled.append(wall(tool + ["-m", f"pair {i}", "--"] + train))
            print(f"pair {i + 1}: bare {bare[-1]:.3f} s   tools exp run {tooled[-1]:.3f} s   "
                  f"overhead {100 * (tooled[-1] / bare[-1] - 1):+.2f} %")
        ratios = [t / b - 1 for b, t in zip(bare, tooled)]
        print(f"A/B: median overhead {100 * statistics.median(ratios):+.2f} %, min-vs-min "
              f"{100 * (min(tooled) / min(bare) - 1):+.2f} % (noisy on a shared machine)")
        # In the same run: the tool's wall time less the child's own wall time (recorded on the page).
        sys.path.insert(0, str(REPO))
        from tools.experiments.records import load_experiments

        child = [r["run_wall_s"][0] for r in load_experiments(Path(tmp) / "wiki")]
        own = [t - c for t, c in zip(tooled, child)]
        print(f"in-run: runner's own time {statistics.median(own):.3f} s per run = "
              f"{100 * statistics.median(o / t for o, t in zip(own, tooled)):.2f} % of wall time (target <= 3 %)")

        lane_growth(tool, Path(tmp), a.lane_pages)

        t_prof = wall(tool + ["--profile", "-m", "profiled", "--"] + train)
        print(f"--profile run: {t_prof:.3f} s ({100 * (t_prof / statistics.median(bare) - 1):+.1f} % vs bare)")
        raw = max((Path(tmp) / "raw" / "profiles").glob("*-profiled"))
        from tools.profiling import summary

        for use_xprof in (False, True):
            t = time.perf_counter()
            s = summary.summarize(raw, use_xprof=use_xprof)
            dt = time.perf_counter() - t
            print(f"profile summary ({'with' if use_xprof else 'without'} xprof converters): {dt:.3f} s for "
                  f"{sum(p.stat().st_size for p in raw.rglob('*.xplane.pb')) / 1e3:.0f} KB xplane, "
                  f"{s['n_ops']} ops, {s['attributed_pct']} % of op time attributed to source lines")


if __name__ == "__main__":
    main()
