"""The performance concepts that ingest looks for, and how each is recognised.

One registry: detectors in tools/ingest/surfaces.py read it, concept pages are written from it.
``names`` match dotted names in Python code (``jax.checkpoint``, ``P``-style aliases are resolved
through imports first); ``strings`` match string literals; ``config`` matches lines in YAML, TOML,
shell and other config files.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Concept:
    slug: str
    title: str
    about: str
    names: tuple[str, ...] = ()
    strings: tuple[str, ...] = ()
    config: tuple[str, ...] = ()
    related: tuple[str, ...] = ()
    name_re: re.Pattern | None = field(default=None, compare=False)
    string_re: re.Pattern | None = field(default=None, compare=False)
    config_re: re.Pattern | None = field(default=None, compare=False)


def _alt(patterns: tuple[str, ...]) -> re.Pattern | None:
    return re.compile("|".join(f"(?:{p})" for p in patterns)) if patterns else None


CONCEPTS: dict[str, Concept] = {}


def concept(slug, title, about, names=(), strings=(), config=(), related=()):
    c = Concept(slug, title, about, tuple(names), tuple(strings), tuple(config), tuple(related),
                _alt(tuple(names)), _alt(tuple(strings)), _alt(tuple(config)))
    CONCEPTS[slug] = c
    return c


concept(
    "pallas-kernels", "Pallas kernels",
    "Hand-written kernels in JAX's Pallas language, lowered through Mosaic (TPU), Triton or Mosaic GPU. "
    "They replace XLA's generic fusion for attention, grouped matmuls, fused losses and collectives when "
    "the compiler's choice is memory-bound or badly tiled. Launch sites are listed in the kernel catalog.",
    names=(r"(?:^|\.)pallas_call$", r"^(?:pl|pallas)\.kernel$", r"^plgpu\.kernel$", r"(?:^|\.)core_map$"),
    related=("flash-attention", "splash-attention", "paged-attention"),
)
concept(
    "sharding", "Sharding and meshes",
    "How arrays and computation are split across devices: `Mesh` axes, `PartitionSpec`/`NamedSharding`, "
    "`with_sharding_constraint` hints, `shard_map` for explicit per-device code, and logical-axis rules. "
    "Sharding choices decide which collectives XLA inserts and whether they overlap with compute.",
    names=(r"(?:^|\.)shard_map$", r"(?:^|\.)PartitionSpec$", r"(?:^|\.)NamedSharding$",
           r"(?:^|\.)with_sharding_constraint$", r"(?:^|\.)(?:Mesh|AbstractMesh|make_mesh|create_device_mesh|create_hybrid_device_mesh)$",
           r"(?:^|\.)pjit$", r"(?:^|\.)logical_to_mesh(?:_axes|_sharding)?$", r"(?:^|\.)LogicallyPartitioned$",
           r"(?:^|\.)with_logical_constraint$", r"(?:^|\.)set_mesh$", r"(?:^|\.)use_mesh$"),
    config=(r"^\s*(?:ici|dcn)_\w+_parallelism\s*[:=]", r"^\s*mesh_axes\s*[:=]", r"^\s*logical_axis_rules\s*[:=]"),
    related=("collective-matmul", "host-offload"),
)
concept(
    "rematerialization", "Rematerialization (remat)",
    "Recomputing activations in the backward pass instead of storing them: `jax.checkpoint`/`remat` with "
    "policies such as `nothing_saveable`, `dots_saveable`, `save_only_these_names`, or offloading policies. "
    "The policy trades HBM for FLOPs and is one of the biggest levers on step time and batch size.",
    # Only JAX's and Flax's checkpoint: `orbax.checkpoint` saves files, it does not rematerialize.
    names=(r"^(?:jax(?:\.ad_checkpoint)?|flax(?:\.linen|\.nnx)?|equinox)\.(?:checkpoint|remat)$", r"(?:^|\.)remat$",
           r"(?:^|\.)checkpoint_policies(?:\.\w+)?$",
           r"(?:^|\.)checkpoint_name$", r"(?:^|\.)(?:nothing_saveable|everything_saveable|dots_saveable|"
           r"dots_with_no_batch_dims_saveable|save_only_these_names|save_and_offload_only_these_names|"
           r"save_any_names_but_these|offload_dot_with_no_batch_dims)$"),
    config=(r"^\s*remat_policy\s*[:=]",),
    related=("scan-over-layers", "host-offload"),
)
concept(
    "scan-over-layers", "Scan over layers",
    "Running a stack of identical layers with `jax.lax.scan` (or `nn.scan`) so XLA compiles one layer body "
    "instead of N copies: much faster compiles and smaller programs, at the cost of some cross-layer "
    "fusion and scheduling freedom.",
    names=(r"^(?:jax\.)?lax\.scan$", r"^flax\.(?:linen|nnx)\.scan$", r"(?:^|\.)scan_layers$"),
    config=(r"^\s*scan_layers\s*[:=]",),
    related=("rematerialization",),
)
concept(
    "flash-attention", "Flash attention",
    "Blockwise attention that never materialises the full score matrix: online softmax over key/value "
    "blocks held in fast memory. On TPU the Pallas `flash_attention` kernel; on GPU Triton/Mosaic kernels "
    "or cuDNN through `dot_product_attention`.",
    names=(r"(?:^|\.)(?:flash_attention|flash_attn\w*|mha|mha_reference)$",),
    strings=(r"^flash$",),
    config=(r"^\s*attention\s*[:=]\s*['\"]?flash",),
    related=("splash-attention", "dot-product-attention", "pallas-kernels"),
)
concept(
    "splash-attention", "Splash attention",
    "Sparse flash attention for TPU: block-sparse masks (causal, local, chunked) skip whole blocks, and "
    "the kernel is configured through `BlockSizes` and mask objects. The workhorse attention kernel of "
    "MaxText and tokamax training on TPU.",
    names=(r"(?:^|\.)splash_attention\w*$", r"(?:^|\.)make_splash_m[hq]a\w*$", r"(?:^|\.)SplashAttention\w*$"),
    strings=(r"^splash$",),
    config=(r"^\s*attention\s*[:=]\s*['\"]?splash",),
    related=("flash-attention", "pallas-kernels"),
)
concept(
    "paged-attention", "Paged and ragged attention",
    "Decode-time attention over a paged KV cache (pages indexed through a page table) and ragged batches "
    "of sequences with different lengths, as used by vLLM/SGLang TPU backends.",
    names=(r"(?:^|[._])paged_attention\w*$", r"(?:^|\.)ragged_\w*attention\w*$"),
    strings=(r"^paged$",),
    config=(r"^\s*attention\s*[:=]\s*['\"]?(?:paged|ragged)",),
    related=("flash-attention", "pallas-kernels"),
)
concept(
    "dot-product-attention", "dot_product_attention",
    "`jax.nn.dot_product_attention`: one call that lets JAX pick an implementation (XLA or cuDNN flash on "
    "GPU). A baseline to compare hand-written attention kernels against.",
    names=(r"(?:^|\.)dot_product_attention$",),
    strings=(r"^(?:cudnn|cudnn_flash_te)$",),
    related=("flash-attention",),
)
concept(
    "xla-flags", "XLA and LIBTPU flags",
    "Compiler flags passed through `XLA_FLAGS` or `LIBTPU_INIT_ARGS` (latency-hiding scheduler, async "
    "collective fusion, collective-matmul thresholds, ...). Cheap to try and often worth several percent.",
    names=(),
    strings=(r"--xla_[a-z0-9_]+", r"^(?:XLA_FLAGS|LIBTPU_INIT_ARGS)$"),
    config=(r"--xla_[a-z0-9_]+", r"\b(?:XLA_FLAGS|LIBTPU_INIT_ARGS)\b"),
    related=("collective-matmul",),
)
concept(
    "collective-matmul", "Collective matmul",
    "Overlapping a collective (all-gather or reduce-scatter) with the matmul that consumes it by "
    "decomposing both into steps, either by hand with `ppermute` in `shard_map` or through XLA's "
    "windowed-einsum thresholds.",
    # Not every ppermute: pipeline stages rotate with it too. Only code that names the technique.
    names=(r"(?:^|\.)\w*collective_matmul\w*$",),
    strings=(r"collective_matmul", r"windowed_einsum"),
    config=(r"collective_matmul",),
    related=("sharding", "xla-flags"),
)
concept(
    "quantization", "Quantization",
    "Lower-precision weights or activations (int8, int4, fp8) through libraries such as AQT and qwix or "
    "quantized Pallas matmuls; trades accuracy for memory bandwidth and MXU throughput.",
    names=(r"(?:^|\.)(?:quantize|dequantize|quantize_\w+|\w+_quantize|fake_quant\w*)$", r"^(?:aqt|qwix)(?:\.\w+)*$",
           r"(?:^|\.)(?:float8_e4m3fn|float8_e5m2|int4)$", r"(?:^|\.)QArray$"),
    config=(r"^\s*quantization\s*[:=]\s*['\"]?\w",),
    related=("pallas-kernels",),
)
concept(
    "host-offload", "Host offload",
    "Moving activations, optimizer state or parameters to host memory (`memory_kind='pinned_host'`, "
    "offloading remat policies) to fit larger batches in HBM, overlapped with compute by XLA.",
    names=(r"(?:^|\.)TransferToMemoryKind$", r"(?:^|\.)save_and_offload_only_these_names$",
           r"(?:^|\.)offload_dot_with_no_batch_dims$"),
    strings=(r"^(?:pinned_host|unpinned_host)$",),
    config=(r"pinned_host", r"^\s*\w*offload\w*\s*[:=]\s*(?:true|True|1)"),
    related=("rematerialization",),
)
concept(
    "expert-parallelism", "Mixture of experts and expert parallelism",
    "Mixture-of-experts layers: a router picks experts per token, tokens are dispatched to the devices holding "
    "those experts (all-to-all or ragged all-to-all), run through grouped matmuls (`gmm`, megablox, "
    "`ragged_dot`) and combined back. Capacity factors, dropping and the expert mesh axis decide the balance "
    "between all-to-all traffic and idle experts.",
    names=(r"(?:^|\.)ragged_all_to_all$", r"(?:^|\.)ragged_dot(?:_general)?$", r"(?:^|\.)(?:gmm|tgmm)$",
           r"(?:^|\.)(?:\w*_)?(?:moe|MoE|Moe)(?:_\w*|[A-Z]\w*)?$", r"(?:^|\.)(?:router|top_k_router|unpermute)$",
           r"(?:^|\.)megablox\b"),
    strings=(r"^expert$",),
    config=(r"^\s*(?:ici|dcn)_expert_parallelism\s*[:=]", r"^\s*num_experts\s*[:=]",
            r"^\s*num_experts_per_tok\s*[:=]", r"^\s*capacity_factor\s*[:=]", r"^\s*megablox\s*[:=]",
            r"^\s*sparse_matmul\s*[:=]"),
    related=("sharding", "pallas-kernels"),
)
concept(
    "pipeline-parallelism", "Pipeline parallelism",
    "Splitting the layers into stages on different devices and streaming microbatches through them "
    "(GPipe, 1F1B, circular/interleaved schedules); the bubble shrinks with more microbatches per stage. "
    "In JAX usually a `stage` mesh axis with `ppermute` between stages, or a library pipeline module.",
    names=(r"(?:^|\.)pipeline_(?:stage|schedule|parallel|apply|step)\w*$", r"(?:^|\.)\w*Pipeline(?:Stage|Schedule)\w*$",
           r"(?:^|\.)(?:gpipe|GPipe)\w*$", r"(?:^|\.)\w*[Cc]ircular_?[Pp]ipeline\w*$", r"(?:^|\.)one_f_one_b\w*$"),
    strings=(r"^stage$",),
    config=(r"^\s*(?:ici|dcn)_pipeline_parallelism\s*[:=]", r"^\s*num_pipeline_microbatches\s*[:=]",
            r"^\s*num_pipeline_repeats\s*[:=]", r"^\s*pipeline_parallel_layers\s*[:=]",
            r"^\s*num_layers_per_pipeline_stage\s*[:=]"),
    related=("sharding", "scan-over-layers"),
)
concept(
    "gradient-accumulation", "Gradient accumulation",
    "Summing gradients over micro-batches before one optimizer update: a larger effective batch at "
    "constant memory, and a way to keep per-step shapes efficient.",
    names=(r"(?:^|\.)MultiSteps$", r"(?:^|\.)\w*grad(?:ient)?_accum\w*$"),
    config=(r"^\s*gradient_accumulation_steps\s*[:=]",),
    related=(),
)


def by_slug(slug: str) -> Concept:
    return CONCEPTS[slug]
