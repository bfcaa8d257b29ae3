"""In-process pairs: the timed rounds of an interleaved comparison in two processes (``tools exp run --pairs``).

A process-level round runs each arm as a process of its own, and another job on the machine lands on one arm and
not the other. When the two arms are the reference model (``llama_train.py``) with the same script, interpreter,
folder and environment, differing in flags only (compile-time knobs: shapes, dtypes, remat, scan), the runner
instead runs ``templates/llama_pairs.py`` twice: both step functions built from that script, compiled once, stepped
in alternating blocks (A B, B A, ...), so interference hits both arms within the same second; the second process
swaps the arms' positions (the variant as arm A), since in one process the arm built and warmed second runs a
little faster. Each block becomes a round here, read as a process-level round is (its median step, or its
fastest), and judged by the same statistics.

What a process-level round proves, a block proves too: every step prints a line the runner times on its own clock,
and the reported step times of each block must fit between those lines (``clock_check``); the blocks must be the
ones asked for (``split``). The profiled run and its HLO and trace checks stay process-level; the semantics and
learning checks read the profiled run's losses when there is one, else the pairs process's. Arms that differ in
XLA flags share the process too, each compiled with its own as options (``xla_options``), believed only when a
witness process with the arm's real ``XLA_FLAGS`` compiled the same program (``options_hold``). Anything else
(another environment change, another script or folder, a remote runner) gets processes of its own, with the reason
on the page. One thing processes rule out and one process does not: code that only the variant's flags
reach slowing the other arm (a thread, module state); the flags are the user's own script's.
"""

from __future__ import annotations

import ast
import json
import math
import os
import shlex
from dataclasses import dataclass, field, replace
from pathlib import Path

from ..runners.process import Proc, log_end
from . import arms, clocks, integrity, metrics, xla_options
from .arms import ArmResult
from .sides import Side, script_of

SCRIPT = Path(__file__).resolve().parents[1] / "templates" / "llama_pairs.py"
SCHEMA = "autoresearch-pairs/1"
BLOCK_STEPS = 8  # a block's first line opens its window: the runner's bound loses one step of each block, so a
                 # block of 8 still catches a step timer running at 0.6x (the corpus's scaled clock)
# what llama_pairs.py builds an arm from: a script that defines these is the reference model's kind
MODEL_NAMES = frozenset({"parse_args", "init_params", "adamw_init", "train_step", "make_batch", "report", "xla_flops"})


@dataclass(frozen=True)
class Planned:
    """What one process needs to run two arms: the interpreter, the model script, each arm's flags, and, when the
    arms differ in XLA flags, each arm's compile options and the flags both share (the process's ``XLA_FLAGS``)."""
    python: str
    script: Path
    flags_a: list[str]
    flags_b: list[str]
    options_a: dict[str, str] = field(default_factory=dict)
    options_b: dict[str, str] = field(default_factory=dict)
    xla_flags: str | None = None  # the process's XLA_FLAGS when an arm has options (None: unset)

    @property
    def options(self) -> bool:
        return bool(self.options_a or self.options_b)

    def swapped(self) -> Planned:
        return replace(self, flags_a=self.flags_b, flags_b=self.flags_a, options_a=self.options_b,
                       options_b=self.options_a)

    def env(self, side: Side) -> tuple[dict[str, str], list[str]]:
        """The process's environment and what it unsets: the side's, with the shared XLA flags when arms have
        options of their own."""
        env, unset = dict(side.env), list(side.unset)
        if self.options:
            if self.xla_flags:
                env["XLA_FLAGS"] = self.xla_flags
            else:
                env.pop("XLA_FLAGS", None)
                unset.append("XLA_FLAGS")
        return env, unset


def plan(base: Side | None, variant: Side, runner: str) -> tuple[Planned | None, str]:
    """What one process needs to run both arms, else (None, why)."""
    if runner != "local":
        return None, f"the {runner} runner runs each arm where it is sent"
    if base is None:
        return None, "no baseline arm to pair with"
    options: tuple[str | None, dict[str, str], dict[str, str]] = (None, {}, {})
    if _effective(base) != _effective(variant):
        split, why = xla_options.split(_effective(base), _effective(variant))
        if split is None:
            return None, why
        options = split
    if Path(base.cwd or Path.cwd()).resolve() != Path(variant.cwd or Path.cwd()).resolve():
        return None, "the arms run from different folders"
    sides = []
    for side in (base, variant):
        script = script_of(side.command, side.cwd)
        i = next((k for k, a in enumerate(side.command) if a.endswith(".py")), None)
        if script is None or i != 1:
            return None, f"`{shlex.join(side.command[:3])}` is not `python <script>.py flags`"
        sides.append((side.command[0], script.resolve(), side.command[2:]))
    (py_a, script_a, flags_a), (py_b, script_b, flags_b) = sides
    if py_a != py_b or script_a != script_b:
        return None, "the arms run different scripts or interpreters (a code change needs processes)"
    try:
        tree = ast.parse(script_b.read_text(encoding="utf-8"), filename=str(script_b))
    except (OSError, SyntaxError, ValueError) as e:
        return None, f"{script_b}: cannot be read ({e})"
    defined = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    if missing := sorted(MODEL_NAMES - defined):
        return None, f"{script_b.name} does not build its step as the reference model does (no {', '.join(missing)})"
    common, options_a, options_b = options
    return Planned(py_b, script_b, flags_a, flags_b, options_a, options_b, common), ""


def _effective(side: Side) -> dict[str, str]:
    """The environment the side's process gets: the runner's, less what it unsets, plus its own."""
    env = {k: v for k, v in os.environ.items() if k not in side.unset}
    env.update(side.env)
    return env


def side(planned: Planned, variant: Side, rounds: int, block_steps: int = BLOCK_STEPS,
         hlo_dir: Path | None = None) -> Side:
    """A process that runs ``rounds`` rounds, each arm first warmed up by a block's worth of untimed steps (after
    one step the first blocks still ran slower: A/A σ per round 8.7-11.0 % with one warm-up step, 5.5-6.9 % with
    eight, in 12-round runs of the loop template's shape). ``hlo_dir``: each arm's optimized program written
    there."""
    env, unset = planned.env(variant)
    return Side(_command(planned) + ["--rounds", str(rounds), "--block-steps", str(block_steps),
                                     "--warmup-steps", str(block_steps)]
                + (["--hlo-dir", str(hlo_dir)] if hlo_dir else []), env, variant.cwd, unset)


def _command(planned: Planned) -> list[str]:
    cmd = [planned.python, str(SCRIPT), "--model", str(planned.script), f"--a={shlex.join(planned.flags_a)}",
           f"--b={shlex.join(planned.flags_b)}"]
    for letter, options in (("a", planned.options_a), ("b", planned.options_b)):
        if options:
            cmd.append(f"--{letter}-options={xla_options.encode(options)}")
    return cmd


def witness(planned: Planned, arm_side: Side, letter: str, hlo_dir: Path) -> Side:
    """A process with the arm's own environment (its XLA flags in ``XLA_FLAGS``) that compiles the arm and writes
    its optimized program to ``hlo_dir/a.txt``, running no step: what the arm compiled with options must equal."""
    flags = shlex.join(planned.flags_a if letter == "a" else planned.flags_b)
    return Side([planned.python, str(SCRIPT), "--model", str(planned.script), f"--a={flags}", f"--b={flags}",
                 "--witness", "--hlo-dir", str(hlo_dir)], dict(arm_side.env), arm_side.cwd, list(arm_side.unset))


def options_hold(planned: Planned, hlo_dir: Path, witness_dirs: dict[str, Path]) -> str:
    """Why the arms compiled with options are not the programs their XLA flags give ("" when each equals its
    witness's)."""
    for letter, options in (("a", planned.options_a), ("b", planned.options_b)):
        if not options:
            continue
        mine, theirs = hlo_dir / f"{letter}.txt", witness_dirs[letter] / "a.txt"
        if not mine.is_file() or not theirs.is_file():
            return f"arm {letter}'s optimized program was not written ({mine if not mine.is_file() else theirs})"
        if not xla_options.same_program(mine.read_text(errors="replace"), theirs.read_text(errors="replace")):
            flags = " ".join(f"--{k}={v}" for k, v in options.items())
            return (f"arm {letter} compiled with `{flags}` as options is another program than the flags in "
                    "XLA_FLAGS give (its witness process's)")
    return ""


def output(p: Proc) -> dict | None:
    """The pairs process's last JSON line, or None."""
    for line in reversed(log_end(p.log, clocks.LOG_READ_BYTES).splitlines()):
        line = line.strip()
        if line.startswith("{") and SCHEMA in line:
            try:
                out = json.loads(line)
            except ValueError:
                return None
            return out if isinstance(out, dict) and out.get("schema") == SCHEMA else None
    return None


def split(name: str, p: Proc, timeout: float, peak_flops: float | None, swapped: bool = False,
          first_round: int = 1) -> tuple[ArmResult, list[ArmResult], list[ArmResult]]:
    """The process as an arm of its own (its wall time, its crash), and its blocks as rounds: (process, baseline
    arms, variant arms), one of each per round, each read as a run of that block's steps (the first in the warm-up
    slot), numbered from ``first_round``. ``swapped``: the variant ran as arm A. A process that reports other blocks
    than those asked for is a crash naming the field."""
    out = None if p.timed_out or p.stopped_by or p.hung_s else output(p)
    crash = arms.crash_reason(p, timeout, None, out)
    whole = ArmResult(name, p, out if crash is None else None, crash, kind="pairs")
    if crash is not None:
        return whole, [], []
    rounds = int(out.get("rounds") or 0)
    if bad := bad_blocks(out, rounds):
        whole.result, whole.crash = None, f"bad JSON field `blocks`: {bad}"
        return whole, [], []
    share = replace(p, wall_s=p.wall_s / max(1, 2 * rounds))
    got: dict[str, list[ArmResult]] = {}
    for letter, kind in (("a", "var"), ("b", "base")) if swapped else (("a", "base"), ("b", "var")):
        arm = out[letter]
        run = arm["result"]
        times = run["step_times_s"]
        got[kind] = []
        for i, block in enumerate(arm["blocks"]):
            # the block's first step fills the warm-up slot: the reading is of the steps the clock check covers
            res = dict(run, step_times_s=[times[s] for s in block], warmup_steps=1, pairs_block=i)
            a = ArmResult(f"{'baseline' if kind == 'base' else 'run'}-{first_round + i}", share, res, kind=kind,
                          pairs=letter)
            if bad := metrics.validate(res):
                a.result, a.crash = None, f"bad JSON field {bad}"
            else:
                losses = res.get("losses") or []
                nonfinite = next((x for x in losses if not math.isfinite(float(x))), None)
                if nonfinite is not None:
                    a.bad_loss = f"non-finite loss ({nonfinite}): the math broke"
                a.metrics = metrics.compute(res, peak_flops)
            got[kind].append(a)
    return whole, got["base"], got["var"]


def bad_blocks(out: dict, rounds: int, letters: tuple[str, ...] | list[str] = ("a", "b")) -> str | None:
    """What is wrong with the blocks the process says it ran (None: each arm ran ``rounds`` blocks of
    ``BLOCK_STEPS`` consecutive steps after its warm-up, each step's time reported)."""
    if rounds < 1 or out.get("block_steps") != BLOCK_STEPS:
        return f"expected rounds >= 1 of {BLOCK_STEPS} steps, got {rounds} of {out.get('block_steps')!r}"
    warm = out.get("warmup_steps")
    for letter in letters:
        arm = out.get(letter)
        run = arm.get("result") if isinstance(arm, dict) else None
        times = run.get("step_times_s") if isinstance(run, dict) else None
        if not isinstance(times, list):
            return f"arm {letter} reports no step times"
        want = [list(range(warm + i * BLOCK_STEPS, warm + (i + 1) * BLOCK_STEPS)) for i in range(rounds)] \
            if isinstance(warm, int) and warm >= 1 else None
        if want is None or arm.get("blocks") != want:
            return f"arm {letter}'s blocks are not {rounds} runs of {BLOCK_STEPS} consecutive steps after its warm-up"
        if len(times) < want[-1][-1] + 1:
            return f"arm {letter} reports {len(times)} step times for {want[-1][-1] + 1} steps"
    return None


def clock_check(whole: ArmResult, out: integrity.Integrity) -> None:
    """Each arm's blocks against the runner's clock: the reported times of a block's steps after its first must
    fit between the first's line and the last's, summed over the blocks (a block's lines are printed back to back;
    between blocks the other arm runs). Step lines must cover every step and carry the reported losses. An arm
    without that evidence leaves the clock check unchecked, whatever the other gave."""
    res = whole.result or {}
    for letter in ("a", "b"):
        finding, why = arm_clock(res.get(letter) or {}, whole, f"{whole.name}-{letter}", out.facts)
        if finding is not None:
            out.add("clock", finding)
        elif why:
            if out.checks.get("clock") != "violated":
                out.checks["clock"] = f"unchecked: {why}"
        else:
            out.add("clock", None)


def arm_clock(arm: dict, whole: ArmResult, name: str, facts: dict) -> tuple[integrity.Finding | None, str]:
    run = arm.get("result") or {}
    times, losses = run.get("step_times_s") or [], run.get("losses") or []
    lines = {ln.step: ln for ln in clocks.step_lines(whole.proc.log, whole.proc.clock, arm=name[-1])}
    if len(lines) < len(times):
        return integrity.Finding("step-count", f"{name}: reported {len(times)} step times; the runner saw step "
                                 f"lines for {len(lines)} steps"), ""
    wrong = [s for s, ln in lines.items() if s < len(losses) and (ln.loss is None or
                                                                 clocks.differs(ln.loss, float(losses[s])))]
    if wrong:
        return integrity.Finding("step-losses", f"{name}: step {wrong[0]}'s line printed loss "
                                 f"{lines[wrong[0]].loss}, the result reports {losses[wrong[0]]}"), ""
    told = least = most = 0.0
    steps = 0
    for block in arm.get("blocks") or []:
        if len(block) < 2:
            continue
        if any(s not in lines or s >= len(times) for s in block):
            return None, f"{name}: a block without a step line and a step time for each of its steps"
        first, last = lines[block[0]], lines[block[-1]]
        told += math.fsum(times[s] for s in block[1:])
        least += last.after - first.t
        most += last.t - first.after
        steps += len(block) - 1
    if steps < 3:
        return None, f"{name}: only {steps} timed steps inside blocks with step lines"
    facts.setdefault("clock", {})[name] = {"steps": steps, "reported_s": round(told, 6),
                                           "runner_s": [round(least, 6), round(most, 6)]}
    if told < clocks.CLOCK_SLOW * least and least - told > clocks.CLOCK_SLACK_S:
        return integrity.Finding("clock-slow", f"{name}: its blocks report {told * 1e3:.1f} ms in all; on the "
                                 f"runner's clock their lines were at least {least * 1e3:.1f} ms apart (ratio "
                                 f"{told / least:.2f} < {clocks.CLOCK_SLOW})"), ""
    if told > clocks.CLOCK_FAST * most and told - most > clocks.CLOCK_SLACK_S:
        return integrity.Finding("clock-replay", f"{name}: its blocks report {told * 1e3:.1f} ms in all; on the "
                                 f"runner's clock their lines were at most {most * 1e3:.1f} ms apart"), ""
    if least < 0:  # no lower bound at all: "not slow" proved nothing
        return None, f"{name}: {clocks.TOGETHER}"
    return None, ""
