"""Ctrl-C pressed twice (or SIGINT to the whole process group, as `timeout -s INT` sends it) while the ingest's
worker pool analyses a real tree: the ingest ends within seconds and leaves no worker behind (it used to join
workers waiting on a queue nobody fed, for good)."""

from __future__ import annotations

import inspect
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tools import scaffold


@pytest.mark.slow
@pytest.mark.parametrize("gap", [0.01, 0.2])
def test_a_double_ctrl_c_ends_the_ingest_and_its_workers(tmp_path, gap):
    jax = pytest.importorskip("jax")
    root = tmp_path / "kb"
    scaffold.init(root, site_name="interrupt")
    shutil.copytree(Path(inspect.getfile(jax)).parent, root / "raw/code/jax",
                    ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    # SIGINT as a terminal delivers it: a test worker may ignore it, and Python then ignores it for good
    p = subprocess.Popen([sys.executable, "-m", "tools", "--root", str(root), "ingest", "raw/code/jax", "-q",
                          "-j", "2"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    time.sleep(3.0)  # the pool is analysing files
    assert p.poll() is None, "the ingest ended before it could be interrupted"
    os.killpg(p.pid, signal.SIGINT)
    time.sleep(gap)
    if p.poll() is None:
        os.kill(p.pid, signal.SIGINT)
    try:
        p.wait(timeout=30)
        end = time.monotonic() + 15  # the workers were sent SIGTERM as the ingest ended: give a loaded machine time
        while (left := _group(p.pid)) and time.monotonic() < end:
            time.sleep(0.1)
    finally:
        if left := _group(p.pid):
            os.killpg(p.pid, signal.SIGKILL)
    assert p.returncode != 0 and left == [], left


def _group(pgid: int) -> list[str]:
    """The live processes of the group (zombies are dead: their parent is gone and init reaps them)."""
    out = subprocess.run(["ps", "-o", "pid=,stat=", "-g", str(pgid)], capture_output=True, text=True).stdout
    return [ln.split()[0] for ln in out.splitlines() if ln.split() and not ln.split()[1].startswith("Z")]
