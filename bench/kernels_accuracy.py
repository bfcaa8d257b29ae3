"""Accuracy and speed of the Pallas kernel catalog on real kernel libraries.

Downloads the pinned wheels named in bench/kernel_labels/manifest.json (pip download --no-deps,
checked by sha256) into a cache folder, unpacks them, scans each with tools.kernels.scan and
compares against the hand-written labels: site precision/recall and, on matched sites, accuracy
of kernel, backend, category and kind. Tuned and held-out libraries are reported apart.

    python bench/kernels_accuracy.py [--cache DIR] [--only jax,qwix] [--show-errors]

Prints a card, then one JSON line for machines.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import subprocess
import sys
import time
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
LABELS = HERE / "kernel_labels"
DEFAULT_CACHE = Path.home() / ".cache" / "autoresearch-wiki" / "kernel-bench"
FIELDS = ("kernel", "backend", "category", "kind")

sys.path.insert(0, str(HERE.parent))


def fetch(lib: dict, cache: Path) -> Path:
    """The unpacked wheel of one library, downloading it once."""
    root = cache / f"{lib['package']}-{lib['version']}"
    done = root / ".unpacked"
    if done.exists():
        return root / "x"
    wheel_dir = root / "dist"
    wheel = wheel_dir / lib["file"]
    if not wheel.exists():
        wheel_dir.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--ignore-requires-python",
                        "--only-binary=:all:", "-q", "-d", str(wheel_dir),
                        f"{lib['package']}=={lib['version']}"], check=True)
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    if digest != lib["sha256"]:
        raise SystemExit(f"{wheel}: sha256 {digest} does not match the manifest ({lib['sha256']})")
    with zipfile.ZipFile(wheel) as z:
        z.extractall(root / "x")
    done.write_text("ok\n")
    return root / "x"


def load_labels(name: str) -> tuple[dict, set]:
    sites, negatives = {}, set()
    for line in (LABELS / name).read_text().splitlines():
        if not line.strip():
            continue
        r = json.loads(line)
        key = (r["path"], r["line"])
        if r["label"] == "site":
            sites[key] = r
        else:
            negatives.add(key)
    return sites, negatives


def score(found: list[dict], sites: dict, negatives: set) -> dict:
    got = {(s["path"], s["line"]): s for s in found}
    tp = [k for k in got if k in sites]
    out = {"labelled": len(sites), "found": len(got), "tp": len(tp),
           "fp": sorted(k for k in got if k not in sites), "fn": sorted(k for k in sites if k not in got),
           "negatives_hit": sorted(k for k in got if k in negatives)}
    for f in FIELDS:
        out[f] = sum(got[k][f] == sites[k][f] for k in tp)
        out[f + "_wrong"] = [(k, got[k][f], sites[k][f]) for k in tp if got[k][f] != sites[k][f]]
    return out


def load_tiling() -> dict[str, dict]:
    """bench/kernel_labels/tiling.jsonl (TILING.md: the rules), by library, keyed by (path, line)."""
    out: dict[str, dict] = {}
    path = LABELS / "tiling.jsonl"
    for line in path.read_text().splitlines() if path.exists() else []:
        if line.strip():
            r = json.loads(line)
            out.setdefault(r["library"], {})[(r["path"], r["line"])] = r
    return out


def _norm(shape: str) -> str:
    """A shape as ``ast.unparse`` writes it: no space inside brackets, no trailing comma before ``)`` but a
    1-tuple's."""
    s = " ".join(shape.split()).replace("( ", "(").replace(" )", ")")
    return re.sub(r"(?<=[^\s(]),\s*\)", ")", s) if not re.fullmatch(r"\([^,()]*,\)", s) else s


def _conditional(site: dict) -> set[str]:
    """The shapes the scan says hold only under a condition."""
    alts = (site.get("branches") or {}).get("block_shapes") or []
    always = {_norm(v) for v, c in alts if not c}
    return {_norm(v) for v, c in alts if c} - always


def _branches(site: dict, key: str) -> int:
    alts = (site.get("branches") or {}).get(key)
    return len(alts) if alts else int(bool(site.get(key)))


def score_tiling(found: list[dict], labels: dict) -> dict:
    """Per labelled site: the body (name and def line), block shapes (distinct shapes: recall and precision),
    which shapes are conditional (of the shapes both found), and the number of grid and dimension-semantics
    branches."""
    got = {(s["path"], s["line"]): s for s in found}
    out = {"sites": 0, "body": 0, "body_line": 0, "shapes_labelled": 0, "shapes_found": 0, "shapes_matched": 0,
           "cond_checked": 0, "cond_right": 0, "grid_right": 0, "dims_right": 0, "wrong": []}
    for key, lab in labels.items():
        s = got.get(key)
        if s is None:
            out["wrong"].append((key, "site not found"))
            continue
        out["sites"] += 1
        name_ok = s.get("body_function") == lab["body_function"]
        at = f"{lab.get('body_path') or key[0]}:{lab['body_line']}" if lab.get("body_line") else None
        line_ok = at is None and not s.get("body_at") or s.get("body_at") == at
        out["body"] += name_ok
        out["body_line"] += bool(line_ok)
        if not (name_ok and line_ok):
            out["wrong"].append((key, f"body {s.get('body_function')} at {s.get('body_at')}, "
                                      f"want {lab['body_function']} at {at}"))
        want, have = {_norm(x) for x in lab["block_shapes"]}, {_norm(x) for x in s.get("block_shapes") or []}
        out["shapes_labelled"] += len(want)
        out["shapes_found"] += len(have)
        out["shapes_matched"] += len(want & have)
        if want != have:
            out["wrong"].append((key, f"shapes missed {sorted(want - have)} extra {sorted(have - want)}"))
        cond_want, cond_have = {_norm(x) for x in lab["conditional_shapes"]}, _conditional(s)
        for shape in want & have:
            out["cond_checked"] += 1
            out["cond_right"] += (shape in cond_want) == (shape in cond_have)
        for field, label in (("grid", "grid_branches"), ("dimension_semantics", "dimension_semantics_branches")):
            ok = _branches(s, field) == lab[label]
            out["grid_right" if field == "grid" else "dims_right"] += ok
            if not ok:
                out["wrong"].append((key, f"{field} branches {_branches(s, field)}, want {lab[label]}"))
    return out


def summarize_tiling(rows: list[dict]) -> dict:
    t = {k: sum(r[k] for r in rows) for k in rows[0] if k != "wrong"} if rows else {}
    if not t or not t["sites"]:
        return {}
    return {"sites": t["sites"], "body": ratio(t["body"], t["sites"]), "body_line": ratio(t["body_line"], t["sites"]),
            "shape_recall": ratio(t["shapes_matched"], t["shapes_labelled"]),
            "shape_precision": ratio(t["shapes_matched"], t["shapes_found"]),
            "conditional": ratio(t["cond_right"], t["cond_checked"]),
            "grid_branches": ratio(t["grid_right"], t["sites"]), "dims_branches": ratio(t["dims_right"], t["sites"])}


def ratio(a: int, b: int) -> float | None:
    return round(a / b, 3) if b else None


def summarize(rows: list[dict]) -> dict:
    tp = sum(r["tp"] for r in rows)
    found = sum(r["found"] for r in rows)
    labelled = sum(r["labelled"] for r in rows)
    out = {"sites": labelled, "found": found, "precision": ratio(tp, found), "recall": ratio(tp, labelled)}
    for f in FIELDS:
        out[f] = ratio(sum(r[f] for r in rows), tp)
    out["negatives_hit"] = sum(len(r["negatives_hit"]) for r in rows)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cache", type=Path, default=DEFAULT_CACHE)
    ap.add_argument("--only", default="", help="comma-separated library names from the manifest")
    ap.add_argument("--show-errors", action="store_true", help="list misses, false sites and wrong fields")
    args = ap.parse_args()

    from tools.kernels.scan import scan_paths

    manifest = json.loads((LABELS / "manifest.json").read_text())
    libs = [lib for lib in manifest["libraries"] if not args.only or lib["library"] in args.only.split(",")]
    roots = {lib["library"]: fetch(lib, args.cache) for lib in libs}

    scan_paths([roots[libs[0]["library"]]])  # warm-up: imports and regex compilation
    results, total, cpu = {}, 0.0, 0.0
    tiling_labels, tiling = load_tiling(), {}
    for lib in libs:
        t0, c0 = time.perf_counter(), time.process_time()
        found = [s.to_dict() for s in scan_paths([roots[lib["library"]]])]
        dt = time.perf_counter() - t0
        total += dt
        cpu += time.process_time() - c0
        sites, negatives = load_labels(lib["labels"])
        results[lib["library"]] = {**score(found, sites, negatives), "seconds": round(dt, 2), "split": lib["split"]}
        if lib["library"] in tiling_labels:
            tiling[lib["library"]] = score_tiling(found, tiling_labels[lib["library"]])

    print(f"{'library':16} {'split':9} {'sites':>5} {'found':>5} {'prec':>6} {'recall':>6} "
          f"{'kernel':>6} {'backend':>7} {'categ':>6} {'kind':>6} {'neg':>4} {'sec':>5}")
    for name, r in results.items():
        s = summarize([r])
        print(f"{name:16} {r['split']:9} {s['sites']:5} {s['found']:5} {s['precision'] or 0:6.3f} "
              f"{s['recall'] or 0:6.3f} {s['kernel'] or 0:6.3f} {s['backend'] or 0:7.3f} {s['category'] or 0:6.3f} "
              f"{s['kind'] or 0:6.3f} {s['negatives_hit']:4} {r['seconds']:5.2f}")
        if args.show_errors:
            for k in r["fn"]:
                print(f"    missed     {k[0]}:{k[1]}")
            for k in r["fp"]:
                print(f"    extra      {k[0]}:{k[1]}")
            for f in FIELDS:
                for k, got, want in r[f + "_wrong"]:
                    print(f"    {f:10} {k[0]}:{k[1]}  got {got!r}  want {want!r}")
    split = {}
    for part in sorted({r["split"] for r in results.values()}, key=lambda p: (p != "tuned", p)):
        rows = [r for r in results.values() if r["split"] == part]
        if rows:
            split[part] = summarize(rows)
            s = split[part]
            print(f"{part.upper():26} {s['sites']:5} {s['found']:5} {s['precision'] or 0:6.3f} {s['recall'] or 0:6.3f} "
                  f"{s['kernel'] or 0:6.3f} {s['backend'] or 0:7.3f} {s['category'] or 0:6.3f} {s['kind'] or 0:6.3f} "
                  f"{s['negatives_hit']:4}")
    if manifest.get("first_shot"):
        print("first-shot held-out scores (each set scored once, before any rule was changed for it):")
        for part, r in manifest["first_shot"].items():
            print(f"  {part:12} sites {r['sites']:4}  precision {r['precision']:.3f}  recall {r['recall']:.3f}  "
                  f"kernel {r['kernel']:.3f}  backend {r['backend']:.3f}  category {r['category']:.3f}  kind {r['kind']:.3f}")
    tiling_total = summarize_tiling(list(tiling.values()))
    if tiling_total:
        print(f"tiling ({tiling_total['sites']} labelled sites in {', '.join(tiling)}; kernel_labels/TILING.md): "
              f"body {tiling_total['body']}, its def line {tiling_total['body_line']}, block shapes recall "
              f"{tiling_total['shape_recall']} precision {tiling_total['shape_precision']}, conditional "
              f"{tiling_total['conditional']}, grid branches {tiling_total['grid_branches']}, dimension-semantics "
              f"branches {tiling_total['dims_branches']}")
        for name, r in tiling.items() if args.show_errors else []:
            for key, why in r["wrong"]:
                print(f"    tiling     {key[0]}:{key[1]}  {why}")
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"total scan time for {len(libs)} packages: {total:.2f} s wall, {cpu:.2f} s CPU "
          f"({os.cpu_count()} cores, load average {load:.1f})")
    print(json.dumps({"bench": "kernels_accuracy", "scan_seconds": round(total, 2), "cpu_seconds": round(cpu, 2), **split,
                      "first_shot": manifest.get("first_shot"), "tiling": tiling_total,
                      "packages": {lib["library"]: f"{lib['package']}=={lib['version']}" for lib in libs}}))


if __name__ == "__main__":
    main()
