"""Pure readers under ingest: README summaries, git metadata, module names, concept detection."""

from __future__ import annotations


import pytest

from tools import gitinfo
from tools.ingest import analyze, pyfacts
from tools.ingest.metadata import package_metadata, readme_summary

README = """<!-- badges -->
[![Tests](https://x/badge.svg)](https://x) ![PyPI](https://pypi/x.svg)

[**Documentation**](https://docs) | [**Release Notes**](notes.md)

> **_NOTE:_** use the latest release.

# MaxTiny

MaxTiny is a **high performance**, highly scalable [LLM](https://jax) library written in pure Python/JAX.

```bash
pip install maxtiny
```
"""


def test_readme_summary_keeps_prose_only():
    assert readme_summary(README) == ("MaxTiny is a high performance, highly scalable LLM library written "
                                      "in pure Python/JAX.")


def test_package_metadata_from_setup_py_without_running_it(tmp_path):
    (tmp_path / "setup.py").write_text(
        "import os\nfrom setuptools import setup\nos.system('touch pwned')\n"
        "setup(name='old', version='1.0', description='legacy', "
        "entry_points={'console_scripts': ['old-train = old.train:main']}, install_requires=['jax'])\n")
    meta = package_metadata(tmp_path)
    assert meta["name"] == "old" and meta["scripts"] == {"old-train": "old.train:main"}
    assert meta["dependencies"] == ["jax"]
    assert not (tmp_path / "pwned").exists()


def test_a_latin1_readme_reads_as_written(tmp_path):
    """A README saved as Windows-1252/Latin-1, as older repositories' are: `Café`, not `Caf\ufffd`."""
    (tmp_path / "README.md").write_bytes("# Café kernels\n\nFast naïve attention kernels for the café of JAX on "
                                         "TPU and GPU, written in Pallas “by hand” © 2024.\n".encode("cp1252"))
    assert package_metadata(tmp_path)["summary"] == ("Fast naïve attention kernels for the café of JAX on TPU and "
                                                     "GPU, written in Pallas “by hand” © 2024.")
    # a UTF-8 README with one stray Latin-1 byte keeps its UTF-8: only that byte is replaced
    (tmp_path / "README.md").write_bytes("Fast naïve attention kernels for the café of JAX on TPU and GPU, written "
                                         "in Pallas — by hand\n".encode() + b"caf\xe9\n")
    assert package_metadata(tmp_path)["summary"].startswith("Fast naïve attention kernels for the café of JAX")


@pytest.mark.parametrize("remote, web", [
    ("git@github.com:acme/repo.git", "https://github.com/acme/repo"),
    ("https://github.com/acme/repo", "https://github.com/acme/repo"),
    ("https://user:tok@github.com/acme/repo.git/", "https://github.com/acme/repo"),
    ("ssh://git@gitlab.com/group/sub/repo.git", "https://gitlab.com/group/sub/repo"),
    ("https://example.org/repo.git", None),
])
def test_web_url(remote, web):
    assert gitinfo.web_url(remote) == web


def test_git_info_from_packed_refs_and_worktree_file(tmp_path):
    main = tmp_path / "main"
    (main / ".git").mkdir(parents=True)
    sha = "a" * 40
    (main / ".git/HEAD").write_text("ref: refs/heads/dev\n")
    (main / ".git/packed-refs").write_text(f"# pack-refs\n{sha} refs/heads/dev\n")
    (main / ".git/config").write_text('[remote "upstream"]\n\turl = https://github.com/a/b\n')
    info = gitinfo.read(main)
    assert info.commit == sha and info.blob_url("x.py", 3) == f"https://github.com/a/b/blob/{sha}/x.py#L3"
    wt = tmp_path / "wt"
    wt.mkdir()
    (wt / ".git").write_text(f"gitdir: {main / '.git'}\n")
    assert gitinfo.head_commit(wt) == sha
    assert gitinfo.read(tmp_path).commit is None


def test_import_names():
    packages = {"jax", "jax/experimental", "src/pkg", "src/pkg/sub"}
    assert analyze.import_name("jax/experimental/x.py", packages) == "jax.experimental.x"
    assert analyze.import_name("jax/__init__.py", packages) == "jax"
    assert analyze.import_name("src/pkg/sub/m.py", packages) == "pkg.sub.m"
    assert analyze.import_name("bench/train.py", packages) == "bench.train"
    assert analyze.import_name("ops/x.py", {"", "ops"}, "pallas") == "pallas.ops.x"


def surfaces(src: str) -> set[tuple[str, str]]:
    return {(c, label) for c, _, label in pyfacts.python_facts("m.py", src.encode())["surfaces"]}


def test_concepts_follow_imports_not_spelling():
    found = surfaces(
        "import jax\nimport orbax.checkpoint as ocp\nfrom flax import nnx\n"
        "from jax.sharding import PartitionSpec as P\n"
        "mgr = ocp.CheckpointManager\nsave = ocp.checkpoint\n"
        "f = jax.checkpoint(g, policy=jax.checkpoint_policies.nothing_saveable)\n"
        "y = nnx.scan(body)\nspec = P('data')\n"
        "def checkpoint(x):\n    '''jax.checkpoint in a docstring is prose'''\n"
        "flags = '--xla_tpu_enable_async_collective_fusion=true'\n")
    assert ("rematerialization", "jax.checkpoint") in found
    assert ("rematerialization", "jax.checkpoint_policies.nothing_saveable") in found
    assert not any(label.startswith("orbax") for _, label in found)
    assert ("scan-over-layers", "flax.nnx.scan") in found
    assert ("sharding", "jax.sharding.PartitionSpec") in found
    assert ("xla-flags", "--xla_tpu_enable_async_collective_fusion=true") in found  # the flag with its value


def test_paged_attention_by_config_string_and_prefixed_kernel_name():
    found = surfaces(
        "from tpu_inference.attention_interface import sharded_ragged_paged_attention as rpa\n"
        "def f(config, q):\n"
        "    if config.attention == 'paged':\n"
        "        return rpa(q)\n")
    assert ("paged-attention", "paged") in found
    assert any(c == "paged-attention" and "sharded_ragged_paged_attention" in label for c, label in found), found


def test_flags_in_a_multi_line_string_point_at_their_own_line():
    src = ('FLAGS = (\n'
           '    " --xla_tpu_enable_async_collective_fusion=true"\n'
           '    " --xla_enable_async_all_gather=true"\n'
           ')\n'
           'DOC = """\n--xla_dump_to=/tmp/x\n"""\n')
    lines = {label: line for c, line, label in pyfacts.python_facts("m.py", src.encode())["surfaces"]
             if c == "xla-flags"}
    assert lines == {"--xla_tpu_enable_async_collective_fusion=true": 2, "--xla_enable_async_all_gather=true": 3,
                     "--xla_dump_to=/tmp/x": 6}


def test_notebook_magics_inside_blocks_keep_the_cell_parseable():
    import json

    nb = json.dumps({"cells": [{"cell_type": "code", "source": [
        "import jax\n", "if IN_COLAB:\n", "    !pip install maxtext\n", "    %cd /content\n",
        "f = jax.checkpoint(g)\n"]}]})
    facts = pyfacts.python_facts("demo.ipynb", nb.encode())
    assert not facts["errors"] and not facts.get("partial")
    assert ("rematerialization", 5, "jax.checkpoint") in {tuple(h) for h in facts["surfaces"]}


def test_yaml_aliases_do_not_blow_up_a_setting():
    """A "billion laughs" config: nine levels of nine aliases, 9^9 elements once expanded, in 700 bytes."""
    from tools.ingest import yaml_settings

    text = "a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n"
    for n in range(8):
        prev, cur = chr(97 + n), chr(98 + n)
        text += f"{cur}: &{cur} [{', '.join(['*' + prev] * 9)}]\n"
    text += "bomb:\n  - *i\n  - *i\n"
    got = {s["key"]: s for s in yaml_settings.settings(text)}
    assert len(got["bomb"]["value"]) == yaml_settings.MAX_VALUE_CHARS and got["bomb"]["value"].endswith("…")
    assert got["bomb"]["value"].startswith("[[[[[[[[[['lol', 'lol'")
