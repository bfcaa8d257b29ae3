"""Proposers: one small protocol, one module per implementation, chosen by name from a plain dict.

A proposer returns the next Proposal from the priors, or None when it has nothing left that is not refuted or
already tried (the engine then writes a retrospective and, on a double plateau, stops).
"""

from __future__ import annotations

from typing import Protocol

from ... import plugins
from ...errors import ToolsError
from ..priors import Priors
from ..proposal import Proposal


class Proposer(Protocol):
    """Subclass it (the optional parts then come with their defaults) and add the class to ``PROPOSERS``."""

    name: str
    serves_people: bool = False   # it proposes people's hypothesis pages itself (else the engine asks them first)

    def propose(self, priors: Priors, record: "RecordFn") -> Proposal | None:
        """The next hypothesis. ``record(name, text)`` saves an artefact (a prompt, a response) with the run."""
        raise NotImplementedError

    def ready(self) -> None:
        """Optional: raise ToolsError when the proposer cannot work here (no API key, an option its client does not
        take), so the loop says so before its baseline and calibration have run, not three failures after."""

    def untried(self, priors: Priors, n: int = 10) -> list[Proposal]:
        """Optional: the best ideas not yet tried, for a retrospective; [] when the proposer cannot say (the
        engine then lists the declared knob space's)."""
        return []


class RecordFn(Protocol):
    def __call__(self, name: str, text: str) -> None: ...


PROPOSERS = {
    "sweep": "tools.loop.proposers.sweep:SweepProposer",
    "llm": "tools.loop.proposers.llm:LLMProposer",
    "queue": "tools.loop.proposers.queue:QueueProposer",
}


def get(name: str, options: dict | None = None) -> Proposer:
    return plugins.load(PROPOSERS, name, "proposer", options)


class BudgetExhausted(ToolsError):
    """A proposer would exceed a budget of the loop (``what``: the budget key, e.g. llm_tokens, cost_usd)."""

    def __init__(self, what: str, message: str = "", usage: dict | None = None):
        self.what = what
        self.usage = dict(usage or {})  # what was already spent in this call (charge it anyway)
        super().__init__(message or f"the {what} budget is exhausted")
