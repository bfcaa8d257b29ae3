"""Whether search ranks meaning: precision@3 and MRR of ``tools search`` on hand-judged questions over a knowledge
base of real inputs (bench/search_labels/README.md: the rules, and how the questions were judged).

    python bench/search_quality.py [--set dev|heldout] [--cache DIR] [--show] [--check]

The knowledge base is built once under the cache folder from pinned registry files: four kernel libraries' wheels
(jax 0.10.2, tokamax 0.0.12, maxtext 0.2.5, tpu-inference 0.32.0; bench/kernel_labels/manifest.json, sha256
checked) ingested as codebases, and the 14 performance documents of bench/claim_labels ingested as sources. Each
question's relevant pages count 1, its partly relevant pages 0.5 in the half-credit figure. Prints one row per
question, the totals (targets P@3 ≥ 0.8, MRR ≥ 0.8) with the median query time, then one JSON line; ``--check``
exits 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(REPO / "tests" / "sources"))
import claim_scoring  # noqa: E402 - the pinned performance documents
import kernels_accuracy  # noqa: E402 - the pinned wheels

LABELS = REPO / "bench" / "search_labels"
DEFAULT_CACHE = Path.home() / ".cache" / "autoresearch-wiki" / "search-quality"
CODEBASES = {"jax": "jax", "tokamax": "tokamax", "maxtext": "maxtext", "tpu-inference": "tpu_inference"}
TARGETS = {"p_at_3": 0.8, "mrr": 0.8}
BUILD = 3  # bump when what the knowledge base holds changes


def build(cache: Path) -> Path:
    """The knowledge base, built once (raw/ copied from the pinned files, then ``tools ingest``)."""
    kb = cache / "kb"
    stamp = kb / ".built"
    if stamp.exists() and stamp.read_text().strip() == str(BUILD):
        return kb
    shutil.rmtree(kb, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "tools", "init", str(kb)], check=True, capture_output=True)
    manifest = json.loads((kernels_accuracy.LABELS / "manifest.json").read_text())
    libs = {lib["library"]: lib for lib in manifest["libraries"]}
    for slug, package_dir in CODEBASES.items():
        root = kernels_accuracy.fetch(libs[slug], cache / "wheels")
        shutil.copytree(root / package_dir, kb / "raw" / "code" / slug)
    sources = kb / "raw" / "sources"
    sources.mkdir(parents=True, exist_ok=True)
    for which in claim_scoring.SETS:
        for doc_id, (path, data) in claim_scoring.documents(which).items():
            (sources / f"{doc_id}{Path(path).suffix}").write_bytes(data)
    done = subprocess.run([sys.executable, "-m", "tools", "ingest", "--all", "-q"], cwd=kb, capture_output=True,
                          text=True)
    if done.returncode not in (0, 3):  # 3: completed, some files skipped (a tokenizer too large to read)
        raise SystemExit(f"ingest failed ({done.returncode}):\n{done.stderr[-2000:]}")
    stamp.write_text(f"{BUILD}\n")
    return kb


SETS = {"dev": "questions.yaml", "heldout": "heldout.yaml"}  # the set the ranking was tuned on; one labelled after


def questions(which: str = "dev") -> list[dict]:
    return yaml.safe_load((LABELS / SETS[which]).read_text(encoding="utf-8"))["questions"]


def score(kb: Path, qs: list[dict], show: bool = False) -> dict:
    from tools import search
    from tools.project import Project

    project = Project(kb)
    search.search(project, "warm up")  # the index brought up to date once, outside the timings
    p3, p3_half, rr, times = [], [], [], []
    for q in qs:
        relevant, partial = set(q["relevant"]), set(q.get("partial") or [])
        t0 = time.perf_counter()
        _, hits = search.search(project, q["q"], limit=10)
        times.append(time.perf_counter() - t0)
        got = [h.path for h in hits]
        top = got[:3]
        p3.append(sum(p in relevant for p in top) / 3 if len(relevant) >= 3 else
                  sum(p in relevant for p in top) / min(3, max(len(relevant), 1)))
        p3_half.append(min(1.0, (sum(p in relevant for p in top) + 0.5 * sum(p in partial for p in top))
                           / min(3, max(len(relevant) + len(partial), 1))))
        first = next((i for i, p in enumerate(got) if p in relevant), None)
        rr.append(0.0 if first is None else 1 / (first + 1))
        print(f"{p3[-1]:5.2f} {rr[-1]:5.2f}  {q['q']}")
        if show:
            for i, p in enumerate(got[:5]):
                mark = "R" if p in relevant else "p" if p in partial else " "
                print(f"        {mark} {i + 1}. {p}")
            missing = sorted(relevant - set(got[:10]))
            if missing:
                print(f"        not in the top 10: {', '.join(missing)}")
    out = {"questions": len(qs), "p_at_3": round(statistics.mean(p3), 3),
           "p_at_3_half_credit": round(statistics.mean(p3_half), 3), "mrr": round(statistics.mean(rr), 3),
           "median_query_ms": round(1000 * statistics.median(times), 1)}
    out["met"] = all(out[k] >= v for k, v in TARGETS.items())
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cache", type=Path, default=DEFAULT_CACHE)
    ap.add_argument("--show", action="store_true", help="the top five of each question, marked")
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--set", dest="which", default="dev", choices=SETS,
                    help="dev: the questions the ranking was tuned on; heldout: written after, scored once")
    ap.add_argument("--build-only", action="store_true", help="build the knowledge base and print its path")
    a = ap.parse_args()
    kb = build(a.cache)
    if a.build_only:
        print(kb)
        return 0
    out = score(kb, questions(a.which), a.show)
    print(f"\nP@3 {out['p_at_3']} (half credit for partly relevant: {out['p_at_3_half_credit']})  MRR {out['mrr']}  "
          f"median query {out['median_query_ms']} ms  ({out['questions']} questions; targets P@3 ≥ 0.8, MRR ≥ 0.8)")
    print(json.dumps({"bench": "search_quality", "set": a.which, **out, "targets": TARGETS}))
    return 1 if a.check and not out["met"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
