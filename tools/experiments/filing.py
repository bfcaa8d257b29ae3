"""Filing into a lane: the lane lock, version numbers, and the three things a filed run leaves
(the experiment page, its ledger row, the recomputed model page), all through the writer.

Whoever reserves a version or files a page holds the lane lock (``wiki/experiments/<model>/<lane>/.lane.lock``)
for that moment only, never while a command runs: concurrent runs never share or lose a version or a row.
"""

from __future__ import annotations

import re

from dataclasses import dataclass
from pathlib import Path

from .. import pages, safeio
from ..errors import InputError
from ..project import Project
from ..writer import Writer, locked
from . import crash_pages, ledger, metrics, records, report
from .context import RunContext


@dataclass(frozen=True)
class Lane:
    project: Project
    model: str
    lane: str

    @property
    def dir(self) -> Path:
        return self.project.wiki / "experiments" / self.model / self.lane

    @property
    def ledger_rel(self) -> str:
        return f"experiments/{self.model}/{self.lane}/RESULTS.tsv"

    def locked(self):
        """The lane lock, never created through a link that takes the lane's folder out of wiki/ (``O_NOFOLLOW``
        guards the lock file's own name only)."""
        d = self.dir
        if not d.resolve().is_relative_to(self.project.wiki.resolve()):  # a link anywhere on the path, made or not
            raise InputError(f"wiki/experiments/{self.model}/{self.lane}", "the lane's folder is a link out of wiki/: "
                             "nothing is filed through it")
        return locked(d / ".lane.lock")

    def ledger_rows(self) -> list[dict]:
        try:
            return ledger.read(read_text(self.project.wiki / self.ledger_rel))
        except ledger.LedgerError as e:
            raise InputError(f"wiki/{self.ledger_rel}", str(e)) from None

    def append_rows(self, w: Writer, new: list[dict]) -> None:
        """Add rows that belong to no experiment page (a loop's stop, a screen's invalid move) under the lane lock."""
        with self.locked():
            w.write_file(self.ledger_rel, ledger.render(self.ledger_rows() + new))

    def discard(self, w: Writer, exp_id: str, page: str, why: str) -> None:
        """A run filed ``keep`` that was not kept after all (a loop's parallel iteration whose trunk moved first):
        its ledger row and its page say ``discard``, so no best or prior reads it as kept."""
        with self.locked():
            rows = self.ledger_rows()
            for r in rows:
                if r.get("exp_id") == exp_id and r.get("status") == "keep":
                    r["status"] = "discard"
            w.write_file(self.ledger_rel, ledger.render(rows))

            def change(text: str) -> str | None:
                text = re.sub(r"(?m)^ledger_status: keep$", "ledger_status: discard", text, count=1)
                return text.replace("(ledger status `keep`)", f"(ledger status `discard`: {why})", 1)
            if page:
                w.update_file(page, change)

    def repair_ledger(self, w: Writer) -> list[str]:
        """Give every filed page of the lane its ledger row (a kill between the page and its row left it without
        one for good); the exp_ids repaired."""
        with self.locked():
            rows, recs = self.ledger_rows(), self.records()
            missing = rows_missing(rows, recs)
            if missing:
                w.write_file(self.ledger_rel, ledger.render(rows + missing))
                w.write_page(report.model_page(self.model, self.lane, recs))  # written after the row, lost with it
            return [r["exp_id"] for r in missing]

    def next_version(self) -> int:
        """Call with the lane lock held."""
        return records.next_version(self.dir, self.ledger_rows())

    def records(self) -> list[dict]:
        return records.lane_records(self.project.wiki, self.model, self.lane)


def repair_ledgers(w: Writer, project: Project, recs: list[dict]) -> list[str]:
    """``Lane.repair_ledger`` for each lane of ``recs`` (the wiki's records) that has a filed page without its row;
    the exp_ids given a row."""
    by_lane: dict[tuple[str, str], list[dict]] = {}
    for r in recs:
        by_lane.setdefault((str(r.get("model")), str(r.get("lane"))), []).append(r)
    out = []
    for (model, name), mine in sorted(by_lane.items()):
        lane = Lane(project, model, name)
        try:
            if rows_missing(lane.ledger_rows(), mine):
                out += lane.repair_ledger(w)
        except InputError:  # a ledger that cannot be read: reading the lane names it
            continue
    return out


def rows_missing(rows: list[dict], recs: list[dict]) -> list[dict]:
    """Ledger rows of the filed records ``rows`` does not hold (one per exp_id), in their order."""
    have = {r.get("exp_id") for r in rows}  # as the ledger holds them (a tab in an exp_id is a space there)
    return [ledger.row_for(r) for r in recs if r.get("status") == "filed" and ledger.cell(r.get("exp_id")) not in have]


def write_in_progress(w: Writer, rec: dict, command_line: str) -> str:
    """The page that reserves a version while the command runs (call with the lane lock held)."""
    page = report.experiment_page(rec, RunContext(command_line=command_line))
    refuse_filed(w, page.path)
    w.write_page(page)
    return page.path


def file_record(w: Writer, lane: Lane, rec: dict, ctx: RunContext, prior: list[dict] | None = None) -> str:
    """Write a filed run: its page, its ledger row (once per exp_id), the model page. Call with the lane lock held;
    ``prior``: the lane's records read under this same hold (saves reading the lane again)."""
    rec = metrics.finite(rec)  # never a NaN in frontmatter or the ledger
    if rec.get("crash"):
        ctx.crash_frames = crash_pages.link_frames(lane.project.wiki, rec)
        ctx.concepts = crash_pages.concept_slugs(lane.project.wiki)
    page = report.experiment_page(rec, ctx)
    refuse_filed(w, page.path)
    w.write_page(page)
    if rec.get("crash"):
        write_signature_page(w, lane.project.wiki, dict(rec, page=page.path), rec["crash"]["signature"])
    if prior is None:
        recs = lane.records()
    else:
        recs = sorted([r for r in prior if r.get("exp_id") != rec["exp_id"]] + [dict(rec, page=page.path)],
                      key=lambda r: (int(r.get("version") or 0), r["page"]))
    rows = lane.ledger_rows()  # this run's row, and any an earlier filing lost to a kill between page and row
    missing = rows_missing(rows, [r for r in recs if r.get("exp_id") != rec["exp_id"]] + [rec])
    if missing:
        w.write_file(lane.ledger_rel, ledger.render(rows + missing))
    w.write_page(report.model_page(lane.model, lane.lane, recs))
    if not rec.get("crash"):  # a run one knob away from a crashed one that passed: the first fix of its signature
        mine = dict(rec, page=page.path)
        for sig in sorted({c["crash"]["signature"] for c in recs if (c.get("crash") or {}).get("signature")
                           and crash_pages.first_fix([c], [mine])}):
            write_signature_page(w, lane.project.wiki, None, sig)
    from ..wikiindex import rebuild

    rebuild(lane.project.wiki, w, log=False)  # the index counts the new page: lint finds no drift after a run
    return page.path


def write_signature_page(w: Writer, wiki: Path, rec: dict | None, sig: str) -> str:
    """The page of crash signature ``sig``, from every run of this knowledge base that hit it (``rec``: one being
    filed now, not yet readable from its page)."""
    recs = records.load_experiments(wiki)
    if rec is not None:
        recs = [r for r in recs if r.get("exp_id") != rec["exp_id"]] + [rec]
    runs = [r for r in recs if (r.get("crash") or {}).get("signature") == sig]
    return w.write_page(crash_pages.signature_page(sig, runs, recs, crash_pages.concept_slugs(wiki)))


def refuse_filed(w: Writer, rel: str) -> None:
    p = w.target(rel)
    if p.exists():
        meta, _ = pages.split(read_text(p))
        if (meta or {}).get("status") == "filed":
            raise InputError(p, "experiment page is filed and immutable; start a new run instead")


def read_text(p: Path) -> str:
    """A ledger, a lane page or a /proc file: "" when absent; a FIFO, a device or a huge file is refused with
    InputError naming it (a FIFO would hang the command)."""
    try:
        return safeio.read_text(p, 64 * 1024 * 1024)
    except FileNotFoundError:
        return ""
    except safeio.Refused as e:
        raise InputError(p, f"not read: {e}") from None


def rel(p: Path, root: Path) -> str:
    try:
        return Path(p).resolve().relative_to(Path(root).resolve()).as_posix()
    except ValueError:
        return str(p)
