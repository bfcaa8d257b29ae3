"""Names, backends, categories, kinds, stability and vendoring."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.kernels.helpers import by_line, line_of, scan, src
from tools.kernels import rules
from tools.kernels.scan import scan_paths

FLASH = src("""
def _fwd_kernel(q_ref, o_ref):
  o_ref[...] = q_ref[...]

def _flash_fwd_impl(q):
  def run(q):
    return pl.pallas_call(_fwd_kernel, out_shape=q,
                          compiler_params=pltpu.CompilerParams())(q)
  return run(q)

@jax.custom_vjp
def flash_attention(q):
  return _flash_fwd_impl(q)

def _fwd(q):
  return _flash_fwd_impl(q), q

def _bwd(res, g):
  dq = pl.pallas_call(_fwd_kernel, out_shape=g, compiler_params=pltpu.CompilerParams())(g)
  return (dq,)

flash_attention.defvjp(fwd=_fwd, bwd=_bwd)
""")


def test_private_helpers_and_vjp_rules_take_the_public_name():
    sites = by_line(scan({"ops/flash.py": FLASH}))
    fwd = sites[("ops/flash.py", line_of(FLASH, "return pl.pallas_call"))]
    bwd = sites[("ops/flash.py", line_of(FLASH, "dq = pl.pallas_call"))]
    assert (fwd.kernel, fwd.impl) == ("flash_attention", "_flash_fwd_impl.run")
    assert (bwd.kernel, bwd.impl) == ("flash_attention", "_bwd")
    assert fwd.category == bwd.category == "attention"
    assert "ops.flash.flash_attention" in fwd.qualname


def test_callers_are_followed_across_files_and_classes():
    impl = src("""
def _gmm_impl(x):
  return pl.pallas_call(_k, out_shape=x)(x)
""")
    api = src("""
from pkg import impl

class RaggedDot:
  def _fwd(self, x):
    return impl._gmm_impl(x)
""")
    (site,) = scan({"pkg/impl.py": impl, "pkg/api.py": api})
    assert (site.kernel, site.impl) == ("RaggedDot", "_gmm_impl")


def test_no_public_caller_falls_back_to_the_outermost_private_function():
    text = src("""
def _run_step(x):
  return pl.pallas_call(_k, out_shape=x)(x)

@jax.custom_vjp
def _chunk_fwd(x):
  return _run_step(x)
""")
    (site,) = scan({"m.py": text})
    assert (site.kernel, site.impl) == ("_chunk_fwd", "_run_step")


@pytest.mark.parametrize("imports, call_kwargs, want", [
    ("", "compiler_params=pltpu.CompilerParams(vmem_limit_bytes=1)", "tpu"),
    ("", "compiler_params=dict(mosaic=dict(dimension_semantics=('parallel',)))", "tpu"),
    ("", "grid_spec=pltpu.PrefetchScalarGridSpec(num_scalar_prefetch=1, grid=(2,))", "tpu"),
    ("from jax.experimental.pallas import triton as plgpu\n", "compiler_params=plgpu.CompilerParams(num_warps=4)",
     "gpu-triton"),
    ("import jax.experimental.pallas.mosaic_gpu as plgpu\n", "compiler_params=plgpu.CompilerParams()", "gpu-mosaic"),
    ("from jax.experimental.pallas import triton as plgpu\n", "interpret=True, compiler_params=plgpu.CompilerParams()",
     "gpu-triton"),  # compiler params first
])
def test_backend_from_compiler_params_first(imports, call_kwargs, want):
    text = ("from jax.experimental import pallas as pl\n"
            "from jax.experimental.pallas import tpu as pltpu\n" + imports
            + f"def f(x):\n  return pl.pallas_call(k, out_shape=x, {call_kwargs})(x)\n")
    (site,) = scan({"m.py": text})
    assert site.backend == want


@pytest.mark.parametrize("path, text, want", [
    ("m.py", "def f(x):\n  return pl.pallas_call(k, out_shape=x, interpret=True)(x)\n", "interpret"),
    ("m.py", ("from jax.experimental.pallas import tpu as pltpu\n"
              "def f(x):\n  return pl.pallas_call(k, out_shape=x)(x)\n"), "tpu"),  # imports
    ("ops/gpu/m.py", "def f(x):\n  return pl.pallas_call(k, out_shape=x)(x)\n", "gpu-triton"),  # context
    ("m.py", "def f(x):\n  return pl.pallas_call(k, out_shape=x)(x)\n", "unknown"),
])
def test_backend_falls_back_to_interpret_imports_context(path, text, want):
    (site,) = scan({path: "from jax.experimental import pallas as pl\n" + text})
    assert site.backend == want


@pytest.mark.parametrize("names, path, want", [
    ("ragged_paged_attention", "pkg/flash_attention.py", "paged/ragged attention"),
    ("mha", "ops/gpu/attention.py", "attention"),
    ("gmm", "ops/megablox/gmm.py", "moe/grouped matmul"),
    ("quantized_matmul_kernel", "kernels/qmm.py", "quantized matmul"),
    ("all_gather_matmul", "collectives/x.py", "collective/communication"),
    ("fused_cross_entropy_pallas", "x.py", "cross-entropy/loss"),
    ("PallasTritonNormalization", "ops/normalization/pallas_triton.py", "normalization"),
    ("qnorm_rope", "deepseek/rope.py", "rotary/positional"),
    ("linear_rnn_pallas_call", "x/pallas.py", "ssm/scan/linear-recurrence"),
    ("streamindex_topk", "indexer/x.py", "sampling/top-k"),
    ("ragged_causal_conv1d", "conv/x.py", "fft/convolution"),
    ("gated_linear_unit_sm90", "x.py", "activation/GLU"),
    ("matmul", "ops/tpu/matmul.py", "matmul/gemm"),
    ("threefry_2x32_count", "ops/tpu/random/threefry.py", "crypto/fhe/other"),
    # issue 10: each cause of a wrong category, as a general rule
    ("ragged_gather_reduce", "ops/moe/sc.py", "moe routing/dispatch"),
    ("sparse_core_gather_reduce_kernel", "kernels/sparsecore.py", "moe routing/dispatch"),
    ("token_dispatch", "layers/moe.py", "moe routing/dispatch"),
    ("mhc_pre_kernel", "ops/mhc.py", "residual/hyper-connections"),
    ("hyper_connection_post", "x.py", "residual/hyper-connections"),
    ("gated_linear_attention_fwd", "ops/attention/gla.py", "ssm/scan/linear-recurrence"),
    ("lightning_attn_kernel", "attention/lightning.py", "ssm/scan/linear-recurrence"),
    ("chunk_gla_fwd", "ops/attention/chunk.py", "ssm/scan/linear-recurrence"),
    ("token_log_probs", "rl/logprobs.py", "cross-entropy/loss"),
    ("speculative_verify", "serving/spec.py", "sampling/top-k"),
    ("flash_attention", "ops/attention/flash.py", "attention"),  # still attention
    ("decode_attn_sequence", "kernels/gpu/ragged_decode_attention/impl", "paged/ragged attention"),  # the folder says
    ("matmul_kernel", "kernels/tpu/quantized_matmul/core", "matmul/gemm"),  # a helper keeps its own category
    ("splash_mha_fwd", "ops/attention/linear_layout.py", "attention"),
])
def test_category_rules(names, path, want):
    assert rules.category_of(names, path, None) == want


@pytest.mark.parametrize("path, want", [
    ("pkg/ops/flash.py", "library"), ("tests/test_flash.py", "test"), ("pkg/flash_test.py", "test"),
    ("benchmarks/run.py", "benchmark"), ("pkg/ops/tpu/example_kernel.py", "example"),
    ("docs/guide.md", "example"), ("nb/tour.ipynb", "example"),
])
def test_kind_from_path(path, want):
    assert rules.kind_of(path) == want


def test_stability_from_path_and_docstrings():
    assert rules.stability_of("pkg/experimental/x.py", False) == "experimental"
    assert rules.stability_of("pkg/contrib/x.py", False) == "research"
    assert rules.stability_of("pkg/ops/x.py", True) == "deprecated"
    assert rules.stability_of("pkg/ops/x.py", False) == "stable"
    text = src('''
def old_matmul(x):
  """Deprecated: use matmul instead."""
  return pl.pallas_call(_k, out_shape=x)(x)
''')
    (site,) = scan({"pkg/ops/m.py": text})
    assert site.stability == "deprecated"


def test_vendored_copies_point_at_the_original():
    body = "\n".join(f"  y{i} = x + {i}" for i in range(12))
    fn = f"def splash(x):\n{body}\n  return pl.pallas_call(_k, out_shape=x)(x)\n"
    sites = scan({"jaxlib/splash.py": src(fn), "third_party/vendor/splash.py": src("# a fork\n" + fn)})
    by_path = {s.path: s for s in sites}
    assert by_path["jaxlib/splash.py"].vendored_from is None
    assert by_path["third_party/vendor/splash.py"].vendored_from == "jaxlib/splash.py"


def test_scan_paths_walks_folders_and_skips_hidden_and_links(tmp_path):
    root = tmp_path / "repo"
    (root / "pkg").mkdir(parents=True)
    (root / ".git").mkdir()
    (root / "node_modules").mkdir()
    launch = "from jax.experimental import pallas as pl\ndef f(x):\n  return pl.pallas_call(k, out_shape=x)(x)\n"
    for p in ("pkg/a.py", ".git/b.py", "node_modules/c.py"):
        (root / p).write_text(launch)
    (root / "pkg" / "loop").symlink_to(root, target_is_directory=True)
    sites = scan_paths([root])
    assert [(s.path, s.line) for s in sites] == [("pkg/a.py", 3)]


def test_a_file_the_scan_could_not_read_is_named_and_the_exit_says_so(tmp_path):
    """`tools kernels scan` dropped a file with a syntax error without a word: 0 kernels, exit 0. A block whose body
    was commented out is now read around it (and said); a file that cannot be read at all is named, exit 3."""
    from click.testing import CliRunner

    from tools.cli import cli

    (tmp_path / "scale.py").write_text(
        "from jax.experimental import pallas as pl\nDEBUG = False\n\ndef scale(x):\n  if DEBUG:\n"
        "    # print(x.shape)\n  return pl.pallas_call(k, out_shape=x)(x)\n")
    (tmp_path / "ok.py").write_text("from jax.experimental import pallas as pl\ndef f(x):\n"
                                    "  return pl.pallas_call(k, out_shape=x)(x)\n")
    problems: list = []
    assert sorted(s.path for s in scan_paths([tmp_path], problems=problems)) == ["ok.py", "scale.py"]
    assert problems == [((tmp_path / "scale.py").as_posix(), "read in part: line 5 set aside (a syntax error)")]
    r = CliRunner().invoke(cli, ["kernels", "scan", str(tmp_path)])
    assert r.exit_code == 0 and f"warning: {tmp_path / 'scale.py'}: read in part" in r.output
    (tmp_path / "nul.py").write_bytes(b"from jax.experimental import pallas as pl\n\x00\x00\ndef f(x):\n"
                                      b"  return pl.pallas_call(k, out_shape=x)(x)\n")
    r = CliRunner().invoke(cli, ["kernels", "scan", str(tmp_path)])
    assert r.exit_code == 3 and f"warning: {tmp_path / 'nul.py'}: not read" in r.output, r.output
    assert "2 files not read in full" in r.output
    r = CliRunner().invoke(cli, ["kernels", "scan", str(tmp_path / "ok.py")])
    assert r.exit_code == 0 and "1 launch site, 1 kernel" in r.output


def test_real_jax_pallas_ops(jax_pallas: Path):
    """The installed jax ships real kernels; the catalog must name them and their backends."""
    sites = scan_paths([jax_pallas / "ops"])
    got = {(s.path, s.kernel): s for s in sites}
    expect = {
        ("tpu/flash_attention.py", "flash_attention"): ("tpu", "attention"),
        ("gpu/attention.py", "mha"): ("gpu-triton", "attention"),
        ("tpu/megablox/gmm.py", "gmm"): ("tpu", "moe/grouped matmul"),
        ("tpu/megablox/gmm.py", "tgmm"): ("tpu", "moe/grouped matmul"),
        ("tpu/paged_attention/paged_attention_kernel.py", "paged_attention"): ("tpu", "paged/ragged attention"),
        ("gpu/layer_norm.py", "layer_norm"): ("gpu-triton", "normalization"),
        ("gpu/hopper_matmul_mgpu.py", "matmul"): ("gpu-mosaic", "matmul/gemm"),
        ("tpu/splash_attention/splash_attention_kernel.py", "SplashAttentionKernel"): ("tpu", "attention"),
    }
    for key, (backend, category) in expect.items():
        assert key in got, f"missing {key}"
        assert (got[key].backend, got[key].category) == (backend, category), key
    flash = [s for s in sites if s.path == "tpu/flash_attention.py"]
    assert len(flash) == 3 and {s.kernel for s in flash} == {"flash_attention"}  # fwd, bwd dkv, bwd dq
    assert all(s.kind == "library" for s in sites if "example" not in s.path)
    assert not [s for s in sites if s.entry == "core_map"]  # WarpMesh core_maps are inside kernels


def test_near_copies_across_repositories_are_linked():
    from tools.kernels.vendored import link_vendored

    body = "\n".join(f"  y{i} = x * {i} + jnp.sin(x)" for i in range(15))
    orig = src(f"def splash(x):\n{body}\n  return pl.pallas_call(_k, out_shape=x)(x)\n")
    fork = orig.replace("y3 = x * 3", "y3 = x * 33").replace("def splash", "def my_splash")
    other = src("def unrelated(x):\n" + "\n".join(f"  z{i} = x - {i}" for i in range(15))
                + "\n  return pl.pallas_call(_k, out_shape=x)(x)\n")
    sites = {"upstream": scan({"ops/splash.py": orig}), "fork": scan({"kernels/splash.py": fork, "u.py": other})}
    link_vendored(sites)
    assert sites["upstream"][0].vendored_from is None
    got = {s.kernel: s.vendored_from for s in sites["fork"]}
    assert got == {"my_splash": "upstream:ops/splash.py", "unrelated": None}
