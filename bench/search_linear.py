"""Per-page costs stay linear: search, query and a page read on one page of 0.25, 0.5, 1 and 2 MB, with 1, 2, 4
and 8 query words. Each doubling of the page should about double the time (ratio ~2) and each doubling of the
words should leave it about the same (ratio ~1); FTS5's snippet() grew with size x words (8.8 s for two words on
1 MB, 54 s for five).

    python bench/search_linear.py [--rounds 3]

Prints a card, then one JSON line. Each cell is the fastest of --rounds interleaved runs (this machine drifts).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

WORDS = "remat sharding attention kernel pipeline flash scan layer block memory".split()
SIZES_MB = (0.25, 0.5, 1.0, 2.0)
N_WORDS = (1, 2, 4, 8)


def page(mb: float) -> str:
    rnd = random.Random(0)
    body = " ".join(rnd.choice(WORDS) for _ in range(int(mb * 150_000)))
    paras = "\n\n".join(body[i:i + 500] for i in range(0, len(body), 500))
    return f"---\ntitle: Big\ntype: concept\n---\n\n# Big\n\n{paras}\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    from tools import query, scaffold, search
    from tools.agent.registry import call
    from tools.project import Project

    kbs = {}
    for mb in SIZES_MB:
        root = Path(tempfile.mkdtemp(prefix="search-linear-")) / "kb"
        scaffold.init(root, site_name="bench")
        (root / "wiki/concepts/big.md").write_text(page(mb))
        kbs[mb] = Project(root)
        search.search(kbs[mb], "remat")  # build the index once: the cost measured is the query's
    best: dict[tuple[str, float, int], float] = {}
    for _ in range(a.rounds):
        for mb in SIZES_MB:
            for n in N_WORDS:
                q = " ".join(WORDS[:n])
                for what, fn in (("search", lambda: search.search(kbs[mb], q)),
                                 ("query", lambda: query.query(kbs[mb], q)),
                                 ("read", lambda: call(kbs[mb], "wiki.read", {"path": "concepts/big.md"}))):
                    t = time.perf_counter()
                    fn()
                    dt = time.perf_counter() - t
                    key = (what, mb, n)
                    best[key] = min(best.get(key, dt), dt)
    out = {}
    for what in ("search", "query", "read"):
        print(f"{what}: seconds (rows: MB, columns: words {N_WORDS})")
        for mb in SIZES_MB:
            print(f"  {mb:>5} MB  " + "  ".join(f"{best[(what, mb, n)]:7.3f}" for n in N_WORDS))
        size_ratio = [best[(what, SIZES_MB[i + 1], 8)] / best[(what, SIZES_MB[i], 8)] for i in range(len(SIZES_MB) - 1)]
        word_ratio = [best[(what, 2.0, N_WORDS[i + 1])] / best[(what, 2.0, N_WORDS[i])] for i in range(len(N_WORDS) - 1)]
        print(f"  per doubling of the page (8 words): {', '.join(f'{r:.2f}' for r in size_ratio)}; "
              f"per doubling of the words (2 MB): {', '.join(f'{r:.2f}' for r in word_ratio)}")
        out[what] = {"size_ratio": [round(r, 2) for r in size_ratio], "word_ratio": [round(r, 2) for r in word_ratio],
                     "seconds_2mb_8words": round(best[(what, 2.0, 8)], 4)}
    print(json.dumps({"bench": "search_linear", **out}))


if __name__ == "__main__":
    main()
