"""From what ran (``rounds.Runs``) to a filed record: metrics over the repeats, the comparison against the
baseline and the current best (paired interval, band, memory, semantics), and the verdict. Pure: data in, data out."""

from __future__ import annotations

import shlex
import statistics

from ..runners.process import log_end
from . import clocks, crash_facts, crash_pages, integrity, metrics, noise, records, stats, verdict
from .arms import ArmResult
from .pairs import clock_check as pairs_clock
from .sides import script_of
from .context import RunContext


def _median(values: list[float]) -> float:
    return statistics.median(values)


def aggregate(good: list[ArmResult]) -> dict:
    """Median metrics over the good runs (the middle run's other fields). MFU is recomputed from the median step
    time, so ``flops_per_step / step_time / (peak × devices)`` on the page gives it back by hand."""
    per_run = [a.metrics for a in good]
    m = dict(per_run[len(per_run) // 2 if len(per_run) % 2 else 0])
    m["tokens_per_s"] = round(_median([x["tokens_per_s"] for x in per_run]), 2)
    m["tokens_per_s_per_chip"] = round(m["tokens_per_s"] / m["n_chips"], 2)
    m["step_time_ms"] = round(_median([x["step_time_ms"] for x in per_run]), 4)
    # the per-run figures beside the median step: their medians too (the middle run's spread, 64 %, stood beside a
    # median step it was not measured around)
    for k, nd in (("tokens_per_s_best", 2), ("step_time_min_ms", 4), ("step_time_spread_pct", 2),
                  ("steady_steps", 0), ("compile_s", 4)):
        xs = [x[k] for x in per_run if isinstance(x.get(k), (int, float))]
        m[k] = (round(_median(xs), nd) if nd else int(round(_median(xs)))) if xs else None
    tokens = {x.get("tokens_per_step") for x in per_run}
    if len(tokens) == 1 and (t := tokens.pop()):  # the step times the median rates imply: with an even number of
        # runs the median of each is the mean of two middle ones (arithmetic for one, harmonic for the other), and
        # the page's step time and MFU disagreed with its tokens/s (the rates unrounded: a slow lane's 0.33 tokens/s
        # is no step time of 3030 ms)
        m["step_time_ms"] = round(1e3 * t / _median([t / (x["step_time_ms"] / 1e3) for x in per_run]), 4)
        mins = [x["step_time_min_ms"] for x in per_run if x.get("step_time_min_ms")]
        if mins:
            m["step_time_min_ms"] = round(1e3 * t / _median([t / (x / 1e3) for x in mins]), 4)
    peak = m.get("peak_flops_per_device")
    for b in metrics.BASES:
        f = m.get(f"flops_per_step_{b}")
        m[f"mfu_{b}_percent"] = round(100 * f / (m["step_time_ms"] / 1e3) / (peak * m["n_devices"]), 3) \
            if f and peak else None
    basis = m.get("mfu_basis")
    m["mfu_percent"] = m.get(f"mfu_{basis}_percent") if basis else None
    return metrics.finite(m)


def reference_losses(key: str, r, prior: list[dict]) -> tuple[list | None, str]:
    """The same-shape loss trajectory to check a run against: an interleaved baseline rerun of that shape, the
    compared record's own trajectory, the lane's earliest same-shape baseline or semantics-ok run, or the
    ``reference`` run; (None, "") when there is none."""
    for a in reversed(r.base):
        if a.ok and verdict.shape_key(a.result) == key and a.result.get("losses"):
            return a.result["losses"], f"{(r.base_rec or {}).get('exp_id')} (rerun interleaved)"
    b = r.base_rec or {}
    if b.get("loss_trajectory") and records.shape_key_of(b) == key and records.usable(b) is None:
        return b["loss_trajectory"], b["exp_id"]
    ref = records.semantics_reference(prior, key)
    if ref is not None:
        return ref["loss_trajectory"], ref["exp_id"]
    a = r.reference
    if a is not None and a.ok and verdict.shape_key(a.result) == key and a.result.get("losses"):
        return a.result["losses"], "the reference run (reference.log)"
    return None, ""


def reference_tokens(key: str, r, prior: list[dict]) -> tuple[float | None, str]:
    """Tokens per step a same-shape run reported (the same references as ``reference_losses``, in that order)."""
    for a in reversed(r.base):
        if a.ok and verdict.shape_key(a.result) == key and a.result.get("tokens_per_step"):
            return float(a.result["tokens_per_step"]), f"{(r.base_rec or {}).get('exp_id')} (rerun interleaved)"
    for b in (r.base_rec or {}, records.semantics_reference(prior, key) or {}):
        t = (b.get("metrics") or {}).get("tokens_per_step")  # a record from before it was kept has none
        if records.shape_key_of(b) == key and isinstance(t, (int, float)) and not isinstance(t, bool) and t > 0:
            return float(t), str(b.get("exp_id"))
    return None, ""


def reference_windows(key: str, r, prior: list[dict]) -> tuple[dict | None, str]:
    """The same-shape whole trajectory (``integrity.loss_windows``) to check a run's drift against: an interleaved
    baseline rerun's, else the compared record's or the lane's semantics reference's, as kept with them."""
    for a in reversed(r.base):
        if a.ok and verdict.shape_key(a.result) == key and integrity.loss_windows(a.result.get("losses")):
            return integrity.loss_windows(a.result["losses"]), f"{(r.base_rec or {}).get('exp_id')} (rerun interleaved)"
    for b in (r.base_rec or {}, records.semantics_reference(prior, key) or {}):
        if integrity.windows_ok(b.get("loss_windows")) and records.shape_key_of(b) == key:
            return b["loss_windows"], str(b.get("exp_id"))
    return None, ""


def check_semantics(spec, key: str, result: dict, r, prior: list[dict]) -> verdict.Semantics:
    ref, name = reference_losses(key, r, prior)
    return verdict.semantics(ref, result.get("losses"), name, spec.semantics_steps, spec.loss_tol)


def assess(spec, rec: dict, r, prior: list[dict], base_rec: dict | None, key: str | None,
           role: str, summary: dict | None = None) -> integrity.Integrity:
    """The integrity checks of the variant's good arms (``integrity``): each arm's step lines on the runner's clock,
    the profiled arm's compiled step and its trace (``summary``: its profile summary), the loss falling as
    the reference's, the protected files against the baseline's; a check the baseline passed and this run gives no
    evidence for."""
    out = integrity.Integrity()
    arms_ok = [a for a in ([r.profile] if r.profile is not None else []) + list(r.var) if a is not None and a.ok]
    for a in arms_ok:
        if not a.pairs:  # each arm's own status kept too: one arm's evidence never stands in for another's
            mine = integrity.Integrity()
            clocks.clock_check(a.result, clocks.step_lines(a.proc.log, a.proc.clock), mine, a.name,
                               clocked=bool(a.proc.clock))
            for f in mine.findings:
                out.add("clock", f)
            status = mine.checks.get("clock", "")
            if not mine.findings:
                out.add("clock", None, "" if status == "ok" else status.removeprefix("unchecked: "))
            out.facts.setdefault("clock", {}).update(mine.facts.get("clock", {}))
            out.facts.setdefault("clock_arms", {})[a.name] = status
    if role == "variant":  # the variant's timer against the baseline's, arm by arm, in the same rounds
        checked = out.facts.get("clock") or {}  # the variant arms' clocks, read above
        mine = [clocks.untimed_per_step(checked.get(a.name)) for a in r.var if a.ok and not a.pairs
                and out.facts.get("clock_arms", {}).get(a.name) == "ok"]
        base = [clocks.arm_untimed(a.result, clocks.step_lines(a.proc.log, a.proc.clock), a.name)
                for a in r.base if a.ok and not a.pairs and a.result is not None]
        if not any(base):  # compared with a stored record: its arms' clocks as filed
            stored = ((((base_rec or {}).get("integrity") or {}).get("facts") or {}).get("clock") or {}).values()
            base = [clocks.untimed_per_step(f) for f in stored]
        clocks.untimed_check([x for x in base if x], [x for x in mine if x], out)
    for a in r.all_arms:
        if a.kind == "pairs" and a.result is not None:
            pairs_clock(a, out)
    prof = r.profile if r.profile is not None else (r.var[0] if r.traced and r.var else None)
    if prof is not None and prof.ok:
        integrity.hlo_check(prof.result, r.hlo_facts, out, bool((base_rec or {}).get("hlo_fingerprint")))
        clocks.trace_check(prof.result, (summary or {}).get("steps"), out)
        if role == "variant":
            clocks.timed_ops_check([a for a in r.var if a is not None and a.ok and not a.pairs and a is not prof], out)
    else:
        out.add("hlo", None, "the run was not profiled (no HLO dump)")
        out.add("trace", None, "the run was not profiled")
    if arms_ok and key is not None and role == "variant":
        ref, _ = reference_losses(key, r, prior)
        integrity.learning_check(ref, arms_ok[-1].result.get("losses"), spec.semantics_steps, out)
        integrity.tokens_check(arms_ok[-1].result.get("tokens_per_step"), *reference_tokens(key, r, prior), out)
        for a in arms_ok:  # each arm's whole trajectory: one that skips work only in some runs is caught in those
            integrity.drift_check(*reference_windows(key, r, prior), a.result.get("losses"), spec.semantics_steps, out)
    if r.base_changed and role == "variant":
        out.add("protected", integrity.Finding("baseline-changed", r.base_changed))
    integrity.protected_check(rec.get("protected") or {}, (base_rec or {}).get("protected") if base_rec else None,
                              out)
    if role == "variant":
        integrity.evidence_check(out, (base_rec or {}).get("integrity"))
        integrity.ops_rate_check(out, base_rec, (prof.result or {}).get("device_kind") if prof is not None and prof.ok
                                 else None)
    return out


def _role(spec, r, prior: list[dict], ran: bool) -> str:
    if spec.calibrate:
        return "calibration"
    if spec.baseline:
        return "baseline"
    coming = any(p.get("status") == "in_progress" and p.get("variant") == spec.variant and p.get("role") == "baseline"
                 for p in prior)  # a --baseline run of this variant still running: it, not this run, is the baseline
    if r.base_rec is None and ran and records.baseline_for(prior, spec.variant) is None and not coming:
        return "baseline"  # the first good run of a variant becomes its baseline
    return "variant"


def _crash(r) -> tuple[str | None, ArmResult | None]:
    if r.stopped_by:
        return f"stopped by {r.stopped_by}: the command's process group was killed", r.crash
    if r.crash is not None:
        return r.crash.crash, r.crash
    return None, None


def pairs(r, statistic: str = "median") -> tuple[list[float], list[float]]:
    """tokens/s (read by ``statistic``) of the rounds where both arms gave a result, in round order."""
    pairs = [(b.speed(statistic), v.speed(statistic)) for b, v in zip(r.base, r.var) if b.ok and v.ok]
    return [b for b, _ in pairs], [v for _, v in pairs]


def judge(spec, rec: dict, ctx: RunContext, prior: list[dict], r) -> tuple[dict, verdict.Decision]:
    """The filed record (``rec`` plus metrics, comparison and verdict); fills ``ctx`` for the page body."""
    timed_ok = [a for a in r.var if a.ok]
    primary = timed_ok or ([r.profile] if r.profile is not None and r.profile.ok else [])
    crash, crashed_arm = _crash(r)
    bad = next((a for a in [r.profile, *r.var] if a is not None and a.bad_loss), None)
    last = crashed_arm or bad or (r.all_arms[-1] if r.all_arms else None)
    if r.error is not None:
        crash = f"the runner failed: {type(r.error).__name__}: {r.error}"
    elif r.calibration and r.base_failure is not None:
        crash, last = f"{r.base_failure.name}: {r.base_failure.crash or r.base_failure.bad_loss}", r.base_failure
    elif not primary and not crash and not bad:
        crash = "the command did not run"
    rec = dict(rec, repeats=len(r.var), run_wall_s=[round(a.proc.wall_s, 3) for a in r.var],
               wall_s_total=round(sum(a.proc.wall_s for a in r.all_arms), 3),
               interleaved=bool(r.interleaved and r.base), stop=r.stop or None, pairs=r.pairs)
    if crash or bad:
        ctx.log_tail = last.proc.tail if last is not None else ""
        ctx.crash_reason = crash or bad.bad_loss
        ctx.crash_log = last.proc.log.name if last is not None else ""
        if last is not None and r.error is None:
            facts = crash_facts.analyze(log_end(last.proc.log), ctx.crash_reason, last.proc.rc,
                                        _model_dirs(spec, rec),
                                        (last.result or {}).get("losses"))
            n = crash_pages.MAX_FRAMES  # the innermost frames, and the model's own outer ones (a deep import)
            outer = [f for f in facts.frames[:-n] if f.role in ("model", "ingested")][-3:]
            facts.frames = outer + facts.frames[-n:]
            rec["crash"] = facts.as_record()
    m: dict = {}
    key = None
    role = _role(spec, r, prior, bool(primary) and not crash)
    sem = None
    if primary and not crash:
        m = aggregate(primary)
        res = primary[-1].result
        key = verdict.shape_key(res)
        rec.update(config=res.get("config"), shape=res.get("shape"), shape_key=key,
                   loss_trajectory=metrics.finite([float(x) for x in (res.get("losses") or [])[:spec.semantics_steps]]),
                   loss_windows=integrity.loss_windows(res.get("losses")))
        if r.traced or not timed_ok:
            ctx.traced_timing = True
        sem = r.early_semantics or check_semantics(spec, key, res, r, prior)
        if role == "baseline" and sem.status == "unchecked" and sem.reason.startswith("no same-shape"):
            sem = verdict.Semantics("unchecked", tol=spec.loss_tol, reason="this run is the first of its shape: "
                                    "it becomes the semantics reference")
    rec["metrics"] = m
    rec["role"] = role
    base_rec = r.base_rec
    if role == "variant" and base_rec is None:  # a baseline filed meanwhile by a concurrent run
        base_rec = records.baseline_for(prior, spec.variant, key) or records.baseline_for(prior, spec.variant)
    gain = band = mem_delta = timing = None
    single = verdict.SINGLE_RUN_REASON
    stat = getattr(spec, "statistic", "median")
    b_tps, v_tps = pairs(r, stat)
    if stat != "median":
        rec["statistic"] = stat
    if ctx.reading:
        rec["statistic_choice"] = ctx.reading
    if (b_tps or v_tps) and r.interleaved:
        rec["runs_tokens_per_s"] = {"baseline": [a.tps for a in r.base if a.ok], "variant": [a.tps for a in timed_ok]}
        # both readings, whichever decides: a later `statistic: auto` learns from them which is steadier
        rec["runs_tokens_per_s_best"] = {"baseline": [a.speed("min") for a in r.base if a.ok],
                                         "variant": [a.speed("min") for a in timed_ok]}
        ctx.arms = rec["runs_tokens_per_s"]
    elif len(timed_ok) > 1:
        rec["runs_tokens_per_s"] = {"variant": [a.tps for a in timed_ok]}
    if m and role == "calibration" and base_rec:
        cal = stats.calibration(*pairs(r))
        cal["pair_sd_min_pct"] = stats.calibration(*pairs(r, "min"))["pair_sd_pct"]  # runs read by their fastest step
        rec.update(calibration=cal, baseline=base_rec["exp_id"])
        gain, band = cal["aa_gain_pct"], cal["band_pct"]
        ctx.band_how = (f"A/A: {cal['rounds']} rounds of the baseline's command against itself; σ of a round's "
                           f"log-ratio {cal['pair_sd_pct']} % (read by the fastest step: {cal['pair_sd_min_pct']} %)"
                           + (f"; position effect (second arm vs first) {cal['position_bias_pct']:+.2f} %, cancelled "
                              "in later experiments by alternating the arm order" if "position_bias_pct" in cal else "")
                           + f"; band {cal['band_pct']} %")
        sem = verdict.semantics(r.base[-1].result.get("losses") if r.base and r.base[-1].ok else None,
                                primary[-1].result.get("losses"), "the other arm (A/A)", spec.semantics_steps,
                                spec.loss_tol)
    elif m and role == "variant" and base_rec:
        rec["baseline"] = base_rec["exp_id"]
        if r.interleaved and b_tps:
            cal = records.calibration_for(prior, spec.variant, records.shape_key_of(base_rec), bool(r.pairs))
            timing = stats.paired(b_tps, v_tps, current_noise(prior, spec.variant, base_rec, stat, bool(r.pairs)),
                                  r.looks)
            if timing:
                if r.pairs and (look := r.pairs.get("first_look")):
                    timing.how = (f"in-process pairs: {len(r.var)} rounds of {r.pairs['block_steps']}-step blocks, "
                                  "both arms in one process, alternated, the variant as arm B; decided there (the "
                                  f"first of {stats.PAIRS_LOOKS} looks) with the variant's position worth "
                                  f"±{look['allowance_pct']:g} %, the swapped process not run; " + timing.how)
                elif r.pairs:
                    timing.how = (f"in-process pairs: {len(r.var)} rounds of {r.pairs['block_steps']}-step blocks, "
                                  "both arms in each of two processes, alternated, their positions swapped in the "
                                  "second; " + timing.how)
                if stat == "min":
                    timing.how = "each run read by its fastest steady step (statistic min); " + timing.how
                if ctx.reading:
                    timing.how = f"statistic auto chose {ctx.reading['chosen']} ({ctx.reading['why']}); " + timing.how
                gain, band, ctx.band_how = timing.gain_pct, timing.band_pct, timing.how
                rec["calibrated_by"] = (cal or {}).get("exp_id")
            else:
                gain, band = round(100 * (v_tps[0] / b_tps[0] - 1), 3), stats.noise_from_calibration(cal, stat).band_pct
                single = "one interleaved round gives no interval: no speed verdict from it"
            base_mem = [a.metrics.get("memory_gb") for a in r.base if a.ok and a.metrics.get("memory_gb")]
            base_mem = _median(base_mem) if base_mem else None
        else:
            bt = (base_rec.get("metrics") or {}).get("tokens_per_s")
            gain = round(100 * (m["tokens_per_s"] / bt - 1), 3) if bt else None
            band = verdict.STALE_BASELINE_PCT
            ctx.band_how = (f"no interleaved repeats: compared with the stored baseline number, band "
                               f"{verdict.STALE_BASELINE_PCT} % shown, no verdict on speed")
            base_mem = (base_rec.get("metrics") or {}).get("memory_gb")
        if base_mem and m.get("memory_gb"):
            mem_delta = 100 * (m["memory_gb"] / base_mem - 1)
        if records.shape_key_of(base_rec) not in (None, key):
            ctx.notes.append(f"the baseline `{base_rec['exp_id']}` has another shape: tokens/s are "
                                               "compared across shapes; semantics against a same-shape reference")
        if r.base_failure is not None:
            single = (f"the baseline rerun failed ({r.base_failure.crash or r.base_failure.bad_loss}; see "
                      f"`{r.base_failure.proc.log.name}`): no interleaved comparison")
            timing = None
    if m and key:
        best = records.best_for(prior, spec.variant, key)
        if best:
            rec["best"] = best["exp_id"]
            rec["gain_vs_best_pct"] = round(100 * (m["tokens_per_s"] / best["metrics"]["tokens_per_s"] - 1), 3)
    if sem is not None:
        rec["semantics"] = {k: v for k, v in vars(sem).items() if v not in ("", None)}
    check = None
    unverified = ""
    if m and not crash and role != "calibration":
        check = assess(spec, rec, r, prior, base_rec, key, role, ctx.profile_summary)
        rec["integrity"] = check.as_record()
        unverified = _unverified(check, r) if role == "variant" else ""
    d = verdict.decide(crash=crash, violations=[f.reason() for f in check.findings] if check else None,
                       bad_loss=None if crash else (bad.bad_loss if bad else None),
                       sem=None if role == "calibration" else sem, role=role,
                       timing=timing, gain_pct=gain, band_pct=band, memory_delta_pct=mem_delta,
                       memory_gb=(m or {}).get("memory_gb"), memory_tol_pct=spec.memory_tol_pct,
                       memory_max_gb=spec.memory_max_gb, noop=r.noop,
                       single_reason=single, unverified=unverified if not spec.trust_step_times else "",
                       doubted=(r.base_doubt or baseline_slowed(r, base_rec)) if role == "variant" and timing else "")
    if unverified and spec.trust_step_times and d.verdict == "supported":
        d.reasons.append(f"step times taken as reported (trust_step_times): no clock checked them ({unverified})")
    if role == "baseline" and d.verdict == "invalid":
        d.reasons.append("not used as a baseline: baselines and comparisons skip invalid runs")
    if role == "calibration" and d.verdict == "calibration" and sem and sem.status == "changed":
        d.reasons.append("the two arms traced different losses: the command is not deterministic")
    if r.fingerprint:
        rec["hlo_fingerprint"] = r.fingerprint
    if r.reference is not None:
        a = r.reference
        rec["reference_run"] = {"command": shlex.join(spec.reference_command or []), "log": a.proc.log.name,
                                "ok": a.ok, "same_shape": bool(a.ok and key and verdict.shape_key(a.result) == key)}
        if not a.ok:
            ctx.notes.append(f"the reference run failed: {a.crash or a.bad_loss}")
    if spec.parent_fingerprint and not spec.profile:
        ctx.notes.append("no-op check skipped: it needs --profile (the optimized-HLO dump)")
    rec.update({"status": "filed", "verdict": d.verdict, "ledger_status": d.status, "reasons": d.reasons,
                "gain_pct": gain, "noise_band_pct": band, "timing": timing.as_record() if timing else None})
    return metrics.finite({k: v for k, v in rec.items() if v is not None}), d


def _model_dirs(spec, rec: dict) -> tuple[str, ...]:
    """Where the model's own code ran from: the run's folder, and its script's (``python /elsewhere/train.py``)."""
    script = script_of(list(spec.command or []), spec.cwd)
    return tuple(str(d) for d in (spec.cwd, rec.get("cwd"), script and script.parent) if d)


def _unverified(check: integrity.Integrity | None, r) -> str:
    """Why no clock the program cannot move confirmed the variant's timed step times, where the runner had its own
    clock on their output (a local process; a remote job's log comes back without one). Each timed arm is judged on
    its own lines (a profiled run that behaves is no evidence for timed runs that lie), at least one of them
    bounded by the runner's clock and none without lines; pairs by their blocks; a traced timed run by the
    profiler's clock. "" when confirmed."""
    if check is None or not any(a.proc.clock for a in r.var if a is not None):
        return ""
    if r.traced and check.checks.get("trace") == "ok":
        return ""
    if any(a.kind == "pairs" for a in r.all_arms):
        status = check.checks.get("clock") or "unchecked: no step lines"
        return "" if status == "ok" else status.removeprefix("unchecked: ")
    arms = check.facts.get("clock_arms") or {}
    statuses = [arms.get(a.name) or "unchecked: no step lines" for a in r.var if a is not None and a.ok]
    missing = [s for s in statuses if s != "ok" and clocks.TOGETHER not in s]
    if "ok" in statuses and not missing:
        return ""
    return (missing or statuses or ["unchecked: no step lines"])[0].removeprefix("unchecked: ")


SLOWED_BELOW = 0.5  # the baseline's fastest rerun under this share of its record's tokens/s ...
VARIANT_AS_FILED = 0.8  # ... while the variant's runs keep this share of it: the baseline alone was slowed


def baseline_slowed(r, base_rec: dict | None) -> str:
    """Why the baseline's reruns are not the baseline that was filed: the fastest ran at under ``SLOWED_BELOW`` of
    its record's tokens/s while the variant's ran near it. A variant can slow every later baseline arm without
    touching its script: a file the baseline's command sources, a compile cache both arms share (a red team's
    no-ops came out `supported` at +220 % and +249 % so). A loaded machine (a loop's parallel iterations) slows
    both sides: not said then, nor for pairs. "" when not slowed."""
    filed = ((base_rec or {}).get("metrics") or {}).get("tokens_per_s")
    base = [a.tps for a in r.base if a.ok and not a.pairs and a.tps]
    var = [a.tps for a in r.var if a is not None and a.ok and not a.pairs and a.tps]
    if not filed or not base or not var or r.pairs or max(base) >= SLOWED_BELOW * filed \
            or _median(var) < VARIANT_AS_FILED * filed:
        return ""
    return (f"the baseline's reruns ran at {max(base) / filed:.2f}x the tokens/s its record `{base_rec.get('exp_id')}` "
            f"filed (the fastest {max(base):,.0f} against {filed:,.0f}) while the variant's kept "
            f"{_median(var) / filed:.2f}x: something the baseline alone runs or reads changed since (a file its "
            "command sources or reads, a cache it shares with the variant), so a gain over it is not believed; find "
            "what changed before filing the baseline again (a baseline filed while it is there is slowed too)")


def current_noise(prior: list[dict], variant: str, base_rec: dict | None, statistic: str,
                  pairs: bool = False) -> stats.Noise:
    """What an interval of this lane is built from: the lane's current noise model (every paired round filed,
    recency-weighted, the calibration among them) when it has one, else the calibration's floor or the default.
    Rounds of in-process pairs (``pairs``) have a model of their own, with the calibration's floor until then."""
    key = records.shape_key_of(base_rec or {})
    cal = records.calibration_for(prior, variant, key, pairs)
    out = stats.noise_from_calibration(cal, statistic)
    if cal is None and not pairs and (other := records.calibration_for(prior, variant, key, True)) is not None:
        # a lane calibrated as pairs only (a loop with `pairs: true`): its σ floors processes too, never below the
        # default floor, with the default band, until the lane's process rounds make a model of their own
        o = stats.noise_from_calibration(other, statistic)
        out = stats.Noise(max(out.sigma_floor_pct, o.sigma_floor_pct), out.band_pct,
                          f"no calibration of processes: the default floor or {o.source} (of pairs), the larger")
    lane = noise.lane_noise(prior, variant, key, statistic, (base_rec or {}).get("exp_id"), pairs)
    if lane is not None:
        out.lane, out.source = lane, lane.describe()
    return out
