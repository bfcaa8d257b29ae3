"""A Llama-style decoder training benchmark in JAX: one readable script.

Runs on CPU in seconds at ``--preset tiny`` and unchanged on TPU/GPU. It prints a readable card,
then ONE final JSON line with its metrics (the contract in experiments/README.md), which
``tools exp run`` reads; before it, one step line per step, which the runner times with its own clock.

    python experiments/llama_train.py --preset tiny
    python experiments/llama_train.py --preset small --compute-dtype bfloat16 --remat full --scan

XLA flags come through the environment (``XLA_FLAGS=...``). With ``AUTORESEARCH_PROFILE_DIR`` set, the
steady-state steps are traced with ``jax.profiler`` (one ``StepTraceAnnotation`` per step).
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import os
import platform
import resource
import statistics
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

# ----------------------------------------------------------------------------- configuration

# Presets: shapes only. Every field can be overridden on the command line.
PRESETS = {
    # ~0.3M params: the CPU smoke size used by the tests (~1 s compile, a few ms per step).
    "tiny": dict(n_layers=2, d_model=64, n_heads=4, n_kv_heads=2, d_ff=192, vocab=256,
                 seq_len=32, batch=4, steps=12),
    # ~3M params, 2,048 tokens/step: the CPU benchmark size (~12 s per run on 2 cores).
    "small": dict(n_layers=4, d_model=256, n_heads=8, n_kv_heads=4, d_ff=768, vocab=1024,
                  seq_len=128, batch=16, steps=16),
    # ~125M params: a single-accelerator size.
    "125m": dict(n_layers=12, d_model=768, n_heads=12, n_kv_heads=4, d_ff=2048, vocab=32000,
                 seq_len=1024, batch=16, steps=30),
    # ~1B params: a TPU/GPU host size.
    "1b": dict(n_layers=16, d_model=2048, n_heads=32, n_kv_heads=8, d_ff=8192, vocab=32000,
               seq_len=2048, batch=8, steps=30),
}


@dataclasses.dataclass
class Config:
    n_layers: int = 2
    d_model: int = 64
    n_heads: int = 4
    n_kv_heads: int = 2          # < n_heads: grouped-query attention
    d_ff: int = 192              # SwiGLU hidden size
    vocab: int = 256
    seq_len: int = 32
    batch: int = 4               # global batch per optimizer step (sequences)
    grad_accum: int = 1          # micro-batches per step (batch must divide evenly)
    steps: int = 12              # optimizer steps, the first one includes compilation
    lr: float = 1e-3             # kept small: the early loss trajectory must stay comparable (semantics check)
    seed: int = 0
    compute_dtype: str = "float32"   # activations and matmuls
    param_dtype: str = "float32"     # stored weights and optimizer state
    remat: str = "none"          # none | full | dots_saveable | dots_with_no_batch_dims_saveable
    scan: bool = False           # lax.scan over layers instead of a Python loop
    donate: bool = True          # donate params/optimizer state buffers to the step
    attention: str = "naive"     # naive | dpa (jax.nn.dot_product_attention) | flash (Pallas, TPU/GPU)
    # A decoy, for testing verdicts: skips the last layer. Faster, and it changes the math, so the semantics check
    # must file it `invalid`. Never a real optimization.
    decoy_skip_layer: bool = False

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads

    @property
    def tokens_per_step(self) -> int:
        return self.batch * self.seq_len


def parse_args(argv: list[str] | None = None) -> Config:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--preset", choices=sorted(PRESETS), default="tiny")
    for f in dataclasses.fields(Config):
        flag = "--" + f.name.replace("_", "-")
        if f.type == "bool":
            p.add_argument(flag, dest=f.name, action=argparse.BooleanOptionalAction, default=None)
        else:
            kind = {"int": int, "float": float, "str": str}[f.type]
            p.add_argument(flag, dest=f.name, type=kind, default=None)
    a = vars(p.parse_args(argv))
    values = dict(PRESETS[a.pop("preset")])
    values.update({k: v for k, v in a.items() if v is not None})
    cfg = Config(**values)
    assert cfg.d_model % cfg.n_heads == 0, "d_model must divide by n_heads"
    assert cfg.n_heads % cfg.n_kv_heads == 0, "n_heads must divide by n_kv_heads"
    assert cfg.batch % cfg.grad_accum == 0, "batch must divide by grad_accum"
    return cfg


# ----------------------------------------------------------------------------- model

def init_params(cfg: Config, key: jax.Array) -> dict:
    """Weights with the layer axis first (L) so the same tree serves scan and the Python loop."""
    D, F, V, L, K = cfg.d_model, cfg.d_ff, cfg.vocab, cfg.n_layers, cfg.head_dim
    H, G = cfg.n_heads, cfg.n_kv_heads
    dt = jnp.dtype(cfg.param_dtype)
    ks = jax.random.split(key, 8)

    def normal(k, shape, fan_in):
        return (jax.random.normal(k, shape, jnp.float32) / np.sqrt(fan_in)).astype(dt)

    return {
        "embed_VxD": normal(ks[0], (V, D), 1.0) * 0.02,
        "layers": {
            "attn_norm_LxD": jnp.ones((L, D), dt),
            "wq_LxDxHK": normal(ks[1], (L, D, H * K), D),
            "wk_LxDxGK": normal(ks[2], (L, D, G * K), D),
            "wv_LxDxGK": normal(ks[3], (L, D, G * K), D),
            "wo_LxHKxD": normal(ks[4], (L, H * K, D), H * K),
            "mlp_norm_LxD": jnp.ones((L, D), dt),
            "w_gate_LxDxF": normal(ks[5], (L, D, F), D),
            "w_up_LxDxF": normal(ks[6], (L, D, F), D),
            "w_down_LxFxD": normal(ks[7], (L, F, D), F),
        },
        "final_norm_D": jnp.ones((D,), dt),
        "unembed_DxV": normal(jax.random.fold_in(key, 99), (D, V), D),
    }


def rms_norm(x_BxTxD, w_D):
    x = x_BxTxD.astype(jnp.float32)
    x = x * jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + 1e-6)
    return (x * w_D.astype(jnp.float32)).astype(x_BxTxD.dtype)


def rope(x_BxTxHxK):
    T, K = x_BxTxHxK.shape[1], x_BxTxHxK.shape[3]
    freq_K2 = 1.0 / (10000.0 ** (jnp.arange(0, K, 2, dtype=jnp.float32) / K))
    ang_TxK2 = jnp.arange(T, dtype=jnp.float32)[:, None] * freq_K2[None, :]
    cos, sin = jnp.cos(ang_TxK2)[None, :, None, :], jnp.sin(ang_TxK2)[None, :, None, :]
    x1, x2 = jnp.split(x_BxTxHxK.astype(jnp.float32), 2, axis=-1)
    out = jnp.concatenate([x1 * cos - x2 * sin, x1 * sin + x2 * cos], axis=-1)
    return out.astype(x_BxTxHxK.dtype)


def attention_naive(q_BxTxHxK, k_BxTxGxK, v_BxTxGxK):
    B, T, H, K = q_BxTxHxK.shape
    G = k_BxTxGxK.shape[2]
    q_BxTxGxRxK = q_BxTxHxK.reshape(B, T, G, H // G, K)
    s_BxGxRxTxS = jnp.einsum("btgrk,bsgk->bgrts", q_BxTxGxRxK, k_BxTxGxK) / np.sqrt(K)
    causal_TxS = jnp.tril(jnp.ones((T, T), bool))
    s_BxGxRxTxS = jnp.where(causal_TxS, s_BxGxRxTxS.astype(jnp.float32), -1e30)
    p_BxGxRxTxS = jax.nn.softmax(s_BxGxRxTxS, axis=-1).astype(v_BxTxGxK.dtype)
    o_BxTxGxRxK = jnp.einsum("bgrts,bsgk->btgrk", p_BxGxRxTxS, v_BxTxGxK)
    return o_BxTxGxRxK.reshape(B, T, H, K)


def attention_flash(q_BxTxHxK, k_BxTxGxK, v_BxTxGxK):
    """A Pallas flash-attention kernel: the TPU one on TPU, the Triton one on GPU."""
    H = q_BxTxHxK.shape[2]
    rep = H // k_BxTxGxK.shape[2]
    k_BxTxHxK = jnp.repeat(k_BxTxGxK, rep, axis=2)
    v_BxTxHxK = jnp.repeat(v_BxTxGxK, rep, axis=2)
    scale = 1.0 / np.sqrt(q_BxTxHxK.shape[3])
    backend = jax.default_backend()
    if backend == "tpu":
        from jax.experimental.pallas.ops.tpu import flash_attention as tpu_fa
        t = lambda x: x.transpose(0, 2, 1, 3)
        o = tpu_fa.flash_attention(t(q_BxTxHxK), t(k_BxTxHxK), t(v_BxTxHxK), causal=True, sm_scale=scale)
        return t(o)
    if backend == "gpu":
        from jax.experimental.pallas.ops.gpu import attention as gpu_fa
        return gpu_fa.mha(q_BxTxHxK, k_BxTxHxK, v_BxTxHxK, None, sm_scale=scale, causal=True)
    raise SystemExit(f"--attention flash needs a TPU or GPU backend (this is {backend}); use naive or dpa")


def block(cfg: Config, x_BxTxD, lp: dict):
    """One decoder layer: pre-norm attention with RoPE and GQA, then a SwiGLU MLP."""
    B, T, _ = x_BxTxD.shape
    H, G, K = cfg.n_heads, cfg.n_kv_heads, cfg.head_dim
    c = lambda w: w.astype(x_BxTxD.dtype)
    h_BxTxD = rms_norm(x_BxTxD, lp["attn_norm_LxD"])
    q_BxTxHxK = rope((h_BxTxD @ c(lp["wq_LxDxHK"])).reshape(B, T, H, K))
    k_BxTxGxK = rope((h_BxTxD @ c(lp["wk_LxDxGK"])).reshape(B, T, G, K))
    v_BxTxGxK = (h_BxTxD @ c(lp["wv_LxDxGK"])).reshape(B, T, G, K)
    if cfg.attention == "naive":
        o_BxTxHxK = attention_naive(q_BxTxHxK, k_BxTxGxK, v_BxTxGxK)
    elif cfg.attention == "dpa":
        o_BxTxHxK = jax.nn.dot_product_attention(q_BxTxHxK, k_BxTxGxK, v_BxTxGxK, is_causal=True)
    elif cfg.attention == "flash":
        o_BxTxHxK = attention_flash(q_BxTxHxK, k_BxTxGxK, v_BxTxGxK)
    else:
        raise SystemExit(f"unknown --attention {cfg.attention!r}")
    x_BxTxD = x_BxTxD + o_BxTxHxK.reshape(B, T, H * K) @ c(lp["wo_LxHKxD"])
    h_BxTxD = rms_norm(x_BxTxD, lp["mlp_norm_LxD"])
    gate_BxTxF = jax.nn.silu(h_BxTxD @ c(lp["w_gate_LxDxF"]))
    up_BxTxF = h_BxTxD @ c(lp["w_up_LxDxF"])
    return x_BxTxD + (gate_BxTxF * up_BxTxF) @ c(lp["w_down_LxFxD"])


REMAT_POLICIES = {
    "full": None,
    "dots_saveable": jax.checkpoint_policies.dots_saveable,
    "dots_with_no_batch_dims_saveable": jax.checkpoint_policies.dots_with_no_batch_dims_saveable,
}


def forward(cfg: Config, params: dict, tokens_BxT):
    x_BxTxD = params["embed_VxD"][tokens_BxT].astype(cfg.compute_dtype)
    layer = functools.partial(block, cfg)
    if cfg.remat != "none":
        layer = jax.checkpoint(layer, policy=REMAT_POLICIES[cfg.remat])
    n_run = cfg.n_layers - 1 if cfg.decoy_skip_layer else cfg.n_layers
    if cfg.scan:
        layers = jax.tree.map(lambda w: w[:n_run], params["layers"])
        x_BxTxD, _ = jax.lax.scan(lambda x, lp: (layer(x, lp), None), x_BxTxD, layers)
    else:
        for i in range(n_run):
            x_BxTxD = layer(x_BxTxD, jax.tree.map(lambda w, i=i: w[i], params["layers"]))
    x_BxTxD = rms_norm(x_BxTxD, params["final_norm_D"])
    return (x_BxTxD @ params["unembed_DxV"].astype(x_BxTxD.dtype)).astype(jnp.float32)


def loss_fn(cfg: Config, params: dict, tokens_BxT):
    logits_BxTxV = forward(cfg, params, tokens_BxT[:, :-1])
    targets_BxT = tokens_BxT[:, 1:]
    logp_BxTxV = jax.nn.log_softmax(logits_BxTxV, axis=-1)
    return -jnp.mean(jnp.take_along_axis(logp_BxTxV, targets_BxT[..., None], axis=-1))


# ----------------------------------------------------------------------------- optimizer and step

def adamw_init(params):
    zeros = lambda p: jnp.zeros_like(p, dtype=jnp.float32)
    return {"m": jax.tree.map(zeros, params), "v": jax.tree.map(zeros, params), "t": jnp.zeros((), jnp.int32)}


def adamw_update(cfg: Config, params, grads, opt, b1=0.9, b2=0.95, eps=1e-8, wd=0.01):
    t = opt["t"] + 1
    m = jax.tree.map(lambda m, g: b1 * m + (1 - b1) * g.astype(jnp.float32), opt["m"], grads)
    v = jax.tree.map(lambda v, g: b2 * v + (1 - b2) * jnp.square(g.astype(jnp.float32)), opt["v"], grads)
    bc1, bc2 = 1 - b1 ** t, 1 - b2 ** t

    def upd(p, m, v):
        p32 = p.astype(jnp.float32)
        p32 = p32 - cfg.lr * ((m / bc1) / (jnp.sqrt(v / bc2) + eps) + wd * p32)
        return p32.astype(p.dtype)

    return jax.tree.map(upd, params, m, v), {"m": m, "v": v, "t": t}


def train_step(cfg: Config, params, opt, tokens_AxMxT):
    """One optimizer step over ``grad_accum`` (A) micro-batches of M sequences each."""
    grad_fn = jax.value_and_grad(functools.partial(loss_fn, cfg))

    def micro(acc, tokens_MxT):
        loss, grads = grad_fn(params, tokens_MxT)
        return jax.tree.map(jnp.add, acc, (loss, grads)), None

    zero = (jnp.zeros((), jnp.float32), jax.tree.map(lambda p: jnp.zeros_like(p, jnp.float32), params))
    (loss, grads), _ = jax.lax.scan(micro, zero, tokens_AxMxT)
    loss, grads = jax.tree.map(lambda x: x / cfg.grad_accum, (loss, grads))
    params, opt = adamw_update(cfg, params, grads, opt)
    return params, opt, loss


DATA_VERSION = 2  # 2: each step's batch depends only on (seed, step, shape), so --steps never changes the data


def make_batch(cfg: Config, step: int) -> np.ndarray:
    """Learnable synthetic data for one step: each sequence counts up from a random start by a stride of 1 to 4.
    Seeded by (seed, step) alone: the first steps see the same tokens whatever ``--steps`` is."""
    rng = np.random.default_rng([cfg.seed, step])
    T = cfg.seq_len + 1
    start = rng.integers(0, cfg.vocab, size=(cfg.batch, 1))
    stride = rng.integers(1, 5, size=(cfg.batch, 1))
    toks = (start + stride * np.arange(T)[None, :]) % cfg.vocab
    M = cfg.batch // cfg.grad_accum
    return toks.astype(np.int32).reshape(cfg.grad_accum, M, T)


def make_batches(cfg: Config) -> np.ndarray:
    return np.stack([make_batch(cfg, i) for i in range(cfg.steps)])


# ----------------------------------------------------------------------------- accounting

def param_counts(cfg: Config) -> dict:
    D, F, V, L, K, H, G = cfg.d_model, cfg.d_ff, cfg.vocab, cfg.n_layers, cfg.head_dim, cfg.n_heads, cfg.n_kv_heads
    per_layer_mm = D * H * K + 2 * D * G * K + H * K * D + 3 * D * F
    return {"total": V * D + L * (per_layer_mm + 2 * D) + D + D * V,
            "matmul": L * per_layer_mm + D * V}  # the embedding lookup is a gather, not a matmul


def model_flops(cfg: Config) -> dict:
    """Training FLOPs per optimizer step (forward + backward = 3x forward); remat recompute not counted."""
    T = cfg.seq_len
    tokens = cfg.tokens_per_step
    dense = 2 * param_counts(cfg)["matmul"]
    attn_full = 4 * cfg.n_layers * T * cfg.n_heads * cfg.head_dim  # QK^T and PV per token, all key positions
    return {"causal": 3 * tokens * (dense + attn_full / 2), "noncausal": 3 * tokens * (dense + attn_full)}


def xla_flops(compiled) -> float | None:
    ca = compiled.cost_analysis()
    if isinstance(ca, (list, tuple)):
        ca = ca[0] if ca else {}
    return float(ca["flops"]) if ca and "flops" in ca else None


def peak_memory(compiled) -> tuple[int | None, str]:
    stats = jax.devices()[0].memory_stats() or {}
    if stats.get("peak_bytes_in_use"):
        return int(stats["peak_bytes_in_use"]), "device peak_bytes_in_use"
    ma = compiled.memory_analysis()
    if ma is not None:
        total = sum(int(getattr(ma, k, 0) or 0) for k in
                    ("argument_size_in_bytes", "output_size_in_bytes", "temp_size_in_bytes"))
        return total, "compiled memory_analysis (arguments + outputs + temporaries)"
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, "host max RSS"


# ----------------------------------------------------------------------------- main

def run_steps(step, params, opt, batches, profile_dir: str | None) -> tuple[list[float], list[float]]:
    """Run and time every step: each one synchronised (``block_until_ready``) before its clock stops, then a step
    line ``{"step": i, "loss": ..., "step_time_s": ...}``, which the runner times with its own clock (the
    integrity check: reported step times against the intervals it saw). With ``profile_dir``, the steps after the
    first are traced."""
    losses, step_times = [], []
    for i in range(len(batches)):
        if profile_dir and i == 1:  # trace the steady-state steps, not the first one
            jax.profiler.start_trace(profile_dir)
        t = time.perf_counter()
        with jax.profiler.StepTraceAnnotation("train", step_num=i):
            params, opt, loss = step(params, opt, batches[i])
            loss = float(jax.block_until_ready(loss))
        step_times.append(time.perf_counter() - t)
        losses.append(loss)
        print(json.dumps({"step": i, "loss": round(loss, 6), "step_time_s": round(step_times[-1], 6)}), flush=True)
    if profile_dir and len(batches) > 1:
        jax.profiler.stop_trace()
    return losses, step_times


def main(argv: list[str] | None = None) -> dict:
    cfg = parse_args(argv)
    params = init_params(cfg, jax.random.PRNGKey(cfg.seed))
    opt = adamw_init(params)
    batches = make_batches(cfg)
    step = jax.jit(functools.partial(train_step, cfg), donate_argnums=(0, 1) if cfg.donate else ())

    t0 = time.perf_counter()
    compiled = step.lower(params, opt, batches[0]).compile()
    compile_s = time.perf_counter() - t0
    flops_xla = xla_flops(compiled)

    losses, step_times = run_steps(step, params, opt, batches, os.environ.get("AUTORESEARCH_PROFILE_DIR"))

    result = report(cfg, compiled, flops_xla, compile_s, step_times, losses)
    print_card(cfg, result, statistics.median(result["step_times_s"][1:] or result["step_times_s"]))
    print(json.dumps(result), flush=True)  # the contract: the LAST stdout line, one JSON object
    return result


def devices_used(compiled) -> int:
    """The devices the compiled step runs on (its shardings'), not every device the host has: an unsharded step
    on an 8-chip host runs on one, and MFU per chip divided by 8 was 8x too low."""
    try:
        shardings = jax.tree_util.tree_leaves((compiled.input_shardings, compiled.output_shardings))
        return max(1, len({d for s in shardings for d in s.device_set}))
    except (AttributeError, TypeError):  # an older JAX without shardings on the compiled step: every device, as
        return jax.device_count()          # before (a per-chip figure then errs low, never high)


def report(cfg: Config, compiled, flops_xla, compile_s: float, step_times: list[float], losses: list[float]) -> dict:
    """The JSON line's fields (experiments/README.md): what ran, how long each step took, the losses, FLOPs and
    memory. The metric code: a loop file protects it (``protected: [experiments/llama_train.py::report]``)."""
    mem, mem_source = peak_memory(compiled)
    flops = model_flops(cfg)
    dev = jax.devices()[0]
    result = {
        "schema": "autoresearch-exp/1",
        "model": "llama",
        "config": dataclasses.asdict(cfg),
        "params": param_counts(cfg)["total"],
        "platform": jax.default_backend(),
        "device_kind": dev.device_kind,
        "n_devices": devices_used(compiled),
        "tokens_per_step": cfg.tokens_per_step,
        # What fixes the math: runs with the same shape must trace the same early loss trajectory.
        "shape": {**{k: getattr(cfg, k) for k in ("n_layers", "d_model", "n_heads", "n_kv_heads", "d_ff", "vocab",
                                                   "seq_len", "batch", "lr", "seed")}, "data": DATA_VERSION},
        "warmup_steps": 1,
        "step_times_s": [round(s, 6) for s in step_times],
        "compile_s": round(compile_s, 4),
        "losses": [round(x, 6) for x in losses],
        "flops_per_step": flops,
        "flops_per_step_xla": flops_xla,
        "peak_memory_bytes": mem,
        "peak_memory_source": mem_source,
        "jax_version": jax.__version__,
        "xla_flags": os.environ.get("XLA_FLAGS", ""),
    }
    return result


def print_card(cfg: Config, r: dict, med: float) -> None:
    f = r["flops_per_step"]
    xla = r["flops_per_step_xla"]
    print(f"llama  {r['params'] / 1e6:.2f}M params  L={cfg.n_layers} D={cfg.d_model} H={cfg.n_heads}/"
          f"{cfg.n_kv_heads} F={cfg.d_ff} V={cfg.vocab}  B={cfg.batch}x{cfg.seq_len} accum={cfg.grad_accum}")
    print(f"  {cfg.compute_dtype}/{cfg.param_dtype}  remat={cfg.remat} scan={cfg.scan} "
          f"donate={cfg.donate} attention={cfg.attention}")
    print(f"  {r['platform']} ({r['device_kind']}) x{r['n_devices']}  jax {r['jax_version']}  "
          f"python {platform.python_version()}")
    print(f"  compile {r['compile_s']:.2f} s   step {med * 1e3:.2f} ms (median of {len(r['step_times_s']) - 1})"
          f"   {cfg.tokens_per_step / med:,.0f} tokens/s")
    print(f"  model FLOPs/step {f['causal'] / 1e9:.3f} G causal, {f['noncausal'] / 1e9:.3f} G non-causal;"
          f" XLA cost_analysis {xla / 1e9 if xla else float('nan'):.3f} G")
    print(f"  loss {r['losses'][0]:.4f} -> {r['losses'][-1]:.4f}   peak memory "
          f"{(r['peak_memory_bytes'] or 0) / 2**20:.1f} MiB ({r['peak_memory_source']})")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
