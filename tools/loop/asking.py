"""Asking for the next change: people's hypothesis pages first, then the loop's proposer; a proposal the admission
rules refuse is asked for again (at most ``MAX_REFUSALS`` times of the proposer), and each page a queue could not use
is said once."""

from __future__ import annotations

import json
import time

from ..redact import redact
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


MAX_PROPOSER_FAILURES = 3  # unusable proposals or refused requests in a row before the loop stops
MAX_WAITS, MAX_WAIT_S = 10, 300.0  # an endpoint unavailable: waits in a row (5 s first: ~25 min in all), the longest


def failed(loop, n: int, e: Exception) -> None:
    """The proposer failed (an unusable LLM proposal twice, a refused request): said, charged, counted; the third
    in a row stops the loop."""
    s = loop.state
    learn.charge(s, getattr(e, "usage", {}) or {})
    s.proposer_failures += 1
    said = redact(f"{type(e).__name__}: {e}")  # an endpoint's message may quote what it was sent
    atomic_write(loop.paths.iteration_dir(n) / f"proposer-error-{s.proposer_failures}.txt", said + "\n")
    loop.writer.append_log("loop proposer error", f"{loop.spec.name} {n}", [said])
    loop.say(f"proposer error ({s.proposer_failures} in a row): {said}")
    if s.proposer_failures >= MAX_PROPOSER_FAILURES:
        s.error_stop = f"error: the proposer failed {s.proposer_failures} times in a row; last: {said}"
    loop.save()


def wait_out(loop, n: int, e: Exception) -> None:
    """An endpoint that cannot answer now (``LLMUnavailable``): wait (the proposer's ``unavailable_wait_s``,
    doubled each time in a row, ``MAX_WAIT_S`` at most) and ask again; a stop asked meanwhile ends the wait. Only
    ``MAX_WAITS`` in a row stop the loop: 529s for a few seconds stopped it after three asks, with nothing run."""
    s = loop.state
    learn.charge(s, getattr(e, "usage", {}) or {})
    s.proposer_waits += 1
    said = redact(f"{type(e).__name__}: {e}")
    atomic_write(loop.paths.iteration_dir(n) / f"proposer-unavailable-{s.proposer_waits}.txt", said + "\n")
    loop.writer.append_log("loop proposer unavailable", f"{loop.spec.name} {n}", [said])
    if s.proposer_waits > MAX_WAITS:
        s.error_stop = f"error: the proposer's endpoint stayed unavailable through {MAX_WAITS} waits; last: {said}"
        loop.save()
        return
    wait = min(MAX_WAIT_S, float(getattr(loop.proposer, "unavailable_wait_s", 5.0)) * 2 ** (s.proposer_waits - 1))
    loop.say(f"proposer endpoint unavailable ({s.proposer_waits} in a row): {said}; asking again in {wait:g} s")
    loop.save()
    end = time.monotonic() + wait
    while time.monotonic() < end and not loop.paths.stop_request.exists():
        time.sleep(min(0.2, max(0.0, end - time.monotonic())))
