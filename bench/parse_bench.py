"""Python parse cost: `ast.parse` alone (the floor) vs the reader's path (tools.downlevel.rewrite + ast.parse), on
the installed jax package, plus the facts each produces on files with 3.12+ syntax.

    python bench/parse_bench.py [--root DIR] [--repeat 3]

The reader runs tree-sitter only on files that may hold 3.12+ syntax (a cheap regex first); the target is within
3x the floor. Prints a card, then one JSON line.
"""

from __future__ import annotations

import argparse
import ast
import json
import statistics
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tools import downlevel  # noqa: E402

TARGET_RATIO = 3.0


def sources(root: Path) -> list[str]:
    out = []
    for p in sorted(root.rglob("*.py")):
        try:
            text = p.read_text(encoding="utf-8")
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                ast.parse(text)
        except (UnicodeDecodeError, SyntaxError, ValueError):
            continue
        out.append(text)
    return out


def timed(fn, texts: list[str], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for t in texts:
                fn(t)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", type=Path, help="a source tree (default: the installed jax package)")
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    if a.root is None:
        import jax
        a.root = Path(jax.__file__).parent
    texts = sources(a.root)
    mb = sum(len(t) for t in texts) / 1e6
    floor = timed(ast.parse, texts, a.repeat)
    ours = timed(lambda t: ast.parse(downlevel.rewrite(t)), texts, a.repeat)
    rewrite_only = timed(downlevel.rewrite, texts, a.repeat)
    ratio = ours / floor
    print(f"{len(texts)} files, {mb:.1f} MB from {a.root}")
    print(f"  ast.parse (floor):             {floor:6.2f} s")
    print(f"  rewrite + ast.parse (reader):  {ours:6.2f} s   ratio {ratio:.2f}x (target <= {TARGET_RATIO}x: "
          f"{'met' if ratio <= TARGET_RATIO else 'MISSED'})")
    print(f"  rewrite alone:                 {rewrite_only:6.2f} s")
    print(json.dumps({"bench": "parse", "files": len(texts), "mb": round(mb, 2), "floor_s": round(floor, 3),
                      "reader_s": round(ours, 3), "rewrite_s": round(rewrite_only, 3), "ratio": round(ratio, 2)}))


if __name__ == "__main__":
    main()
