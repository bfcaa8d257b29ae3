"""What one run learns on its way through ``run_experiment`` that is not frontmatter: the command line it ran, the
environment it recorded, the log tail of a crash, the noise band's explanation, the profile's text. The page body
(``report.experiment_body``) is written from the record (frontmatter, a plain dict) and this."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class RunContext:
    command_line: str = ""
    env: dict[str, str] = field(default_factory=dict)     # the environment the record keeps (secrets redacted)
    timeout: float | None = None                          # seconds per command
    notes: list[str] = field(default_factory=list)        # said on the page under "Notes"
    # a crash
    crash_reason: str | None = None
    crash_log: str = ""                                   # the log file's name, beside the page's raw folder
    log_tail: str = ""
    crash_frames: list[dict] = field(default_factory=list)  # the crash's frames, linked (``crash_pages``)
    concepts: frozenset[str] = frozenset()  # the knowledge base's concept pages (slugs): what a crash's advice links
    # the comparison
    traced_timing: bool = False                           # the one timed run also carried the profiler
    arms: dict | None = None                              # tokens/s per arm and round (``runs_tokens_per_s``)
    band_how: str = ""                                    # how the noise band was measured
    reading: dict | None = None                           # ``statistic: auto``: the reading chosen, and why
    attribution_note: str | None = None
    # the profile
    profile_note: str | None = None                       # why there is no profile, when there is none
    profile_md: str | None = None
    profile_summary: dict | None = None
    trace_dir: str | None = None
    hlo_files: list[str] = field(default_factory=list)
    hlo_stats: list[dict] = field(default_factory=list)
