"""Source ingest against the extractors alone, on the same real files.

    python bench/source_ingest.py [--rounds 7] [--cache DIR]

The files: the test PDFs shipped in pypdf's source distribution (pinned: pypdf 5.1.0, sha256 checked; downloaded
once with ``pip download``) and 20 generated papers (tests/sources/makepdf.py, 6 pages each, with measured numbers
and figure captions, so that claims and concept links have work to do). Per round, interleaved:

- **floor**: what ``tools.sources.extract`` needs from the libraries: pypdf's reader (and the empty-password
  decryption), metadata and outline (with each entry's page number), and pypdfium2's text of every page, for every file;
- **ingest**: ``tools ingest raw/sources`` from scratch in a fresh knowledge base (extraction, claims, figures,
  source pages, concept regions, the catalog, the cache), in-process.

A round runs floor, ingest, ingest, floor (this machine's speed drifts by tens of percent over seconds; the order
cancels a drift within the round). Prints each round, the median ratio ingest / floor (target ≤ 1.5), the ratio
of the fastest rounds, and a final JSON line.
"""

from __future__ import annotations

import argparse
import io
import json
import logging
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests" / "sources"))
import registry_docs  # noqa: E402 - tests/sources: the pinned sdists

SDIST = registry_docs.PYPDF
DEFAULT_CACHE = registry_docs.DEFAULT_CACHE
TARGET = 1.5


def real_pdfs(cache: Path) -> list[tuple[str, bytes]]:
    return [(Path(name).name, data) for name, data in registry_docs.members(registry_docs.PYPDF, (".pdf",), cache)]


def generated_pdfs(n: int = 20) -> list[tuple[str, bytes]]:
    from makepdf import pdf

    out = []
    for i in range(n):
        pages = [[f"Paper {i}: training fast", "Abstract. We measure what each technique buys on accelerators."]]
        for p in range(5):
            pages.append([f"Section {p + 1}",
                          f"Splash attention reaches {300 + 10 * i + p} TFLOP/s on one chip.",
                          f"With remat the step time is {400 + i} ms per step, at {50 + p}.{i}% MFU.",
                          f"Figure {p + 1}: Step time against batch size, run {i}.",
                          "Gradient accumulation over 4 micro-batches gives a 1.3x speedup over the baseline."])
        out.append((f"gen-{i:02d}.pdf", pdf(pages, title=f"Paper {i}", author="A. Author",
                                            outline=[("Abstract", 1), ("Results", 2)])))
    return out


def floor(files: list[tuple[str, bytes]]) -> float:
    import pypdf
    import pypdfium2 as pdfium

    logging.getLogger("pypdf").setLevel(logging.ERROR)
    t = time.perf_counter()
    for _, data in files:
        try:
            reader = pypdf.PdfReader(io.BytesIO(data))
            if reader.is_encrypted and not reader.decrypt(""):  # an empty user password opens, as in the ingest
                continue
            reader.metadata
            try:  # the outline with its page numbers, as the page shows it
                def walk(items):
                    for it in items:
                        walk(it) if isinstance(it, list) else reader.get_destination_page_number(it)
                walk(reader.outline)
            except Exception:  # noqa: BLE001
                pass
            doc = pdfium.PdfDocument(data)
        except Exception:  # noqa: BLE001 - broken files: the ingest skips them too
            continue
        try:
            for i in range(len(doc)):
                doc[i].get_textpage().get_text_range()
        finally:
            doc.close()
    return time.perf_counter() - t


def ingest(files: list[tuple[str, bytes]], base: Path, n: int) -> tuple[float, dict]:
    from tools import scaffold
    from tools.project import Project
    from tools.sources.run import ingest_sources
    from tools.writer import Writer

    root = base / f"kb-{n}"
    scaffold.init(root, site_name="source bench")
    src = root / "raw" / "sources"
    src.mkdir(parents=True, exist_ok=True)
    for name, data in files:
        (src / name).write_bytes(data)
    project = Project(root)
    t = time.perf_counter()
    report = ingest_sources(project, [str(src)], Writer(project.wiki))
    took = time.perf_counter() - t
    shutil.rmtree(root, ignore_errors=True)
    return took, {"documents": report.documents, "read": len(report.ingested), "skipped": len(report.skipped),
                  "claims": report.claims}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--cache", type=Path, default=DEFAULT_CACHE)
    a = ap.parse_args()
    files = real_pdfs(a.cache) + generated_pdfs()
    size = sum(len(d) for _, d in files)
    print(f"{len(files)} PDFs ({size / 1e6:.1f} MB): pypdf {SDIST['version']} test files and 20 generated papers",
          flush=True)
    base = Path(tempfile.mkdtemp(prefix="source-bench-"))
    floor(files), ingest(files, base, 0)  # warm: imports, file cache
    rows = []
    try:
        for r in range(a.rounds):  # A B B A: a drift of the machine's speed within a round cancels
            f1 = floor(files)
            g1, report = ingest(files, base, 2 * r + 1)
            g2, report = ingest(files, base, 2 * r + 2)
            f2 = floor(files)
            f, g = (f1 + f2) / 2, (g1 + g2) / 2
            rows.append({"floor_s": round(f, 3), "ingest_s": round(g, 3), "ratio": round(g / f, 3)})
            print(f"round {r + 1}: extractors {f1:.2f} {f2:.2f} s, ingest {g1:.2f} {g2:.2f} s, ratio {g / f:.2f}  "
                  f"{report}", flush=True)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    ratio = statistics.median(x["ratio"] for x in rows)
    fastest = min(x["ingest_s"] for x in rows) / min(x["floor_s"] for x in rows)
    print(f"median ingest / extractors: {ratio:.2f} (target ≤ {TARGET}); fastest round of each: {fastest:.2f}")
    print(json.dumps({"bench": "source_ingest", "files": len(files), "bytes": size, "rounds": rows,
                      "median_ratio": ratio, "fastest_ratio": round(fastest, 3), "report": report, "target": TARGET, "met": ratio <= TARGET}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
