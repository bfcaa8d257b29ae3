"""Site build time and size at scale: our build (plugin, generated pages, small nav) vs the floor.

The floor is plain mkdocs-material on the same pages with the nav hidden: our theme settings and markdown
extensions, no plugin but search, ``nav: [index.md]``. Also times `tools site stage` + `zensical build`. Prints a card, then one JSON line.

    python bench/site_build.py            # 4,000 pages, ~17,000 links
    python bench/site_build.py --pages 500
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

PAGES = 4000          # wiki pages generated (types and folders like a real knowledge base)
LINKS_PER_PAGE = 3.7  # mean markdown links per page (~17,000 edges with frontmatter refs)
TARGET_S = 60         # issue 4: a 4,000-page wiki builds in <= 60 s on this 2-core machine
TARGET_RATIO = 1.5    # issue 10: ... and in <= 1.5x plain mkdocs with the nav hidden
TARGET_MB = 300       # issue 10: the site fits GitHub Pages with room (1 GB limit)


def size_mb(path: Path) -> float:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / 1e6


def floor_config(ours: str) -> str:
    """Plain mkdocs on the same pages: our theme and markdown extensions, without our plugin, awesome-nav and the
    nav (``nav: [index.md]``): what any MkDocs site of these pages costs, so the ratio is what our part adds."""
    import yaml

    cfg = yaml.safe_load(ours)
    cfg["plugins"] = ["search"]
    cfg["nav"] = ["index.md"]
    cfg.pop("watch", None)
    cfg["validation"] = {"omitted_files": "info", "not_found": "info", "absolute_links": "info",
                         "unrecognized_links": "info", "anchors": "info"}
    return yaml.safe_dump(cfg, sort_keys=False)


def run(cmd: list[str], cwd: Path) -> float:
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
    t = time.perf_counter()
    r = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    dt = time.perf_counter() - t
    if r.returncode:
        sys.exit(f"{' '.join(cmd)} failed:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
    return dt


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pages", type=int, default=PAGES)
    ap.add_argument("--keep", action="store_true", help="keep the temporary folder")
    ap.add_argument("--layout", choices=("shallow", "deep"), default="shallow",
                    help="deep: the hand-kept shape (~880 folders up to 8 deep, 30 hand-written index.md)")
    ap.add_argument("--no-zensical", action="store_true")
    ap.add_argument("--repeat", type=int, default=3, help="interleaved builds of each (median reported)")
    args = ap.parse_args()

    from tools.sitegen.config import docs_index_md, mkdocs_yml
    from tools.sitegen.generate import generate
    from tools.sitegen.synthetic import synthetic_wiki, write_wiki

    tmp = Path(tempfile.mkdtemp(prefix="site-bench-"))
    ours, floor = tmp / "ours", tmp / "floor"
    wiki = synthetic_wiki(args.pages, LINKS_PER_PAGE, layout=args.layout)
    write_wiki(ours / "wiki", wiki)
    (ours / "docs").mkdir()
    (ours / "docs/index.md").write_text(docs_index_md("Bench"))
    (ours / "mkdocs.yml").write_text(mkdocs_yml("Bench"))
    gen = generate(ours / "wiki")  # warm-up (imports, page cache) and graph figures

    write_wiki(floor / "docs/wiki", wiki)
    (floor / "docs/index.md").write_text("# Bench\n")
    (floor / "mkdocs.yml").write_text(floor_config(mkdocs_yml("Bench")))

    floors, oursl = [], []
    for _ in range(args.repeat):  # interleaved: the machine drifts, both sides see the same drift
        floors.append(run([sys.executable, "-m", "mkdocs", "build", "-q"], floor))
        oursl.append(run([sys.executable, "-m", "mkdocs", "build", "-q", "--strict"], ours))
    t_floor, t_ours = sorted(floors)[len(floors) // 2], sorted(oursl)[len(oursl) // 2]
    res = {
        "pages": args.pages, "layout": args.layout, "graph_nodes": gen.stats["nodes"], "graph_edges": gen.stats["edges"],
        "generate_s": gen.stats["total_s"], "ours_s": round(t_ours, 1), "floor_s": round(t_floor, 1),
        # the median of the paired ratios: each pair ran back to back, so drift between pairs cancels
        "ratio": round(sorted(o / f for o, f in zip(oursl, floors))[len(floors) // 2], 2), "repeat": args.repeat,
        "ratios": [round(o / f, 2) for o, f in zip(oursl, floors)], "ours_mb": round(size_mb(ours / "site"), 1),
        "floor_mb": round(size_mb(floor / "site"), 1), "target_s": TARGET_S,
        "graph_json_kb": round((ours / "site/explore/graph/graph.json").stat().st_size / 1e3),
    }
    if not args.no_zensical and shutil.which("zensical"):
        t = time.perf_counter()
        subprocess.run([sys.executable, "-m", "tools", "--root", str(ours), "site", "stage", "--out", "staged"],
                       check=True, capture_output=True)
        res["stage_s"] = round(time.perf_counter() - t, 1)
        res["zensical_s"] = round(run(["zensical", "build"], ours / "staged"), 1)
        res["zensical_mb"] = round(size_mb(ours / "staged/site"), 1)

    print(f"Site build, {args.pages} pages ({args.layout} layout), {res['graph_edges']} graph edges "
          f"({os.cpu_count()} CPUs)")
    print(f"  ours (plugin, small nav, --strict): {res['ours_s']:6.1f} s  {res['ours_mb']:7.1f} MB")
    print(f"  floor (plain mkdocs, nav hidden):   {res['floor_s']:6.1f} s  {res['floor_mb']:7.1f} MB")
    met = lambda ok: "met" if ok else "MISSED"  # noqa: E731
    print(f"  ratio ours/floor: {res['ratio']}x (target <= {TARGET_RATIO}: {met(res['ratio'] <= TARGET_RATIO)})   "
          f"time <= {TARGET_S} s: {met(res['ours_s'] <= TARGET_S)}   size <= {TARGET_MB} MB: "
          f"{met(res['ours_mb'] <= TARGET_MB)}")
    if "zensical_s" in res:
        print(f"  stage + zensical build: {res['stage_s']} s + {res['zensical_s']} s  {res['zensical_mb']} MB")
    print(json.dumps(res))
    if not args.keep:
        shutil.rmtree(tmp)
    else:
        print(f"kept {tmp}", file=sys.stderr)


if __name__ == "__main__":
    main()
