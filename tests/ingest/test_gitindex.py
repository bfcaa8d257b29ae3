"""Forge links only for files as committed: `.git/index` read directly (real git writes it, versions 2, 3 and 4,
SHA-1 and SHA-256), and an ingest whose tree has local edits, untracked files and a nested repository."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from tools.cli import cli
from tools.gitindex import Tracked, read_index

KERNEL = ("import jax\nfrom jax.experimental import pallas as pl\n\n\ndef _body(x_ref, o_ref):\n"
          "  o_ref[...] = x_ref[...] * 2\n\n\ndef {name}(x):\n  return pl.pallas_call(\n      _body,\n"
          "      out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),\n  )(x)\n")


def git(repo: Path, *args: str) -> str:
    env = dict(os.environ, GIT_AUTHOR_NAME="a", GIT_AUTHOR_EMAIL="a@b", GIT_COMMITTER_NAME="a",
               GIT_COMMITTER_EMAIL="a@b")
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True,
                          env=env).stdout.strip()


@pytest.mark.parametrize("fmt", ["sha1", "sha256"])
def test_every_index_version_git_writes_is_read(tmp_path, fmt):
    repo = tmp_path / "r"
    repo.mkdir()
    git(repo, "init", "-q", f"--object-format={fmt}")
    for i in range(40):  # deep shared prefixes: what version 4 compresses
        (repo / "pkg/sub/deeper").mkdir(parents=True, exist_ok=True)
        (repo / f"pkg/sub/deeper/module_{i:02d}.py").write_text(f"x = {i}\n")
    (repo / "top.py").write_text("y = 1\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "init")
    for version in (2, 3, 4):
        git(repo, "update-index", f"--index-version={version}")
        entries = read_index((repo / ".git/index").read_bytes(), 32 if fmt == "sha256" else 20)
        assert sorted(entries) == sorted(git(repo, "ls-files").split("\n")), version
        t = Tracked(repo)
        assert t("top.py") and t("pkg/sub/deeper/module_39.py") and t("missing.py") is False
    # an edit of the same size whose mtime is put back (cp -p, rsync -a): the content decides
    f = repo / "pkg/sub/deeper/module_07.py"
    st = f.stat()
    f.write_text("x = 8\n")
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))
    (repo / "new.py").write_text("z = 1\n")
    os.utime(repo / "top.py")  # touched, not changed
    t = Tracked(repo)
    assert t("pkg/sub/deeper/module_07.py") is False and t("new.py") is False and t("top.py") is True
    assert Tracked(tmp_path)("anything.py") is None  # not a checkout: not known


def test_an_ingest_links_only_committed_files_to_the_forge(tmp_path):
    root = tmp_path / "kb"
    assert CliRunner().invoke(cli, ["init", str(root)]).exit_code == 0
    repo = root / "raw/code/demo"
    repo.mkdir(parents=True)
    for name in ("scale", "same"):
        (repo / f"{name}.py").write_text(KERNEL.format(name=name))
    git(repo, "init", "-q")
    git(repo, "remote", "add", "origin", "https://github.com/example/demo.git")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "init")
    commit = git(repo, "rev-parse", "HEAD")
    (repo / "scale.py").write_text("# a local note\n# another\n" + KERNEL.format(name="scale"))  # lines moved
    (repo / "extra.py").write_text(KERNEL.format(name="extra"))                                # untracked
    nested = repo / "third_party/vend"
    nested.mkdir(parents=True)
    (nested / "vimpl.py").write_text(KERNEL.format(name="vimpl"))
    git(nested, "init", "-q")
    git(nested, "add", "-A")
    git(nested, "commit", "-qm", "vendored")
    r = CliRunner().invoke(cli, ["--root", str(root), "ingest", "raw/code/demo", "-q"])
    assert r.exit_code == 0, r.output
    text = "\n".join(p.read_text() for p in (root / "wiki/kernels/demo").glob("*.md"))
    links = {k.replace("\\", ""): v for k, v in re.findall(r"\[([\w/\\]+\.py):\d+\]\(([^)]+)\)", text)}
    assert links["same.py"].startswith(f"https://github.com/example/demo/blob/{commit}/same.py#L")
    for rel in ("scale.py", "extra.py", "third_party/vend/vimpl.py"):
        assert links[rel].startswith("../../../raw/code/demo/" + rel + "#L"), (rel, links[rel])
    overview = (root / "wiki/codebases/demo/overview.md").read_text()
    assert "(pinned); 3 files read here differ from it or are not in it" in overview


def test_a_crafted_index_is_refused_at_once():
    """Version 4's path prefix is a varint: a run of 0xFF bytes grew it without end (80 kB took 0.8 s, growing as
    the square). Now a prefix past eight bytes is no index."""
    import struct

    data = b"DIRC" + struct.pack(">II", 4, 1) + b"\0" * 62 + b"\xff" * 80_000 + b"\0x\0"
    with pytest.raises(ValueError, match="too long"):
        read_index(data)
