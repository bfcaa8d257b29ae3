"""What counts as a launch site and what does not."""

from __future__ import annotations

import pytest

import json

from tests.kernels.helpers import by_line, line_of, scan, src

KERNEL_BODY = """
def _add_kernel(x_ref, o_ref):
  o_ref[...] = x_ref[...] + 1
"""


def test_direct_call_reports_the_pallas_call_token_line():
    text = src(KERNEL_BODY + """
def add_one(x):
  return pl.pallas_call(
      _add_kernel,
      out_shape=x,
      compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel",)),
      grid=(4,),
      in_specs=[pl.BlockSpec((8, 128), lambda i: (i, 0))],
  )(x)
""")
    (site,) = scan({"pkg/ops/add.py": text})
    assert (site.path, site.line) == ("pkg/ops/add.py", line_of(text, "pl.pallas_call("))
    assert (site.kernel, site.impl, site.entry, site.backend) == ("add_one", None, "pallas_call", "tpu")
    assert site.grid == "(4,)" and site.block_shapes == ["(8, 128)"]
    assert site.dimension_semantics == "('parallel',)"
    assert site.body == "_add_kernel" and site.kind == "library"


def test_aliases_and_partials_call_sites_count_not_their_definitions():
    text = src(KERNEL_BODY + """
call = pl.pallas_call

def via_alias(x):
  return call(_add_kernel, out_shape=x)(x)

def via_partial(x):
  launch = functools.partial(pl.pallas_call, out_shape=x, interpret=True)
  return launch(_add_kernel)(x)

def via_decorator(x):
  @functools.partial(pl.pallas_call, out_shape=x)
  def kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...]
  return kernel(x)
""")
    sites = by_line(scan({"m.py": text}))
    assert set(sites) == {("m.py", line_of(text, "return call(")), ("m.py", line_of(text, "return launch(")),
                          ("m.py", line_of(text, "@functools.partial"))}
    assert {s.kernel for s in sites.values()} == {"via_alias", "via_partial", "via_decorator"}
    assert sites[("m.py", line_of(text, "return launch("))].backend == "interpret"  # from the partial's kwargs


def test_local_wrapper_sites_are_its_callers_across_files():
    lib = src("""
def buffered_pallas_call(kernel, out_shape, grid_spec, compiler_params, buffer_count=2):
  def pallas_call(*args):
    return pl.pallas_call(kernel, out_shape=out_shape, grid_spec=grid_spec,
                          compiler_params=compiler_params)(*args)
  return pallas_call
""")
    user = src("""
from mylib.callib import buffered_pallas_call

def _gmm_kernel(a_ref, b_ref, o_ref):
  o_ref[...] = a_ref[...] @ b_ref[...]

def gmm(a, b):
  call = buffered_pallas_call(_gmm_kernel, a, None, pltpu.CompilerParams())
  return call(a, b)
""")
    init = "from ._pallas_call import buffered_pallas_call\n"
    sites = scan({"mylib/callib/_pallas_call.py": lib, "mylib/callib/__init__.py": init, "mylib/ops/gmm.py": user})
    assert [(s.path, s.line, s.kernel, s.entry, s.category) for s in sites] == [
        ("mylib/ops/gmm.py", line_of(user, "call = buffered"), "gmm", "buffered_pallas_call", "moe/grouped matmul")]
    assert sites[0].backend == "tpu"


def test_module_that_redefines_pallas_call():
    text = src(KERNEL_BODY + """
def pallas_call(*args, **kwargs):
  return pl.pallas_call(*args, interpret=True, **kwargs)

def rms_norm(x):
  return pallas_call(_add_kernel, out_shape=x)(x)
""")
    (site,) = scan({"norm.py": text})
    assert (site.line, site.kernel, site.entry, site.category) == (
        line_of(text, "return pallas_call("), "rms_norm", "pallas_call", "normalization")


def test_wrapper_imported_from_another_package():
    text = src("""
from qwix import pallas as qpl

def _kernel(x_ref, o_ref):
  o_ref[...] = x_ref[...]

def quantized_matmul(x):
  return qpl.pallas_call(_kernel, out_shape=x, grid_spec=pltpu.PrefetchScalarGridSpec(num_scalar_prefetch=0))(x)
""")
    (site,) = scan({"ops/qmm.py": text})
    assert (site.line, site.entry, site.backend, site.category) == (
        line_of(text, "qpl.pallas_call("), "qpl.pallas_call", "tpu", "quantized matmul")


def test_wrapper_and_foreign_launches_keep_grid_and_semantics():
    text = src("""
from qwix import pallas as qpl

def _kernel(x_ref, o_ref):
  o_ref[...] = x_ref[...]

def gmm(x, tiles_n, tiles_k):
  call = qpl.pallas_call(
      _kernel,
      out_shape=x,
      grid_spec=pltpu.PrefetchScalarGridSpec(
          num_scalar_prefetch=2,
          in_specs=[pl.BlockSpec((None, 128), lambda i, j: (i, j))],
          grid=(tiles_n, tiles_k),
      ),
      compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "arbitrary")),
  )
  return call(x)
""")
    (site,) = scan({"ops/gmm.py": text})
    assert (site.kernel, site.entry) == ("gmm", "qpl.pallas_call")
    assert site.grid == "(tiles_n, tiles_k)" and site.block_shapes == ["(None, 128)"]
    assert site.dimension_semantics == "('parallel', 'arbitrary')"


def test_nested_launch_inside_named_scope():
    text = src(KERNEL_BODY + """
def prefetch(x):
  return jax.named_scope("prefetch")(pl.pallas_call(_add_kernel, out_shape=x))(x)
""")
    (site,) = scan({"t.py": text})
    assert site.line == line_of(text, "named_scope") and site.kernel == "prefetch"


def test_kernels_launched_without_pallas_call():
    text = src("""
import jax.experimental.pallas.mosaic_gpu as plgpu

def gather(x):
  mesh = pltpu.create_tensorcore_mesh("core")
  @pl.kernel(out_shape=x, mesh=mesh)
  def body(x_ref, o_ref):
    pass
  return body(x)

def matmul(a):
  def kernel(a_ref, o_ref):
    @pl.core_map(plgpu.WarpMesh(axis_name="warp"))
    def _per_warp():
      pass
  f = plgpu.kernel(kernel, out_shape=a, grid=(2,))
  return f(a)

def run_on_cores(x):
  mesh = pltpu.create_tensorcore_mesh("core")
  @pl.core_map(mesh)
  def _():
    pass
""")
    sites = by_line(scan({"k.py": text}))
    got = {(s.kernel, s.entry, s.backend) for s in sites.values()}
    assert got == {("gather", "pl.kernel", "tpu"), ("matmul", "plgpu.kernel", "gpu-mosaic"),
                   ("run_on_cores", "core_map", "tpu")}
    assert ("k.py", line_of(text, "WarpMesh")) not in sites  # warp specialisation inside a kernel


def test_notebook_code_cells_only_and_error_outputs_ignored():
    cells = [
        {"cell_type": "markdown", "source": ["Calls `pl.pallas_call(f)` in prose\n"]},
        {"cell_type": "code", "source": ["from jax.experimental import pallas as pl\n",
                                         "def double(x):\n",
                                         "  return pl.pallas_call(k, out_shape=x, interpret=True)(x)\n"],
         "outputs": [{"output_type": "error", "ename": "ValueError",
                      "traceback": ["pl.pallas_call(k)(x) failed", "HloModule custom-call pallas_call"]}]},
    ]
    nb = json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5})
    (site,) = scan({"docs/tutorial.ipynb": nb})
    # cells are counted one after another (tools.pysource): the markdown cell spans lines 1-2
    assert (site.kernel, site.kind, site.backend, site.line) == ("double", "example", "interpret", 5)


def test_markdown_python_blocks_are_examples():
    md = ("# Guide\n\nUse pl.pallas_call(kernel) like this:\n\n```python\n"
          "from jax.experimental import pallas as pl\ndef add(x):\n  return pl.pallas_call(k, out_shape=x)(x)\n```\n\n"
          "```text\npl.pallas_call(not_code)\n```\n")
    (site,) = scan({"README.md": md})
    assert (site.line, site.kind, site.kernel) == (8, "example", "add")


def test_negatives_give_no_sites():
    text = src('''
"""Module docstring: call pl.pallas_call(kernel) to launch."""
from jax.experimental.pallas import pallas_call  # an import is not a launch
from typing import overload

launch = pl.pallas_call  # an alias definition
HLO = "ENTRY main { custom-call(pallas_call) } // tpu_custom_call pl.pallas_call(x)"

def documented(x):
  """Example:

  >>> pl.pallas_call(kernel, out_shape=x)(x)
  """
  # pl.pallas_call(kernel) in a comment
  return "pl.pallas_call(" + str(x)

@overload
def linear_rnn_pallas_call(x: int) -> int: ...
@overload
def linear_rnn_pallas_call(x: str) -> str: ...
def linear_rnn_pallas_call(x):
  return x

def caller(x):
  return linear_rnn_pallas_call(x)
''')
    assert scan({"neg.py": text}) == []


def test_wrapper_internals_are_not_sites_even_without_callers():
    text = src("""
def pallas_call(kernel, out_shape, **kwargs):
  def wrapped_kernel(*refs):
    return kernel(*refs)
  return pl.pallas_call(wrapped_kernel, out_shape=out_shape, **kwargs)

def custom_buffered_pallas_call(kernel, out_shape, grid_spec):
  return pl.pallas_call(lambda *a: kernel(*a), out_shape=out_shape, grid_spec=grid_spec)
""")
    assert scan({"block.py": text}) == []


def test_bad_inputs_give_facts_with_a_reason():
    from tools.kernels.scan import analyze_file

    assert analyze_file("a.py", b"\x00\x01binary")["error"] == "binary file"
    assert "notebook" in analyze_file("n.ipynb", b"{not json: pl.pallas_call(k)")["error"]
    py2 = src("""
print "hello"
def f(x):
  return pl.pallas_call(k, out_shape=x)(x)
""")
    facts = analyze_file("old.py", py2.encode())
    assert facts["error"] is None and len(facts["launches"]) == 1 and facts["repaired_lines"]
    json.dumps(facts)
    deep = "from jax.experimental import pallas as pl\nx = " + "[" * 3000 + "]" * 3000 + "\ny = pl.pallas_call(k)\n"
    assert len(analyze_file("deep.py", deep.encode())["launches"]) == 1


def test_wrapper_called_from_a_file_without_pallas_imports():
    lib = src("""
def nf4_matmul(inputs, *tensors, kernel, backward=False):
  def kernel_call(inputs, *tensors):
    fwd = functools.partial(kernel, backward=backward)
    return pl.pallas_call(fwd, out_shape=inputs,
                          grid_spec=pltpu.PrefetchScalarGridSpec(num_scalar_prefetch=0))(inputs, *tensors)
  return kernel_call(inputs, *tensors)
""")
    user = (
        "from .functions import (\n    nf4_matmul,  # the launcher\n)\n\n"
        "def _bmm(x_ref, o_ref):\n  o_ref[...] = x_ref[...]\n\n"
        "def _rhs(x, w):\n  return nf4_matmul(x, w, kernel=_bmm)\n\n"
        "def dot_general_nf4(x, w):\n  return _rhs(x, w)\n")
    sites = scan({"pkg/quant/functions.py": lib, "pkg/quant/implicit.py": user})
    assert [(s.path, s.line, s.kernel, s.impl, s.entry, s.backend, s.category) for s in sites] == [
        ("pkg/quant/implicit.py", 9, "dot_general_nf4", "_rhs", "nf4_matmul", "tpu", "quantized matmul")]


def test_self_checks_in_library_modules_do_not_name_kernels():
    text = src("""
def _call_fwd(q):
  return pl.pallas_call(_k, out_shape=q)(q)

@jax.custom_vjp
def _flash(q):
  return _call_fwd(q)

def gpu_bwd_test():
  return _flash(1)

def _flash_attn2(q):
  return _flash(q)

pallas_flash_attn_2_gpu = _flash_attn2
""")
    (site,) = scan({"ops/fa.py": text})
    assert site.kernel == "pallas_flash_attn_2_gpu"


def test_grid_from_grid_spec_is_resolved_and_signatures_stay_whole():
    from tools.kernels.facts import analyze_file

    long_defaults = ", ".join(f"p{i}: tuple[int, int] = (1, 2)" for i in range(12))
    text = ("import jax\nfrom jax.experimental import pallas as pl\nfrom jax.experimental.pallas import tpu as pltpu\n\n\n"
            f"def _k(x_ref, o_ref, {long_defaults}):\n    o_ref[...] = x_ref[...]\n\n\n"
            "def run(x, n):\n    grid = (x.shape[0] // 128, 4)\n"
            "    spec = pltpu.PrefetchScalarGridSpec(num_scalar_prefetch=0, grid=grid, in_specs=[], out_specs=[])\n"
            "    return pl.pallas_call(_k, grid_spec=spec, out_shape=x)(x)\n\n\n"
            "def run2(x, grid):\n    return pl.pallas_call(_k, grid=grid, out_shape=x)(x)\n")
    facts = analyze_file("m.py", text.encode())
    grids = sorted(str(lc.get("grid")) for lc in facts["launches"])
    assert "(x.shape[0] // 128, 4)" in grids and "grid (set at run time)" in grids, grids
    sig = facts["functions"]["_k"]["signature"]
    assert sig.count("(") == sig.count(")") and sig.count("[") == sig.count("]") and "p11" in sig



@pytest.mark.slow
def test_a_tree_rooted_at_the_jax_package_keeps_jax_s_own_launchers_out():
    """Scanned as site-packages (paths jax/_src/...), JAX's definition of `pl.kernel` is no site; scanned from the
    package itself (`tools kernels scan .../jax`, or a copy at raw/code/jax), its module names lost the `jax.` top,
    the launcher was not recognised, and a kernel named `kernel` joined the catalog (category crypto/fhe/other)."""
    from pathlib import Path

    import jax

    from tools.kernels.scan import scan_facts, scan_paths

    package = Path(jax.__file__).parent
    sites = scan_paths([package / "_src" / "pallas" / "mosaic_gpu"]) + scan_paths([package])
    assert sites, "the installed jax ships Pallas kernels"
    assert not [s for s in sites if s.path.endswith("mosaic_gpu/core.py")], [(s.path, s.kernel) for s in sites][:5]
    facts = scan_facts(package / "experimental" / "pallas")  # a package in a package: named as Python imports it
    assert facts["ops/tpu/flash_attention.py"]["module"] == "jax.experimental.pallas.ops.tpu.flash_attention"
