"""Writing hypothesis pages as the loop goes: its own proposals as pages of their own, and a page written by a person
or an agent updated in place (status and experiment link only: their text stays)."""

from __future__ import annotations

from dataclasses import dataclass

from .. import pages
from ..experiments.runner import slugify
from ..writer import Writer
from . import admission, hypotheses
from .proposal import Proposal
from .spec import LoopSpec


@dataclass
class HypothesisFiler:
    writer: Writer
    spec: LoopSpec

    def file(self, p: Proposal, n: int, status: str, experiment: str | None, page: str = "") -> str:
        """The proposal's page with ``status`` (and its experiment, once run); its path."""
        if p.hypothesis_page:  # a page written by a person or an agent
            return self.update(p.hypothesis_page, status, experiment)
        hid = page.rsplit("/", 1)[-1].removesuffix(".md") if page else f"{n:03d}-{slugify(p.statement)[:40]}"
        pg = hypotheses.hypothesis_page(self.spec, p, hid, status, experiment)
        self.writer.write_page(pg)
        return pg.path

    def update(self, rel: str, status: str, experiment: str | None, extra: dict | None = None) -> str:
        """A person's (or agent's) page: only its status and experiment link change; their text stays."""
        path = self.writer.target(rel)
        meta, body = pages.split(path.read_text(encoding="utf-8"))
        meta = dict(meta or {}, status=status, loop=self.spec.name, **(extra or {}))
        if experiment:
            meta["experiment"] = experiment
        self.writer.write_page(pages.Page(rel, meta, body))
        return rel

    def close_refused(self, rel: str, why: str) -> None:
        """A refused page is closed with the reason (the streak rule only defers it: it stays open)."""
        status = admission.closes_page(why)
        if status:
            self.update(rel, status, None, {"refused": why})
