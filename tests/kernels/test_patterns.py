"""Launch patterns that used to lose facts: a closure that takes the kernel body, compiler parameters chosen at
run time, helper kernels in another kernel's file, callers reached only through a factory or a class."""

from __future__ import annotations

import textwrap
from pathlib import Path

from tools.kernels.pages import kernel_pages
from tools.kernels.scan import scan_paths

CODE = '''
"""Attention kernels."""
import functools
import jax
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu
from jax.experimental.pallas import triton as pltriton


def _fwd_kernel(q_ref, k_ref, v_ref, o_ref, *, causal=False):
    o_ref[...] = q_ref[...]


def flash_fwd(q, k, v, causal: bool = False):
    """Flash attention forward."""

    def call_kernel(kernel):
        return pl.pallas_call(kernel, grid=(4,), out_shape=q)(q, k, v)

    if causal:
        return call_kernel(kernel=functools.partial(_fwd_kernel, causal=True))
    return call_kernel(kernel=_fwd_kernel)


def _zero_kernel(o_ref):
    o_ref[...] = 0


def zeros_like_blocks(x):
    """Zeroed output blocks for the attention backward pass."""
    return pl.pallas_call(_zero_kernel, out_shape=x, compiler_params=pltpu.CompilerParams())()


def attention_with(q, compiler_params):
    return pl.pallas_call(_fwd_kernel, out_shape=q, compiler_params=compiler_params)(q, q, q)


def portable_attention(q, on_tpu: bool):
    return pl.pallas_call(
        _fwd_kernel, out_shape=q,
        compiler_params=pltpu.CompilerParams() if on_tpu else pltriton.CompilerParams(num_warps=4),
    )(q, q, q)


class FlashKernel:
    def __call__(self, q):
        return _launch(q)


def _launch(q):
    return pl.pallas_call(_fwd_kernel, out_shape=q, compiler_params=pltpu.CompilerParams())(q, q, q)


def _make_flash(block):
    return FlashKernel()


make_flash_mha = functools.partial(_make_flash, block=128)


def model_layer(q):
    kernel = make_flash_mha()
    return kernel(q)
'''


def _sites(tmp_path: Path) -> dict[str, object]:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "flash_attention.py").write_text(textwrap.dedent(CODE))
    return {s.kernel: s for s in scan_paths([tmp_path])}


def test_a_closure_that_takes_the_body_is_a_launch_not_a_wrapper(tmp_path):
    s = _sites(tmp_path)["flash_fwd"]
    assert (s.line, s.body, s.impl, s.grid, s.category) == (18, "_fwd_kernel", "flash_fwd.call_kernel", "(4,)",
                                                           "attention")


def test_compiler_params_chosen_at_run_time_fix_no_backend(tmp_path):
    sites = _sites(tmp_path)
    passed, chosen = sites["attention_with"], sites["portable_attention"]
    assert "from the caller" in passed.backend_note and "compiler_params" in passed.backend_note
    assert chosen.backend_note == "compiler_params chosen at run time: gpu-triton or tpu"
    assert sites["flash_fwd"].backend_note is None and sites["FlashKernel"].backend_note is None
    page = next(p for p in kernel_pages([chosen], "demo", None, lambda path, line: f"{path}#L{line}"))
    assert "Backend not fixed by the launch: compiler\\_params chosen at run time: gpu-triton or tpu." in page.body


def test_a_helper_kernel_is_named_for_what_it_does_not_for_its_file(tmp_path):
    sites = _sites(tmp_path)
    assert sites["zeros_like_blocks"].category == "crypto/fhe/other"  # a zero-fill, though in flash_attention.py
    assert sites["flash_fwd"].category == "attention" and sites["FlashKernel"].category == "attention"


def test_callers_through_a_factory_and_a_class(tmp_path):
    callers = _sites(tmp_path)["FlashKernel"].callers
    assert "pkg.flash_attention._make_flash" in callers and "pkg.flash_attention.make_flash_mha" in callers
    assert "pkg.flash_attention.model_layer" in callers  # calls the factory: it gets the kernel


def test_jax_splash_attention_callers_are_its_factories(jax_pallas):
    root = jax_pallas / "ops" / "tpu" / "splash_attention"
    splash = [s for s in scan_paths([root]) if s.kernel == "SplashAttentionKernel"]
    assert len(splash) >= 3  # forward, dq, dkv
    for s in splash:
        names = {c.rsplit(".", 1)[-1] for c in s.callers}
        assert {"make_splash_mha", "make_splash_mqa"} <= names, s.callers
        assert not any(".SplashAttentionKernel." in c for c in s.callers)  # its own methods are not callers
