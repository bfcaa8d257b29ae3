"""Shared by the profiling tests (a unique module name: tests/ has no packages)."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
LLAMA = REPO / "experiments" / "llama_train.py"


def model_line(text: str) -> int:
    """The line number of the reference model's line holding ``text`` (line numbers change as it is edited)."""
    hits = [n for n, ln in enumerate(LLAMA.read_text().splitlines(), 1) if text in ln]
    assert len(hits) == 1, (text, hits)
    return hits[0]


def line_row(summary: dict, text: str) -> dict:
    """The summary's source-line row for the model line holding ``text`` (zeros when no op was credited)."""
    loc = f"llama_train.py:{model_line(text)}"
    return next((r for r in summary["source_lines"] if r["location"] == loc),
                {"location": loc, "self_us": 0.0, "categories": {}, "pct": 0.0})
