"""From the runs' JSON results to a filed record: metrics over the repeats, the comparison against the
baseline and the current best (gain, noise band, memory, semantics), and the verdict. Pure: data in, data out."""

from __future__ import annotations

import statistics

from . import metrics, records, verdict
from .command import Proc


def crash_reason(last: Proc, timeout: float) -> str:
    if last.stopped_by:
        return f"stopped by {last.stopped_by}: the command's process group was killed"
    if last.timed_out:
        return f"timed out after {timeout:g} s"
    return f"exit code {last.rc}" + ("" if last.rc else ", no JSON result line")


def _aggregate(good: list[Proc], peak_flops: float | None) -> tuple[dict, list[float]]:
    """Median metrics over the good runs (the middle run's other fields), and each run's tokens/s."""
    per_run = [metrics.compute(p.result, peak_flops) for p in good]
    m = dict(per_run[len(per_run) // 2 if len(per_run) % 2 else 0])
    tps = [x["tokens_per_s"] for x in per_run]
    m["tokens_per_s"] = round(statistics.median(tps), 2)
    m["tokens_per_s_per_chip"] = round(m["tokens_per_s"] / m["n_chips"], 2)
    m["step_time_ms"] = round(statistics.median(x["step_time_ms"] for x in per_run), 4)
    for b in ("mfu_causal_percent", "mfu_noncausal_percent", "mfu_percent"):
        vals = [x[b] for x in per_run if x.get(b) is not None]
        m[b] = round(statistics.median(vals), 3) if vals else None
    return m, tps


def _semantics_reference(prior: list[dict], key: str) -> tuple[list | None, str]:
    """The earliest same-shape baseline or semantics-ok run in the lane."""
    for r in prior:
        if r.get("status") == "filed" and r.get("loss_trajectory") and \
                verdict.shape_key({"shape": r.get("shape"), "tokens_per_step": None}) == key and \
                (r.get("role") == "baseline" or (r.get("semantics") or {}).get("status") == "ok"):
            return r["loss_trajectory"], r["exp_id"]
    return None, ""


def judge(spec, rec: dict, ctx: dict, prior: list[dict], base_rec: dict | None, base_runs: list[Proc],
          var_runs: list[Proc], interleaved: bool) -> tuple[dict, verdict.Decision]:
    """The filed record (``rec`` plus metrics, comparison and verdict); fills ``ctx`` for the page body."""
    good = [p for p in var_runs if p.result is not None]
    crashed = var_runs[-1].result is None
    rec = dict(rec, repeats=len(var_runs), run_wall_s=[round(p.wall_s, 3) for p in var_runs], interleaved=interleaved)
    m: dict = {}
    tps: list[float] = []
    if crashed:
        ctx["log_tail"] = var_runs[-1].tail
        ctx["crash_reason"] = crash_reason(var_runs[-1], spec.timeout)
    else:
        m, tps = _aggregate(good, spec.peak_flops)
        res = good[-1].result
        rec["config"] = res.get("config")
        rec["shape"] = res.get("shape")
        rec["loss_trajectory"] = [round(float(x), 6) for x in (res.get("losses") or [])[:spec.semantics_steps]]
    rec["metrics"] = m

    is_baseline = spec.baseline or (base_rec is None and not crashed and
                                    not any(r.get("variant") == spec.variant and r.get("role") == "baseline"
                                            for r in prior))
    rec["role"] = "baseline" if is_baseline else "variant"
    if not is_baseline and base_rec is None:  # a baseline filed meanwhile by a concurrent run
        base_rec = records.baseline_for(prior, spec.variant)
    gain = band = mem_delta = None
    sem = None
    if not crashed:
        res = good[-1].result
        key = verdict.shape_key(res)
        base_ok = [p for p in base_runs if p.result is not None]
        if interleaved and base_ok:
            base_tps = [metrics.compute(p.result, spec.peak_flops)["tokens_per_s"] for p in base_ok]
            ctx["arms"] = {"base": base_tps, "var": tps}
            ref_res = base_ok[-1].result
            ref_losses = ref_res.get("losses") if verdict.shape_key(ref_res) == key else None
            ref_name = f"{base_rec['exp_id']} (rerun interleaved)"
            base_mem = metrics.compute(ref_res, spec.peak_flops).get("memory_gb")
        else:
            base_tps = [base_rec["metrics"]["tokens_per_s"]] if base_rec and base_rec.get("metrics") else []
            ref_losses, ref_name, base_mem = None, "", (base_rec or {}).get("metrics", {}).get("memory_gb")
        if ref_losses is None:
            ref_losses, ref_name = _semantics_reference(prior, key)
        if is_baseline and ref_losses is None:
            sem = verdict.Semantics("unchecked", tol=spec.loss_tol, reason="this run is the first of its shape: "
                                    "it becomes the semantics reference")
        else:
            sem = verdict.semantics(ref_losses, res.get("losses"), ref_name, spec.semantics_steps, spec.loss_tol)
        if base_tps and not is_baseline:
            base_med = statistics.median(base_tps)
            gain = round(100 * (m["tokens_per_s"] / base_med - 1), 3)
            band, ctx["band_how"] = verdict.noise_band(base_tps, tps, interleaved and bool(base_ok))
            rec["baseline"] = base_rec["exp_id"]
            if base_mem and m.get("memory_gb"):
                mem_delta = 100 * (m["memory_gb"] / base_mem - 1)
        best = records.best_for(prior, spec.variant)
        if best:
            rec["best"] = best["exp_id"]
            rec["gain_vs_best_pct"] = round(100 * (m["tokens_per_s"] / best["metrics"]["tokens_per_s"] - 1), 3)
        rec["semantics"] = {k: v for k, v in vars(sem).items() if v not in ("", None)}
    sep = verdict.separation(ctx["arms"]["base"], ctx["arms"]["var"]) if ctx.get("arms") else None
    d = verdict.decide(crashed=crashed, is_baseline=is_baseline, gain_pct=gain, band_pct=band, sem=sem,
                       memory_delta_pct=mem_delta, separated=sep)
    if crashed and var_runs[-1].stopped_by:
        d.reasons.insert(0, crash_reason(var_runs[-1], spec.timeout))
    rec.update({"status": "filed", "verdict": d.verdict, "ledger_status": d.status, "reasons": d.reasons,
                "gain_pct": gain, "noise_band_pct": band})
    return {k: v for k, v in rec.items() if v is not None}, d
