"""Peak FLOP/s per device, from the table in peaks.json (data apart from code)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path


@dataclass(frozen=True)
class Peak:
    name: str
    peak_flops: float | None  # per jax device, dense bf16
    devices_per_chip: int
    source: str  # "table: TPU v4" | "--peak-flops" | reason it is unknown


@lru_cache(maxsize=1)
def table() -> list[dict]:
    return json.loads((Path(__file__).with_name("peaks.json")).read_text())["devices"]


def lookup(device_kind: str | None, platform: str | None = None, override: float | None = None) -> Peak:
    kind = (device_kind or "").lower()
    row = next((r for r in table() if any(m in kind for m in r["match"])), None)
    per_chip = row["devices_per_chip"] if row else 1
    if override:
        return Peak(row["name"] if row else (device_kind or "?"), float(override), per_chip, "--peak-flops")
    if row:
        return Peak(row["name"], float(row["peak_flops"]), per_chip, f"table: {row['name']} dense bf16")
    if (platform or "").lower() == "cpu" or kind == "cpu":
        return Peak("cpu", None, 1, "CPU has no trustworthy peak FLOP/s; pass --peak-flops to get an MFU")
    return Peak(device_kind or "?", None, 1, f"device {device_kind!r} is not in the peak table; pass --peak-flops")
