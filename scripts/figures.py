"""Fill the figures the README and the docs quote from a measured run, so they cannot drift from what a run shows.

    tools demo /tmp/kb && cp /tmp/kb/demo-report.json docs/data/demo-report.json
    python scripts/figures.py                 # rewrite every figures region from docs/data/
    python scripts/figures.py --check         # exit 1 and name the file when a region is stale (tests run it)

A region is ``<!-- figures:NAME -->text<!-- /figures:NAME -->`` (inline, or around whole lines); NAME picks the
function below that writes its text from the report.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "docs" / "data"
FILES = ["README.md", "docs/demo.md", "docs/site.md", "docs/index.md"]
REGION = re.compile(r"(<!-- figures:([\w-]+) -->)(.*?)(<!-- /figures:\2 -->)", re.S)


def _minutes(seconds: float) -> str:
    m, s = divmod(int(round(seconds)), 60)
    return f"{m} min {s:02d} s"


def demo_time(r: dict) -> str:
    halves = max(1, round(r["seconds"] / 30)) / 2  # to the half minute
    about = f"{halves:g} minute{'' if halves == 1 else 's'}"
    return f"about {about} on {r['machine'].split(',')[0]} (measured {r['date']}: {_minutes(r['seconds'])})"


def demo_pages(r: dict) -> str:
    i = r["ingest"]
    return f"{r['pages']} pages, {i['kernels']} Pallas kernels at {i['launch_sites']} launch sites"


def demo_run(r: dict) -> str:
    i, lp = r["ingest"], r["loop"]
    rows = "\n".join(f"| {n} | `{c}` | {v} |" for n, (c, v) in enumerate(zip(lp["changes"], lp["verdicts"]), 1))
    gain = f"{lp['gain_pct']:+.1f} %" if lp.get("gain_pct") is not None else "—"
    return (f"\nMeasured {r['date']} on {r['machine']}, {_minutes(r['seconds'])} in all:\n\n"
            f"- ingest of the installed jax: {i['files']} files, {i['kernels']} Pallas kernels at "
            f"{i['launch_sites']} launch sites, {i['pages']} pages in {i['seconds']} s;\n"
            f"- the loop: a baseline at {lp['baseline_tokens_per_s']:,.0f} tokens/s, then {lp['experiments']} "
            f"experiments ({lp['kept']} kept) in {_minutes(lp['wall_s'])}; the trunk {gain} over the baseline (the "
            "kept changes' gains, each judged in interleaved rounds against the trunk it changed: runs measured "
            f"alone and in pairs are not compared by raw tokens/s); stop: {lp['stop_reason']};\n"
            f"- lint: {r['lint']['errors']} errors, {r['lint']['warnings']} warnings; {r['pages']} pages in all.\n\n"
            "| # | change | verdict |\n|---:|---|---|\n" + rows + "\n")


WRITERS = {"demo-time": demo_time, "demo-pages": demo_pages, "demo-run": demo_run}


def fill(text: str, report: dict) -> str:
    def one(m: re.Match) -> str:
        writer = WRITERS.get(m.group(2))
        return m.group(0) if writer is None else m.group(1) + writer(report) + m.group(4)
    return REGION.sub(one, text)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true", help="change nothing; exit 1 if a region is stale")
    ap.add_argument("--report", type=Path, default=DATA / "demo-report.json")
    a = ap.parse_args(argv)
    report = json.loads(a.report.read_text(encoding="utf-8"))
    stale = []
    for rel in FILES:
        path = ROOT / rel
        if not path.is_file():
            continue
        old = path.read_text(encoding="utf-8")
        new = fill(old, report)
        if new != old:
            stale.append(rel)
            if not a.check:
                path.write_text(new, encoding="utf-8")
    if stale:
        print(("stale figures: " if a.check else "filled: ") + ", ".join(stale) + f" (from {a.report})")
    return 1 if (a.check and stale) else 0


if __name__ == "__main__":
    sys.exit(main())
