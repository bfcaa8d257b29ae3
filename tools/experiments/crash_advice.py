"""What to try after a crash, from the crash's own facts: the allocator's figures of an out-of-memory run against
the run's size knobs, the step at which a loss went non-finite and the compute dtype, the XLA flags a failed
compile ran with, the frame a shape error came from. Each suggestion names the knob or flag to move and links the
knowledge base's concept page when it has one. Pure: a crash record, a configuration and an environment in,
markdown bullets out (for an experiment page and a crash signature page).
"""

from __future__ import annotations

import math
import posixpath
import re

from ..mdtext import code

SIZE = re.compile(r"batch|seq|tokens|micro", re.I)
SHAPE = re.compile(r"batch|seq|tokens|micro|heads|dim|d.model|block|mesh|shard|width|hidden|vocab", re.I)
REMAT = re.compile(r"remat|checkpoint", re.I)
ACCUM = re.compile(r"accum", re.I)
DTYPE = re.compile(r"dtype|precision", re.I)
LR = re.compile(r"^-*(lr|learning.rate)$", re.I)
FLAG_VARS = ("XLA_FLAGS", "LIBTPU_INIT_ARGS")
NO_REMAT = {"none", "no", "false", "off", "", "0"}


def _gib(b: float) -> str:
    return f"{b / 2 ** 30:.2f} GiB"


def _number(v) -> float | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, (int, float)):
        return float(v)
    try:
        return float(str(v))
    except ValueError:
        return None


def _knob(config: dict, pattern: re.Pattern) -> tuple[str, object] | None:
    return next(((k, v) for k, v in config.items() if pattern.search(str(k))), None)


def what_to_try(crash: dict, config: dict, env: dict, concept=lambda slug: None) -> list[str]:
    """Markdown bullets for ``crash`` (a record's ``crash``) of a run with ``config`` (its knobs or flags) and
    ``env``; ``concept(slug)`` is a link to that concept's page, or None when the knowledge base has none."""
    def see(slug: str, words: str) -> str:
        link = concept(slug)
        return f"; see [{words}]({link})" if link else ""

    kind = crash.get("kind") or "other"
    out = {"oom": _oom, "nan": _nan, "compile": _compile, "shape": _shape, "timeout": _timeout, "hang": _hang,
           "killed": _killed, "not_run": _not_run, "syntax": _syntax, "signal": _signal,
           "stopped": _stopped, "lost": _lost}.get(kind, _other)(crash, config, env, see)
    return [f"- {line}" for line in out]


def _oom(crash, config, env, see) -> list[str]:
    oom = crash.get("oom") or {}
    need, used, avail = oom.get("needed_bytes"), oom.get("used_bytes"), oom.get("available_bytes")
    out = []
    size = _knob(config, SIZE)
    v = _number(size[1]) if size else None
    if need and used is not None and avail:
        short = used + need - avail
        if short > 0:
            out.append(f"It was {_gib(short)} short: {_gib(need)} asked for with {_gib(used)} of {_gib(avail)} in "
                       "use.")
        fit = math.floor(v * avail / (used + need)) if size and v and v > 1 and short > 0 else 0
        if fit >= 1:
            out.append(f"{code(f'{size[0]}={size[1]}')}: at most {code(f'{size[0]}={fit}')} fits if the memory "
                       "scaled with it alone; weights and optimizer state do not, so fewer may.")
    elif need and size and v and v >= 2:
        out.append(f"{code(f'{size[0]}={size[1]}')} asked for one buffer of {_gib(need)}; halve it "
                   f"({code(f'{size[0]}={int(v // 2)}')}) to see whether that buffer shrinks with it.")
    largest = (oom.get("largest_bytes") or [None])[0]
    if largest and avail and largest >= 0.25 * avail:
        out.append(f"One allocation is {_gib(largest)} ({100 * largest / avail:.0f} % of the device): a single "
                   "buffer such as the logits (batch × sequence × vocabulary, in float32): compute the loss in "
                   "chunks, or shard it.")
    remat = _knob(config, REMAT)
    if remat is None or str(remat[1]).lower() in NO_REMAT:
        where = f"{code(f'{remat[0]}=full')}, or a policy saving only the matmul outputs" if remat else \
            "`jax.checkpoint`"
        out.append(f"Recompute activations in the backward pass instead of keeping them ({where})"
                   + see("rematerialization", "rematerialization") + ".")
    accum = _knob(config, ACCUM)
    n = _number(accum[1]) if accum else None
    out.append((f"{code(f'{accum[0]}={int(2 * n)}')} with half the micro-batch: the same tokens per optimizer step"
                if accum and n else
                "Accumulate gradients over smaller micro-batches: the same tokens per optimizer step")
               + see("gradient-accumulation", "gradient accumulation") + ".")
    out.append("Keep optimizer state or saved activations in host memory" + see("host-offload", "host offload") + ".")
    return out


def _nan(crash, config, env, see) -> list[str]:
    step = crash.get("nan_step")
    out = []
    lr = _knob(config, LR)
    if step == 0:
        out.append("The first loss was not finite, before any update: the initialization, the data or the loss "
                   "itself (a log of zero, a mean over an empty mask). Compare it with the baseline's first loss.")
    elif step is not None:
        out.append(f"After {step} finite step{'s' if step > 1 else ''} the updates made it diverge: "
                   + (f"lower {code(f'{lr[0]}={lr[1]}')}" if lr else "a lower learning rate")
                   + ", a longer warm-up, or gradient clipping.")
    dtype = _knob(config, DTYPE)
    if dtype and "16" in str(dtype[1]):
        out.append(f"With {code(f'{dtype[0]}={dtype[1]}')}: keep the softmax, the norms and the loss in float32 "
                   "(float16 also needs loss scaling).")
    return out or ["Find the first non-finite value: `jax.config.update('jax_debug_nans', True)` stops at the "
                   "operation that made it."]


def _compile(crash, config, env, see) -> list[str]:
    out = []
    flags = [(k, env[k]) for k in FLAG_VARS if env.get(k)]
    for k, v in flags:
        out.append(f"The run set {code(f'{k}={v}')}: a flag this backend or version does not take aborts the "
                   "compile. Rerun without it, then add the flags back one at a time"
                   + see("xla-flags", "XLA flags") + ".")
    msg = str(crash.get("message") or "").lower()
    if any(w in msg for w in ("unimplemented", "not supported", "unsupported", "not implemented")):
        out.append("The backend cannot compile this configuration: it is invalid on this hardware, not a flake; "
                   "do not retry it as is.")
    return out or ["Read XLA's own lines above: the failed check or pass names what it could not compile."]


def _shape(crash, config, env, see) -> list[str]:
    frame = _inner(crash, "model")
    knobs = [code(f"{k}={v}") for k, v in config.items() if SHAPE.search(str(k))]
    where = f" at {frame}" if frame else ""
    return [f"The shapes this configuration made met code that tiles them{where}: check that "
            + (", ".join(knobs) if knobs else "the sizes") + " divide what it splits by (a kernel's block size, "
            "the mesh's axes, the number of heads)" + see("sharding", "sharding") + "."]


def _timeout(crash, config, env, see) -> list[str]:
    if "printed nothing" in str(crash.get("message") or ""):  # the runner's clock: silent, not slow
        return ["It printed nothing for most of its time: it looks hung, not slow. Run it with `--hang-after` "
                "(loop file `hang_s`) to take its Python stack when it goes silent: a collective waiting for a "
                "peer, a data loader, a lock, or a device sync."]
    return ["It was still printing when its time ran out: a slower configuration or a longer compile. Raise the "
            "timeout (`--timeout`; loop file `timeout_s`) or run fewer steps; `--hang-after` (`hang_s`) tells a "
            "silent run from a slow one and takes its stack."]


def _hang(crash, config, env, see) -> list[str]:
    frames = crash.get("frames") or []
    if any("compile" in str(f.get("func") or "").lower() for f in frames if f.get("role") == "framework"):
        return ["It was compiling when it went silent (a compile frame is on its stack): a long compile, not a "
                "deadlock. Give `--hang-after` (loop file `hang_s`) more than the compile takes, or cache compiles "
                "(`--compile-cache`)."]
    frame = _inner(crash, "model") or _inner(crash, "framework")
    if not frames:  # a remote runner cancels the job without a stack; a local one without py-spy took none either
        return ["It went silent and was stopped; no Python stack was taken (a remote worker's job is cancelled "
                "without one). Run `py-spy dump --pid <PID>` on the worker while it hangs, or run it here with "
                "`--hang-after` to take its stack: a collective waiting for a peer, a data loader, a lock, or a "
                "device sync."]
    return [f"Its Python stack is in the log{f'; it waited at {frame}' if frame else ''}: a collective waiting for "
            "a peer, a data loader, a lock, or a device sync. Run it alone with the same flags to tell a deadlock "
            "from a stall."]


def _killed(crash, config, env, see) -> list[str]:
    return ["Killed by a signal, not an exception: SIGKILL with no Python error is often the host's out-of-memory "
            "killer (host RAM, not the device: `dmesg`), or a scheduler taking the machine back."]


def _not_run(crash, config, env, see) -> list[str]:
    return ["The command never ran: the job was not started or not submitted (the reason above). This says nothing "
            "about the configuration: look at the cluster (quota, queue, node pool), then run it again."]


def _syntax(crash, config, env, see) -> list[str]:
    frame = _inner(crash, "model") or _inner(crash, "other") or _inner(crash, "framework")
    return [f"The code does not parse{f' at {frame}' if frame else ''}: nothing ran. Fix that line (the message "
            "above says what Python expected) and run it again; it says nothing about the configuration."]


def _signal(crash, config, env, see) -> list[str]:
    frame = _inner(crash, "model")
    return ["Native code died under Python (a segmentation fault, an abort, a bus error): no Python exception was "
            "raised" + (f"; Python's own stack stopped at {frame}" if frame else "")
            + ". A custom kernel or extension reading out of bounds, a library built for another version, or a "
            "failed check in the runtime: run it alone with `PYTHONFAULTHANDLER=1` (the local runner sets it) and "
            "read the native frames with `gdb -batch -ex bt --args python ...`."]


def _stopped(crash, config, env, see) -> list[str]:
    return ["The runner was stopped (Ctrl-C or SIGTERM) while this ran: not a failure of the configuration. Run it "
            "again."]


def _lost(crash, config, env, see) -> list[str]:
    return ["The cluster lost the job under this arm (the reason above: a failed node, a cancel from outside, "
            "expired credentials): nothing is known about the configuration. Look at the job's own record "
            "(`sacct -j`, `kubectl describe`), then run it again."]


def _other(crash, config, env, see) -> list[str]:
    frame = _inner(crash, "model")
    if frame:
        return [f"It was raised at {frame}, the innermost frame of the model's code."]
    if crash.get("frames"):
        return ["Read the innermost frames below: no frame of the model's own code was in the traceback."]
    said = str(crash.get("message") or "")[:200]  # no traceback at all (a shell's exit 3): there were no frames
    if "exit code 127" in said or "command not found" in said or "not found" in said.lower():
        return [f"A program the command runs was not found ({code(said)}): check its name, and that it is on the "
                "worker's PATH."]
    return [f"It printed no traceback; the last it said was {code(said)}: start from there."]


def _inner(crash: dict, role: str) -> str:
    f = next((f for f in reversed(crash.get("frames") or []) if f.get("role") == role), None)
    if not f:
        return ""
    return code(f"{posixpath.basename(str(f.get('rel') or f.get('file') or ''))}:{f.get('line')} {f.get('func')}")
