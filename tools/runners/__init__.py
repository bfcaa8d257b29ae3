"""Where runs happen. An experiment is a sequence of *rounds*; a round is a list of *arms* (baseline, variant,
profile run) that one worker runs in order, so the two arms of an interleaved comparison always share a machine.

A runner backend implements ``run_round``; remote ones (xpk, ray, template) do it with submit / poll / logs /
fetch / cancel (``remote.RemoteRunner``). ``local`` is today's runner: each arm is ``process.run_command``.
Backends are chosen by name from a plain dict; heavy clients are imported inside the backend that needs them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from .. import plugins
from ..errors import ToolsError
from .process import Proc, env_with, run_command


@dataclass
class Arm:
    name: str                      # log stem: baseline-1, run-1, profile-run, reference
    command: list[str]
    log: Path                      # where the arm's log goes (raw/profiles/<run>/<name>.log)
    env: dict[str, str] = field(default_factory=dict)   # on top of the runner's environment
    cwd: Path | None = None
    timeout: float = 1800.0
    artefacts: dict[str, Path] = field(default_factory=dict)  # env var -> local folder the arm's files must reach
    hang_s: float | None = None    # no output for this long: hung (the local runner takes its stack, then kills it)


class Runner(Protocol):
    name: str

    def run_round(self, arms: list[Arm], echo: bool = False) -> list[Proc]:
        """Run the arms in order on one worker; stop after an arm that was stopped (Ctrl-C, SIGTERM)."""


class LocalRunner:
    name = "local"

    def __init__(self, **options):
        if options:
            raise ToolsError(f"runner local takes no options (got {', '.join(sorted(options))})")

    def run_round(self, arms: list[Arm], echo: bool = False) -> list[Proc]:
        out = []
        for arm in arms:
            env = env_with(dict(arm.env, **{k: str(v) for k, v in arm.artefacts.items()}))
            out.append(run_command(arm.command, arm.log, env, arm.timeout, arm.cwd, echo, arm.hang_s))
            if out[-1].stopped_by:
                break
        return out


RUNNERS = {
    "local": "tools.runners:LocalRunner",
    "xpk": "tools.runners.xpk:XpkRunner",
    "ray": "tools.runners.ray:RayRunner",
    "template": "tools.runners.template:TemplateRunner",
}


def get(name: str, options: dict | None = None) -> Runner:
    return plugins.load(RUNNERS, name, "runner", options)
