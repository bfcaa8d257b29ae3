"""Concepts found under the names real code uses: CamelCase classes, name variants, config fields; ring attention
and Ulysses as context parallelism; a scan is "scan over layers" only when it runs a layer stack. Then on real
code: the kernel libraries' wheels that name ring attention (tokamax, maxtext, tpu-inference)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from tools.ingest import pyfacts
from tools.kernels import scan as kscan
from tools.kernels.facts import provenance


def _concepts(code: str) -> dict[str, set[str]]:
    facts = pyfacts.python_facts("pkg/mod.py", textwrap.dedent(code).encode())
    out: dict[str, set[str]] = {}
    for slug, _, label in facts["surfaces"]:
        out.setdefault(slug, set()).add(label)
    return out


def test_camel_case_classes_variants_and_config_fields():
    found = _concepts("""
        import dataclasses

        class RingAttention:
            pass

        class UlyssesAllToAll:
            pass

        class FlashAttentionOp:
            pass

        def tpu_flash_attention_fwd(q, k, v):
            return q

        def splash_attention(q):
            return q

        @dataclasses.dataclass
        class Parallelism:
            ici_context_parallelism: int = 1
            num_layers: int = 2
    """)
    assert {"def RingAttention", "def UlyssesAllToAll", "field ici_context_parallelism"} <= \
        found["context-parallelism"]
    assert {"def FlashAttentionOp", "def tpu_flash_attention_fwd"} <= found["flash-attention"]
    assert "def splash_attention" not in found.get("flash-attention", set())  # splash is its own concept


def test_a_scan_is_over_layers_only_when_it_runs_a_layer_stack():
    found = _concepts("""
        import jax

        def decode(carry, tokens):
            return jax.lax.scan(step_fn, carry, tokens)

        def forward(params, x):
            y, _ = jax.lax.scan(decoder_layer, x, params["layers"])
            return y
    """)
    assert found["scan-over-layers"] == {"jax.lax.scan"}
    facts = pyfacts.python_facts("pkg/mod.py", textwrap.dedent("""
        import jax
        def decode(carry, tokens):
            return jax.lax.scan(step_fn, carry, tokens)
    """).encode())
    assert not [s for s in facts["surfaces"] if s[0] == "scan-over-layers"]


def test_a_file_that_names_its_origin_is_believed():
    assert provenance("# Adapted from https://github.com/org/repo/blob/abc/kernel.py.\nimport jax") == \
        "https://github.com/org/repo/blob/abc/kernel.py"
    assert provenance('"""Ported from the jax-ml/jax repository."""') == "jax-ml/jax"
    assert provenance("# Data is copied from HBM to VMEM before the matmul.") is None  # data movement
    assert provenance("\n" * 80 + "# Adapted from https://example.com/x.py") is None  # not in the header
    # MaxText's ragged kernels say "Source from" (a user's report: no `vendored_from` on either page)
    said = "# Source from https://github.com/vllm-project/tpu-inference/blob/main/tpu_inference/kernels/x.py\n"
    assert provenance(said) == said[len("# Source from "):].strip()
    assert provenance("x = load()  # the data source from disk\n") is None


JAX_OPS = Path(__import__("jax").__file__).parent / "experimental" / "pallas" / "ops" / "tpu"


def test_jax_all_gather_kernel_lists_its_remote_copies_and_semaphores():
    if not (JAX_OPS / "all_gather.py").exists():
        pytest.skip("this jax has no Pallas all_gather")
    (site,) = [s for s in kscan.scan_paths([JAX_OPS]) if s.path == "all_gather.py"]
    names = {n for n, _ in site.collectives}
    assert {"async_remote_copy", "semaphore_signal"} <= names
    lines = (JAX_OPS / "all_gather.py").read_text().split("\n")
    for name, at in site.collectives:
        assert name in lines[int(at.rpartition(":")[2]) - 1]


RING_FILES = {  # library -> files of its wheel that name ring attention, Ulysses or context parallelism
    "tokamax": ["tokamax/_src/ops/experimental/tpu/splash_attention/ring_attention_kernel.py"],
    "maxtext": ["maxtext/kernels/attention/ulysses_attention.py", "maxtext/configs/base.yml"],
    "tpu-inference": ["tpu_inference/layers/common/sharding.py"],
}


def test_context_parallelism_page_lists_every_library_that_has_it(tmp_path):
    """Files from three pinned wheels (sha256 checked, downloaded once per machine), ingested as three codebases."""
    import json
    import subprocess
    import sys
    import zipfile

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
    import kernels_accuracy

    manifest = json.loads((kernels_accuracy.LABELS / "manifest.json").read_text())
    libs = {lib["library"]: lib for lib in manifest["libraries"]}
    kb = tmp_path / "kb"
    assert subprocess.run([sys.executable, "-m", "tools", "init", str(kb)], capture_output=True).returncode == 0
    for name, members in RING_FILES.items():
        lib = libs[name]
        wheel = kernels_accuracy.DEFAULT_CACHE / f"{lib['package']}-{lib['version']}" / "dist" / lib["file"]
        if not wheel.exists():
            kernels_accuracy.fetch(lib, kernels_accuracy.DEFAULT_CACHE)
        with zipfile.ZipFile(wheel) as z:
            for m in members:
                out = kb / "raw" / "code" / name / m
                out.parent.mkdir(parents=True, exist_ok=True)
                out.write_bytes(z.read(m))
    r = subprocess.run([sys.executable, "-m", "tools", "ingest", "--all", "-q"], cwd=kb, capture_output=True,
                       text=True)
    assert r.returncode == 0, r.stderr[-1000:]
    page = (kb / "wiki" / "concepts" / "context-parallelism.md").read_text()
    for name in RING_FILES:
        assert f"<!-- tools:begin appears-{name} -->" in page, name
    assert "def _ring_attention_forward" in page and "def is_context_parallel_ulysses_requested" in page
