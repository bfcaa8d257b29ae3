"""Hypothesis pages written by a person or an agent (e.g. through MCP), taken in order: a person's first, then
by priority. The engine also asks this queue for people's hypotheses before any other proposer, so a person
steers the loop by writing a page, without touching code."""

from __future__ import annotations

from ..priors import Priors
from ..proposal import Proposal, ProposalError
from . import Proposer


class QueueProposer(Proposer):
    name = "queue"
    serves_people = True

    def __init__(self, people_only: bool = False):
        self.people_only = people_only
        self.rejected: list[tuple[str, str]] = []   # (page, why) for pages that are not a usable proposal

    def propose(self, priors: Priors, record) -> Proposal | None:
        from ..hypotheses import hypothesis_from_page

        skip = {a.hypothesis_page for a in priors.attempts} | {r.get("page") for r in priors.refusals}
        for h in priors.open_hypotheses:
            if (self.people_only and not h["person"]) or h["page"] in skip:
                continue
            try:
                if h.get("error"):
                    raise ProposalError(h["error"])
                d = dict(hypothesis_from_page(h["meta"], h["body"]), hypothesis_page=h["page"], proposer=self.name)
                return Proposal.from_dict(d)
            except ProposalError as e:
                if (h["page"], str(e)) not in self.rejected:
                    self.rejected.append((h["page"], str(e)))
                    record("rejected.txt", "\n".join(f"{p}: {why}" for p, why in self.rejected) + "\n")
        return None
