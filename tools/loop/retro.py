"""Retrospectives and plateaus: when one is due (a few iterations without a frontier move, a proposer with nothing
left, every stop), and when two of them make a double plateau (runs between and no frontier move), which stops the
loop. Pure: reads and updates the state; the engine writes the page."""

from __future__ import annotations

from . import memory
from .state import LoopState

RETRO_EVERY = 4            # non-improving iterations between retrospectives ("a few": then switch category)


def due(state: LoopState) -> str | None:
    """Why a retrospective is due after this iteration, or None."""
    since = memory.since_frontier_move(state.history)
    last = state.retrospectives[-1]["iteration"] if state.retrospectives else 0
    if since >= RETRO_EVERY and state.iteration - last >= RETRO_EVERY:
        return f"{since} iterations without a frontier move"
    return None


def written_now(state: LoopState) -> bool:
    """A retrospective was written at this very iteration."""
    return bool(state.retrospectives) and state.retrospectives[-1]["iteration"] == state.iteration


def exhausted(state: LoopState) -> bool:
    """The proposer has nothing left. True when that is a plateau (it said so right after a retrospective):
    ``plateau_stop`` is set. False: a retrospective is due first."""
    if written_now(state):
        state.plateau_stop = (f"plateau: the proposer has nothing left that is not refuted or already tried "
                              f"({len(state.retrospectives)} retrospectives)")
        return True
    return False


def record(state: LoopState, page: str, why: str, manual: bool = False, final: bool = False) -> None:
    """Add a written retrospective; a second one with runs between and no frontier move is a double plateau (one
    asked for by hand, or written because the loop stops, never counts towards a stop)."""
    prev = next((r for r in reversed(state.retrospectives) if not (r.get("manual") or r.get("final"))), None)
    if prev is None:
        moved = any(f["iteration"] > 0 for f in state.frontier)
    else:
        moved = any(f["iteration"] > prev["iteration"] for f in state.frontier)
    state.retrospectives.append({"iteration": state.iteration, "page": page, "frontier_moved": moved, "why": why,
                                 "manual": manual, "final": final})
    if prev and not moved and state.iteration > prev["iteration"] and not (manual or final):
        state.plateau_stop = (f"double plateau: two retrospectives ({prev['page']}, {page}) with "
                              f"{state.iteration - prev['iteration']} runs between and no frontier move")
