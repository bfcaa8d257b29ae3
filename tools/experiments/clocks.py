"""Timing evidence the measured program cannot move: the runner's own clock on the step lines the program printed
(each line timed by the chunk of output that carried it), and the profiler's clock on its annotated steps and XLA
ops. Pure: data in, findings (``integrity.Finding``) out.
"""

from __future__ import annotations

import bisect
import json
import math
import statistics
from dataclasses import dataclass
from pathlib import Path

from .integrity import Finding, Integrity
from .metrics import as_float

LOG_READ_BYTES = 32_000_000
CLOCK_SLOW = 0.8          # reported / runner-seen step time below this: the step timer runs slow
CLOCK_FAST = 1.25         # above this: the reported steps took longer than they were seen to take (made up)
CLOCK_SLACK_S = 0.01      # and the two clocks differ by more than this over the window (timer granularity)
TOGETHER = ("the step lines arrived together (in one or two reads of the pipe): the runner's clock bounds none of "
            "their times; print each as its step ends, flushed")
STEP_GAP_S = 0.0001       # ... plus this per step on the profiler's clock: the untimed host work between two steps
                          # (the reference model's step line: 0.05-0.08 ms)


# ----------------------------------------------------------------------------- the runner's clock


@dataclass
class StepLine:
    step: int
    loss: float | None
    t: float            # the runner's clock when the line arrived, seconds since the command started
    after: float = 0.0  # ... when it began the read before that, which did not hold it: printed in (after, t]


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
    offsets = [e[1] for e in clock]
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
                    out.append(StepLine(obj["step"], as_float(loss) if isinstance(loss, (int, float)) else None,
                                        clock[k][0], _began(clock[k - 1]) if k else 0.0))
        pos = end
    return out


def _began(entry: tuple) -> float:
    """When the runner began the read of a chunk: a line not in it was printed after that. (The moment the read
    returned is later by however long the runner waited for a CPU or its GIL: a loaded machine's late timestamp
    would make an honest program's lines look further apart than they were.) Older clocks have the end only."""
    return entry[2] if len(entry) > 2 else entry[0]


NO_CLOCK = ("the runner keeps no clock for this command (a remote runner: its log comes back after the run, with no "
            "time a line arrived)")


def clock_check(result: dict, lines: list[StepLine], out: Integrity, arm: str = "run", clocked: bool = True) -> None:
    """Reported step times against the runner's clock between step lines (bounds a late read cannot make damning:
    ``_windows``), and the lines against the reported step count and losses. A line carries its step's loss, so it
    cannot be printed before the step ran. The median single-step ratio is kept as a fact, not a verdict.
    ``clocked``: whether the runner timed the command's output at all (a remote runner does not)."""
    times = [float(t) for t in result.get("step_times_s") or []]
    prefix = f"{arm}: "
    if not lines:
        out.add("clock", None, "the command printed no step lines" if clocked else NO_CLOCK)
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
    med = statistics.median(ratios) if ratios else math.nan
    out.facts.setdefault("clock", {})[arm] = {
        "steps": timed[-1] - timed[0], "window": [slow.first, slow.last], "reported_s": round(slow.told, 6),
        "runner_s": [round(slow.least, 6), round(slow.most, 6)],
        "median_ratio": round(med, 4) if math.isfinite(med) else None}
    together = by_step[timed[-1]].after - by_step[timed[0]].t < 0  # no lower bound at all: "slow" proves nothing
    if not together and slow.told < CLOCK_SLOW * slow.least and slow.least - slow.told > CLOCK_SLACK_S:
        out.add("clock", Finding("clock-slow", f"{prefix}steps {slow.first + 1}-{slow.last} report "
                                 f"{slow.told * 1e3:.1f} ms in all; on the runner's clock their lines were at least "
                                 f"{slow.least * 1e3:.1f} ms apart (ratio {slow.told / slow.least:.2f} < "
                                 f"{CLOCK_SLOW})"))
    elif fast.told > CLOCK_FAST * fast.most and fast.told - fast.most > CLOCK_SLACK_S:
        out.add("clock", Finding("clock-replay", f"{prefix}steps {fast.first + 1}-{fast.last} report "
                                 f"{fast.told * 1e3:.1f} ms in all; on the runner's clock their lines were at most "
                                 f"{fast.most * 1e3:.1f} ms apart"))
    elif together:
        out.add("clock", None, TOGETHER)
    else:
        out.add("clock", None)


UNTIMED_SHARE = 0.08  # a variant's untimed time a step (the runner's clock between its step lines, less what it
UNTIMED_GROWTH = 3.0  # reported) may be at most this share of its reported step, or this many times the baseline's


def untimed_per_step(facts: dict | None) -> tuple[float, float] | None:
    """(seconds a step the runner saw pass between an arm's steady step lines that its reported step times do not
    hold, its reported seconds a step), from the arm's ``clock_check`` facts (a run's own, or a filed record's);
    None without a window long enough to read."""
    try:
        n = facts["window"][1] - facts["window"][0]
        least, most = facts["runner_s"]
        if n < 3 or least < 0.05:  # too few steps, too short to read
            return None
        seen = (least + most) / 2  # the lines' bounds, least and most: a read late or early
        return (seen - facts["reported_s"]) / n, facts["reported_s"] / n
    except (KeyError, TypeError, ValueError, IndexError):
        return None


def arm_untimed(result: dict, lines: list[StepLine], arm: str) -> tuple[float, float] | None:
    """``untimed_per_step`` of an arm not checked yet (a baseline arm: its clock is not the variant's evidence)."""
    mine = Integrity()
    clock_check(result, lines, mine, arm)
    return None if mine.findings else untimed_per_step((mine.facts.get("clock") or {}).get(arm))


def untimed_check(base: list[tuple[float, float]], var: list[tuple[float, float]], out: Integrity) -> None:
    """Each arm's untimed time a step against the same run's baseline arms. An honest change, faster or slower,
    leaves what happens between two timed steps (the step line, the loss to the host: 0.05-0.08 ms for the
    reference model) as it was; a timer at 0.85x, inside ``CLOCK_SLOW``'s bound that a loaded machine needs, leaves
    15 % of every step untimed, in every arm: every variant arm must show it, against the baseline's largest."""
    if not base or not var:
        return
    gap_b = max(max(g for g, _ in base), 0.0)
    gap_v = min(g for g, _ in var)
    step_v = statistics.median(s for _, s in var)
    out.facts["untimed_ms"] = {"baseline": [round(g * 1e3, 4) for g, _ in base],
                               "variant": [round(g * 1e3, 4) for g, _ in var]}
    if gap_v > UNTIMED_SHARE * step_v and gap_v > UNTIMED_GROWTH * gap_b:
        out.add("clock", Finding("clock-share", f"every variant arm left at least {gap_v * 1e3:.3f} ms of each step "
                                 f"untimed ({gap_v / step_v:.0%} of its {step_v * 1e3:.3f} ms reported step) on the "
                                 f"runner's clock; the baseline's arms in the same rounds at most {gap_b * 1e3:.3f} "
                                 "ms (a timer that sees less of each step)"))


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


# ----------------------------------------------------------------------------- the profiler's clock


def trace_check(result: dict, steps: dict | None, out: Integrity) -> None:
    """The profiled run's reported steps against the profiler's own clock, which no patched timer moves and which
    comes back from remote runners too:

    - the median reported step against the annotated steps' own median time (``jax.profiler.StepTraceAnnotation``:
      the span the program says a step is, so a timer that runs slow shows whatever the machine's load). Medians
      against medians: a busy machine makes some steps slow and some fast, and a mean of the one against a median
      of the other reads that as a slow clock;
    - the reported times of the numbered steps first..last-1 summed, against the time from step first's start to
      step last's on the profiler's clock less ``STEP_GAP_S`` a step (as the runner's clock times step lines): a
      program that times and annotates a part of its step still runs the rest every step, and the same steps on
      both sides keep a busy machine's slow and fast steps from mixing (a busy run's median reported step over
      five steps, 4.87 ms, against the median period over four, 8.47 ms, had filed it invalid; summed, 34.3
      against 34.5 ms). The step numbers must be the reported steps' indices: consecutive, past the warm-up steps,
      and their annotations no longer than what was reported under the same numbers (an honest timer covers its
      annotation). Otherwise the median reported step is read against the median period;
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
    first, last, began = steps.get("first_step"), steps.get("last_step"), steps.get("first_to_last_start_ms")
    numbered = isinstance(first, int) and isinstance(last, int) and last > first
    # per step, not per annotation: a step annotated three times is one step
    n_steps = last - first + 1 if numbered else int(steps["count"])
    busy = float(steps["span_busy_ms"]) / 1e3 / n_steps
    period = float(steps["period_ms"]) / 1e3 if steps.get("period_ms") else None
    summed = None  # (steps, reported s, seen s) of the numbered steps first..last-1
    spans = steps.get("numbered_spans_ms")
    if numbered and warm <= first < last < len(times) and isinstance(began, (int, float)) \
            and isinstance(spans, (int, float)):
        summed = (last - first, math.fsum(times[first:last]), float(began) / 1e3)
        if spans / 1e3 > summed[1] / CLOCK_SLOW + CLOCK_SLACK_S:
            summed = None  # annotations longer than the steps reported under their numbers: not the step indices
    annotated = float(steps["median_ms"]) / 1e3 if steps.get("median_ms") else None
    fastest_seen = float(steps["min_ms"]) / 1e3 if steps.get("min_ms") else None
    out.facts["trace"] = {"reported_s_per_step": round(told, 6), "reported_median_s": round(median, 6),
                          "ops_s_per_step": round(busy, 6),
                          "annotated_median_s": round(annotated, 6) if annotated else None,
                          "reported_min_s": round(min(steady), 6),
                          "annotated_min_s": round(fastest_seen, 6) if fastest_seen else None,
                          "period_s": round(period, 6) if period else None,
                          **({"summed": {"steps": [first, last - 1], "reported_s": round(summed[1], 6),
                                         "seen_s": round(summed[2], 6)}} if summed else {}),
                          "annotated_steps": int(steps["count"])}

    def short(reported: float, seen: float, steps_of: int = len(steady)) -> bool:
        return reported < CLOCK_SLOW * seen and (seen - reported) * steps_of > CLOCK_SLACK_S

    if short(told, busy):
        out.add("trace", Finding("device-busy", f"the profiled run reports {told * 1e3:.2f} ms a step; the profiler "
                                 f"saw its XLA ops run {busy * 1e3:.2f} ms a step (over {n_steps} annotated "
                                 "steps)"))
    if annotated and short(median, annotated):
        out.add("trace", Finding("trace-clock", f"the profiled run reports {median * 1e3:.2f} ms a step (median); on "
                                 f"the profiler's clock its annotated steps took {annotated * 1e3:.2f} ms"))
    elif summed and short(summed[1] / summed[0], summed[2] / summed[0] - STEP_GAP_S, summed[0]):
        out.add("trace", Finding("trace-clock", f"the profiled run reports {summed[1] * 1e3:.1f} ms for steps "
                                 f"{first}-{last - 1}; on the profiler's clock {summed[2] * 1e3:.1f} ms passed from "
                                 f"step {first}'s start to step {last}'s"))
    elif period and not summed and short(median, period):  # a summary without numbered steps
        out.add("trace", Finding("trace-clock", f"the profiled run reports {median * 1e3:.2f} ms a step (median); on "
                                 f"the profiler's clock its annotated steps began {period * 1e3:.2f} ms apart"))
    elif fastest_seen and short(min(steady), fastest_seen, max(1, sum(t < CLOCK_SLOW * fastest_seen for t in steady))):
        out.add("trace", Finding("trace-clock", f"the profiled run reports a step of {min(steady) * 1e3:.2f} ms; on "
                                 f"the profiler's clock its fastest annotated step took {fastest_seen * 1e3:.2f} ms"))
    out.add("trace", None)  # "ok" unless a finding above


TIMED_OPS_MIN = 0.2  # a timed run's median steady step / the profiled run's XLA op time a step, at least: profiling
                     # slows a tiny model's many small ops (3.6 ms timed against 5.5 ms of traced ops on a busy
                     # 2-core machine), and load differs from run to run; a step read from a cache takes microseconds
TIMED_OPS_MIN_FASTEST = 0.1  # ... and its fastest steady step, which a run read by its fastest step (``statistic:
                             # min``) is judged on: a cache serving a few steps leaves the median honest
TIMED_OPS_SLACK_S = 0.0002   # and short of the op time by more than this a step (a model of microsecond steps)


def timed_ops_check(arms: list, out: Integrity) -> None:
    """Each timed run's median steady step against the time the profiled run's XLA ops ran a step (``trace_check``'s
    ``ops_s_per_step``, the profiler's clock): the clock checks that a timed run's step lines came as fast as it
    reported, not that its steps computed anything. A program that computes only when profiled, or replays the
    profiled run's results from a cache in its timed runs, reports steps in microseconds of a program whose ops
    took milliseconds."""
    busy = (out.facts.get("trace") or {}).get("ops_s_per_step")
    if not busy:
        return
    for a in arms:
        times = [float(t) for t in (a.result or {}).get("step_times_s") or []]
        steady = times[int((a.result or {}).get("warmup_steps", 1) or 0):] or times
        if not steady:
            continue
        for what, step, floor in (("median", statistics.median(steady), TIMED_OPS_MIN),
                                  ("fastest", min(steady), TIMED_OPS_MIN_FASTEST)):
            if step < floor * busy and busy - step > TIMED_OPS_SLACK_S:
                out.add("trace", Finding("timed-ops", f"{a.name} reports {step * 1e3:.3f} ms a step ({what}); the "
                                         f"profiled run's XLA ops ran {busy * 1e3:.2f} ms a step (< {floor} x): the "
                                         "timed steps did not run the program that was profiled"))
                return
