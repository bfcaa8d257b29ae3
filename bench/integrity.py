"""Integrity: does every hack in the corpus get filed invalid (or refused), and does every real change stay clean?

    python bench/integrity.py [--repeats 2] [--max-repeats 12] [--statistic min] [--only-clean | --only-hacks] [--keep DIR] [--check]

Runs tests/integrity/corpus/corpus.yaml through `tools exp run` on the reference model (CPU, the tiny preset),
in a knowledge base of its own: the clean baseline (profiled), then each hack against it (profiled, one timed
run: the checks read evidence per run, not a comparison), then each real change in interleaved rounds against the
baseline (adaptive between ``--repeats`` and ``--max-repeats``, as the loop runs them), so that a real speed-up
can be `supported`.

Prints a row per hack (verdict, the signatures named) and per real change (verdict, gain, integrity), then
hacks caught / total, real changes kept / those expected faster, real changes falsely rejected (an integrity
finding or `invalid`), and a final JSON line. ``--check`` exits 1 unless 100 % caught, 100 % kept and none
falsely rejected.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "integrity"))
sys.path.insert(0, str(REPO))

import harness  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=2, help="interleaved rounds for each real change, at least")
    ap.add_argument("--max-repeats", type=int, default=12, help="... and at most (adaptive, as the loop runs)")
    ap.add_argument("--statistic", default="min", choices=["median", "min"],
                    help="a run's tokens/s read from (min: its fastest steady step, as loops/llama-cpu.yml)")
    ap.add_argument("--only-clean", action="store_true", help="skip the hacks (the real changes only)")
    ap.add_argument("--only-hacks", action="store_true", help="skip the real changes (the hacks only)")
    ap.add_argument("--keep", type=Path, default=None, help="keep the knowledge base here")
    ap.add_argument("--check", action="store_true")
    a = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="integrity-"))
    t0 = time.time()
    b = harness.Bench(root)
    b.setup()
    c = harness.corpus()
    print(f"baseline {b.baseline['exp_id']}: {b.baseline['metrics']['tokens_per_s']:.0f} tokens/s", flush=True)
    rows, caught = [], 0
    print(f"\n{'hack':18} {'verdict':11} signatures named", flush=True)
    for h in [] if a.only_clean else c["hacks"]:
        out = b.hack(h)
        named = harness.caught_by(out, h)
        ok = harness.is_caught(out, h)
        caught += ok
        rows.append({"hack": h["name"], "verdict": out.get("verdict"), "named": named, "caught": ok})
        print(f"{h['name']:18} {str(out.get('verdict')):11} {', '.join(named) or '-'}"
              + ("" if ok else "   <- NOT CAUGHT: " + "; ".join(out.get("reasons") or [])[:300]), flush=True)
    print(f"\n{'real change':18} {'verdict':11} {'gain %':>8}  integrity", flush=True)
    kept = faster = rejected = 0
    for ch in [] if a.only_hacks else c["clean"]:
        out = b.clean(ch, repeats=a.repeats, max_repeats=a.max_repeats, statistic=a.statistic)
        fm = harness.frontmatter(b, out)
        integ = fm.get("integrity") or {}
        bad = out.get("verdict") == "invalid" or bool(integ.get("findings"))
        rejected += bad
        if ch.get("faster", True):
            faster += 1
            kept += out.get("verdict") == "supported"
        rows.append({"change": ch["name"], "verdict": out.get("verdict"), "gain_pct": out.get("gain_pct"),
                     "integrity": integ.get("status"), "falsely_rejected": bad, "faster": ch.get("faster", True)})
        print(f"{ch['name']:18} {str(out.get('verdict')):11} {out.get('gain_pct') or 0:8.2f}  {integ.get('status')}"
              + ("   <- FALSELY REJECTED" if bad else ""), flush=True)
        if out.get("verdict") != "supported":
            print("    " + "\n    ".join(out.get("reasons") or []), flush=True)
    n_hacks = sum(1 for r in rows if "hack" in r)
    n_clean = sum(1 for r in rows if "change" in r)
    print(f"\nhacks caught: {caught}/{n_hacks} ({100 * caught / max(n_hacks, 1):.0f} %)")
    print(f"real changes kept (supported): {kept}/{faster} of those expected faster on this machine "
          f"({100 * kept / max(faster, 1):.0f} %)")
    print(f"real changes falsely rejected: {rejected}/{n_clean}")
    print(f"wall {time.time() - t0:.0f} s")
    summary = {"hacks": n_hacks, "caught": caught, "clean": n_clean, "expected_faster": faster, "kept": kept,
               "falsely_rejected": rejected, "rows": rows}
    print(json.dumps(summary))
    if a.keep:
        shutil.copytree(root, a.keep, dirs_exist_ok=True)
    shutil.rmtree(root, ignore_errors=True)
    if a.check and (a.only_clean or a.only_hacks or caught < n_hacks or kept < faster or rejected):
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
