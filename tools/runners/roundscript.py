"""One round as one POSIX shell script, and the job log split back into per-arm logs.

The script runs the arms in order. Around each arm's output it prints marker lines ``@@AR begin <token> <i>``
and ``@@AR end <token> <i> <exit code> <start> <end>`` (epoch seconds), then ``@@AR done <token> <n>``.
The token is random per round and the literal marker text never appears in the script itself (it is assembled
by ``printf`` at run time), so a log that also echoes the script (Ray prints its entrypoint) cannot fake one.
An arm runs in a subshell: ``cd`` to its folder, its variables exported, the command under ``timeout`` (a shell
watchdog where ``timeout`` is missing). A TERM, INT or HUP to the script stops the running arm and exits 143.
Where the worker has a ``python3``, an arm's output goes through a FIFO to a stamper (another process than the
program) that reads it as the local runner reads a pipe (waits for output, then reads all there is) and writes each
piece as ``@@T<token> <asked> <heard> `` and a line (``@@T<token>+`` for a piece with no newline yet, which the
next continues): when its read began and when it returned, on the worker's clock. Step lines are then timed as a local run's (``ArmOutput.clock``); the log
is cut at ``\n`` only, so a stamp after a ``\r`` in the program's own line is no stamp.
"""

from __future__ import annotations

import itertools
import math
import re
import shlex
from dataclasses import dataclass, field

from ..errors import ToolsError

ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
KILL_AFTER_S = 10  # the arm gets TERM at its timeout, KILL this much later
MISSING = ("{name} did not reach the job: the runner's submit command must pass its environment on (or set the "
           "runner option hide_secrets: false; see docs/runners.md, Secrets)")


@dataclass
class ArmPlan:
    """One arm as the worker sees it: paths already translated to the worker's side."""
    name: str
    command: list[str]
    cwd: str | None
    env: dict[str, str]
    timeout: float
    uploads: list[tuple[str, str]] = field(default_factory=list)  # (folder on the worker, destination) after the arm
    # a secret's name -> the job variable holding its value: the job's environment carries it, never the script
    hidden: dict[str, str] = field(default_factory=dict)


@dataclass
class ArmOutput:
    text: str = ""        # what the command printed
    after: str = ""       # what came after its end marker (artefact uploads)
    begun: bool = False
    ended: bool = False
    rc: int | None = None
    seconds: float = 0.0
    start: float | None = None  # epoch seconds on the worker when the arm began (its end marker says)
    stamped: bool = False       # a stamper read its output (the script says so, not the program)
    # (seconds from the arm's start when a read returned, byte offset in ``text`` after it, when it began), from
    # (0, 0, 0) on: the shape of the local runner's clock (``process.Proc.clock``); empty where nothing was stamped
    clock: list[tuple[float, int, float]] = field(default_factory=list)


@dataclass
class SplitLog:
    arms: list[ArmOutput]
    preamble: str = ""    # before the first arm began (job start-up, errors of the wrapper)
    done: bool = False    # the script reached its end
    stopped: bool = False  # the script was signalled and stopped its arm
    worker: str = ""      # the worker's host name


_PRELUDE = r"""_ar_pid=
_ar_mark() { printf '@@AR %s %s %s\n' "$1" "$_ar_tok" "$2"; }
_ar_stop() {
  [ -n "$_ar_pid" ] && kill -TERM "$_ar_pid" 2>/dev/null; rm -f "${_ar_q:-}" 2>/dev/null; _ar_mark stopped signal
  exit 143
}
trap _ar_stop TERM INT HUP
_ar_limit() {  # seconds command...: TERM at the limit, KILL later; GNU/busybox timeout kills the whole group
  _ar_s=$1; shift
  if command -v timeout >/dev/null 2>&1; then exec timeout -k %(kill)d "$_ar_s" "$@"; fi
  "$@" & _ar_p=$!
  ( _ar_e=0; while [ "$_ar_e" -lt "$_ar_s" ] && kill -0 "$_ar_p" 2>/dev/null; do sleep 1; _ar_e=$((_ar_e + 1)); done
    kill -TERM "$_ar_p" 2>/dev/null && sleep %(kill)d && kill -KILL "$_ar_p" 2>/dev/null ) >/dev/null 2>&1 &
  _ar_w=$!; wait "$_ar_p"; _ar_r=$?; kill "$_ar_w" 2>/dev/null; exit "$_ar_r"
}
_ar_leftover() {  # pgid: TERM what is left of the arm's group, KILL what is still there a second later
  if kill -TERM -"$1" 2>/dev/null; then
    echo "[tools runner] stopped the processes the arm left running"; sleep 1; kill -KILL -"$1" 2>/dev/null
  fi; return 0
}
_ar_now() { _ar_t=$(date +%s.%N 2>/dev/null); case $_ar_t in *[!0-9.]*|'') date +%s ;; *) echo "$_ar_t" ;; esac; }
_ar_stamper='import os, select, sys, time
tok, out, held = sys.argv[1].encode(), sys.stdout.buffer, b""
while True:
    select.select([0], [], [])
    asked = time.time()
    data = os.read(0, 65536)
    if not data:
        if held:
            out.write(b"@@T%s+ %.6f %.6f %s\n" % (tok, asked, asked, held))
        break
    while len(data) % 65536 == 0 and len(data) < 1 << 24 and select.select([0], [], [], 0)[0]:
        more = os.read(0, 65536)
        if not more:
            break
        data += more
    heard = time.time()
    *whole, part = (held + data).split(b"\n")
    lead = next((i for i in range(1, min(4, len(part)) + 1) if part[-i] & 192 != 128), 0)
    cut = len(part) - lead if lead and part[-lead] >= 192 and lead < 2 + (part[-lead] >= 224) + (part[-lead] >= 240) \
        else len(part)  # a character whose last bytes are still to come waits for them
    part, held = part[:cut], part[cut:]
    for line in whole:
        out.write(b"@@T%s %.6f %.6f %s\n" % (tok, asked, heard, line))
    if part:
        out.write(b"@@T%s+ %.6f %.6f %s\n" % (tok, asked, heard, part))
    out.flush()'
_ar_py=$(command -v python3 2>/dev/null || true)  # the stamper itself tried: one that died would take its arm along
printf 'x\n' | "${_ar_py:-false}" -c "$_ar_stamper" 0 >/dev/null 2>&1 || _ar_py=
_ar_pipe() {  # i: a FIFO arm i writes to and a stamper reads ($_ar_sp its pid), where the worker allows one
  _ar_sp=; _ar_q="${TMPDIR:-/tmp}/ar-$_ar_tok-$1"
  [ -n "$_ar_py" ] && rm -f "$_ar_q" && mkfifo "$_ar_q" 2>/dev/null || return 0
  "$_ar_py" -c "$_ar_stamper" "$_ar_tok" < "$_ar_q" & _ar_sp=$!
  _ar_mark stamped "$1"
}
_ar_mark worker "$(uname -n)"
""".replace("%(kill)d", str(KILL_AFTER_S))


def render(plans: list[ArmPlan], token: str, header: list[str] | None = None, upload: str = "") -> str:
    """The round's script. ``header`` lines follow the shebang (``#SBATCH ...``); ``upload`` is a command
    template with ``{src}`` and ``{dst}`` run after an arm for each of its ``uploads``."""
    if not re.fullmatch(r"[0-9a-f]{6,}", token):
        raise ToolsError(f"round token {token!r} must be lowercase hex")
    names = ", ".join(p.name for p in plans)
    out = ["#!/bin/sh", *(header or []),
           f"# autoresearch-wiki: {len(plans)} arm(s) run in order on one worker: {names}",
           f"_ar_tok={token}"]
    for var in sorted({v for p in plans for v in p.hidden.values()}):
        if not ENV_NAME.fullmatch(var):
            raise ToolsError(f"{var!r} is not a valid environment variable name")
        # the job's secrets into shell variables, out of the environment: only the arm a secret is for exports it
        out.append(f'if [ "${{{var}+set}}" = set ]; then _ar_h{var}=${var}; fi; unset {var}')
    out.append(_PRELUDE)
    for i, p in enumerate(plans):
        out += _arm_lines(i, len(plans), p, upload)
    out += [f"_ar_mark done {len(plans)}", "exit 0", ""]
    return "\n".join(out)


def _arm_lines(i: int, n: int, p: ArmPlan, upload: str) -> list[str]:
    if not p.command:
        raise ToolsError(f"arm {p.name}: empty command")
    # a function run as the background job: that job is the process `timeout` replaces (its group the arm's)
    lines = [f"# arm {i + 1}/{n}: {p.name}", f"_ar_arm{i}() {{"]
    if p.cwd:
        lines.append(f"  cd -- {shlex.quote(p.cwd)} || exit 127")
    for k, v in p.env.items():
        if not ENV_NAME.fullmatch(k):
            raise ToolsError(f"arm {p.name}: {k!r} is not a valid environment variable name")
        lines.append(f"  export {k}={shlex.quote(str(v))}")
    for k, var in p.hidden.items():  # the arm's own secrets, from the job's environment (each arm is a subshell)
        if not ENV_NAME.fullmatch(k):
            raise ToolsError(f"arm {p.name}: {k!r} is not a valid environment variable name")
        # a submit that does not pass its environment on (ssh, sbatch --export=NONE): the arm fails saying so,
        # rather than running with an empty secret
        lines.append(f'  export {k}="${{_ar_h{var}?{MISSING.format(name=k)}}}"')
    seconds = max(1, math.ceil(p.timeout))
    lines += [f"  _ar_limit {seconds} {shlex.join(p.command)}", "}",
              f"_ar_mark begin {i}", f"_ar_pipe {i}", "_ar_t0=$(_ar_now)",
              f'if [ -n "$_ar_sp" ]; then _ar_arm{i} </dev/null >"$_ar_q" 2>&1 & else _ar_arm{i} </dev/null 2>&1 & fi',
              '_ar_pid=$!; wait "$_ar_pid"; _ar_rc=$?; _ar_t1=$(_ar_now)',
              # what the arm left running (`helper &`) would take the machine from the next arm, and print into its
              # log: `timeout` made the arm a process group of its own, and the group goes with the arm
              '_ar_leftover "$_ar_pid"; _ar_pid=',
              # the stamper has written every line; a helper the arm moved out of its group holds the FIFO open:
              # the stamper is stopped after 5 s (the helper's later writes fail) rather than the round waiting
              '[ -n "$_ar_sp" ] && { ( sleep 5; kill "$_ar_sp" ) >/dev/null 2>&1 & _ar_k=$!; wait "$_ar_sp"; '
              'kill "$_ar_k" 2>/dev/null; rm -f "$_ar_q"; }',
              f'_ar_mark end "{i} $_ar_rc $_ar_t0 $_ar_t1"']
    for src, dst in p.uploads:
        cmd = upload.format(src=shlex.quote(src), dst=shlex.quote(dst))
        lines.append(f"if [ -e {shlex.quote(src)} ]; then {cmd} 2>&1 || echo '[tools runner] upload failed: {src}'; "
                     f"else echo '[tools runner] nothing to upload: {src} does not exist'; fi")
    return lines


def split(text: str, token: str, n: int) -> SplitLog:
    """Cut a job log into the output of each of ``n`` arms, by the round's markers; a stamped arm's pieces
    unstamped into its text, their times into its clock."""
    marker = re.compile(rf"@@AR (begin|end|done|stopped|worker|stamped) {re.escape(token)}(?: ([^\r\n]*))?\r?$")
    stamp = re.compile(rf"@@T{re.escape(token)}(\+?) (\d+(?:\.\d+)?) (\d+(?:\.\d+)?) ")
    out = SplitLog([ArmOutput() for _ in range(n)])
    pre: list[str] = []
    target: list[str] = pre
    bufs: dict[tuple[int, str], list[str]] = {}
    reads: dict[int, list[list]] = {}  # arm -> [asked, heard, pieces of its text so far] per read of the stamper
    arm = None
    # a log read through a tty (a pod with tty: true, `ssh -t`) has every \n as \r\n: the script's first marker says
    first = re.search(rf"@@AR (?:worker|begin) {re.escape(token)}[^\n]*\n", text)
    for line in _lines(text, first is not None and first.group().endswith("\r\n")):
        if arm is not None and out.arms[arm].stamped and target is bufs.get((arm, "text")) and \
                (t := stamp.match(line)):
            target.append(line[t.end():-1] if t[1] and line.endswith("\n") else line[t.end():])
            when, seen = [float(t[2]), float(t[3])], reads.setdefault(arm, [])
            if seen and seen[-1][:2] == when:  # the lines of one read: one entry at its end
                seen[-1][2] = len(target)
            else:
                seen.append([*when, len(target)])
            continue
        m = marker.search(line)
        if not m or m.start():
            target.append(line[:m.start()] + "\n" if m else line)  # output without a final newline, the marker
            if not m:
                continue
        kind, arg = m.group(1), (m.group(2) or "").split()
        if kind in ("begin", "stamped") and arg and arg[0].isdigit() and int(arg[0]) < n:
            i = arm = int(arg[0])
            out.arms[i].begun, out.arms[i].stamped = True, out.arms[i].stamped or kind == "stamped"
            target = bufs.setdefault((i, "text"), [])
        elif kind == "end" and len(arg) == 4 and int(arg[0]) < n:
            i = int(arg[0])
            a = out.arms[i]
            a.ended, a.rc, a.seconds = True, int(arg[1]), round(max(0.0, float(arg[3]) - float(arg[2])), 3)
            a.start = float(arg[2])
            if (text_of := bufs.get((i, "text"))) and not text_of[-1].endswith("\n"):
                text_of.append("\n")  # a stamped piece with no newline, then the arm's end
            target = bufs.setdefault((i, "after"), [])
        elif kind == "done":
            out.done = True
            target = []
        elif kind == "stopped":
            out.stopped = True
        elif kind == "worker":
            out.worker = " ".join(arg)
    out.preamble = "".join(pre)
    for (i, part), buf in bufs.items():
        setattr(out.arms[i], part, "".join(buf))
    for i, a in enumerate(out.arms):
        if not a.stamped:
            continue
        seen = reads.get(i, [])
        ends = list(itertools.accumulate(len(x.encode("utf-8", "replace")) for x in bufs.get((i, "text"), [])))
        t0 = a.start if a.start is not None else (seen[0][0] if seen else 0.0)
        a.clock = [(0.0, 0, 0.0)] + [(round(heard - t0, 6), ends[k - 1], round(asked - t0, 6))
                                     for asked, heard, k in seen]
    return out


def _lines(text: str, crlf: bool = False):
    """The log's lines, cut at ``\n`` alone (``str.splitlines`` also cuts at ``\r``, ``\x0c``, U+2028...: where
    the program's own line could start a stamp); ``crlf``: each line's ``\r\n`` as ``\n``."""
    parts = text.split("\n")
    for p in parts[:-1]:
        yield (p[:-1] if crlf and p.endswith("\r") else p) + "\n"
    if parts[-1]:
        yield parts[-1]
