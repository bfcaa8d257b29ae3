"""Findings grouped by cause: when one cause has many instances (69,000 links naming ``#Symbol`` anchors that no
heading of a catalog page defines, a page renamed under 3,000 links), a person needs one finding with its count,
its first examples and the fix, not every line. Every instance stays in the report (``--json`` lists them all)."""

from __future__ import annotations

from dataclasses import dataclass

from .issues import Issue

GROUP_AT = 20      # instances of one cause from which they are shown as one group
EXAMPLES = 3


@dataclass
class Group:
    code: str
    severity: str
    cause: str
    count: int
    pages: int
    examples: list[Issue]
    what: str
    fix: str
    fixable: bool

    def lines(self) -> list[str]:
        out = [f"{self.code} x{self.count:,} in {self.pages:,} pages ({self.severity}s): {self.what}",
               f"  fix: {self.fix}"]
        return out + [f"  e.g. {i}" for i in self.examples]

    def as_dict(self) -> dict:
        return {"code": self.code, "severity": self.severity, "cause": self.cause, "count": self.count,
                "pages": self.pages, "what": self.what, "fix": self.fix, "fixable": self.fixable,
                "examples": [i.as_dict() for i in self.examples]}


def _explain(cause: str, sample: Issue) -> tuple[str, str]:
    kind, _, arg = cause.partition(":")
    if kind == "symbol-anchor":
        return ("links name `#Symbol` anchors, but the headings of the pages they point at read "
                "\"`Symbol` · ...\" and get longer ids (`symbol-...`), so no heading defines `#Symbol`",
                "`tools lint --fix` gives each such heading the id its links use (`{#Symbol}`, attr_list); "
                "or link to the heading's own id")
    if kind == "anchor-into":
        return (f"links into wiki/{arg} name headings or ids it does not have",
                f"compare the fragments with the headings of wiki/{arg} (`--json` lists every link)")
    if kind == "missing":
        return (f"links point at {arg}, which does not exist",
                f"restore {arg}, or point the links at the page that replaced it (`--json` lists every link)")
    if kind == "wikilink":
        return ("`[[wikilinks]]` (Obsidian and Foam syntax), which the site does not render as links",
                "`tools lint --fix` turns each one that names a single page into a relative link")
    if kind == "section":
        return (f"pages lack the section {arg}", "add the section (or re-file the pages with the current tools)")
    return sample.message, "see each instance with `--json`"


def grouped(issues: list[Issue], at: int = GROUP_AT) -> tuple[list[Group], list[Issue]]:
    """(groups of causes with at least ``at`` instances, biggest first; the issues in no group)."""
    by_cause: dict[tuple[str, str], list[Issue]] = {}
    for i in issues:
        if i.cause:
            by_cause.setdefault((i.code, i.cause), []).append(i)
    groups, taken = [], set()
    for (code, cause), members in by_cause.items():
        if len(members) < at:
            continue
        what, fix = _explain(cause, members[0])
        groups.append(Group(code, members[0].severity, cause, len(members), len({m.path for m in members}),
                            members[:EXAMPLES], what, fix, any(m.fixable for m in members)))
        taken.update(id(m) for m in members)
    groups.sort(key=lambda g: (-g.count, g.code, g.cause))
    return groups, [i for i in issues if id(i) not in taken]
