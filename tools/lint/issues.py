"""A lint finding and the table of codes."""

from __future__ import annotations

from typing import NamedTuple

ERROR, WARNING = "error", "warning"

# code -> (severity, what it means). The docs table in docs/lint.md lists the same codes.
CODES: dict[str, tuple[str, str]] = {
    "unreadable": (ERROR, "the file is not UTF-8 or cannot be read"),
    "frontmatter-missing": (ERROR, "no YAML frontmatter block (fixable: type from the folder, title from the heading)"),
    "frontmatter-invalid": (ERROR, "the frontmatter block is not valid YAML or not a mapping"),
    "unknown-type": (ERROR, "`type` is not one of the page types"),
    "missing-key": (ERROR, "a required key is missing (`title`/`type` fixable)"),
    "invalid-value": (ERROR, "a value outside its allowed set (status, verdict, backend, dates...)"),
    "wrong-type": (ERROR, "a value of the wrong YAML type (a string where a list is expected...)"),
    "no-metrics": (ERROR, "an experiment with verdict `supported` has no metrics"),
    "missing-section": (WARNING, "a section the page type expects is missing"),
    "broken-link": (ERROR, "a relative link whose target does not exist"),
    "outside-link": (WARNING, "a relative link that leaves the project, or reaches out of it through a symlink: "
                              "not checked, and not published"),
    "hidden-target": (WARNING, "a relative link to a file that exists in a hidden folder of wiki/ (`.attachments/`, "
                               "`.gitbook/assets/`): the site does not publish it"),
    "broken-anchor": (WARNING, "a link to a page that exists, with a #fragment that names no heading or id there "
                               "(fixable when the fragment is the symbol a heading starts with: `{#Symbol}`)"),
    "wikilink": (ERROR, "a [[wikilink]] (fixable when the target resolves to one page)"),
    "file-link": (ERROR, "an absolute file:// link (fixable when it points inside the project)"),
    "absolute-link": (ERROR, "a link with an absolute path (fixable when the target exists)"),
    "orphan": (WARNING, "no other page links here (links from index.md and log.md do not count)"),
    "duplicate-exp-id": (ERROR, "two experiments in one lane share an id (exp_id or vNNN in the filename)"),
    "index-missing": (ERROR, "wiki/index.md does not exist (fixable)"),
    "index-drift": (ERROR, "the counts in index.md differ from the pages (fixable)"),
    "index-stale": (WARNING, "index.md lists the right counts but old titles, summaries or pages (fixable)"),
    "index-unmanaged": (WARNING, "index.md has no generated listing (fixable: `tools index` adds one)"),
    "not-followed": (ERROR, "a symlink out of wiki/, or a FIFO or device: never read, never published"),
    "pathological": (WARNING, "markdown built to stall the engine (deep nesting, bracket runs): published as text"),
    "missing-tree": (WARNING, "raw/code/<slug> is not in this clone: its links counted once, not reported one by one"),
    "stale-codebase": (WARNING, "a page's recorded commit differs from raw/code/<repo> HEAD; re-ingest"),
}


class Issue(NamedTuple):  # a tuple: ordered, hashable, and cheap at the 70,000 findings of a large hand-kept wiki
    path: str  # relative to the project root, posix
    line: int  # 0 when the problem has no line
    code: str
    message: str
    severity: str = ERROR
    fixable: bool = False
    cause: str = ""  # what many instances share (``symbol-anchor``, ``missing:<target>``): shown as one group


    def __str__(self) -> str:
        where = f"{self.path}:{self.line}" if self.line else self.path
        return f"{where}: {self.code}: {self.message}"

    def as_dict(self) -> dict:
        out = {"path": self.path, "line": self.line or None, "code": self.code, "severity": self.severity,
               "message": self.message, "fixable": self.fixable}
        return {**out, "cause": self.cause} if self.cause else out


def issue(path: str, line: int | None, code: str, message: str, fixable: bool = False, cause: str = "") -> Issue:
    return Issue(path, line or 0, code, message, CODES[code][0], fixable, cause)
