"""A small repository with the mess real trees have, written into a folder for tests."""

from __future__ import annotations

import json
import os
from pathlib import Path

SHA = "0123456789abcdef0123456789abcdef01234567"


def pallas_kernel(name: str, times: str = "") -> str:
    """A module holding one Pallas kernel, ``name``, launched by ``pl.pallas_call`` (``times``: ``" * 2"``)."""
    return ("from jax.experimental import pallas as pl\n\n\ndef _body(x_ref, o_ref):\n"
            f"    o_ref[...] = x_ref[...]{times}\n\n\ndef {name}(x):\n    return pl.pallas_call(_body, out_shape=x)(x)\n")

FILES = {
    "README.md": "# tinymodel\n\n[![ci](x.svg)](y)\n\nTinymodel is a small Llama-style trainer used to test "
                 "ingest on a messy repository.\n\n```python\nfrom tinymodel.kernels import fused_rms\n```\n",
    "pyproject.toml": '[project]\nname = "tinymodel"\nversion = "0.3.1"\ndescription = "A tiny trainer"\n'
                      'dependencies = ["jax>=0.6"]\n[project.scripts]\ntiny-train = "tinymodel.train:main"\n',
    "tinymodel/__init__.py": '"""Tiny model package."""\nfrom . import layers\n',
    "tinymodel/layers.py": (
        '"""Layers: attention and MLP."""\nimport jax\nfrom jax.sharding import PartitionSpec as P\n'
        "from jax.experimental.shard_map import shard_map\n\n\n"
        "class Attention:\n    \"\"\"Multi-head attention.\"\"\"\n\n    def __call__(self, x):\n"
        "        x = jax.lax.with_sharding_constraint(x, P('data', None))\n        return x\n\n\n"
        "def block(x):\n    \"\"\"One block, rematerialized.\"\"\"\n"
        "    f = jax.checkpoint(lambda y: y, policy=jax.checkpoint_policies.nothing_saveable)\n"
        "    return f(x)\n\n\ndef stack(xs):\n    return jax.lax.scan(lambda c, x: (c, x), 0, xs)\n"
    ),
    "tinymodel/kernels.py": (
        '"""Pallas kernels."""\nimport functools\nimport jax\nfrom jax.experimental import pallas as pl\n'
        "from jax.experimental.pallas import tpu as pltpu\n\n\n"
        "def _rms_kernel(x_ref, o_ref):\n    o_ref[...] = x_ref[...]\n\n\n"
        "def fused_rms(x):\n    \"\"\"Fused RMS norm on TPU.\"\"\"\n    return pl.pallas_call(\n"
        "        _rms_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),\n"
        "        compiler_params=pltpu.CompilerParams(dimension_semantics=('parallel',)),\n    )(x)\n"
    ),
    "tinymodel/train.py": (
        '"""Training entry point."""\nimport os\nfrom tinymodel import layers\nfrom tinymodel.kernels import fused_rms\n\n'
        "os.environ['XLA_FLAGS'] = '--xla_tpu_enable_async_collective_fusion=true'\n\n\n"
        "def main():\n    return layers.block(fused_rms(1))\n\n\nif __name__ == '__main__':\n    main()\n"
    ),
    "tinymodel/util.py": "from tinymodel import layers\nfrom .layers import block\n",
    "configs/base.yml": "remat_policy: full\nscan_layers: true\nici_fsdp_parallelism: 4\n"
                        "libtpu_init_args: --xla_tpu_enable_data_parallel_all_reduce_opt=true\n",
    "scripts/run.sh": "export LIBTPU_INIT_ARGS='--xla_enable_async_all_gather=true'\npython -m tinymodel.train\n",
    "broken/syntax_error.py": "def f(:\n    pass\n",
    "broken/py2.py": "import jax\nprint 'hello'\nx = jax.checkpoint\n",
    "broken/pep695.py": "import jax\ntype Shape = tuple[int, ...]\n\ndef ident[T](x: T) -> T:\n    return jax.lax.scan(x)\n",
    "docs/guide.md": "# Guide\n\n```python\nimport jax\njax.lax.with_sharding_constraint(x, s)\n```\n",
}


def notebook() -> str:
    return json.dumps({"cells": [
        {"cell_type": "markdown", "source": ["# Demo\n", "pallas_call in prose\n"]},
        {"cell_type": "code", "source": ["import jax\n", "%matplotlib inline\n", "y = jax.checkpoint(f)\n"],
         "outputs": [{"output_type": "error", "ename": "E", "evalue": "pallas_call failed",
                      "traceback": ["jax.checkpoint boom"]}]},
    ], "metadata": {}, "nbformat": 4, "nbformat_minor": 5})


def write(root: Path, git: bool = True) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for rel, text in FILES.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    (root / "notebooks").mkdir()
    (root / "notebooks/demo.ipynb").write_text(notebook())
    (root / "broken/latin1.py").write_bytes("# caf\xe9 = 1\nx = 'd\xe9j\xe0'\n".encode("latin-1"))
    (root / "broken/binary.py").write_bytes(b"\x00\x01\x02garbage\x00")
    (root / "broken/huge.py").write_bytes(b"x = 1\n" * 400_000)
    os.symlink("../tinymodel/layers.py", root / "broken/link.py")
    os.symlink("..", root / "broken/loop")
    os.symlink("nowhere.py", root / "broken/dangling.py")
    os.symlink("self_loop", root / "broken/self_loop")
    if git:
        g = root / ".git"
        (g / "refs/heads").mkdir(parents=True)
        (g / "HEAD").write_text("ref: refs/heads/main\n")
        (g / "refs/heads/main").write_text(SHA + "\n")
        (g / "config").write_text('[core]\n\tbare = false\n[remote "origin"]\n\turl = git@github.com:acme/tinymodel.git\n')
    return root
