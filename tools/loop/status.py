"""Where a loop stands, as data: what `tools loop status --json`, `loop start --json` and the registry's
``loop.status`` all return (the state file holds more: see ``state.LoopState``)."""

from __future__ import annotations

from . import memory
from .combos import combinations
from .device_time import device_time


def summary(state: dict) -> dict:
    """The status of a loop from its state document: trunk, frontier, each iteration's verdict, budgets used."""
    pending = state.get("pending")
    pending = [pending] if isinstance(pending, dict) else pending or []
    history = state.get("history") or []
    return {"name": state["name"], "status": state["status"], "stop_reason": state.get("stop_reason"),
            "iteration": state["iteration"], "usage": state["usage"], "trunk": state.get("trunk") or {},
            "frontier": state.get("frontier"), "pending": [x.get("phase") for x in pending],
            "categories": memory.compute(history),
            "history": [{k: h.get(k) for k in ("iteration", "exp_id", "category", "describe", "verdict", "gain_pct",
                                                "kept", "device_s")} for h in history],
            "retrospectives": [r["page"] for r in state.get("retrospectives") or []],
            "device_time": device_time(state), "combinations": combinations(state),
            "screens": [{"iteration": w.get("iteration"), "trunk_exp": w.get("trunk_exp"), "rounds": w.get("rounds"),
                         "device_s": w.get("device_s"), "error": w.get("error"),
                         "moves": [{k: m.get(k) for k in ("describe", "gain_pct", "interval_pct", "losses",
                                                          "outcome", "why")} for m in w.get("moves") or []]}
                        for w in state.get("screens") or []]}
