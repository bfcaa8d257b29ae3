"""Ingest speed on a large real tree against a floor measured in the same run.

Floor: read and ast.parse every .py file of the tree in one process.
Targets (issue 2): first ingest <= 3x floor; unchanged re-ingest <= 0.3x first ingest.

    python bench/ingest_bench.py            # the whole installed jax package
    python bench/ingest_bench.py PATH       # any checkout (e.g. a maxtext clone)
"""

from __future__ import annotations

import ast
import shutil
import sys
import tempfile
import time
import warnings
from pathlib import Path

from tools.ingest.run import ingest_repo, rebuild_index
from tools.project import Project
from tools.writer import Writer


def floor(tree: Path) -> tuple[float, int]:
    t = time.perf_counter()
    n = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for p in tree.rglob("*.py"):
            if p.is_symlink():
                continue
            try:
                ast.parse(p.read_bytes())
            except (SyntaxError, ValueError):
                pass
            n += 1
    return time.perf_counter() - t, n


def run_ingest(project: Project, jobs: int = 0) -> tuple[float, object]:
    t = time.perf_counter()
    writer = Writer(project.wiki)
    report = ingest_repo(project, "raw/code/tree", writer, jobs=jobs)
    rebuild_index(project, writer)
    return time.perf_counter() - t, report


def main() -> None:
    if len(sys.argv) > 1:
        src = Path(sys.argv[1]).resolve()
    else:
        import jax
        src = Path(jax.__file__).parent
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "wiki").mkdir()
        dest = root / "raw/code/tree" / src.name
        shutil.copytree(src, dest, symlinks=True, ignore=shutil.ignore_patterns("__pycache__"))
        project = Project(root)
        fl, n = floor(dest)
        fl2, _ = floor(dest)  # warm cache for both
        fl = min(fl, fl2)
        first, rep = run_ingest(project)
        again, rep2 = run_ingest(project)
        shutil.rmtree(root / ".tools-cache")
        shutil.rmtree(root / "wiki")
        (root / "wiki").mkdir()
        single, _ = run_ingest(project, jobs=1)
    print(f"tree: {src} ({n} .py files, {rep.files_scanned} files read, {rep.kernels} kernels)")
    print(f"floor (read + ast.parse, 1 process): {fl:6.2f} s")
    print(f"first ingest (auto jobs):            {first:6.2f} s   {first / fl:4.2f}x floor   (target <= 3x)")
    print(f"first ingest (1 process):            {single:6.2f} s   {single / fl:4.2f}x floor")
    print(f"unchanged re-ingest:                 {again:6.2f} s   {again / first:4.2f}x first (target <= 0.3x); "
          f"{rep2.created + rep2.updated} pages written")


if __name__ == "__main__":
    main()
