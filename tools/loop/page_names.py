"""Names of the pages a loop writes for itself (hypotheses, retrospectives) that never take an earlier run's: a
``--fresh`` start numbers its iterations and retrospectives from 1 again, and the earlier run's pages, linked from its
experiment pages, must stay as they were."""

from __future__ import annotations

import re
from pathlib import Path


def free(wiki: Path, rel: str) -> str:
    """``rel``, or ``rel`` with ``-r2``, ``-r3``... where a page of that name exists."""
    stem, k = rel.removesuffix(".md"), 1
    while (wiki / rel).exists():
        k += 1
        rel = f"{stem}-r{k}.md"
    return rel


def next_retrospective(wiki: Path, loop: str, written: int) -> int:
    """The number of this run's next retrospective (``written`` so far): after every one on disk."""
    rx = re.compile(rf"{re.escape(loop)}-retrospective-(\d+)\.md")
    folder = wiki / "analyses"
    seen = [int(m.group(1)) for f in (folder.iterdir() if folder.is_dir() else ()) if (m := rx.fullmatch(f.name))]
    return max([written, *seen]) + 1
