"""What a remote backend runs and reads: external commands (xpk, kubectl, sbatch, gsutil) with their output
captured, and its options checked where the runner is built, so a bad one is a clear error before any job exists."""

from __future__ import annotations

import math
import os
import subprocess

from ..errors import ToolsError


class SubmitError(ToolsError):
    """The job could not be submitted; the message says why (the submit command's own error). ``maybe_queued``:
    the submit command did not answer in time, so it may have queued the job all the same."""

    def __init__(self, message: str, maybe_queued: bool = False):
        super().__init__(message)
        self.maybe_queued = maybe_queued


TIMED_OUT = 124  # what ``call`` gives for a command that did not answer in time


def call(cmd: list[str], timeout: float = 120.0, stdin: str | None = None,
         env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """Run an external command (xpk, kubectl, gsutil, sbatch...), output captured; a missing one is a ToolsError.
    ``env``: variables added to ours for it (a job's secrets, ``hidden_env``)."""
    try:
        # a job's log is other people's bytes: one that is not UTF-8 is shown replaced, never a lost round; a lone
        # "\r" stays one (text mode made it a new line, on which an arm could start a stamp of its own)
        p = subprocess.run(cmd, capture_output=True, timeout=timeout, check=False,
                           input=stdin.encode() if stdin is not None else None,
                           env={**os.environ, **env} if env else None)
        return subprocess.CompletedProcess(cmd, p.returncode, p.stdout.decode("utf-8", "replace"),
                                           p.stderr.decode("utf-8", "replace"))
    except FileNotFoundError:
        raise ToolsError(f"{cmd[0]!r} not found: install it or give its path in the runner options") from None
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(cmd, TIMED_OUT, "", f"{cmd[0]} did not answer within {timeout:g} s")


def strings(runner: str, key: str, value) -> list[str]:
    """A list option as strings; a lone string is refused (it would be taken one character at a time)."""
    if value is None:  # `--runner-option 'header=#SBATCH -p x'`: YAML reads all after `#` as a comment
        raise ToolsError(f"runner {runner}: `{key}` is empty (a value starting with `#` is a YAML comment: give a "
                         f"quoted list, {key}=['#SBATCH -p x'])")
    if isinstance(value, str) or not isinstance(value, (list, tuple)):
        raise ToolsError(f"runner {runner}: `{key}` must be a list of strings, not {type(value).__name__} {value!r}")
    return [str(x) for x in value]


def mapping(runner: str, key: str, value) -> dict:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ToolsError(f"runner {runner}: `{key}` must be a mapping (name: value), not {type(value).__name__} "
                         f"{value!r}")
    return value


def seconds(runner: str, **given) -> list[float]:
    """Each option a number of seconds above 0 (``grace_s`` may be 0): ``poll_s=-1`` crashed the watch with a
    traceback, after the job was submitted, and left it running; ``hang_s=-5`` filed "no output for -5 s"."""
    out = []
    for key, value in given.items():
        try:
            v = float(value)
        except (TypeError, ValueError):
            v = math.nan
        if not math.isfinite(v) or v < 0 or (v == 0 and key != "grace_s"):
            raise ToolsError(f"runner {runner}: `{key}` is a number of seconds above 0"
                             + (" (or 0)" if key == "grace_s" else "") + f", not {value!r}")
        out.append(v)
    return out
