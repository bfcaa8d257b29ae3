"""Concurrent writers lose nothing: 24 ingests at once keep every repo's concept regions, and an editor appending
to pages while `tools lint --fix` rewrites them keeps every line; a killed writer's temp files are swept."""

from __future__ import annotations

import pytest

import os
import random
import subprocess
import sys
import threading
import time
from pathlib import Path

from .conftest import tools

N_REPOS = 24
# Each repo shows two concepts (remat, a scan over layers) in code, so every one of them owns a region on both concept pages.
CODE = '"""Repo {i}."""\nimport jax\n\n\ndef f{i}(x):\n    y = jax.checkpoint(lambda z: z)(x)\n' \
       '    return jax.lax.scan(lambda layer, v: (layer, v), 0, y)\n'


@pytest.mark.slow
def test_concurrent_ingests_keep_every_concept_region(tmp_path):
    root = tmp_path / "kb"
    assert tools(root, "init", str(root)).returncode == 0
    for i in range(N_REPOS):
        d = root / f"raw/code/r{i:02d}"
        d.mkdir(parents=True)
        (d / f"m{i}.py").write_text(CODE.format(i=i))
    procs = [subprocess.Popen([sys.executable, "-m", "tools", "--root", str(root), "ingest", f"raw/code/r{i:02d}",
                               "-q"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for i in range(N_REPOS)]
    for p in procs:
        out, err = p.communicate(timeout=600)
        assert p.returncode == 0, err
    for concept in ("rematerialization", "scan-over-layers"):
        text = (root / f"wiki/concepts/{concept}.md").read_text()
        missing = [i for i in range(N_REPOS) if f"tools:begin appears-r{i:02d} " not in text]
        assert not missing, f"{concept}: regions lost for repos {missing}"
    # The index was rebuilt from a scan taken under the lock: its counts are true, so lint finds no drift.
    lint = tools(root, "lint", "--json")
    assert '"index-drift"' not in lint.stdout, lint.stdout[-2000:]


def _pages_to_fix(wiki: Path, n: int) -> list[Path]:
    out = []
    for i in range(n):
        p = wiki / "analyses" / f"n{i:03d}.md"
        p.parent.mkdir(parents=True, exist_ok=True)
        # No frontmatter (fixable) and a [[wikilink]] to the next page (fixable): both fixes rewrite the page.
        p.write_text(f"# Note {i}\n\nSee [[n{(i + 1) % n:03d}]].\n")
        out.append(p)
    return out


def test_edit_saved_during_lint_fix_is_kept(tmp_path):
    root = tmp_path / "kb"
    assert tools(root, "init", str(root)).returncode == 0
    pages = _pages_to_fix(root / "wiki", 300)
    appended: dict[Path, list[str]] = {p: [] for p in pages}
    stop = threading.Event()

    def editor():
        rnd = random.Random(7)
        k = 0
        while not stop.is_set():
            p = rnd.choice(pages)
            line = f"edit {k} saved by hand"
            with open(p, "a", encoding="utf-8") as f:
                f.write(line + "\n")
            appended[p].append(line)
            k += 1
            time.sleep(0.002)

    t = threading.Thread(target=editor)
    t.start()
    try:
        r = tools(root, "lint", "--fix")
    finally:
        stop.set()
        t.join()
    assert "Traceback" not in r.stderr, r.stderr
    total = sum(len(v) for v in appended.values())
    assert total > 20  # the editor really raced the fixer
    lost = [(p.name, line) for p, lines in appended.items() for line in lines if line not in p.read_text()]
    assert not lost, f"{len(lost)} of {total} edits lost: {lost[:5]}"
    fixed = sum(1 for p in pages if p.read_text().startswith("---\n"))
    assert fixed > len(pages) // 2, fixed  # and the fixes were applied


def test_killed_writer_temp_files_are_swept(tmp_path):
    root = tmp_path / "kb"
    assert tools(root, "init", str(root)).returncode == 0
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale = root / f"wiki/concepts/.remat.md.{dead.pid}.abc123.tmp"
    stale.parent.mkdir(parents=True, exist_ok=True)
    stale.write_text("half a page")
    live = root / f"wiki/.index.md.{os.getpid()}.xyz789.tmp"  # this process is alive: not its to remove
    live.write_text("in flight")
    assert tools(root, "index").returncode == 0
    assert not stale.exists()
    assert live.exists()


def _children(pid: int) -> set[int]:
    out = set()
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                fields = (p / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                out.add(int(p.name))
    return out


def test_parser_workers_die_with_a_killed_ingest(tmp_path):
    root = tmp_path / "kb"
    assert tools(root, "init", str(root)).returncode == 0
    tree = root / "raw/code/big"
    body = "".join(f"def f{j}(x):\n    return jax.checkpoint(lambda y: y + {j})(x)\n\n\n" for j in range(300))
    for i in range(1500):
        p = tree / f"pkg{i % 30}" / f"m{i}.py"
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text("import jax\n\n\n" + body)
    proc = subprocess.Popen([sys.executable, "-m", "tools", "--root", str(root), "ingest", "raw/code/big", "-j", "2",
                             "-q"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    workers: set[int] = set()
    for _ in range(600):
        workers = _children(proc.pid)
        if len(workers) >= 2 or proc.poll() is not None:
            break
        time.sleep(0.05)
    assert proc.poll() is None and workers, "the ingest finished before its workers could be seen"
    proc.kill()
    proc.wait()
    for _ in range(100):
        alive = {w for w in workers if Path(f"/proc/{w}").exists()
                 and "Z" not in Path(f"/proc/{w}/stat").read_text().rsplit(")", 1)[1].split()[0]}
        if not alive:
            break
        time.sleep(0.1)
    assert not alive, f"workers outlived their killed parent: {alive}"


def test_a_worker_whose_pool_maker_died_first_ends_even_under_a_subreaper():
    """The worker checked its parent's death by `getppid() == 1`: under a subreaper (tini -s, systemd --user, a
    command of `tools exp run`) the orphan's new parent is not pid 1, and a worker that lost the race lived on."""
    code = ("import os, sys; from tools import safeio; safeio.die_with_parent(int(sys.argv[1])); "
            "print('alive')")
    reaped = subprocess.run([sys.executable, "-c", code, str(os.getpid() + 1_000_000)], capture_output=True,
                            text=True, timeout=60)  # its parent is not the pool maker it was given: the maker died
    assert reaped.returncode == 1 and "alive" not in reaped.stdout, reaped
    kept = subprocess.run([sys.executable, "-c", code, str(os.getpid())], capture_output=True, text=True, timeout=60)
    assert kept.returncode == 0 and "alive" in kept.stdout, kept
    # asking which start method pools use does not choose it for the process (a plugin may still set its own)
    code = ("import multiprocessing as mp, os; from tools import safeio; print(safeio.pool_parent() == (os.getpid(),));"
            " mp.set_start_method('spawn'); print(safeio.pool_parent())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.split() == ["True", "()"], out
