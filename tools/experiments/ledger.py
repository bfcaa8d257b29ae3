"""The lane's RESULTS.tsv: autoresearch's ledger columns first, then ours.

autoresearch: ``commit, metric, memory_gb, status (keep|discard|crash), description``; extended with
``exp_id, date, tokens_per_s, mfu_percent, mfu_basis, step_time_ms, config``, then (appended later, so files
written before them still read) ``verdict, gain_pct, noise_band_pct, flops_per_step_causal,
flops_per_step_noncausal, peak_flops_per_device, rounds``. ``metric`` is tokens/s.
"""

from __future__ import annotations

import csv
import io
import json

COLUMNS = ("commit", "metric", "memory_gb", "status", "description",
           "exp_id", "date", "tokens_per_s", "mfu_percent", "mfu_basis", "step_time_ms", "config",
           "verdict", "gain_pct", "noise_band_pct", "flops_per_step_causal", "flops_per_step_noncausal",
           "peak_flops_per_device", "rounds")


def cell(v) -> str:
    """A value as a ledger cell holds it (JSON for a mapping or a list; tabs and newlines as spaces)."""
    if v is None:
        return ""
    if isinstance(v, (dict, list)):
        v = json.dumps(v, sort_keys=True, separators=(",", ":"))
    return str(v).replace("\t", " ").replace("\n", " ").replace("\r", " ")


class LedgerError(ValueError):
    """A RESULTS.tsv that cannot be read as a ledger (the caller names the file)."""


def read(text: str) -> list[dict]:
    """Rows as dicts; a file with fewer columns (written before some were added) reads with those left out."""
    if not text.strip():
        return []
    first = text.split("\n", 1)[0].rstrip("\r")
    if not set(first.split("\t")) & {"status", "exp_id", "description"}:  # rewritten from such rows, all lost
        raise LedgerError(f"its first line is not the header (it starts {first[:60]!r}): restore the header line "
                          f"({' '.join(COLUMNS[:5])} ..., tab-separated) or the file from git; nothing was written")
    # plain TSV as written (no quoting): a description that starts with '"' is text, not the start of a quoted
    # field that would swallow the rows after it
    rows = csv.DictReader(io.StringIO(text), delimiter="\t", quoting=csv.QUOTE_NONE)
    return [{k: v for k, v in r.items() if k is not None} for r in rows]


def render(rows: list[dict]) -> str:
    out = ["\t".join(COLUMNS)]
    out += ["\t".join(cell(r.get(c)) for c in COLUMNS) for r in rows]
    return "\n".join(out) + "\n"


def row_for(record: dict) -> dict:
    """A ledger row from an experiment page's frontmatter."""
    m = record.get("metrics") or {}
    return {"commit": record.get("commit") or "", "metric": m.get("tokens_per_s"), "memory_gb": m.get("memory_gb"),
            "status": record.get("ledger_status"), "description": record.get("description") or record.get("title"),
            "exp_id": record.get("exp_id"), "date": record.get("date"), "tokens_per_s": m.get("tokens_per_s"),
            "mfu_percent": m.get("mfu_percent"), "mfu_basis": m.get("mfu_basis"),
            "step_time_ms": m.get("step_time_ms"), "config": record.get("config"), "verdict": record.get("verdict"),
            "gain_pct": record.get("gain_pct"), "noise_band_pct": record.get("noise_band_pct"),
            "flops_per_step_causal": m.get("flops_per_step_causal"),
            "flops_per_step_noncausal": m.get("flops_per_step_noncausal"),
            "peak_flops_per_device": m.get("peak_flops_per_device"),
            "rounds": (record.get("timing") or {}).get("rounds") or (record.get("calibration") or {}).get("rounds")}
