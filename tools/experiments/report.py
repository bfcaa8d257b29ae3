"""Experiment and model pages, built from records (plain data in, Page objects out)."""

from __future__ import annotations

from .. import mdtext, pages
from ..runners.process import cap_tail
from . import crash_pages
from . import records as rec_mod
from .context import RunContext


def _fmt(v, nd=2, unit="") -> str:
    return mdtext.number(v, nd, unit) if isinstance(v, float) else "—" if v is None or v == "" else f"{v}{unit}"


def experiment_path(model: str, lane: str, exp_id: str) -> str:
    return f"experiments/{model}/{lane}/{exp_id}.md"


def model_path(model: str, lane: str) -> str:
    return f"models/{model}-{lane}.md"


def _sci(v) -> str:
    return "—" if v is None or v == "" else f"{float(v):.4g}"


def _mfu_check(m: dict) -> str:
    """MFU = FLOPs per step / step time / (peak per device × devices), with the page's own numbers."""
    basis, peak, st = m.get("mfu_basis"), m.get("peak_flops_per_device"), m.get("step_time_ms")
    f = m.get(f"flops_per_step_{basis}") if basis else None
    if not (f and peak and st):
        return ""
    return (f"{_sci(f)} FLOP / {st / 1e3:.6g} s / ({_sci(peak)} FLOP/s × {m.get('n_devices')}) = "
            f"{100 * f / (st / 1e3) / (peak * m.get('n_devices', 1)):.3f} % ({basis})")


def _metrics_table(m: dict) -> list[str]:
    rows = [("tokens/s", _fmt(m.get("tokens_per_s"), 1)),
            ("tokens/s per chip", _fmt(m.get("tokens_per_s_per_chip"), 1)),
            ("step time (median, steady steps)", f"{_fmt(m.get('step_time_ms'), 3)} ms "
                                                 f"(p10–p90 spread {_fmt(m.get('step_time_spread_pct'))} %,"
                                                 f" {m.get('steady_steps', '—')} steps)"),
            ("MFU, causal attention FLOPs", _fmt(m.get("mfu_causal_percent"), 3, " %")),
            ("MFU, non-causal attention FLOPs", _fmt(m.get("mfu_noncausal_percent"), 3, " %")),
            ("model FLOPs per step, causal / non-causal (all devices)",
             f"{_sci(m.get('flops_per_step_causal'))} / {_sci(m.get('flops_per_step_noncausal'))}"),
            ("peak FLOP/s per device", f"{_sci(m.get('peak_flops_per_device'))} ({m.get('peak_flops_source', '—')})"),
            ("peak memory", f"{_fmt(m.get('memory_gb'), 4)} GB ({m.get('memory_source') or '—'})"),
            ("compile", _fmt(m.get("compile_s"), 2, " s")),
            ("devices / chips", f"{m.get('n_devices', '—')} × {m.get('device_kind', '—')} / {m.get('n_chips', '—')}"),
            ("final loss", _fmt(m.get("loss_final"), 4)),
            ("XLA cost_analysis / model FLOPs (non-causal)", _fmt(m.get("xla_flops_ratio"), 3))]
    if m.get("mfu_note"):
        rows.append(("MFU note", m["mfu_note"]))
    check = _mfu_check(m)
    if check:
        rows.append(("MFU by hand", check))
    return ["| metric | value |", "|---|---|"] + [f"| {k} | {v} |" for k, v in rows]


def _prose(text) -> str:
    """One line of a person's markdown: code spans kept; newlines and HTML as text."""
    return mdtext.prose(text or "")


def _short(v, n: int = 120) -> str:
    s = str(v)
    return s if len(s) <= n else s[:n] + "..."


def experiment_body(r: dict, ctx: RunContext) -> str:
    """``r`` is the page frontmatter; ``ctx`` carries what is not frontmatter (log tail, profile text)."""
    m = r.get("metrics") or {}
    # the hypothesis and the change are a person's or a proposer's prose: their code spans stay, but a newline, an
    # HTML tag or a region marker in them is text (a marker there ended the page's region: its results were lost)
    out = ["## Hypothesis under test", "", _prose(r.get("hypothesis")) or "(none given: `--hypothesis`)", ""]
    if r.get("description"):
        out += [f"Change: {_prose(r['description'])}", ""]
    env = ctx.env
    out += ["## Setup", "", *mdtext.block(ctx.command_line, "bash"), "",
            f"- model `{r.get('model')}`, lane `{r.get('lane')}`, variant `{r.get('variant')}`, role {r.get('role')}",
            f"- model code commit `{r.get('commit') or 'unknown'}`; script sha256 `{r.get('script_sha256') or '—'}`"
            + (f"; uncommitted beside it: {', '.join(mdtext.code(f) for f in r['uncommitted'])}" if r.get("uncommitted")
               else ""),
            f"- runs: {r.get('repeats', 1)} timed" + (" interleaved with the baseline (A B, B A, ...)" if r.get('interleaved') else "")
            + (f", {r['stop']}" if r.get("stop") else "") + f"; timeout {ctx.timeout} s"
            + ("; the timed run was also traced (profiler overhead included; use --repeats to time untraced)"
               if ctx.traced_timing else ""),
            f"- raw log and profile: `{r.get('raw_dir')}`"]
    for k, v in sorted(env.items()):
        out.append(f"- `{k}={v}`")
    if r.get("config"):
        cfg = r["config"]
        out.append("- config: " + ", ".join(f"{k}={_short(v)}" for k, v in cfg.items()))
    out += ["", "## Results", ""]
    if r.get("verdict") == "crash" or (ctx.crash_reason and not m):
        log = f" (`{ctx.crash_log}`)" if ctx.crash_log else ""
        what = "The run crashed" if r.get("verdict") == "crash" else "The run gave no usable result"
        out += [f"{what}: {ctx.crash_reason or 'see log'}. Last lines of the log{log}:", "",
                *mdtext.block(cap_tail(ctx.log_tail).rstrip()), ""]
        out += crash_pages.crash_section(r, ctx.crash_frames, experiment_path(r["model"], r["lane"], r["exp_id"]),
                                         ctx.concepts)
    else:
        out += _metrics_table(m) + [""]
        base, best = r.get("baseline"), r.get("best")
        if ctx.crash_reason:
            out.append(f"- {ctx.crash_reason} (`{ctx.crash_log}`)")
        if r.get("calibration"):
            c = r["calibration"]
            out.append(f"- A/A calibration of `{base}`: {c['rounds']} rounds, σ of a round's log-ratio "
                       f"{c['pair_sd_pct']} %, apparent gain of the command over itself {c['aa_gain_pct']:+.2f} %, "
                       f"band for later verdicts ±{c['band_pct']} %")
        elif r.get("gain_pct") is not None:
            out.append(f"- against the baseline `{base}`: tokens/s {r['gain_pct']:+.2f} %"
                       f" (noise band ±{r.get('noise_band_pct')} %: {ctx.band_how})")
        for note in r.get("notes") or []:
            out.append(f"- note: {note}")
        if ctx.arms:
            a = ctx.arms
            out.append(f"- interleaved tokens/s, baseline: {', '.join(_fmt(x, 1) for x in a.get('baseline', []))}; "
                       f"this run: {', '.join(_fmt(x, 1) for x in a.get('variant', []))}")
        if r.get("attribution_note"):
            out.append(f"- profile: {r['attribution_note']}")
        if r.get("hlo_fingerprint"):
            out.append(f"- optimized-HLO fingerprint `{r['hlo_fingerprint']}`")
        # the best's own filed number, measured at another time: beside an interleaved gain over that very run it
        # read as a contradiction ("supported, +25 %" and "-20 % vs the current best", the same record)
        if best and r.get("gain_vs_best_pct") is not None and not (best == r.get("baseline") and r.get("timing")):
            out.append(f"- against the current best `{best}`: tokens/s {r['gain_vs_best_pct']:+.2f} % (its filed "
                       "tokens/s, not measured beside this run)")
        s = r.get("semantics") or {}
        out.append(f"- semantics: {s.get('status', 'unchecked')}"
                   + (f", max |Δloss| {s.get('max_abs_delta')} over {s.get('steps')} steps vs `{s.get('reference')}`"
                      if s.get("max_abs_delta") is not None else f" ({s.get('reason', '')})")
                   + f"; tolerance {s.get('tol')} (bf16 moved a 12-step trajectory ≤ 0.011, a layer-skipping"
                     " decoy ≥ 0.056)")
        if r.get("loss_trajectory"):
            out.append("- loss trajectory: " + ", ".join(_fmt(x, 4) for x in r["loss_trajectory"]))
        out.append("")
    out += integrity_section(r.get("integrity"))
    out += ["## Profile", ""]
    if ctx.profile_md:
        out += [ctx.profile_md, "Open the trace in xprof (it serves on all interfaces; run it on your machine):", "",
                "```bash", f"xprof --logdir={ctx.trace_dir} --port=8791", "```", "",
                f"Summary again: `tools profile summary {r.get('raw_dir')}`.", ""]
    else:
        out += [ctx.profile_note or "Not profiled (run with `--profile`).", ""]
    out += ["## HLO", ""]
    if ctx.hlo_files:
        out += ["Optimized HLO dumped with `--xla_dump_to --xla_dump_hlo_as_text`:"] + \
               [f"- `{f}`" for f in ctx.hlo_files] + [""]
        for st in ctx.hlo_stats:
            out.append(f"`{st['module']}` after optimizations: {st['instructions']} instructions in "
                       f"{st['computations']} computations; {st['fusions']} fusions, {st['matmuls']} dots/convolutions,"
                       f" {st['custom_calls']} custom-calls, {st['while_loops']} while loops, {st['collectives']}"
                       f" collectives, {st['copies_outside_fusions']} copies/transposes outside fusions.")
        out.append("")
    else:
        out += ["No HLO dump (run with `--profile`).", ""]
    out += ["## Verdict", "", f"**{r.get('verdict')}** (ledger status `{r.get('ledger_status')}`)", ""]
    out += [f"- {x}" for x in r.get("reasons") or []]
    return "\n".join(out) + "\n"


def experiment_page(r: dict, ctx: RunContext) -> pages.Page:
    up = f"Lane: [{mdtext.escape(r['model'])} ({mdtext.escape(r['lane'])})](../../../{model_path(r['model'], r['lane'])})\n\n"
    running = "\n".join(["## Hypothesis under test", "", _prose(r.get("hypothesis")), "", "## Setup", "",
                         *mdtext.block(ctx.command_line, "bash"), "", "## Results", "", "Running.", "", "## Verdict",
                         "", "Pending.", ""])
    body = f"# {_prose(r['title'])}\n\n" + up + pages.region(
        "experiment", experiment_body(r, ctx) if r.get("status") == "filed" else running)
    return pages.Page(experiment_path(r["model"], r["lane"], r["exp_id"]), r, body)


# ----------------------------------------------------------------------------- model page

def model_page(model: str, lane: str, records: list[dict]) -> pages.Page:
    """Variant matrix (a row per variant, and per shape where a variant has several) and run list, recomputed
    from the lane's experiment pages."""
    recs = [r for r in records if r.get("status") == "filed"]
    variants = sorted({str(r.get("variant")) for r in recs})
    lines = ["| variant | shape | baseline | baseline tokens/s | current best | best tokens/s | gain | MFU (basis) "
             "| runs | crashes |",
             "|---|---|---|---:|---|---:|---:|---:|---:|---:|"]
    for v in variants:
        vr = [r for r in recs if str(r.get("variant")) == v]
        keys = sorted({rec_mod.shape_key_of(r) for r in vr if r.get("metrics") and r.get("role") != "calibration"}
                      - {None})
        labels = rec_mod.shape_labels(keys)
        for key in keys if len(keys) > 1 else [None]:
            rows = vr if key is None else [r for r in vr if rec_mod.shape_key_of(r) == key]
            b, best = rec_mod.baseline_for(rows, v, key), rec_mod.best_for(rows, v, key)
            bt = (b or {}).get("metrics", {}).get("tokens_per_s")
            bm = (best or {}).get("metrics", {})
            gain = f"{100 * (bm['tokens_per_s'] / bt - 1):+.1f} %" if best and bt else "—"
            mfu = f"{bm['mfu_percent']:.2f} % ({bm.get('mfu_basis')})" if bm.get("mfu_percent") is not None else "—"
            link = lambda r: f"[{r['exp_id']}](../{r['page']})" if r else "—"
            crashes = sum(r.get("verdict") == "crash" for r in vr) if key is None or key == keys[0] else 0
            lines.append(f"| `{v}` | {labels.get(key, '—')} | {link(b)} | {_fmt(bt, 1)} | {link(best)} | "
                         f"{_fmt(bm.get('tokens_per_s'), 1)} | {gain} | {mfu} | {len(rows)} | {crashes} |")
    runs = ["| # | experiment | variant | verdict | tokens/s | Δ vs baseline | MFU (basis) |",
            "|---:|---|---|---|---:|---:|---:|"]
    for r in recs:
        m = r.get("metrics") or {}
        mfu = f"{m['mfu_percent']:.2f} % ({m.get('mfu_basis')})" if m.get("mfu_percent") is not None else "—"
        gain = f"{r['gain_pct']:+.2f} %" if r.get("gain_pct") is not None else "—"
        role = f" ({r['role']})" if r.get("role") in ("baseline", "calibration") and r.get("verdict") != r["role"] else ""
        runs.append(f"| {r.get('version')} | [{r.get('slug')}](../{r['page']}) | `{r.get('variant')}` | "
                    f"{r.get('verdict')}{role} | "
                    f"{_fmt(m.get('tokens_per_s'), 1)} | {gain} | {mfu} |")
    hardware = sorted({str(r.get("variant")).split("/", 1)[-1] for r in recs if "/" in str(r.get("variant"))})
    meta = {"title": f"{model} ({lane})", "type": "model", "tags": ["model", model, lane],
            "model": model, "lane": lane, "hardware": ", ".join(hardware) or None}
    body = (f"# {model} ({lane})\n\n"
            "Recomputed from the experiment pages by `tools exp run`; do not edit inside the generated regions. "
            "Reference lines for the explorer go in the `references` frontmatter key "
            "(`- {label, tokens_per_s | mfu_percent, basis, variant}`).\n\n"
            "## Variants\n\n" + pages.region("variants", "\n".join(lines) + "\n")
            + "\n## Experiments\n\n" + pages.region("experiments", "\n".join(runs) + "\n"))
    # keep_regions: a loop with a reference adds its "gap to reference" region (tools/loop/reference_lane.py)
    return pages.Page(model_path(model, lane), {k: v for k, v in meta.items() if v is not None}, body,
                      keep_regions=True)


def integrity_section(integ: dict | None) -> list[str]:
    """What the run's evidence said about its own report (``integrity``): each check, each finding's signature."""
    if not integ:
        return []
    out = ["## Integrity", "", f"Status **{integ.get('status')}** (docs/integrity.md): evidence the measured "
           "program cannot fake, against what it reported.", ""]
    for name, state in (integ.get("checks") or {}).items():
        out.append(f"- {name}: {state}")
    for f in integ.get("findings") or []:
        out.append(f"- **`{f.get('signature')}`**: {f.get('detail')}")
    facts = integ.get("facts") or {}
    for arm, c in (facts.get("clock") or {}).items():
        least, most = (c.get("runner_s") or [None, None])[:2]
        if "window" not in c:  # in-process pairs: each block's lines, summed over the arm's blocks
            out.append(f"- clock ({arm}): {c.get('steps')} steps inside its blocks reported {c.get('reported_s')} s; "
                       f"on the runner's clock their blocks' lines were {least}-{most} s apart")
            continue
        first, last = c["window"][:2]
        out.append(f"- clock ({arm}): steps {first}+1 to {last} "
                   f"reported {c.get('reported_s')} s; on the runner's clock their lines were {least}-{most} s "
                   f"apart (median single-step ratio {c.get('median_ratio')})")
    t = facts.get("trace") or {}
    if t.get("annotated_steps"):
        summed = t.get("summed") or {}
        median = (f"{t['reported_median_s']} s a step reported (median; mean {t.get('reported_s_per_step')} s); on "
                  f"the profiler's clock {t.get('annotated_steps')} annotated steps took {t.get('annotated_median_s')}"
                  f" s and began {t.get('period_s')} s apart (medians)"
                  + (f"; steps {summed['steps'][0]}-{summed['steps'][1]} reported {summed['reported_s']} s where "
                     f"{summed['seen_s']} s passed" if summed else "")
                  if t.get("reported_median_s") is not None
                  else f"{t.get('reported_s_per_step')} s a step reported; on the profiler's clock "
                       f"{t.get('annotated_steps')} annotated steps began {t.get('period_s')} s apart")
        out.append(f"- trace: {median}, their XLA ops ran {t.get('ops_s_per_step')} s a step")
    h = facts.get("hlo") or {}
    if h.get("module"):
        out.append(f"- compiled step `{h['module']}`: token input {h.get('token_input') or '—'}"
                   + (f", matmul FLOPs {h['matmul_flops']:.4g} = {h['ratio']} × the reported model FLOPs"
                      if h.get("ratio") is not None else ""))
    return out + [""]
