"""Adversarial pages cost what plain pages of the same size cost: ingest, index, lint and site build, timed on
pages built to make a backtracking regex or the markdown engine super-linear, against plain prose pages.

Usage: python bench/hostile_inputs.py [--size 200000] [--keep DIR]

Two knowledge bases, built in the same run: one whose wiki holds one page per adversarial pattern
(tests/hostile/adversarial.py) and whose raw/code repo carries the same text as its README and a module
docstring, one with plain pages and a plain repo of the same sizes. Each step is run on both, alternately, and
the card shows seconds and the ratio adversarial / plain (these machines are noisy: read the ratios; a
super-linear path shows as a ratio of 10 or 1,000, not 1.5). Prints a card, then one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.hostile.adversarial import PATTERNS, page, plain  # noqa: E402

STEPS = ("ingest", "index", "lint", "site")


def tools(root: Path, *args: str) -> None:
    r = subprocess.run([sys.executable, "-m", "tools", "--root", str(root), *args], capture_output=True, text=True,
                       timeout=3600)
    if r.returncode not in (0, 1, 3):  # lint exits 1 on findings; ingest 3 on skips
        raise SystemExit(f"tools {' '.join(args)} failed ({r.returncode}): {r.stderr[-2000:]}")


def make_kb(root: Path, texts: dict[str, str]) -> Path:
    tools(root, "init", str(root))
    code = root / "raw/code/repo"
    code.mkdir(parents=True)
    for name, text in texts.items():
        (root / "wiki/analyses").mkdir(parents=True, exist_ok=True)
        (root / f"wiki/analyses/{name}.md").write_text(
            f"---\ntitle: {name}\ntype: analysis\n---\n\n{text}", encoding="utf-8")
        doc = text.replace("\\", "\\\\").replace('"""', "'''")
        (code / f"{name.replace('-', '_')}.py").write_text(f'"""{doc}"""\nimport jax\nx = jax.checkpoint\n')
    (code / "README.md").write_text(next(iter(texts.values())), encoding="utf-8")
    return root


def time_step(root: Path, step: str) -> float:
    args = {"ingest": ("ingest", "raw/code/repo", "-q"), "index": ("index",), "lint": ("lint", "-q"),
            "site": ("site", "build")}[step]
    t0 = time.perf_counter()
    tools(root, *args)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size", type=int, default=200_000, help="characters per page (default 200,000)")
    ap.add_argument("--keep", type=Path, help="build the knowledge bases here and keep them")
    a = ap.parse_args()
    base = a.keep or Path(tempfile.mkdtemp(prefix="hostile-bench-"))
    if base.exists() and a.keep:
        shutil.rmtree(base)
    base.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("NO_MKDOCS_2_WARNING", "1")
    adv = make_kb(base / "adversarial", {k: page(p, a.size) for k, p in PATTERNS.items()})
    ref = make_kb(base / "plain", {f"plain-{i}": plain(a.size) for i in range(len(PATTERNS))})
    out: dict[str, dict] = {}
    for step in STEPS:
        t_plain = time_step(ref, step)
        t_adv = time_step(adv, step)
        out[step] = {"plain_s": round(t_plain, 3), "adversarial_s": round(t_adv, 3),
                     "ratio": round(t_adv / t_plain, 2) if t_plain else None}
    print(f"{len(PATTERNS)} pages of {a.size:,} characters each (adversarial: one pattern per page)")
    print(f"{'step':8} {'plain s':>9} {'adversarial s':>14} {'ratio':>7}")
    for step, r in out.items():
        print(f"{step:8} {r['plain_s']:9.2f} {r['adversarial_s']:14.2f} {r['ratio']:7.2f}")
    print(json.dumps({"bench": "hostile_inputs", "size": a.size, "pages": len(PATTERNS), "steps": out}))
    if not a.keep:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
