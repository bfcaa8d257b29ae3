"""Which model source line an HLO op's time belongs to.

An op's metadata is a stack of frames. The line credited is the innermost frame that is in the model's code
(not a library: site-packages, the standard library) and is not a pure control-flow wrapper line (the call site of
a scan / while_loop / fori_loop / cond / switch / checkpoint / remat / jit / vmap / shard_map, or the stack below
the jitted function). A fusion holding a dot is credited to the dot's line. An op whose own frames name only
wrapper lines (compiler glue: converts, copies, tuples the compiler stamped with the loop's metadata, or ops
with no metadata at all) borrows the line of the work fused inside it, else of its nearest producer, else of its
nearest consumer. A ``while`` / ``conditional`` / ``call`` op keeps its call site: its self time is the loop's
own overhead, never its body's.
"""

from __future__ import annotations

import re
import sysconfig
from dataclasses import dataclass
from pathlib import Path

from .. import safeio
from .hlo import _MATMUL, Frame, HloModule, Instr

# Calls that wrap a body traced elsewhere: their line is where the body was *called*, not where work happens.
_WRAPPER_CALL = re.compile(
    r"\b(?:lax\.)?(?:scan|while_loop|fori_loop|cond|switch|associative_scan|checkpoint|remat|jit|pjit|"
    r"vmap|pmap|shard_map|custom_vjp|custom_jvp|named_call|lax\.map)\s*\(|\bnn\.(?:scan|remat|jit|vmap)\s*\(|"
    r"\.(?:lower|compile)\s*\(")
CONTROL_OPS = {"while", "conditional", "call", "async-start", "async-done"}
_GLUE = {"parameter", "get-tuple-element", "tuple", "bitcast", "copy", "convert", "reshape", "broadcast",
         "constant", "transpose", "slice", "dynamic-slice", "dynamic-update-slice", "iota"}
_STDLIB = sysconfig.get_path("stdlib") or "/nonexistent-stdlib"
BORROW_HOPS = 3


def is_library(file: str) -> bool:
    """Frames outside the model: installed packages, the standard library, frozen or generated code."""
    return ("/site-packages/" in file or "/dist-packages/" in file or file.startswith(_STDLIB)
            or file.startswith("<"))


@dataclass(frozen=True)
class Credit:
    frame: Frame | None
    via: str  # metadata | fused dot | fused op | producer | consumer | control flow | wrapper line | library | none


SOURCE_LIMIT = 16 * 1024 * 1024


class SourceLines:
    """Source text of model files, read once each: the profile folder's ``code/`` copy first (the runner saves
    the script there, so an old run reads the code it ran), else the recorded path."""

    def __init__(self, search: list[Path] | None = None, confine: Path | None = None):
        self.search = [Path(p) for p in (search or [])]
        self.confine = confine  # set for agent-facing reads: the recorded path only when inside it
        self._files: dict[str, list[str] | None] = {}

    def line(self, file: str, line: int) -> str:
        if file not in self._files:
            self._files[file] = None
            # unconfined (a person's own `tools profile`), the recorded path may be a link (the repository's
            # experiments/llama_train.py is one); special files are refused either way
            cands = [(d / Path(file).name, d) for d in self.search] + [(Path(file), self.confine or Path("/"))]
            for cand, within in cands:
                try:
                    data = safeio.read_bytes(cand, SOURCE_LIMIT, within=within)
                except OSError:  # absent, or refused (a FIFO, a link out, outside the knowledge base)
                    continue
                self._files[file] = data.decode("utf-8", errors="replace").splitlines()
                break
        text = self._files[file]
        return text[line - 1].strip() if text and 0 < line <= len(text) else ""


class Attributor:
    """Credits each op of one module to a source frame (see the module docstring)."""

    def __init__(self, mod: HloModule, sources: SourceLines | None = None):
        self.mod = mod
        self.sources = sources or SourceLines()
        self.wrappers = self._wrapper_lines()
        self._chosen: dict[int, Frame | None] = {}
        self._credit: dict[str, Credit] = {}

    # ------------------------------------------------------------------ which lines are wrappers
    def _wrapper_lines(self) -> set[tuple[str, int]]:
        out: set[tuple[str, int]] = set()
        stacks = {id(i.frames): i.frames for i in self.mod.instrs.values() if i.frames}
        for ins in self.mod.instrs.values():  # the call sites of loops and conditionals left after optimization
            if ins.opcode in CONTROL_OPS:
                f = self._innermost_model(ins.frames)
                if f:
                    out.add(f[:2])
        jitted = re.sub(r"^p?jit_", "", self.mod.name)
        for fr in stacks.values():  # the stack that called the jitted function (main, <module>)
            outer = [n for n, f in enumerate(fr) if f[2] == jitted or f[2].endswith("." + jitted)]
            if outer:
                out.update(f[:2] for f in fr[outer[-1] + 1:])
        if len(stacks) > 1:  # and what every op's stack ends with (the same call stack, when names differ)
            common = None
            for fr in stacks.values():
                keys = [f[:2] for f in reversed(fr)]
                if common is None:
                    common = keys
                else:
                    n = 0
                    while n < min(len(common), len(keys)) and common[n] == keys[n]:
                        n += 1
                    common = common[:n]
            out.update(common or [])
        seen = {f[:2] for fr in stacks.values() for f in fr if not is_library(f[0])}
        out.update(k for k in seen if _WRAPPER_CALL.search(self.sources.line(*k)))
        return out

    @staticmethod
    def _innermost_model(frames: list[Frame]) -> Frame | None:
        return next((f for f in frames if not is_library(f[0])), None)

    def choose(self, frames: list[Frame]) -> Frame | None:
        """The innermost model frame, unless it is a wrapper line: then None. Going further out would name the
        caller of the function holding the loop (``logits = forward(...)``), which is no better."""
        key = id(frames)
        if key not in self._chosen:
            f = self._innermost_model(frames)
            self._chosen[key] = f if f and f[:2] not in self.wrappers else None
        return self._chosen[key]

    # ------------------------------------------------------------------ crediting one op
    def credit(self, op: str) -> Credit:
        if op not in self._credit:
            ins = self.mod.instrs.get(op)
            self._credit[op] = self._compute(ins) if ins else Credit(None, "none")
        return self._credit[op]

    def _own(self, ins: Instr) -> Credit | None:
        """From the op itself and what is fused inside it, without looking at neighbours."""
        fused = self.mod.fused(ins)
        for d in (i for i in fused if i.opcode in _MATMUL):
            f = self.choose(d.frames)
            if f:
                return Credit(f, "fused dot")
        f = self.choose(ins.frames)
        if f:
            return Credit(f, "metadata")
        for pick in ([i for i in fused if i.opcode not in _GLUE], [i for i in fused if i.root], fused):
            for i in pick:
                f = self.choose(i.frames)
                if f:
                    return Credit(f, "fused op")
        return None

    def _compute(self, ins: Instr) -> Credit:
        if ins.opcode in CONTROL_OPS:
            f = self._innermost_model(ins.frames)
            return Credit(f, "control flow") if f else Credit(ins.frames[0] if ins.frames else None,
                                                               "control flow" if ins.frames else "none")
        own = self._own(ins)
        if own:
            return own
        users = self.mod.users()
        loop_line = None  # a loop fed by (or feeding) this op: its call site is the last resort
        for via, step in (("producer", lambda i: i.operands), ("consumer", lambda i: users.get(i.name, []))):
            frontier, seen = [ins], {ins.name}
            for _ in range(BORROW_HOPS):
                nxt = []
                for cur in frontier:
                    for n in step(cur):
                        if n in seen:
                            continue
                        seen.add(n)
                        other = self.mod.instrs[n]
                        if other.opcode in CONTROL_OPS:  # a loop's line says little about the op beside it
                            loop_line = loop_line or self._innermost_model(other.frames)
                            continue
                        got = self._own(other)
                        if got:
                            return Credit(got.frame, via)
                        nxt.append(other)
                frontier = nxt
        f = self._innermost_model(ins.frames) or loop_line
        if f:
            return Credit(f, "wrapper line")
        return Credit(ins.frames[0], "library") if ins.frames else Credit(None, "none")
