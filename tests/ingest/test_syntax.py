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


MULTILINE = '''import jax


def cast_qkv[
    Q: (jax.Array, QArray),
    K: (jax.Array, QArray),
    V: (jax.Array, QArray),
](q: Q, k: K, v: V) -> tuple[Q, K, V]:
    return jax.checkpoint(lambda x: x)(q), k, v


class Cache[
    T: (int, str),
]:
    def get(self) -> T: ...


class Paged[K](
    Cache,
):
    pass
'''


def test_type_parameters_over_several_lines_keep_the_def_and_its_lines():
    # tokamax's pallas_mosaic_gpu_common.py (PEP 695 constrained type parameters, one per line) was lost under 3.11
    out = downlevel.rewrite(MULTILINE)
    assert out.count("\n") == MULTILINE.count("\n")
    parsed = pysource.parse(pysource.Snippet(MULTILINE))
    assert parsed.tree is not None and parsed.repaired_lines == [] and parsed.error is None
    facts = pyfacts.python_facts("ops/pallas_mosaic_gpu_common.py", MULTILINE.encode())
    lines = {s[0]: s[2] for s in facts["symbols"]}
    assert lines["cast_qkv"] == 4 and lines["Cache"] == 12 and lines["Cache.get"] == 15 and lines["Paged"] == 18
    assert "rematerialization" in {c for c, _, _ in facts["surfaces"]}
    assert facts["errors"] == [] and not facts.get("partial")


def test_code_every_python_reads_is_unchanged():
    plain = "import jax\n\n\ndef f(x, type=1):\n    type = x\n    return f'{x}' + f\"{type:>4}\"\n"
    assert downlevel.rewrite(plain) == plain


def _runs(python: str) -> bool:  # a pyenv shim exists but fails when that version is not selected
    try:
        return subprocess.run([python, "-c", "import sys; assert sys.version_info >= (3, 12)"],
                              capture_output=True, timeout=60).returncode == 0
    except OSError:
        return False


NEWER = [p for p in (os.environ.get("NEWER_PYTHON"), shutil.which("python3.13"), shutil.which("python3.12"),
                     *sorted(map(str, Path.home().glob(".pyenv/versions/3.1[2-9]*/bin/python3.1[2-9]")), reverse=True))
         if p and Path(p).exists() and _runs(p)]


def _with_reader_deps(newer: str) -> str:
    """``newer`` if it can import what the reader needs, else a venv of it (cached) with the same versions of
    tree-sitter, tree-sitter-python and PyYAML as this interpreter's, installed from the registry once."""
    need = "import tree_sitter, tree_sitter_python, yaml"
    if subprocess.run([newer, "-c", need], capture_output=True).returncode == 0:
        return newer
    from importlib.metadata import version

    tag = subprocess.run([newer, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"], capture_output=True,
                         text=True).stdout.strip()
    cache = Path(os.environ.get("AUTORESEARCH_TEST_DATA") or Path.home() / ".cache/autoresearch-wiki")
    venv = cache / f"py{tag}-reader-venv"
    python = venv / "bin" / "python"
    pins = [f"{d}=={version(d)}" for d in ("tree-sitter", "tree-sitter-python", "PyYAML")]
    if not python.exists() or subprocess.run([str(python), "-c", need], capture_output=True).returncode != 0:
        made = subprocess.run([newer, "-m", "venv", "--clear", str(venv)], capture_output=True, text=True)
        got = made.returncode == 0 and subprocess.run(
            [str(python), "-m", "pip", "install", "-q", *pins], capture_output=True, text=True, timeout=600)
        if not got or got.returncode != 0:
            if os.environ.get("CI"):
                raise AssertionError(f"could not install {pins} for {newer}: {(got or made).stderr[-800:]}")
            pytest.skip(f"{newer} lacks tree-sitter or PyYAML and they could not be installed")
    return str(python)


@pytest.mark.skipif(not NEWER, reason="no Python 3.12+ on this machine")
def test_facts_are_identical_under_a_newer_python(tmp_path):
    """The reader's facts for 3.12+ code under this Python equal those under 3.12+ (its ast, our rewrite):
    the rewrite, not the interpreter, decides what is read."""
    newer = _with_reader_deps(NEWER[0])
    for text in (MODERN, MULTILINE):
        (tmp_path / "modern.py").write_text(text)
        code = ("import json, sys; sys.path.insert(0, %r); from tools.ingest import pyfacts; "
                "print(json.dumps(pyfacts.python_facts('pkg/modern.py', open(%r, 'rb').read())))"
                % (str(Path(__file__).resolve().parents[2]), str(tmp_path / "modern.py")))
        r = subprocess.run([newer, "-c", code], capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        ours = json.loads(json.dumps(pyfacts.python_facts("pkg/modern.py", text.encode())))
        assert json.loads(r.stdout) == ours
    v = subprocess.run([newer, "-c", "import sys; print(sys.version_info >= (3, 12))"], capture_output=True, text=True)
    assert v.stdout.strip() == "True" or sys.version_info >= (3, 12)


REPAIRABLE = {  # what real trees hold that used to drop the whole file, and the definitions to keep from each
    "a block whose body was commented out":
        "DEBUG = False\ndef scale(x):\n  if DEBUG:\n    # print(x)\n  return x * 2\n\ndef after():\n  pass\n",
    "a body-less block with a comment on its opener":
        "def scale(x):\n  if x:  # note: 'y'\n    # gone\n  return 1\n\ndef after():\n  pass\n",
    "Python 2's except X, e":
        "def scale():\n  try:\n    g()\n  except OSError, e:\n    print e\n  return 1\n\ndef after():\n  pass\n",
    "tabs mixed with spaces":
        "def scale():\n        x = 1\n\treturn x\n\ndef after():\n    pass\n",
    "a merge's conflict markers":
        "def scale():\n    x = 1\n<<<<<<< HEAD\n    y = 2\n=======\n    y = 3\n>>>>>>> branch\n    return y\n\n"
        "def after():\n    pass\n",
    "a line dedented to no outer level":
        "def scale():\n    if x:\n        a = 1\n      b = 2\n    return b\n\ndef after():\n    pass\n",
}


@pytest.mark.parametrize("what", list(REPAIRABLE))
def test_a_file_with_a_common_syntax_error_keeps_its_definitions(what):
    """Each of these skipped its whole file (and every kernel in it): blanking the blamed line cannot help when
    the problem is the line before it, or the file's indentation."""
    parsed = pysource.parse(pysource.Snippet(REPAIRABLE[what]))
    assert parsed.tree is not None, (what, parsed.error)
    assert [n.name for n in parsed.tree.body if hasattr(n, "name")] == ["scale", "after"], what
    assert parsed.repaired_lines, what


def test_a_python_2_module_of_many_prints_is_read_whole():
    """More statements to set aside than the old cap of 25, in a small file."""
    src = "def main():\n" + "".join(f"    print 'step {i}'\n" for i in range(60)) + "\ndef after():\n    pass\n"
    parsed = pysource.parse(pysource.Snippet(src))
    assert parsed.tree is not None and len(parsed.repaired_lines) == 60


def test_definitions_under_module_level_if_and_try_are_symbols():
    """typing_extensions defines nearly everything under `if hasattr(typing, ...):` / `else:` and `try:`; only its
    28 unconditional definitions reached symbols.tsv. The first definition of a name is the one listed."""
    import typing_extensions

    facts = pyfacts.python_facts("typing_extensions.py", Path(typing_extensions.__file__).read_bytes())
    names = [s[0] for s in facts["symbols"]]
    assert {"deprecated", "TypeAliasType", "Protocol", "TypedDict", "override", "get_original_bases"} <= set(names)
    assert len(names) == len(set(names)) and len(names) > 150
    src = ("import sys\nif sys.version_info >= (3, 12):\n    def fast(): 'new'\nelse:\n    def fast(): 'old'\n"
           "try:\n    from x import y\nexcept ImportError:\n    def y(): pass\n"
           "for i in range(2):\n    def loop(): pass\n"
           "class A:\n    if True:\n        def m(self): pass\n")
    got = [s[:3] for s in pyfacts.python_facts("m.py", src.encode())["symbols"]]
    assert got == [["fast", "function", 3], ["y", "function", 9], ["A", "class", 12], ["A.m", "method", 14]]
