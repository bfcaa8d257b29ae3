"""Kernel pages answer tiling questions: the body function with its line, block shapes built above the launch
(spec lists, named specs, branches, subclasses, helpers), every branch of a grid or of dimension_semantics, and
where the names in the block shapes get their values. Fixtures for each shape, then JAX's own Pallas ops (the
installed package: real code nobody here wrote)."""

from __future__ import annotations

from pathlib import Path

import jax
import pytest

from tests.kernels.helpers import line_of, scan, src
from tools.kernels import pages
from tools.kernels import scan as kscan

BODY = """
def _body(x_ref, o_ref):
  o_ref[...] = x_ref[...]
"""


def test_specs_built_above_the_call_in_branches_with_their_conditions():
    text = src(BODY + """
class RowSpec(pl.BlockSpec):
  pass

def _out_spec(bm):
  return pl.BlockSpec((bm, 128), lambda i: (i, 0))

def launch(x, transpose: bool, block_sizes):
  bm = block_sizes.block_m
  x_spec = pl.BlockSpec((bm, 256), lambda i: (i, 0))
  if transpose:
    w_spec = pl.BlockSpec((256, bm), lambda i: (0, i))
  else:
    w_spec = pl.BlockSpec((bm, 256), lambda i: (i, 0))
  in_specs = [x_spec, w_spec, RowSpec((1, bm), lambda i: (0, i))]
  dims: tuple[str, ...]
  if x.ndim == 3:
    grid = (4, 2)
    dims = ("parallel", "arbitrary")
  elif x.ndim == 2:
    grid = (4,)
    dims = ("parallel",)
  else:
    grid = (1,)
    dims = ("arbitrary",)
  kernel = functools.partial(_body)
  return pl.pallas_call(
      kernel, out_shape=x, grid=grid, in_specs=in_specs, out_specs=_out_spec(bm),
      compiler_params=pltpu.CompilerParams(dimension_semantics=dims),
  )(x)
""")
    (site,) = scan({"pkg/ops/k.py": text})
    assert (site.body_function, site.body_at) == ("_body", f"pkg/ops/k.py:{line_of(text, 'def _body(')}")
    assert site.block_shapes == ["(bm, 256)", "(256, bm)", "(1, bm)", "(bm, 128)"]
    assert ["(256, bm)", "transpose"] in site.branches["block_shapes"]
    assert ["(bm, 256)", "not (transpose)"] in site.branches["block_shapes"]
    assert site.branches["grid"] == [["(4, 2)", "x.ndim == 3"], ["(4,)", "x.ndim == 2"], ["(1,)", "otherwise"]]
    assert site.grid == "(4, 2)"  # not the name, not only the last branch
    # dims is annotated first, assigned after: the annotation does not stop the lookup
    assert site.branches["dimension_semantics"][0] == ["('parallel', 'arbitrary')", "x.ndim == 3"]
    assert ["bm", "block_sizes.block_m", ""] in site.block_sources

    page = pages.kernel_pages([site], "repo", None, lambda p, n: f"src/{p}#L{n}")[0].body
    assert f"`_body` at [pkg/ops/k.py:{line_of(text, 'def _body(')}]" in page
    assert "`(4,)` if `x.ndim == 2`<br>`(1,)` otherwise" in page
    assert "`(256, bm)` if `transpose`" in page
    assert "- `bm`: `block_sizes.block_m`" in page


def test_parameters_followed_to_what_the_file_passes_and_knobs_linked():
    text = src(BODY + """
class BlockSizes:
  block_q: int = 128

def _impl(x, block_q, tiling=(8, 128)):
  tm, tn = tiling
  return pl.pallas_call(
      _body, out_shape=x, in_specs=[pl.BlockSpec((block_q, tm, tn), lambda i: (i, 0, 0))],
  )(x)

def attention(x, config):
  return _impl(x, config.sa_block_q)
""")
    (site,) = scan({"pkg/ops/a.py": text})
    call = line_of(text, "return _impl(")
    assert ["block_q", "config.sa_block_q", f"pkg/ops/a.py:{call}"] in site.block_sources
    assert ["tm", "parameter tiling of _impl, default (8, 128)", ""] in site.block_sources
    assert ["BlockSizes", "block-size class", f"pkg/ops/a.py:{line_of(text, 'class BlockSizes')}"] in \
        site.block_sources
    page = pages.kernel_pages([site], "repo", None, lambda p, n: f"src/{p}#L{n}",
                              {"sa_block_q": "configs/base.yml#L7"})[0].body
    assert "(knob [`sa_block_q`](configs/base.yml#L7))" in page


def test_a_body_imported_from_another_file_is_found_there():
    body = src(BODY)
    launch = src("""
from pkg.ops.bodies import _body

def run(x):
  return pl.pallas_call(_body, out_shape=x)(x)
""")
    (site,) = scan({"pkg/ops/bodies.py": body, "pkg/ops/run.py": launch})
    assert site.body_at == f"pkg/ops/bodies.py:{line_of(body, 'def _body(')}"


JAX_OPS = Path(jax.__file__).parent / "experimental" / "pallas" / "ops"


@pytest.fixture(scope="module")
def jax_sites():
    if not (JAX_OPS / "tpu" / "flash_attention.py").exists():
        pytest.skip("this jax has no Pallas ops")
    return {(s.path, s.line): s for s in kscan.resolve(kscan.scan_facts(JAX_OPS))}


def _site(sites, path: str):
    return [s for (p, _), s in sorted(sites.items()) if p == path]


def _def_line(path: str, name: str) -> int:
    lines = (JAX_OPS / path).read_text().split("\n")
    return next(i + 1 for i, ln in enumerate(lines) if ln.lstrip().startswith(f"def {name}("))


def test_jax_flash_attention_specs_lists_and_body(jax_sites):
    fwd = _site(jax_sites, "tpu/flash_attention.py")[0]
    text = (JAX_OPS / "tpu/flash_attention.py").read_text().split("\n")
    assert "BlockSpec" not in text[fwd.line - 1]  # the specs are built above the call, in named lists
    assert fwd.body_function == "_flash_attention_kernel"
    assert fwd.body_at == f"tpu/flash_attention.py:{_def_line('tpu/flash_attention.py', '_flash_attention_kernel')}"
    assert "(block_b, 1, block_q, head_dim)" in fwd.block_shapes
    assert "(block_b, 1, block_k_major, head_dim)" in fwd.block_shapes
    assert any(when == "ab is not None" for _, when in fwd.branches["block_shapes"])
    assert any(name == "block_q" and source == "block_sizes.block_q" for name, source, _ in fwd.block_sources)
    # every TPU launch in jax's ops shows where its body is
    tpu = [s for (p, _), s in jax_sites.items() if p.startswith("tpu/")]
    assert tpu and all(s.body_at for s in tpu)


def test_jax_gmm_rhs_spec_in_both_branches_and_paged_attention_semantics(jax_sites):
    (gmm, tgmm) = _site(jax_sites, "tpu/megablox/gmm.py")
    shapes = {tuple(x) for x in gmm.branches["block_shapes"]}
    assert ("(None, tn, tk)", "transpose_rhs") in shapes and ("(None, tk, tn)", "not (transpose_rhs)") in shapes
    assert ["tm", "parameter tiling of gmm, default (128, 128, 128)", ""] in gmm.block_sources
    (paged,) = _site(jax_sites, "tpu/paged_attention/paged_attention_kernel.py")
    assert paged.dimension_semantics != "dimension_semantics"  # annotated, then assigned in branches
    assert [c for _, c in paged.branches["dimension_semantics"]] == ["inline_seq_dim", "not (inline_seq_dim)"]
    with_shapes = [s for (p, _), s in jax_sites.items() if p.startswith("tpu/") and s.block_shapes]
    assert len(with_shapes) >= 12  # was 2 of 15 when only inline BlockSpec calls were read


def test_a_notebook_variable_is_no_caller():
    from tests.kernels.helpers import scan as scan_files
    import json as _json

    lib = src(BODY + """
def add(x):
  return pl.pallas_call(_body, out_shape=x)(x)
""")
    cells = {"cells": [{"cell_type": "code", "source": ["from jax.experimental import pallas as pl\n",
                                                        "from pkg.ops.k import add\n", "y = add(1)\n",
                                                        "z = pl.pallas_call(lambda r: r, out_shape=y)(y)\n"]}],
             "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    sites = scan_files({"pkg/ops/k.py": lib, "notebooks/try.ipynb": _json.dumps(cells)})
    (site,) = [s for s in sites if s.path == "pkg/ops/k.py"]
    assert not any("try" in c for c in site.callers), site.callers


def test_names_unpacked_from_a_tuple_each_get_their_own_part():
    """A user's report: splash attention's `bq, bkv = block_sizes.block_q, block_sizes.block_kv` showed both names
    as the whole tuple `(block_sizes.block_q, block_sizes.block_kv)` on three kernel pages."""
    text = src(BODY + """
def _impl(x, block_sizes, tiling):
  bq, bkv = block_sizes.block_q, block_sizes.block_kv
  tm, tn = tiling
  return pl.pallas_call(
      _body, out_shape=x, in_specs=[pl.BlockSpec((bq, bkv, tm, tn), lambda i: (i, 0, 0, 0))],
  )(x)
""")
    (site,) = scan({"pkg/ops/s.py": text})
    assert ["bq", "block_sizes.block_q", ""] in site.block_sources, site.block_sources
    assert ["bkv", "block_sizes.block_kv", ""] in site.block_sources, site.block_sources
    assert not [row for row in site.block_sources if row[0] == "tm" and "block_sizes" in row[1]]
