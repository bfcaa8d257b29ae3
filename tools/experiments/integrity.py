"""Is the speed-up real? Checks of a run against evidence the measured program cannot fake: the runner's own clock
on the step lines it printed, the compiled step's HLO (its token input, its matmul FLOPs and their types), the loss
against a same-shape reference, and hashes of the files a user protects. Pure: data in, findings out.

Each finding has a **signature** (``clock-slow``, ``hlo-tokens``...), the name a hack is caught by. A check that has
no evidence says why (``unchecked``); evidence the baseline had and the run lost is itself a finding
(``evidence-lost``): a script that stops printing step lines does not escape the clock.
"""

from __future__ import annotations

import bisect
import hashlib
import json
import math
import statistics
from dataclasses import dataclass, field
from pathlib import Path

LOG_READ_BYTES = 32_000_000
CLOCK_SLOW = 0.8          # reported / runner-seen step time below this: the step timer runs slow
CLOCK_FAST = 1.25         # above this: the reported steps took longer than they were seen to take (made up)
CLOCK_SLACK_S = 0.01      # and the two clocks differ by more than this over the window (timer granularity)
HLO_FLOPS_MIN = 0.8       # the compiled step's matmul FLOPs / the reported (non-causal) model FLOPs, at least:
                          # XLA computes a masked attention in full, and remat only adds recompute
HLO_FLOPS_MIN_KERNELS = 0.5  # ... when custom calls (Pallas, cuDNN) hide some of the matmuls from the HLO
LEARN_MIN = 0.25          # the loss must fall at least this share of what the reference's fell
LEARN_REF_DROP = 0.05     # ... when the reference fell at least this much
NARROW = ("s8", "u8", "s4", "u4", "f8")
SIGNATURES = {
    "step-count": "the run reported more steps than it printed step lines for",
    "step-losses": "the step lines' losses are not the reported trajectory",
    "clock-slow": "reported step times shorter than the runner's clock saw (a patched or scaled timer, or timing "
                  "without waiting for the device)",
    "clock-replay": "reported step times longer than the steps were seen to take (times replayed or made up)",
    "evidence-lost": "evidence the baseline gave is missing from this run",
    "no-program": "profiled, but no compiled program in the HLO dump: nothing was computed",
    "device-busy": "reported step times shorter than the profiler saw the step's ops run",
    "trace-clock": "reported step times shorter than the annotated steps took, or than their period, on the "
                   "profiler's clock",
    "hlo-tokens": "more tokens reported per step than the compiled step takes in",
    "hlo-flops": "the compiled step does far fewer matmul FLOPs than the model FLOPs reported",
    "precision": "matmuls in a narrower type than the declared compute dtype",
    "frozen": "the loss does not fall as the same-shape reference's does: the parameters are not learning",
    "protected": "a protected file changed",
}


@dataclass
class Finding:
    signature: str
    detail: str

    def reason(self) -> str:
        return f"integrity `{self.signature}`: {self.detail}"


@dataclass
class Integrity:
    checks: dict[str, str] = field(default_factory=dict)   # check -> ok | violated | unchecked: why
    findings: list[Finding] = field(default_factory=list)
    facts: dict = field(default_factory=dict)               # the figures the checks compared

    def add(self, check: str, finding: Finding | None, why_unchecked: str = "") -> None:
        if finding is not None:
            self.findings.append(finding)
            self.checks[check] = "violated"
        elif why_unchecked:
            self.checks.setdefault(check, f"unchecked: {why_unchecked}")
        else:
            self.checks.setdefault(check, "ok")

    @property
    def status(self) -> str:
        if self.findings:
            return "violated"
        return "ok" if all(v == "ok" for v in self.checks.values()) else "partial"

    def as_record(self) -> dict:
        return {"status": self.status, "checks": self.checks, "findings": [vars(f) for f in self.findings],
                "facts": self.facts}


# ----------------------------------------------------------------------------- the runner's clock


@dataclass
class StepLine:
    step: int
    loss: float | None
    t: float            # the runner's clock when the line arrived, seconds since the command started
    after: float = 0.0  # ... when it last read the pipe before that, empty: the line was printed in (after, t]


def step_lines(log: Path, clock: list[tuple[float, int]], arm: str | None = None) -> list[StepLine]:
    """The lines ``{"step": i, ...}`` the command printed, each timed by the chunk of output that carried it (with
    ``arm``, only the lines ``{"arm": arm, ...}`` of that arm of in-process pairs)."""
    if not clock:
        return []
    try:
        with open(log, "rb") as f:
            data = f.read(LOG_READ_BYTES)
    except OSError:
        return []
    offsets = [o for _, o in clock]
    out, pos = [], 0
    for raw in data.split(b"\n"):
        end = pos + len(raw) + 1
        line = raw.strip()
        if line.startswith(b"{") and b'"step"' in line and b"step_times_s" not in line:
            try:
                obj = json.loads(line)
            except ValueError:
                obj = None
            if isinstance(obj, dict) and isinstance(obj.get("step"), int) and not isinstance(obj["step"], bool) \
                    and obj.get("arm") == arm:
                k = bisect.bisect_left(offsets, end - 1)
                if k < len(clock):
                    loss = obj.get("loss")
                    out.append(StepLine(obj["step"], float(loss) if isinstance(loss, (int, float)) else None,
                                        clock[k][0], clock[k - 1][0] if k else 0.0))
        pos = end
    return out


def clock_check(result: dict, lines: list[StepLine], out: Integrity, arm: str = "run") -> None:
    """Reported step times against the runner's clock between step lines (bounds a late read cannot make damning:
    ``_windows``), and the lines against the reported step count and losses. A line carries its step's loss, so it
    cannot be printed before the step ran. The median single-step ratio is kept as a fact, not a verdict."""
    times = [float(t) for t in result.get("step_times_s") or []]
    prefix = f"{arm}: "
    if not lines:
        out.add("clock", None, "the command printed no step lines")
        return
    by_step = {ln.step: ln for ln in lines}
    dense = sorted(by_step) == list(range(len(by_step)))  # a line every step (a script logging every k steps is not)
    if dense and len(by_step) < len(times):
        out.add("clock", Finding("step-count", f"{prefix}reported {len(times)} step times; the runner saw step "
                                 f"lines for {len(by_step)} steps"))
        return
    losses = result.get("losses") or []
    carried = [ln for ln in by_step.values() if ln.loss is not None]
    if not carried:
        out.add("clock", None, "the step lines carry no loss (a line printed before its step finished proves nothing)")
        return
    wrong = [ln for ln in carried if ln.step < len(losses) and differs(ln.loss, float(losses[ln.step]))]
    if wrong:
        w = wrong[0]
        out.add("clock", Finding("step-losses", f"{prefix}step {w.step}'s line printed loss {w.loss}, the result "
                                 f"reports {losses[w.step]}"))
        return
    warm = int(result.get("warmup_steps", 1) or 0)
    timed = sorted(s for s, ln in by_step.items() if ln.loss is not None and max(warm, 1) - 1 <= s < len(times))
    ratios = [times[b] / dt if (dt := by_step[b].t - by_step[a].t) > 0 else math.inf
              for a, b in zip(timed, timed[1:]) if b == a + 1]
    if len(timed) < 3:
        out.add("clock", None, f"only {max(len(timed) - 1, 0)} steady steps with step lines")
        return
    slow, fast = _windows(timed, by_step, times)
    ratios.sort()
    med = (ratios[len(ratios) // 2] if len(ratios) % 2 else (ratios[len(ratios) // 2 - 1] + ratios[len(ratios) // 2]) / 2) \
        if ratios else math.nan
    out.facts.setdefault("clock", {})[arm] = {
        "steps": timed[-1] - timed[0], "window": [slow.first, slow.last], "reported_s": round(slow.told, 6),
        "runner_s": [round(slow.least, 6), round(slow.most, 6)],
        "median_ratio": round(med, 4) if math.isfinite(med) else None}
    if slow.told < CLOCK_SLOW * slow.least and slow.least - slow.told > CLOCK_SLACK_S:
        out.add("clock", Finding("clock-slow", f"{prefix}steps {slow.first + 1}-{slow.last} report "
                                 f"{slow.told * 1e3:.1f} ms in all; on the runner's clock their lines were at least "
                                 f"{slow.least * 1e3:.1f} ms apart (ratio {slow.told / slow.least:.2f} < {CLOCK_SLOW})"))
    elif fast.told > CLOCK_FAST * fast.most and fast.told - fast.most > CLOCK_SLACK_S:
        out.add("clock", Finding("clock-replay", f"{prefix}steps {fast.first + 1}-{fast.last} report "
                                 f"{fast.told * 1e3:.1f} ms in all; on the runner's clock their lines were at most "
                                 f"{fast.most * 1e3:.1f} ms apart"))
    else:
        out.add("clock", None)


@dataclass
class Window:
    first: int      # the step whose line opens the window (its own time is not in it)
    last: int       # the step whose line closes it
    told: float     # the reported times of steps first+1 .. last
    least: float    # the runner's clock: the two lines were printed at least this far apart ...
    most: float     # ... and at most this far


def _windows(timed: list[int], by_step: dict, times: list[float]) -> tuple[Window, Window]:
    """Bounds the program cannot move: the runner drains the pipe at every read, so a line was printed after the
    read before the one that carried it, and by that one. A late read (a loaded machine, lines arriving in bunches)
    only widens the bounds; it never makes an honest program look slow or fast. Among the windows opening on one of
    the first quarter of steady lines and closing on one of the last quarter, the most damning each way is
    returned: a timer that runs slow loses its share of every step, which outgrows any late read."""
    q = max(1, len(timed) // 4)
    wins = [Window(a, b, math.fsum(times[a + 1:b + 1]), by_step[b].after - by_step[a].t,
                   by_step[b].t - by_step[a].after)
            for a in timed[:q] for b in timed[-q:] if b > a]
    return (max(wins, key=lambda w: CLOCK_SLOW * w.least - w.told),
            max(wins, key=lambda w: w.told - CLOCK_FAST * w.most))


def differs(a: float, b: float) -> bool:
    return not (math.isfinite(a) and math.isfinite(b)) or abs(a - b) > 1e-4 + 1e-5 * abs(b)


# ----------------------------------------------------------------------------- the compiled step


def _declared_dtype(result: dict) -> str:
    cfg = result.get("config") or {}
    for k in ("compute_dtype", "matmul_dtype", "dtype"):
        if isinstance(cfg.get(k), str):
            return cfg[k]
    return ""


def hlo_check(result: dict, facts: dict | None, out: Integrity, baseline_had_hlo: bool = False) -> None:
    """The profiled run's compiled step against what the run reported: the token input's elements (a step takes
    at least the tokens it counts), matmul FLOPs against the reported model FLOPs, matmul types against the
    declared compute dtype."""
    from ..gap.facts import shape_of

    if facts is None:
        out.add("hlo", None, "the run was not profiled (no HLO dump)")
        return
    if facts.get("stage") == "none" or not facts.get("modules"):
        if baseline_had_hlo:
            out.add("hlo", Finding("no-program", "the profiled run dumped no compiled program, the baseline's did: "
                                   "the reported steps ran no XLA computation"))
        else:
            out.add("hlo", None, "the profiled run dumped no HLO (not a JAX/XLA program?)")
        return
    n_dev = int(result.get("n_devices") or 1)
    _, dims = shape_of(facts.get("token_input") or "")
    reported = float(result.get("tokens_per_step") or 0)
    out.facts["hlo"] = {"module": facts.get("module"), "token_input": facts.get("token_input") or None}
    if dims:
        taken = math.prod(dims) * n_dev
        out.facts["hlo"]["token_elements"] = taken
        if reported > taken:
            out.add("hlo", Finding("hlo-tokens", f"{reported:g} tokens per step reported; the compiled step "
                                   f"`{facts.get('module')}` takes {facts['token_input']} ({taken} elements"
                                   + (f" × {n_dev} devices" if n_dev > 1 else "") + ")"))
    else:
        out.add("hlo", None, "no integer token input in the compiled step")
    f = result.get("flops_per_step")
    model = float(f.get("noncausal") or f.get("causal") or 0) if isinstance(f, dict) else float(f or 0)
    mm = sum((facts.get("matmul_flops") or {}).values()) * n_dev
    floor = HLO_FLOPS_MIN_KERNELS if facts.get("custom_calls") else HLO_FLOPS_MIN
    if model and mm:
        out.facts["hlo"].update(matmul_flops=mm, model_flops=model, ratio=round(mm / model, 3))
        if mm < floor * model:
            out.add("hlo", Finding("hlo-flops", f"the compiled step does {mm / 1e9:.4f} GFLOP of matmuls; the run "
                                   f"reports {model / 1e9:.4f} GFLOP of model FLOPs ({mm / model:.2f} < {floor})"))
    declared = _declared_dtype(result)
    requested = facts.get("requested_flops") or facts.get("matmul_flops") or {}
    total = sum(requested.values())
    narrow = {k: v for k, v in requested.items() if k.startswith(NARROW)}
    if declared and total and narrow and not declared.startswith(("int", "uint", "float8", "fp8")):
        share = sum(narrow.values()) / total
        out.add("hlo", Finding("precision", f"{100 * share:.0f} % of the matmul FLOPs run in "
                               f"{', '.join(sorted(narrow))}; the run declares compute dtype {declared}"))
    out.add("hlo", None)


def trace_check(result: dict, steps: dict | None, out: Integrity) -> None:
    """The profiled run's reported steps against the profiler's own clock, which no patched timer moves and which
    comes back from remote runners too:

    - the median reported step against the annotated steps' own median time (``jax.profiler.StepTraceAnnotation``:
      the span the program says a step is, so a timer that runs slow shows whatever the machine's load) and their
      median period (one step's start to the next, as the runner's clock times step lines: a program that times and
      annotates a part of its step still runs the rest every step). Medians against medians: a busy machine makes
      some steps slow and some fast, and a mean of the one against a median of the other reads that as a slow clock;
    - the fastest reported step against the fastest annotated step: steps reported short, fewer than half of them
      (which a median leaves alone, and which a run read by its fastest step is made of), still show;
    - the mean reported step against the time any XLA op ran from the first annotated step's start to the last
      one's end, per step: a step cannot take less time than its ops ran, wherever the program puts its
      annotations (on a CPU the ops run on XLA's threads; on a TPU it is device busy time), so a script timing only
      the dispatch still waits for the device. Work in that span that is not a step (an evaluation) counts against
      the steps: a program profiling one should keep it out of the span."""
    times = [float(t) for t in result.get("step_times_s") or []]
    warm = int(result.get("warmup_steps", 1) or 0)
    steady = times[warm:] or times
    if not steps or not steps.get("count") or steps.get("span_busy_ms") is None:
        out.add("trace", None, "no step annotations in the profile" if steps else "no trace summary of the profile")
        return
    if not steady:
        out.add("trace", None, "no step times reported")
        return
    told = math.fsum(steady) / len(steady)
    median = statistics.median(steady)
    busy = float(steps["span_busy_ms"]) / 1e3 / int(steps["count"])
    period = float(steps["period_ms"]) / 1e3 if steps.get("period_ms") else None
    annotated = float(steps["median_ms"]) / 1e3 if steps.get("median_ms") else None
    fastest_seen = float(steps["min_ms"]) / 1e3 if steps.get("min_ms") else None
    out.facts["trace"] = {"reported_s_per_step": round(told, 6), "reported_median_s": round(median, 6),
                          "ops_s_per_step": round(busy, 6),
                          "annotated_median_s": round(annotated, 6) if annotated else None,
                          "reported_min_s": round(min(steady), 6),
                          "annotated_min_s": round(fastest_seen, 6) if fastest_seen else None,
                          "period_s": round(period, 6) if period else None, "annotated_steps": int(steps["count"])}

    def short(reported: float, seen: float, steps_of: int = len(steady)) -> bool:
        return reported < CLOCK_SLOW * seen and (seen - reported) * steps_of > CLOCK_SLACK_S

    if short(told, busy):
        out.add("trace", Finding("device-busy", f"the profiled run reports {told * 1e3:.2f} ms a step; the profiler "
                                 f"saw its XLA ops run {busy * 1e3:.2f} ms a step (over {steps['count']} annotated "
                                 "steps)"))
    if annotated and short(median, annotated):
        out.add("trace", Finding("trace-clock", f"the profiled run reports {median * 1e3:.2f} ms a step (median); on "
                                 f"the profiler's clock its annotated steps took {annotated * 1e3:.2f} ms"))
    elif period and short(median, period):
        out.add("trace", Finding("trace-clock", f"the profiled run reports {median * 1e3:.2f} ms a step (median); on "
                                 f"the profiler's clock its annotated steps began {period * 1e3:.2f} ms apart"))
    elif fastest_seen and short(min(steady), fastest_seen, max(1, sum(t < CLOCK_SLOW * fastest_seen for t in steady))):
        out.add("trace", Finding("trace-clock", f"the profiled run reports a step of {min(steady) * 1e3:.2f} ms; on "
                                 f"the profiler's clock its fastest annotated step took {fastest_seen * 1e3:.2f} ms"))
    out.add("trace", None)  # "ok" unless a finding above


# ----------------------------------------------------------------------------- learning, protected files


def learning_check(ref_losses: list[float] | None, losses: list[float] | None, steps: int, out: Integrity) -> None:
    """The loss must fall as the same-shape reference's falls: a step that skips its update is fast and learns
    nothing."""
    if not ref_losses or not losses:
        out.add("learning", None, "no same-shape reference trajectory")
        return
    n = min(steps, len(ref_losses), len(losses))
    if n < 3:
        out.add("learning", None, f"only {n} comparable steps")
        return
    ref_drop = ref_losses[0] - min(ref_losses[1:n])
    drop = losses[0] - min(losses[1:n])
    out.facts["learning"] = {"steps": n, "reference_drop": round(ref_drop, 5), "drop": round(drop, 5)}
    if ref_drop < LEARN_REF_DROP:
        out.add("learning", None, f"the reference's loss fell only {ref_drop:.3f} over {n} steps")
    elif drop < LEARN_MIN * ref_drop:
        out.add("learning", Finding("frozen", f"the loss fell {drop:.4f} over the first {n} steps; the same-shape "
                                    f"reference's fell {ref_drop:.4f}"))
    else:
        out.add("learning", None)


def protected_hashes(entries: list[str], cwd: Path) -> dict[str, str]:
    """sha256 of each protected entry: a file (``path``, relative to ``cwd``), or one top-level function or class
    of a Python file (``path::name``). "missing" when it does not exist."""
    import ast

    out = {}
    for entry in entries:
        path, _, name = entry.partition("::")
        p = Path(cwd) / path
        try:
            data = p.read_bytes()
        except OSError:
            out[entry] = "missing"
            continue
        if name:
            try:
                tree = ast.parse(data)
            except (SyntaxError, ValueError):
                out[entry] = "unparsable"
                continue
            text = data.decode("utf-8", errors="replace")
            node = next((n for n in tree.body if getattr(n, "name", None) == name), None)
            data = (ast.get_source_segment(text, node) or "").encode() if node is not None else b""
            if node is None:
                out[entry] = "missing"
                continue
        out[entry] = hashlib.sha256(data).hexdigest()
    return out


def protected_check(hashes: dict[str, str], base_hashes: dict[str, str] | None, out: Integrity) -> None:
    if not hashes:
        return
    if base_hashes is None:
        out.add("protected", None, "no baseline hashes to compare with")
        return
    changed = sorted(k for k, v in hashes.items() if k in base_hashes and base_hashes[k] != v)
    if changed:
        out.add("protected", Finding("protected", f"{', '.join(changed)} changed since the baseline "
                                     f"(sha256 {base_hashes[changed[0]][:12]} -> {hashes[changed[0]][:12]})"))
    else:
        out.add("protected", None)


def evidence_check(out: Integrity, base: dict | None) -> None:
    """A check the baseline passed on evidence that this run no longer gives (its clock: step lines gone)."""
    checks = (base or {}).get("checks") or {}
    for name in ("clock", "hlo", "trace"):
        mine = out.checks.get(name, "")
        if checks.get(name) == "ok" and mine.startswith("unchecked") and "not profiled" not in mine:
            out.add(name + "-evidence", Finding("evidence-lost", f"the `{name}` check passed on the baseline and "
                                                f"has no evidence here: {mine.removeprefix('unchecked: ')}"))
