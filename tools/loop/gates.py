"""When the loop must stop: a stop decided during an iteration (a double plateau, a failing proposer, a budget a
proposal would pass), a person's ``tools loop stop``, a spent budget or the target reached. Pure: it reads the
state and the spec, and says why (``StopGate``) or returns None."""

from __future__ import annotations

from dataclasses import dataclass

from .state import LoopState

BUDGETS = (("runs", "runs"), ("wall_s", "wall time (s)"), ("llm_tokens", "LLM tokens"),
           ("cost_usd", "LLM cost (USD)"), ("device_s", "device-seconds"))
TARGETS = (("tokens_per_s", "tokens/s"), ("mfu_percent", "MFU %"))


@dataclass
class StopGate:
    """Why the loop must stop now. Budgets and the target never write a retrospective first."""
    reason: str
    kind: str  # budget | target | plateau | request | error


def stop_gate(state: LoopState, budget: dict[str, float], target: dict[str, float],
              stop_requested: bool) -> StopGate | None:
    if state.plateau_stop:
        return StopGate(state.plateau_stop, "plateau")
    if state.error_stop:
        return StopGate(state.error_stop, "error")
    if state.budget_hit:
        return StopGate(state.budget_hit, "budget")
    if stop_requested:
        return StopGate("stopped by request (`tools loop stop`)", "request")
    used = state.usage
    for key, what in BUDGETS:
        if key in budget and used.get(key, 0) >= budget[key]:
            return StopGate(f"budget: {what} {used.get(key, 0):g} of {budget[key]:g} used", "budget")
    trunk = state.trunk or {}
    for key, what in TARGETS:
        if key in target and (trunk.get(key) or 0) >= target[key]:
            return StopGate(f"target reached: {what} {trunk.get(key):g} ≥ {target[key]:g}", "target")
    ref = reference_reached(state, target)
    if ref:
        return StopGate(ref, "target")
    return None


def reference_reached(state: LoopState, target: dict[str, float]) -> str | None:
    """``target: {reference: PCT}``: the latest interleaved check of this trunk against the reference says the
    trunk runs at PCT % of the reference's tokens/s or more."""
    check = (state.reference or {}).get("check") or {}
    if "reference" not in target or check.get("trunk_exp") != (state.trunk or {}).get("exp_id"):
        return None
    pct = check.get("ratio_pct")
    if pct is not None and pct >= target["reference"]:
        return f"target reached: the trunk runs at {pct:.1f} % of the reference's tokens/s (≥ {target['reference']:g} %, " \
               f"{check.get('how') or 'measured interleaved in ' + str(check.get('exp_id'))})"
    return None


def budget_left(state: LoopState, budget: dict[str, float]) -> dict[str, float]:
    return {k: round(v - state.usage.get(k, 0), 3) for k, v in budget.items()}


def clear(state: LoopState) -> None:
    """The stops decided during iterations, once the loop has stopped on them."""
    state.plateau_stop = state.budget_hit = state.error_stop = None
