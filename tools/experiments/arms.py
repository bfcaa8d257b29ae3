"""One arm's outcome: its validated JSON result and metrics, or the specific reason it has none.

A runner backend returns a ``Proc`` per arm (exit code, wall time, the log it wrote); this module reads the log's JSON
line and decides whether that is a result: a non-zero exit after the JSON line, a field that breaks the contract or a non-finite loss is never judged
as a normal run, and a crash names its cause (timeout, signal, exit code, out of memory, no JSON line, bad field).
"""

from __future__ import annotations

import math
import signal
from dataclasses import dataclass, field

from ..runners.process import Proc, log_end
from . import metrics
from .crash_facts import oom_in



@dataclass
class ArmResult:
    name: str
    proc: Proc
    result: dict | None = None      # the validated JSON line
    crash: str | None = None        # why there is no result
    bad_loss: str | None = None     # a non-finite loss: the run ran, but its math broke
    metrics: dict = field(default_factory=dict)
    kind: str = ""                  # base | var | profile | reference | pairs (the process of in-process pairs)
    pairs: str = ""                 # a block of in-process pairs: its arm there (a | b), its clock checked there

    @property
    def tps(self) -> float | None:
        return self.metrics.get("tokens_per_s")

    def speed(self, statistic: str = "median") -> float | None:
        """tokens/s as a comparison reads it: from the median steady step, or (``min``) the fastest one."""
        if statistic == "min":
            return self.metrics.get("tokens_per_s_best") or self.tps
        return self.tps

    @property
    def ok(self) -> bool:
        return self.result is not None and self.bad_loss is None


def _signal_name(n: int) -> str:
    try:
        return signal.Signals(n).name
    except ValueError:
        return f"signal {n}"


def result_of(p: Proc) -> dict | None:
    """The arm's JSON result line from its log; None when it was cut off (timeout, stop) or printed none."""
    if p.timed_out or p.stopped_by or p.hung_s or p.not_run:
        return None
    try:
        return metrics.parse_result(p.log.read_text(encoding="utf-8", errors="replace"))
    except OSError:
        return None


def crash_reason(p: Proc, timeout: float, bad_field: str | None = None, result: dict | None = None) -> str | None:
    """Why the arm has no result, or None when it ran cleanly and printed a valid JSON line."""
    if p.stopped_by:
        return f"stopped by {p.stopped_by}: the command's process group was killed"
    if p.not_run:
        return f"not run: {p.not_run}"
    if p.lost:  # the job failed, was cancelled or vanished under the arm: the runner says how, not "no exit code"
        return f"lost by the runner: {p.lost}"
    if p.hung_s:
        taken = "its stack was taken" if p.stack else "no Python process in it gave a stack"
        return (f"hung: no output for {p.hung_s:g} s; {taken}, then its process group was killed"
                if p.rc is not None else  # a local process, killed; a remote job has no exit code to give
                f"hung: no output for {p.hung_s:g} s; the job was cancelled")
    if p.timed_out:
        # the runner's own clock of its last output (a remote job's is not watched so: never called silent)
        ran = min(p.wall_s, timeout or p.wall_s)  # wall_s also holds the kill and cleanup after it (a busy host)
        quiet = ran - p.last_output_s if p.last_output_s is not None else 0.0
        if quiet >= max(2.0, 0.5 * ran):
            return f"timed out after {timeout:g} s (it printed nothing for its last {quiet:.0f} s)"
        return f"timed out after {timeout:g} s"
    rc = p.rc
    if rc == 0 and result is not None:
        return f"bad JSON field {bad_field}" if bad_field else None
    oom = oom_in(log_end(p.log) or p.tail or "")
    if rc is None:
        how = "no exit code"
    elif rc < 0:
        how = f"killed by signal {_signal_name(-rc)}"
    elif rc > 128 and rc - 128 < 65:
        how = f"exit code {rc} (128 + {_signal_name(rc - 128)})"
    else:
        how = f"exit code {rc}"
    if rc == 0:
        return "no JSON result line (exit code 0)"
    if oom:
        return f"out of memory ({oom} in the log), {how}"
    if result is not None:
        return f"{how} after the JSON line"
    return f"{how}, no JSON result line"


def check(name: str, p: Proc, timeout: float, peak_flops: float | None) -> ArmResult:
    """Validate what the arm printed and compute its metrics."""
    result = result_of(p)
    bad = metrics.validate(result) if result is not None and p.rc == 0 else None
    crash = crash_reason(p, timeout, bad, result)
    if crash:
        return ArmResult(name, p, None, crash)
    a = ArmResult(name, p, result)
    losses = result.get("losses") or []
    nonfinite = next((i for i, x in enumerate(losses) if not math.isfinite(metrics.as_float(x))), None)
    if nonfinite is not None:
        a.bad_loss = f"non-finite loss ({losses[nonfinite]}) at step {nonfinite}: the math broke"
    a.metrics = metrics.compute(result, peak_flops)
    return a
