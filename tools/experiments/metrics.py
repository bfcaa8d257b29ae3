"""Read a training script's final JSON line and turn it into run metrics.

The contract (experiments/README.md): the last stdout line that is a JSON object with
``step_times_s`` (seconds per optimizer step, first ``warmup_steps`` include compilation) and
``tokens_per_step``; optionally ``losses``, ``flops_per_step`` ({causal, noncausal} or a number),
``n_devices``, ``device_kind``, ``platform``, ``peak_memory_bytes``, ``config``, ``shape``, ``compile_s``.
"""

from __future__ import annotations

import json
import math
import statistics

from ..jsonvalues import finite
from . import devices

BASES = ("causal", "noncausal")


def parse_result(text: str) -> dict | None:
    """The last line of ``text`` that is a JSON object carrying ``step_times_s`` or ``tokens_per_step``; None when
    absent. Its fields are checked apart (``validate``), so a broken field is named rather than unseen."""
    for line in reversed(text.splitlines()):
        line = line.strip()
        if not (line.startswith("{") and line.endswith("}")):
            continue
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if isinstance(obj, dict) and ("step_times_s" in obj or "tokens_per_step" in obj):
            return obj
    return None


MAX_DEVICES = 1 << 20  # the devices a run can report (10**400 crashed the runner dividing tokens/s by it)


def as_float(v) -> float:
    """A reported number as a float; an integer too large for one (a loss of 10**400) is infinite, as it is
    for every purpose here (a non-finite loss), where ``float`` raised and crashed the runner."""
    try:
        return float(v)
    except OverflowError:
        return math.inf if v > 0 else -math.inf


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def finite_number(v) -> bool:
    """A real, finite number: json reads ``Infinity`` and ``NaN`` back, and a bool is not a figure."""
    try:
        return _number(v) and math.isfinite(v)
    except OverflowError:  # an integer too large for a float (a result line's 10**400)
        return False


def _positive(v) -> bool:
    return finite_number(v) and v > 0


def validate(r: dict) -> str | None:
    """What breaks the JSON-line contract, naming the field (``None``: a usable result). Non-finite losses are not
    a contract break: the run ran and its math broke (see ``arms.check``)."""
    times = r.get("step_times_s")
    if not isinstance(times, list) or not times:
        return f"`step_times_s`: expected a non-empty list of seconds, got {_short(times)}"
    for i, t in enumerate(times):
        if not _positive(t):
            return f"`step_times_s`: step {i} is {_short(t)}, not a positive finite number of seconds"
    if not _positive(r.get("tokens_per_step")):
        return f"`tokens_per_step`: expected a positive number, got {_short(r.get('tokens_per_step'))}"
    rate = r["tokens_per_step"] / max(times)
    fastest = r["tokens_per_step"] / min(times)
    if not (math.isfinite(fastest) and rate >= 1e-3):  # 1e308 tokens in 10 ms, or one token in 1e308 s
        return (f"`tokens_per_step` / `step_times_s`: imply {rate:.3g} to {fastest:.3g} tokens/s, not a finite rate "
                "a run can have")
    w = r.get("warmup_steps", 1)
    if not (isinstance(w, int) and not isinstance(w, bool) and w >= 0):
        return f"`warmup_steps`: expected a whole number >= 0, got {_short(w)}"
    if w >= len(times):  # the compile steps would be timed as the run's speed
        held = f"`step_times_s` holds {len(times)} step{'s' * (len(times) != 1)}"
        if "warmup_steps" not in r:
            return (f"{held}, and its first is taken as warm-up (`warmup_steps` unset: 1 by default): no steady step "
                    "is left to time (run more steps, or report `warmup_steps: 0` if no step timed compilation)")
        return f"`warmup_steps`: {w}, and {held}: no steady step is left to time (run more steps)"
    losses = r.get("losses")
    if losses is not None and (not isinstance(losses, list) or not all(_number(x) for x in losses)):
        return f"`losses`: expected a list of numbers, got {_short(losses)}"
    f = r.get("flops_per_step")
    vals = list(f.values()) if isinstance(f, dict) else [f]
    if not all(v is None or (finite_number(v) and v >= 0) for v in vals):
        return f"`flops_per_step`: expected a number or {{causal, noncausal}} numbers, got {_short(f)}"
    for k in ("flops_per_step_xla", "peak_memory_bytes", "compile_s"):
        v = r.get(k)
        if v is not None and not (finite_number(v) and v >= 0):
            return f"`{k}`: expected a finite number >= 0 or null, got {_short(v)}"
    n = r.get("n_devices")
    if n is not None and not (isinstance(n, int) and not isinstance(n, bool) and 1 <= n <= MAX_DEVICES):
        return f"`n_devices`: expected a whole number from 1 to {MAX_DEVICES:,}, got {_short(n)}"
    for k in ("shape", "config"):
        if r.get(k) is not None and not isinstance(r[k], dict):
            return f"`{k}`: expected an object, got {_short(r[k])}"
    for k in ("device_kind", "platform"):
        if r.get(k) is not None and not isinstance(r[k], str):
            return f"`{k}`: expected a string, got {_short(r[k])}"
    return None


def _short(v) -> str:
    s = json.dumps(v) if not isinstance(v, float) else repr(v)
    return s if len(s) <= 60 else s[:57] + "..."



def _flops(result: dict) -> dict[str, float]:
    f = result.get("flops_per_step")
    if isinstance(f, dict):
        return {b: float(f[b]) for b in BASES if f.get(b)}
    if isinstance(f, (int, float)) and f:
        return {str(result.get("flops_basis", "noncausal")): float(f)}
    return {}


def compute(result: dict, peak_flops: float | None = None) -> dict:
    """Metrics of one run: tokens/s (total and per chip), step time median and spread over steady
    steps (warm-up excluded), MFU per basis (null with a reason when the peak is unknown), memory."""
    times = [float(t) for t in result["step_times_s"]]
    warm = int(result.get("warmup_steps", 1))
    steady = times[warm:] if len(times) > warm else times
    med = statistics.median(steady)
    q = statistics.quantiles(steady, n=10, method="inclusive") if len(steady) >= 2 else [med] * 9
    n_dev = int(result.get("n_devices") or 1)
    peak = devices.lookup(result.get("device_kind"), result.get("platform"), peak_flops)
    n_chips = max(1, n_dev // peak.devices_per_chip) if n_dev >= peak.devices_per_chip else 1
    tps = float(result["tokens_per_step"]) / med
    m = {
        "tokens_per_s": round(tps, 2),
        "tokens_per_step": float(result["tokens_per_step"]),  # as reported: a later same-shape run is checked by it
        "tokens_per_s_per_chip": round(tps / n_chips, 2),
        "tokens_per_s_best": round(float(result["tokens_per_step"]) / min(steady), 2),  # the fastest steady step
        "step_time_ms": round(med * 1e3, 4),
        "step_time_min_ms": round(min(steady) * 1e3, 4),
        "step_time_spread_pct": round(100 * (q[8] - q[0]) / med, 2),  # p90 - p10 over the median
        "steady_steps": len(steady),
        "compile_s": result.get("compile_s"),
        "n_devices": n_dev,
        "n_chips": n_chips,
        "device_kind": result.get("device_kind"),
        "platform": result.get("platform"),
        "peak_flops_per_device": peak.peak_flops,
        "peak_flops_source": peak.source,
        # six significant digits, not four decimals: a CPU run's 0.2 MB is not 0.0 GB
        "memory_gb": float(f"{result['peak_memory_bytes'] / 1e9:.6g}") if result.get("peak_memory_bytes") else None,
        "memory_source": result.get("peak_memory_source"),
        "loss_final": finite(as_float((result.get("losses") or [math.nan])[-1])),
    }
    flops = _flops(result)
    for b in BASES:
        m[f"flops_per_step_{b}"] = flops.get(b)
    for b in BASES:
        v = None
        if b in flops and peak.peak_flops:
            v = round(100 * flops[b] / med / (peak.peak_flops * n_dev), 3)
        m[f"mfu_{b}_percent"] = v
    basis = "causal" if m["mfu_causal_percent"] is not None else "noncausal"
    m["mfu_percent"] = m[f"mfu_{basis}_percent"]
    m["mfu_basis"] = basis if m["mfu_percent"] is not None else None
    if m["mfu_percent"] is None:
        m["mfu_note"] = peak.source if not peak.peak_flops else "the script reported no flops_per_step"
    if result.get("flops_per_step_xla") and flops.get("noncausal"):
        m["xla_flops_ratio"] = round(float(result["flops_per_step_xla"]) / flops["noncausal"], 3)
    return m
