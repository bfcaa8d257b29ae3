"""The run comparison view of one lane: a standalone HTML page (plotly for the parallel coordinates, from one shared
copy) holding every filed run of the lane as data. In the page: a sortable, filterable runs table against a pinned
baseline (any run; by default the lane's first baseline) with signed deltas, 2–5 runs selected side by side showing
only the code, configuration and environment keys that differ, a parallel-coordinates plot over the knobs that
vary, runs of one configuration (one code, command, settings and environment) grouped with mean ± 95 % interval,
and the table as CSV or JSON. ``compare_html`` is pure: records in, HTML out."""

from __future__ import annotations

import html
import json
from collections.abc import Callable

from ..htmlpage import plotly_page
from .metrics import finite, finite_number


def _run(r: dict, page_url: Callable[[dict], str]) -> dict:
    m = r.get("metrics") if isinstance(r.get("metrics"), dict) else {}
    timing = r.get("timing") if isinstance(r.get("timing"), dict) else {}
    samples = r.get("runs_tokens_per_s")  # this run's own rounds (the variant arm of its comparison)
    samples = samples.get("variant") if isinstance(samples, dict) else samples
    samples = samples if isinstance(samples, list) else []
    checks = (r.get("integrity") or {}).get("checks") if isinstance(r.get("integrity"), dict) else None
    trace = str((checks or {}).get("trace") or "") if isinstance(checks, dict) else ""
    return {"exp_id": r.get("exp_id"), "version": int(r.get("version") or 0),
            "slug": r.get("slug") or r.get("exp_id") or "",  # a hand-kept page without a slug: its id, never blank
            "variant": r.get("variant") or "",
            "verdict": r.get("verdict") or r.get("status"), "role": r.get("role") or "",
            "status": r.get("ledger_status") or "", "loop": r.get("loop") or "", "category": r.get("category") or "",
            "description": r.get("description") or "", "commit": r.get("commit") or "",
            "tps": m.get("tokens_per_s"), "mfu": m.get("mfu_percent"), "step_ms": m.get("step_time_ms"),
            "memory_gb": m.get("memory_gb"), "gain": r.get("gain_pct"), "interval": timing.get("interval_pct"),
            "rounds": timing.get("rounds"),
            # a NaN sample became null in the page, which the groups' mean counted as 0; a bool is no figure
            "samples": [x for x in samples if finite_number(x)],
            "config": r.get("config") if isinstance(r.get("config"), dict) else {},
            "env": r.get("env") if isinstance(r.get("env"), dict) else {},
            # what ran besides the settings: runs of another script or command are not one configuration. The
            # script's own hash says it; the repository's commit only where there is none (a commit of wiki pages
            # in the same repository changes no code)
            "code": {k: v for k, v in (("script", r.get("script_sha256")),
                                       ("commit", None if r.get("script_sha256") else r.get("commit")),
                                       ("command", r.get("command")), ("uncommitted", r.get("uncommitted"))) if v},
            "raw_dir": r.get("raw_dir") or "", "url": page_url(r),
            # `tools profile diff` needs a trace on both sides: a profiled run that did not crash
            "has_trace": bool(r.get("raw_dir")) and r.get("verdict") != "crash" and bool(trace)
            and "not profiled" not in trace}


def compare_html(model: str, lane: str, records: list[dict], plotly_src: str,
                 page_url: Callable[[dict], str]) -> str:
    runs = [_run(r, page_url) for r in records if r.get("model") == model and r.get("lane") == lane
            and r.get("status") == "filed"]
    runs.sort(key=lambda x: x["version"])
    data = finite({"model": model, "lane": lane, "runs": runs})
    # In an attribute, HTML-escaped, not in a script element: descriptions, commands and settings are other
    # people's text, and none of it may reach a place a browser (or a reviewer's scan) reads as code.
    blob = html.escape(json.dumps(data, sort_keys=True, default=str), quote=True)
    return plotly_page("compare", f"{model}/{lane}: runs", plotly_src, None, attrdata=blob)
