"""A screen: several compile-time moves of the reference model measured against the trunk in one process
(``templates/llama_pairs.py`` with ``--arm``), a few rounds of blocks in rotating order. It ranks and it rules out;
it never decides: a move it lets through is confirmed by an experiment of its own (``tools/loop/screening.py``).

Per move: the median over rounds of its block's reading (its fastest step with ``statistic: min``, else the block's
tokens/s; both from the step times of the steps the runner's clock bounds) over the trunk's in the same round, with
a t-interval of the log-ratio; its losses against the trunk's when the shapes match (the same tolerance as an
experiment's semantics check); each arm's blocks against the runner's clock, as pairs are checked
(``pairs.arm_clock``; an arm the clock contradicts or cannot check has no reading). In one process the arms built
after the first ran a little faster (+0.7 % over 24 rounds in A/A, more in the first rounds): a screen's gains lean
that way, which ranking tolerates and a verdict would not.

A move that changes an XLA flag runs in the same process, compiled with the flag as an option
(``experiments/xla_options.py``); its program must differ from the trunk's, or it has no reading. A move one process
cannot run beside the trunk (another environment change, an XLA flag of the trunk's taken away) is screened in
processes instead (``read_processes``): a few rounds of the trunk and the move as processes of their own, read as an
experiment reads a process.
"""

from __future__ import annotations

import math
import shlex
import statistics
from dataclasses import dataclass, field
from pathlib import Path

from ..runners.process import Proc
from . import arms, clocks, integrity, pairs, stats, verdict, xla_options
from .arms import ArmResult
from .sides import Side


@dataclass
class Screened:
    letter: str                            # the arm in the screen's process (b, c, ...; a is the trunk)
    gain_pct: float | None = None          # median over rounds of the move's reading over the trunk's, minus 1
    interval_pct: list[float] | None = None  # 95 % t-interval of that gain (from the rounds' log-ratios)
    rounds: int = 0
    tokens_per_s: float | None = None      # the median of its blocks' tokens/s (what the user reads)
    losses: str = "unchecked"              # ok | changed | unchecked (another shape, no losses)
    loss_diff: float | None = None
    problem: str = ""                      # why its figures cannot be used (the clock, a broken loss, bad blocks)
    facts: dict = field(default_factory=dict)

    @property
    def slower(self) -> bool:
        """Slower than the trunk beyond the screen's own noise (the whole interval below zero)."""
        return self.interval_pct is not None and self.interval_pct[1] < 0

    def to_dict(self) -> dict:
        return {"letter": self.letter, "gain_pct": self.gain_pct, "interval_pct": self.interval_pct,
                "rounds": self.rounds, "tokens_per_s": self.tokens_per_s, "losses": self.losses,
                "loss_diff": self.loss_diff, "problem": self.problem}


def side(planned: pairs.Planned, more: list[pairs.Planned], base: Side, rounds: int,
         hlo_dir: Path | None = None) -> Side:
    """One process with the trunk's environment: the trunk as arm A, the first move as B, the rest as C, D, ...
    (each move's ``pairs.plan`` against the trunk: the interpreter and the script from the first; a move that
    changes an XLA flag compiles with it as an option, and none may take one of the trunk's XLA flags away).
    ``hlo_dir``: each arm's optimized program written there."""
    cmd = [planned.python, str(pairs.SCRIPT), "--model", str(planned.script), f"--a={shlex.join(planned.flags_a)}",
           f"--b={shlex.join(planned.flags_b)}", *[f"--arm={shlex.join(m.flags_b)}" for m in more]]
    if planned.options_b:
        cmd.append(f"--b-options={xla_options.encode(planned.options_b)}")
    if any(m.options_b for m in more):
        cmd += [f"--arm-options={xla_options.encode(m.options_b)}" for m in more]
    cmd += ["--rounds", str(rounds), "--block-steps", str(pairs.BLOCK_STEPS), "--warmup-steps", str(pairs.BLOCK_STEPS)]
    if any(m.options_b for m in [planned, *more]):
        cmd.append("--skip-refused")  # a move whose option XLA refuses is left out, not the whole screen
    return Side(cmd + (["--hlo-dir", str(hlo_dir)] if hlo_dir else []), dict(base.env), base.cwd, list(base.unset))


def option_problems(hlo_dir: Path, letters: dict[str, bool]) -> dict[str, str]:
    """Per arm compiled with XLA options (``letters``: arm -> has options): why its reading says nothing of the
    flag, when its program is the trunk's (the option did not reach the compile in one process; its own
    experiment checks the flag against a process of its own)."""
    trunk = hlo_dir / "a.txt"
    out = {}
    for letter, has in letters.items():
        mine = hlo_dir / f"{letter}.txt"
        if not has:
            continue
        if not trunk.is_file() or not mine.is_file():
            out[letter] = "its optimized program was not written: the XLA flag's reach is unchecked"
        elif xla_options.same_program(mine.read_text(errors="replace"), trunk.read_text(errors="replace")):
            out[letter] = "its XLA flag as a compile option left the trunk's program unchanged in one process"
    return out


def read(p: Proc, moves: int, statistic: str, timeout: float) -> tuple[str | None, list[Screened]]:
    """(why the process as a whole failed, else None; one ``Screened`` per move, in the order given). A move whose
    XLA flag XLA refused as a compile option was left out of the process (``--skip-refused``, named in the JSON's
    ``refused``): it has no reading, and its own experiment measures it (in processes, when the option is refused
    there too)."""
    out = None if p.timed_out or p.stopped_by or p.hung_s else pairs.output(p)
    crash = arms.crash_reason(p, timeout, None, out)
    if crash is not None:
        return crash, []
    letters = [chr(ord("b") + i) for i in range(moves)]
    refused = out.get("refused") or {}
    if not isinstance(refused, dict) or not set(refused) <= set(letters) or \
            not all(isinstance(v, str) for v in refused.values()):
        return f"bad JSON field `refused`: expected moves' arms ({letters}) to reasons, got {refused!r}", []
    ran = [x for x in letters if x not in refused]
    if out.get("arms") != ["a", *ran]:
        return f"bad JSON field `arms`: expected {['a', *ran]}, got {out.get('arms')!r}", []
    rounds = int(out.get("rounds") or 0)
    if bad := pairs.bad_blocks(out, rounds, ["a", *ran]):
        return f"bad JSON field `blocks`: {bad}", []
    try:
        got = {s.letter: s for s in _screened(p, out, ran, rounds, statistic)}
        return None, [got.get(x) or Screened(x, problem=f"XLA refused its flag as a compile option ({refused[x]}): "
                                                        "no reading in one process") for x in letters]
    except TrunkUnusable as e:
        return str(e), []
    except (KeyError, TypeError, ValueError, ZeroDivisionError) as e:  # figures that are not numbers where they must be
        return f"bad JSON field: {type(e).__name__}: {e}", []


class TrunkUnusable(Exception):
    """The trunk's arm cannot be a yardstick: nothing in the screen ranks."""


def _screened(p: Proc, out: dict, letters: list[str], rounds: int, statistic: str) -> list[Screened]:
    whole = ArmResult("screen", p, out, None, kind="screen")
    checked = integrity.Integrity()
    trunk = out["a"]
    if why := _arm_problem(trunk, whole, "a", checked, contradicted_only=True):  # as in processes (read_processes)
        raise TrunkUnusable(f"the trunk's arm: {why}")
    base = _readings(trunk, statistic)
    got = []
    for letter in letters:
        arm = out[letter]
        s = Screened(letter, rounds=rounds)
        s.problem = _arm_problem(arm, whole, letter, checked)
        if not s.problem:
            _gain(s, _readings(arm, statistic), base)
        s.tokens_per_s = round(statistics.median(arm["tokens_per_s"]), 2) if arm.get("tokens_per_s") else None
        if _same_shape(trunk, arm):
            sem = verdict.semantics(trunk["result"].get("losses"), arm["result"].get("losses"), "the trunk's arm")
            s.losses, s.loss_diff = sem.status, sem.max_abs_delta
        s.facts = checked.facts.get("clock", {}).get(f"screen-{letter}", {})
        got.append(s)
    return got


def _gain(s: Screened, mine: list[float], base: list[float]) -> None:
    """The median over rounds of the move's reading over the trunk's (same round), and a t-interval of the mean."""
    ratios = [math.log(v / b) for v, b in zip(mine, base) if v and b and v > 0 and b > 0]
    if not ratios:
        return
    s.gain_pct = round(100 * (math.exp(statistics.median(ratios)) - 1), 3)
    if len(ratios) >= 2:
        half = stats.t_quantile(0.975, len(ratios) - 1) * statistics.stdev(ratios) / math.sqrt(len(ratios))
        mean = statistics.fmean(ratios)
        s.interval_pct = [round(100 * (math.exp(mean - half) - 1), 3), round(100 * (math.exp(mean + half) - 1), 3)]


def read_processes(trunk: list[ArmResult], moves: list[list[ArmResult]], statistic: str
                   ) -> tuple[str | None, list[Screened]]:
    """A screen in processes, for moves one process cannot run beside the trunk (an environment or XLA flag change
    recompiles every program): each round ran the trunk and every move as processes of their own, in rotating
    order. Per move, as in one process: the median over rounds of its reading over the trunk's in the same round
    (the experiment's reading of a process, ``ArmResult.speed``, once its step lines passed the runner's clock), the
    interval, its losses against the trunk's. A move's process that crashed or that the clock contradicts has no
    reading (proposed on its usual prior: its own experiment files the crash, or the finding)."""
    if not trunk:
        return "the trunk ran no process", []
    for a in trunk:
        # a clock that bounds none of the trunk's lines (a busy machine's runner read them together) contradicts
        # nothing: its reading is used as an experiment's would be; a clock that contradicts it is not
        why = (a.crash or a.bad_loss) if not a.ok else _process_problem(a, contradicted_only=True)
        if why:
            return f"the trunk's process {a.name}: {why}", []
    base = [a.speed(statistic) for a in trunk]
    got = []
    for runs in moves:
        s = Screened(runs[0].name.rsplit("-", 1)[0] if runs else "", rounds=len(runs))
        bad = next((a for a in runs if not a.ok), None)
        s.problem = f"{bad.name}: {bad.crash or bad.bad_loss}" if bad else _moves_problem(runs)
        if not s.problem:
            _gain(s, [a.speed(statistic) for a in runs], base)
        ok = [a for a in runs if a.ok]
        s.tokens_per_s = round(statistics.median(a.tps for a in ok), 2) if ok and all(a.tps for a in ok) else None
        if ok and verdict.shape_key(ok[0].result) == verdict.shape_key(trunk[0].result):
            sem = verdict.semantics(trunk[0].result.get("losses"), ok[0].result.get("losses"), "the trunk's process")
            s.losses, s.loss_diff = sem.status, sem.max_abs_delta
        if bad and bad.bad_loss:
            s.problem = f"a non-finite loss: the math broke ({bad.name}: {bad.bad_loss})"
        got.append(s)
    return None, got


def _moves_problem(runs: list[ArmResult]) -> str:
    """Why a move's processes give no reading: one whose lines the clock contradicts, or cannot check. As an
    experiment reads its runs (``comparison._unverified``), a process whose lines a busy runner read all at once is
    no problem while another of the move's processes was checked."""
    whys = [(a.name, _process_problem(a)) for a in runs]
    late = [w for w in whys if clocks.TOGETHER in w[1]]
    if any(not why for _, why in whys):
        whys = [w for w in whys if w not in late]
    return next((f"{name}: {why}" for name, why in whys if why), "")


def _process_problem(a: ArmResult, contradicted_only: bool = False) -> str:
    """Why a process's figures cannot be read: its step lines contradict the runner's clock, or (unless
    ``contradicted_only``) cannot be checked."""
    checked = integrity.Integrity()
    clocks.clock_check(a.result, clocks.step_lines(a.proc.log, a.proc.clock), checked, a.name,
                       clocked=bool(a.proc.clock))
    if checked.findings:
        f = checked.findings[0]
        return f"{f.signature}: {f.detail}"
    state = checked.checks.get("clock", "")
    return f"clock {state}" if state.startswith("unchecked") and not contradicted_only else ""


def _readings(arm: dict, statistic: str) -> list[float]:
    """Per block, tokens/s of the steps the runner's clock bounds (each block's steps after its first, as
    ``pairs.split`` reads a block): the fastest of them (``min``) or all of them, from the reported step times, never
    the figures the program printed for itself."""
    times, per = arm["result"]["step_times_s"], float(arm["tokens_per_step"])
    out = []
    for block in arm["blocks"]:
        t = [float(times[i]) for i in block[1:]]
        out.append(per / min(t) if statistic == "min" else per * len(t) / math.fsum(t))
    return out


def _same_shape(a: dict, b: dict) -> bool:
    ca, cb = a.get("config") or {}, b.get("config") or {}
    return all(ca.get(k) == cb.get(k) for k in ("batch", "seq_len")) and a.get("tokens_per_step") == \
        b.get("tokens_per_step")


def _arm_problem(arm: dict, whole: ArmResult, letter: str, checked: integrity.Integrity,
                 contradicted_only: bool = False) -> str:
    """Why an arm's figures cannot be used: a non-finite loss, or blocks its step lines on the runner's clock
    contradict, or (unless ``contradicted_only``) cannot be checked ("" when none)."""
    losses = (arm.get("result") or {}).get("losses") or []
    if any(not math.isfinite(float(x)) for x in losses):
        return "a non-finite loss: the math broke"
    finding, why = pairs.arm_clock(arm, whole, f"screen-{letter}", checked.facts)
    if finding is not None:
        return f"{finding.signature}: {finding.detail}"
    return f"clock unchecked: {why}" if why and not contradicted_only else ""
