"""Python 3.12+ syntax is read the same way on every supported Python (tools.downlevel + ast)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tools import downlevel, pysource
from tools.ingest import pyfacts

MODERN = '''"""A module only Python 3.12+ parses."""
import jax
from jax.experimental import pallas as pl

type Shape[T] = tuple[T, ...]
type Mesh = dict[str, int]


def remat_policy[T](x: T, name: str) -> T:
    """Where the remat policy is chosen."""
    msg = f"{name["policy"]!r}: {x:{width:{0}}}"
    return jax.checkpoint(lambda y: y, policy=jax.checkpoint_policies.nothing_saveable)(x)


class Attention[K, V](object):
    """Attention with type parameters."""

    def __call__(self, q):
        label = f"{"nested " + f'{q!s  }'}"
        return pl.pallas_call(self.kernel, out_shape=q)(q)


def scan_layers(xs):
    return jax.lax.scan(lambda c, x: (c, x), 0, xs)
'''


def test_modern_syntax_parses_whole_with_lines_kept():
    out = downlevel.rewrite(MODERN)
    assert out.count("\n") == MODERN.count("\n")
    parsed = pysource.parse(pysource.Snippet(MODERN))
    assert parsed.tree is not None and parsed.repaired_lines == [] and parsed.error is None
    facts = pyfacts.python_facts("pkg/modern.py", MODERN.encode())
    names = {s[0] for s in facts["symbols"]}
    assert {"remat_policy", "Attention", "Attention.__call__", "scan_layers"} <= names
    lines = {s[0]: s[2] for s in facts["symbols"]}
    assert lines["remat_policy"] == 9 and lines["scan_layers"] == 23  # file:line links stay true
    concepts = {c for c, _, _ in facts["surfaces"]}
    assert {"rematerialization", "scan-over-layers"} <= concepts
    assert facts["errors"] == [] and not facts.get("partial")


def test_code_every_python_reads_is_unchanged():
    plain = "import jax\n\n\ndef f(x, type=1):\n    type = x\n    return f'{x}' + f\"{type:>4}\"\n"
    assert downlevel.rewrite(plain) == plain


NEWER = [p for p in (os.environ.get("NEWER_PYTHON"), shutil.which("python3.13"), shutil.which("python3.12"),
                     "/root/.pyenv/versions/3.13.0/bin/python3.13") if p and Path(p).exists()]


@pytest.mark.skipif(not NEWER, reason="no Python 3.12+ on this machine")
def test_facts_are_identical_under_a_newer_python(tmp_path):
    """The reader's facts for 3.12+ code under this Python equal those under 3.12+ (its ast, our rewrite):
    the rewrite, not the interpreter, decides what is read."""
    newer = NEWER[0]
    probe = subprocess.run([newer, "-c", "import tree_sitter, tree_sitter_python, yaml"], capture_output=True)
    if probe.returncode:
        pytest.skip(f"{newer} lacks tree-sitter or PyYAML")
    (tmp_path / "modern.py").write_text(MODERN)
    code = ("import json, sys; sys.path.insert(0, %r); from tools.ingest import pyfacts; "
            "print(json.dumps(pyfacts.python_facts('pkg/modern.py', open(%r, 'rb').read())))"
            % (str(Path(__file__).resolve().parents[2]), str(tmp_path / "modern.py")))
    r = subprocess.run([newer, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    ours = json.loads(json.dumps(pyfacts.python_facts("pkg/modern.py", MODERN.encode())))
    assert json.loads(r.stdout) == ours
    v = subprocess.run([newer, "-c", "import sys; print(sys.version_info >= (3, 12))"], capture_output=True, text=True)
    assert v.stdout.strip() == "True" or sys.version_info >= (3, 12)
