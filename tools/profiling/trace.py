"""Read a jax.profiler trace folder into plain records: XLA op events and step annotations.

First choice is ``jax.profiler.ProfileData`` on the ``.xplane.pb`` (fast, stats resolved); the
fallback is the Chrome-trace ``.trace.json.gz`` written next to it. Both carry ``hlo_op`` and
``hlo_module`` on each op event and ``step_num`` on each ``StepTraceAnnotation``.
"""

from __future__ import annotations

import bisect
import gzip
import itertools
import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from .. import safeio
from ..errors import InputError


@dataclass(frozen=True)
class OpEvent:
    op: str
    module: str
    thread: str
    start_us: float
    dur_us: float
    program: int | None = None  # the compiled program's id (module_NNNN of its HLO dump): two compiles of one name


@dataclass(frozen=True)
class StepEvent:
    step: int
    start_us: float
    dur_us: float


@dataclass
class Trace:
    ops: list[OpEvent]
    steps: list[StepEvent]
    source: str  # which file and reader
    planes: list[str]


def find_runs(folder: Path) -> list[Path]:
    """Profile run folders (``plugins/profile/<run>``) under ``folder``, oldest first."""
    folder = Path(folder)
    runs = {p.parent for p in folder.rglob("*.xplane.pb")} | {p.parent for p in folder.rglob("*.trace.json.gz")}
    return sorted(runs)


def read_trace(folder: Path, step_name: str = "train") -> Trace:
    runs = find_runs(folder)
    if not runs:
        raise InputError(folder, "no jax.profiler trace here (no *.xplane.pb or *.trace.json.gz)")
    run = runs[-1]
    xplanes = sorted(run.glob("*.xplane.pb"))
    broken = None
    if xplanes:
        try:
            return _read_xplane(xplanes, step_name, folder)
        except ImportError:
            pass
        except _Unreadable as e:  # truncated (a run killed while its profiler wrote) or not an XSpace at all
            broken = e
    jsons = sorted(run.glob("*.trace.json.gz"))
    if not jsons and broken is not None:
        raise InputError(broken.path, f"not a readable jax.profiler trace (truncated or corrupt: {broken.why}), "
                                      "and no trace.json.gz beside it to fall back on")
    if not jsons:
        raise InputError(run, "xplane present but jax is not installed, and no trace.json.gz to fall back on")
    return _read_chrome(jsons[0], step_name, folder)


TRACE_LIMIT = 1024 * 1024 * 1024        # bytes of a trace file, compressed
TRACE_JSON_LIMIT = 2 * 1024 * 1024 * 1024  # and of the JSON it expands to (a gzip bomb stops here)


def copy_xplanes(folder: Path, tmp: Path) -> list[str]:
    """The latest run's xplane files copied into ``tmp`` for xprof (which writes cache files beside what it reads),
    each read as a bounded regular file inside ``folder``; InputError names one that is not."""
    runs = find_runs(folder)
    out = []
    for p in sorted(runs[-1].glob("*.xplane.pb")) if runs else []:
        try:
            data = safeio.read_bytes(p, TRACE_LIMIT, within=folder)
        except (safeio.Refused, FileNotFoundError) as e:
            raise InputError(p, f"trace not read: {e}") from None
        (Path(tmp) / p.name).write_bytes(data)
        out.append(str(Path(tmp) / p.name))
    return out


class _Unreadable(Exception):
    def __init__(self, path: Path, why: str):
        super().__init__(why)
        self.path, self.why = path, why


def _read_xplane(paths: list[Path], step_name: str, folder: Path) -> Trace:
    try:  # jax.profiler.ProfileData is this extension: loaded alone it takes 30 ms, not jax's 1.8 s import
        from jaxlib._profile_data import ProfileData
    except ImportError:
        from jax.profiler import ProfileData

    ops, steps, planes = [], [], []
    for path in paths:
        # the bytes parsed are the bytes checked (a bounded regular file inside the folder, read from one open
        # descriptor): the profiler opening the path itself would read whatever was swapped in after a check
        try:
            raw = safeio.read_bytes(path, TRACE_LIMIT, within=folder)
        except (safeio.Refused, FileNotFoundError) as e:
            raise InputError(path, f"trace not read: {e}") from None
        if not raw:  # parses as an XSpace with nothing in it: a profile that was never written
            raise _Unreadable(path, "an empty file")
        try:
            data = ProfileData.from_serialized_xspace(raw)
        except RuntimeError as e:  # "Failed to parse XSpace from array"
            raise _Unreadable(path, str(e)) from None
        read = list(data.planes)
        if not read:
            raise _Unreadable(path, "an XSpace with no planes")
        for plane in read:
            planes.append(plane.name)
            for line in plane.lines:
                tname = f"{plane.name}/{line.name}"
                for ev in line.events:
                    stats = dict(ev.stats)
                    if "hlo_op" in stats:
                        ops.append(OpEvent(str(stats["hlo_op"]), str(stats.get("hlo_module", "")), tname,
                                           ev.start_ns / 1e3, ev.duration_ns / 1e3, _program(stats)))
                    elif "step_num" in stats:
                        steps.append((ev.name, StepEvent(int(stats["step_num"]), ev.start_ns / 1e3,
                                                         ev.duration_ns / 1e3)))
    return Trace(ops, _steps(steps, step_name), f"{paths[0].name} (jax.profiler.ProfileData)", planes)


def _program(stats: dict) -> int | None:
    try:
        return int(stats["program_id"]) if "program_id" in stats else None
    except (TypeError, ValueError):
        return None


def unreadable(paths: list[Path]) -> tuple[Path, str] | None:
    """(path, why) for the first xplane file the profiler's own reader cannot parse (a run killed while its
    profiler wrote), None when every one parses."""
    try:
        from jaxlib._profile_data import ProfileData
    except ImportError:
        try:
            from jax.profiler import ProfileData
        except ImportError:
            return None
    for p in paths:
        try:
            ProfileData.from_serialized_xspace(safeio.read_bytes(p, TRACE_LIMIT))
        except RuntimeError as e:
            return p, str(e)
        except OSError:
            continue
    return None


def _steps(named: list[tuple[str, StepEvent]], step_name: str) -> list[StepEvent]:
    """The step annotations: those named ``step_name`` (the reference model's "train"), else the name most
    ``StepTraceAnnotation`` events carry (a script's own "step"), so its steps are counted and op time is per step."""
    names = Counter(n for n, _ in named)
    use = step_name if step_name in names else (names.most_common(1)[0][0] if names else None)
    return sorted((s for n, s in named if n == use), key=lambda s: s.start_us)


def _read_chrome(path: Path, step_name: str, folder: Path | None = None) -> Trace:
    import io

    try:
        raw = safeio.read_bytes(path, TRACE_LIMIT, within=folder or path.parent)
        with gzip.GzipFile(fileobj=io.BytesIO(raw)) as g:
            data = g.read(TRACE_JSON_LIMIT + 1)
        if len(data) > TRACE_JSON_LIMIT:
            raise InputError(path, f"trace expands past {TRACE_JSON_LIMIT >> 30} GiB; not read")
        doc = json.loads(data)
    except (OSError, ValueError, EOFError) as e:  # Refused is an OSError
        raise InputError(path, f"unreadable trace: {e}") from None
    events = doc.get("traceEvents", []) if isinstance(doc, dict) else doc
    if not isinstance(events, list):
        raise InputError(path, "unreadable trace: traceEvents is not a list")
    events = [e for e in events if isinstance(e, dict)]  # a stray string or number is no event
    names = {}
    for e in events:
        if e.get("ph") == "M" and e.get("name") in ("process_name", "thread_name"):
            named = (e.get("args") or {}).get("name") if isinstance(e.get("args"), dict) else None
            if named is not None:
                names[(e.get("pid"), e.get("tid") if e["name"] == "thread_name" else None)] = named
    ops, steps = [], []
    for i, e in enumerate(events):
        if e.get("ph") != "X":
            continue
        args = e.get("args") if isinstance(e.get("args"), dict) else {}
        try:
            if "hlo_op" in args:
                tname = (f"{names.get((e.get('pid'), None), e.get('pid'))}/"
                         f"{names.get((e.get('pid'), e.get('tid')), e.get('tid'))}")
                ops.append(OpEvent(str(args["hlo_op"]), str(args.get("hlo_module", "")), tname,
                                   float(e["ts"]), float(e.get("dur", 0)), _program(args)))
            elif "step_num" in args:
                steps.append((str(e.get("name")),
                              StepEvent(int(args["step_num"]), float(e["ts"]), float(e.get("dur", 0)))))
        except (KeyError, TypeError, ValueError) as err:
            raise InputError(path, f"unreadable trace event {i} ({e.get('name')!r}): {type(err).__name__}: "
                                   f"{err}") from None
    planes = sorted({v for (p, t), v in names.items() if t is None})
    return Trace(ops, _steps(steps, step_name), f"{path.name} (Chrome trace JSON)", planes)


def self_times(ops: list[OpEvent], control=None) -> list[tuple[OpEvent, float]]:
    """Each op event with its self time: its duration less the ops nested inside it on the same thread.

    For events where ``control(event)`` is true (a while loop, a conditional, a call), self time is the duration
    less the time *any* other op ran inside it, on any thread: a loop whose body runs on worker threads
    keeps only its own overhead."""
    out = _nested_self_times(ops)
    if control is None:
        return out
    ctl = [e for e in ops if control(e)]
    if not ctl:
        return out
    starts = sorted(ops, key=lambda e: e.start_us)
    keys = [e.start_us for e in starts]
    own = {}
    for c in ctl:
        end = c.start_us + c.dur_us
        lo, hi = bisect.bisect_left(keys, c.start_us), bisect.bisect_left(keys, end)
        inside = [e for e in starts[lo:hi] if e is not c]
        own[id(c)] = max(0.0, c.dur_us - busy_time(inside, c.start_us, end))
    return [(e, own.get(id(e), s)) for e, s in out]


def _nested_self_times(ops: list[OpEvent]) -> list[tuple[OpEvent, float]]:
    by_thread: dict[str, list[OpEvent]] = {}
    for e in ops:
        by_thread.setdefault(e.thread, []).append(e)
    out = []
    for evs in by_thread.values():
        evs.sort(key=lambda e: (e.start_us, -e.dur_us))
        stack: list[list] = []  # [event, self]
        for e in evs:
            while stack and stack[-1][0].start_us + stack[-1][0].dur_us <= e.start_us:
                out.append(tuple(stack.pop()))
            if stack:
                stack[-1][1] -= min(e.dur_us, stack[-1][0].start_us + stack[-1][0].dur_us - e.start_us)
            stack.append([e, e.dur_us])
        out.extend(tuple(s) for s in stack)
    return [(e, max(0.0, s)) for e, s in out]


class BusyTimeline:
    """The union of every op's interval over all threads, merged once; the busy time of any window by bisection
    (a 200-step profile holds ~90,000 ops: one sort, not one per step)."""

    def __init__(self, ops: list[OpEvent]):
        merged: list[list[float]] = []
        for s, e in sorted((o.start_us, o.start_us + o.dur_us) for o in ops):
            if merged and s <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], e)
            else:
                merged.append([s, e])
        self.starts = [s for s, _ in merged]
        self.ends = [e for _, e in merged]
        self.cum = list(itertools.accumulate((e - s for s, e in merged), initial=0.0))

    def busy(self, start: float, end: float) -> float:
        """Time in [start, end) when at least one op ran; equal to ``busy_time(ops, start, end)``."""
        i = bisect.bisect_right(self.ends, start)  # the first interval that ends after the window starts
        j = bisect.bisect_left(self.starts, end)   # those before j start before it ends
        if i >= j:
            return 0.0
        return (self.cum[j] - self.cum[i] - max(0.0, start - self.starts[i])
                - max(0.0, self.ends[j - 1] - end))


def busy_time(ops: list[OpEvent], start: float, end: float) -> float:
    """Time in [start, end) when at least one op ran (union of intervals over all threads)."""
    spans = sorted((max(e.start_us, start), min(e.start_us + e.dur_us, end)) for e in ops
                   if e.start_us < end and e.start_us + e.dur_us > start)
    total, cur_s, cur_e = 0.0, None, None
    for s, e in spans:
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                total += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    if cur_e is not None:
        total += cur_e - cur_s
    return total
