"""What one filed run teaches the loop: kept or discarded, the new trunk and frontier row when kept, the history
entry, the usage it cost and the hypothesis page's new status. Pure: the state changes in memory; the engine saves
it and writes the pages."""

from __future__ import annotations

from dataclasses import dataclass

from . import runs
from .priors import run_key
from .proposal import Proposal
from .spec import LoopSpec
from .state import LoopState

HYPOTHESIS_STATUS = {"supported": "supported", "refuted": "refuted", "invalid": "refuted",
                     "inconclusive": "inconclusive", "crash": "inconclusive"}


@dataclass
class Lesson:
    kept: bool
    moved: bool          # the trunk moved to this run now (not on an earlier pass over the same iteration)
    commit: str          # the code the run measured ("" for knob and env changes on an untracked tree)
    status: str          # the hypothesis page's status


def is_kept(rec: dict, trunk: dict, pend: dict) -> bool:
    """``supported`` was judged interleaved against the trunk (compare_to): that is the frontier moving. The
    trunk's stored tokens/s is an older measurement and drifts with the machine; it does not decide."""
    return bool(rec.get("verdict") == "supported" and rec.get("ledger_status") == "keep"
                and trunk["exp_id"] == pend["trunk_exp"] == rec.get("baseline", pend["trunk_exp"]))


def chained_gain(prev_pct: float | None, step_pct: float | None) -> float:
    """The gain over the baseline, chained from interleaved gains each measured against its own trunk."""
    return 100 * ((1 + (prev_pct or 0.0) / 100) * (1 + (step_pct or 0.0) / 100) - 1)


def frontier_row(spec: LoopSpec, n: int, rec: dict, cfg: dict, env: dict, commit: str, description: str,
                 gain_pct: float, step_gain_pct: float | None = None) -> dict:
    row = {"iteration": n, "exp_id": rec["exp_id"], "page": rec.get("page", ""),
           "tokens_per_s": rec["metrics"]["tokens_per_s"], "mfu_percent": rec["metrics"].get("mfu_percent"),
           "gain_pct": round(gain_pct, 3)}
    if n:
        row["step_gain_pct"] = step_gain_pct
    return dict(row, description=description, run_key=run_key(spec, cfg, env, commit))


def learn(spec: LoopSpec, state: LoopState, pend: dict) -> Lesson:
    """Apply one filed iteration to the state (idempotent: a run already in the history is not counted again)."""
    p, rec, n = Proposal.from_dict(pend["proposal"]), pend["record"], pend["iteration"]
    cfg, env, trunk = pend["config"], pend["env"], state.trunk
    kept = is_kept(rec, trunk, pend)
    commit = pend.get("commit") or ("" if p.change.kind == "patch" else trunk.get("commit", ""))
    moved = kept and trunk["exp_id"] != rec["exp_id"]
    if moved:
        new_commit = commit or trunk.get("commit", "")
        gain = chained_gain(state.frontier[-1].get("gain_pct"), rec.get("gain_pct"))
        state.trunk = runs.trunk_entry(rec, cfg, env, new_commit)
        state.frontier.append(frontier_row(spec, n, rec, cfg, env, new_commit, p.change.describe(), gain,
                                           rec.get("gain_pct")))
    if not any(h.get("exp_id") == rec["exp_id"] for h in state.history):
        cost = runs.device_seconds(rec)
        state.usage["runs"] += 1
        state.usage["device_s"] = round(state.usage["device_s"] + cost, 3)
        state.history.append(dict(runs.history_entry(p, rec, n, kept, pend), device_s=round(cost, 3),
                                  device_s_total=state.usage["device_s"]))
        if moved:  # what reaching this point of the frontier cost, overhead included
            state.frontier[-1]["device_s_total"] = state.usage["device_s"]
    state.iteration = max(state.iteration, n)
    state.pending = [x for x in state.pendings() if x is not pend and x["iteration"] != n] or None
    return Lesson(kept, moved, commit, HYPOTHESIS_STATUS.get(rec.get("verdict"), "inconclusive"))


def charge(state: LoopState, usage: dict) -> None:
    """What a proposer spent (tokens, dollars), counted against the budget."""
    u = state.usage
    u["llm_tokens"] += int(usage.get("input_tokens", 0) + usage.get("output_tokens", 0))
    u["cost_usd"] = round(u["cost_usd"] + float(usage.get("cost_usd", 0.0)), 6)
