"""Asking for the next change: people's hypothesis pages first, then the loop's proposer; a proposal the admission
rules refuse is asked for again (at most ``MAX_REFUSALS`` times of the proposer), and each page a queue could not use
is said once."""

from __future__ import annotations

import json

from ..writer import atomic_write
from . import learn, runs
from .priors import Priors
from .proposal import Proposal

MAX_REFUSALS = 3           # proposals refused in one iteration before the proposer counts as exhausted


def ask(loop, priors: Priors, n: int) -> Proposal | None:
    """People's hypotheses first, then the loop's proposer; refused proposals are asked for again."""
    folder = loop.paths.iteration_dir(n)
    names: dict[str, str] = {}

    def record(name: str, text: str) -> None:
        """Save an artefact; one an earlier ask of this iteration saved (a proposer's failed try, a resumed
        iteration) is kept, and this ask's goes beside it (``prompt.ask2.md``): every response stays."""
        if name not in names:
            stem, dot, ext = name.rpartition(".") if "." in name else (name, "", "")
            names[name], k = name, 1
            while (folder / names[name]).exists():
                k += 1
                names[name] = f"{stem}.ask{k}{dot}{ext}"
        atomic_write(folder / names[name], text)

    atomic_write(folder / "priors.json", json.dumps(runs.priors_dump(priors), indent=1, default=str))
    refusals: list[dict] = []
    sources = [loop.proposer] if loop.proposer.serves_people else [loop.people, loop.proposer]
    asked_proposer = 0
    while asked_proposer <= MAX_REFUSALS:
        priors.refusals = refusals
        priors.budget_left = loop.budget_left()  # what earlier asks of this iteration spent counts
        p = next((p for src in sources if (p := src.propose(priors, record)) is not None), None)
        _say_rejected(loop, sources)
        if p is None:
            return None
        asked_proposer += not p.hypothesis_page  # a queue of pages is finite: only proposer asks are capped
        learn.charge(loop.state, p.usage)
        why = loop.refuse(p, priors)
        if not why:
            return p
        refusals.append({"change": p.change.describe(), "category": p.category, "why": why,
                         "page": p.hypothesis_page})
        record("refusals.json", json.dumps(refusals, indent=1))
        loop.say(f"refused: {p.change.describe()}: {why}")
        if p.hypothesis_page:
            loop.hyp.close_refused(p.hypothesis_page, why)
    return None


def _say_rejected(loop, sources) -> None:
    """Each hypothesis page a queue could not use (bad frontmatter, a change it cannot run), said once."""
    for src in sources:
        for page, why in getattr(src, "rejected", ()):
            if page not in loop.rejected:
                loop.rejected.add(page)
                loop.say(f"hypothesis page wiki/{page} not usable: {why}")
