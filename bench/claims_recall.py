"""Measured claims found in real documents: recall, precision and location of tools/sources/claims.py against the
hand-labelled set in bench/claim_labels (README.md there: the labelling rules and how a match is made).

    python bench/claims_recall.py [--set documents|heldout] [--cache DIR] [--show missed,spurious,located] [--check]

The documents are files inside pinned source distributions on the registry (performance guides, READMEs with
benchmark tables), downloaded once with ``pip download`` and read from the tarball. Prints a row per document, the
totals (targets: recall ≥ 0.9, precision ≥ 0.9, location ≥ 0.95), the labelled non-claims the extractor reported,
then one JSON line. ``--check`` exits 1 when a target is missed. ``--set heldout`` scores the documents labelled
after the rules were written (documents.yaml says which), to show how the rules carry to text they were not fitted to.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests" / "sources"))
import claim_scoring  # noqa: E402 - tests/sources: the scorer shared with the test
import registry_docs  # noqa: E402

TARGETS = {"recall": 0.9, "precision": 0.9, "location": 0.95}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--set", dest="which", default="documents", choices=claim_scoring.SETS)
    ap.add_argument("--cache", type=Path, default=registry_docs.DEFAULT_CACHE)
    ap.add_argument("--show", default="", help="comma-separated: missed, spurious (print each)")
    ap.add_argument("--check", action="store_true")
    a = ap.parse_args()
    t0 = time.perf_counter()
    scores, total = claim_scoring.run(a.which, a.cache)
    took = time.perf_counter() - t0
    show = set(filter(None, a.show.split(",")))
    print(f"{'document':30} {'labelled':>8} {'found':>6} {'matched':>7} {'recall':>7} {'precision':>9} {'located':>7}")
    for s in scores:
        m = len(s.matched)
        print(f"{s.doc:30} {s.labelled:8} {s.extracted:6} {m:7} {m / max(s.labelled, 1):7.2f} "
              f"{m / max(s.extracted, 1):9.2f} {s.located:7}")
        for lab in s.missed if "missed" in show else []:
            print(f"    missed   {s.doc}:{lab['line']} [{lab['section']}] {lab['text'][:150]!r} {lab['numbers']}")
        for got in s.spurious if "spurious" in show else []:
            print(f"    spurious {got['where']}: {got['quote'][:150]!r}")
        for lab, got in s.matched if "located" in show else []:
            if got["where"] != f"§ {lab['section']}":
                print(f"    where    {s.doc}:{lab['line']} labelled {lab['section']!r}, found {got['where']!r}")
    print(f"\nrecall {total['recall']}  precision {total['precision']}  location {total['location']}  "
          f"({total['matched']} of {total['labelled']} labelled claims in {total['documents']} documents; "
          f"{total['extracted']} reported; extraction {took:.2f} s)")
    hit = [(s.doc, non) for s in scores for non, _ in s.non_claims_hit]
    print(f"labelled non-claims reported as claims: {len(hit)} of {total['non_claims']}")
    for doc, non in hit:
        print(f"    {doc}:{non['line']} ({non.get('why')}) {non['text'][:120]!r}")
    ok = all((total[k] or 0) >= v for k, v in TARGETS.items())
    print(json.dumps({**total, "seconds": round(took, 3), "targets": TARGETS, "met": ok}))
    return 0 if ok or not a.check else 1


if __name__ == "__main__":
    raise SystemExit(main())
