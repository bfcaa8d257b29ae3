"""Read optimized HLO text: each instruction's opcode, category and model source location.

Handles both metadata forms: inline ``source_file=... source_line=...`` (jax <= 0.8.0) and
``stack_frame_id=N`` with the ``FileNames / FunctionNames / FileLocations / StackFrames`` tables in the
module header (jax >= 0.8.3), where the printed ``parent_frame_id`` is the real parent + 1.
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass, field
from pathlib import Path

from .. import safeio

Frame = tuple[str, int, str]  # (file, line, function)


@dataclass
class Instr:
    name: str
    opcode: str
    computation: str
    op_name: str = ""
    frames: list[Frame] = field(default_factory=list)  # innermost first
    calls: list[str] = field(default_factory=list)
    root: bool = False
    shape: str = ""  # result type without layouts, e.g. "f32[64,256]"
    operands: list[str] = field(default_factory=list)
    target: str = ""  # custom_call_target
    pos: int = 0  # order in the module text
    attrs: str = ""  # the text after the opcode (operands, dims, backend_config), kept for ops that need it


@dataclass
class HloModule:
    name: str
    instrs: dict[str, Instr]
    computations: dict[str, list[str]]  # computation -> instruction names in order
    entry: str = ""  # the ENTRY computation
    _users: dict[str, list[str]] | None = field(default=None, repr=False)

    def category(self, op: str) -> str:
        ins = self.instrs.get(op)
        return categorize(self, ins) if ins else "unmapped"

    def source(self, op: str) -> list[Frame]:
        """Frames (innermost first) for an op. A fusion holding a dot/convolution takes the dot's frames (its own
        metadata often names a fused consumer, e.g. log_softmax); one without metadata borrows from the
        instruction inside that does the work (a dot/convolution, else the root)."""
        ins = self.instrs.get(op)
        if ins is None:
            return []
        if ins.opcode == "fusion":
            dot = next((i for i in self.fused(ins) if i.opcode in _MATMUL and i.frames), None)
            if dot is not None:
                return dot.frames
        if ins.frames:
            return ins.frames
        inner = self.fused(ins)
        for pick in ([i for i in inner if i.root and i.frames], [i for i in inner if i.frames]):
            if pick:
                return pick[0].frames
        return []

    def fused(self, ins: Instr) -> list[Instr]:
        """The instructions of the computations ``ins`` calls (fusions, calls), nested ones included, in order;
        reducer bodies (``to_apply``) are left out."""
        if ins.opcode not in ("fusion", "call", "async-start"):
            return []
        out, todo, seen = [], list(ins.calls), set()
        while todo:
            comp = todo.pop(0)
            if comp in seen:
                continue
            seen.add(comp)
            for n in self.computations.get(comp, []):
                inner = self.instrs[n]
                out.append(inner)
                if inner.opcode in ("fusion", "call"):
                    todo.extend(inner.calls)
        return out

    def users(self) -> dict[str, list[str]]:
        """Instruction name -> the instructions that take it as an operand (computed once)."""
        if self._users is None:
            self._users = {}
            for ins in self.instrs.values():
                for o in ins.operands:
                    self._users.setdefault(o, []).append(ins.name)
        return self._users


_COMP = re.compile(r"^(?:ENTRY\s+)?%?(?P<name>[\w.\-]+)\s.*\{\s*$")
_INSTR = re.compile(r"^\s+(?P<root>ROOT\s+)?%?(?P<name>[\w.\-]+)\s*=\s*(?P<rest>.*)$")
_OPCODE = re.compile(r"(?:^|[\s)\]}])(?P<op>[a-z][a-z0-9\-]*)\(")
_META = re.compile(r"metadata=\{(?P<m>[^}]*)\}")
_CALLS = re.compile(r"(?:calls|to_apply|body|condition|branch_computations)=\{?(?P<c>%?[\w.\-]+(?:,\s*%?[\w.\-]+(?![\w.\-]*=))*)")
_KV = re.compile(r'(\w+)=("(?:[^"\\]|\\.)*"|\S+)')
_TABLE_ROW = re.compile(r"^(\d+)\s+(.*)$")
_TARGET = re.compile(r'custom_call_target="([^"]*)"')
_GEMM_TARGET = re.compile(r"gemm|matmul|cublas|\bdot\b|_dot_|convolution|cudnn\$conv", re.I)
# attention kernels by name: cuDNN's fused MHA, flash/splash/ragged-paged attention (Pallas, Mosaic, Triton)
_ATTENTION_TARGET = re.compile(r"attention|attn|flash|splash|fmha|sdpa|\bmha\b", re.I)
_BATCH_DIMS = re.compile(r"lhs_batch_dims=\{([\d,]*)\}")
_BODY = re.compile(r'"body":\s*"([A-Za-z0-9+/=]+)"')
_TRITON_NAME = re.compile(r'"name":\s*"([^"]+)"')
_WORD = re.compile(rb"[A-Za-z_][A-Za-z0-9_]{3,}")
_PYFILE = re.compile(rb"[\w./\-]+\.py")
_LAYOUT = re.compile(r"\{[^{}]*\}|/\*[^*]*\*/")
_OPERAND = re.compile(r"%?([A-Za-z_][\w.\-]*)")

_MATMUL = {"dot", "convolution", "ragged-dot"}
_COLLECTIVE = ("all-reduce", "all-gather", "reduce-scatter", "collective-permute", "all-to-all",
               "collective-broadcast", "send", "recv")
_MOVEMENT = {"copy", "copy-start", "copy-done", "transpose", "dynamic-slice", "dynamic-update-slice",
             "gather", "scatter", "concatenate", "slice", "pad", "bitcast", "reshape", "broadcast",
             "bitcast-convert", "iota", "constant", "parameter", "get-tuple-element", "tuple"}
_CONTROL = {"while", "conditional", "call", "async-start", "async-done"}
_KEEP_ATTRS = _MATMUL | {"while", "custom-call", "fusion"}


def categorize(mod: HloModule, ins: Instr) -> str:
    op = ins.opcode
    if op in _MATMUL:
        return _dot_category(ins)
    if op.startswith(_COLLECTIVE):
        return "collective"
    if op == "custom-call":
        return _call_category(ins)
    if op in _MOVEMENT:
        return "data movement"
    if op in _CONTROL:
        return "control flow"
    if op in ("reduce", "reduce-window", "sort"):
        return "reduction"
    if op == "fusion":
        fused = mod.fused(ins)
        inner = {i.opcode for i in fused}
        kinds = [_dot_category(i) if i.opcode in _MATMUL else _call_category(i) for i in fused
                 if i.opcode in _MATMUL or i.opcode == "custom-call"]
        if "attention" in kinds:
            return "attention"
        if "matmul" in kinds:
            return "matmul"
        if "custom-call" in inner:
            return "custom-call"
        if inner & {"reduce", "reduce-window"}:
            return "reduction"
        if inner and inner <= _MOVEMENT:
            return "data movement"
        return "elementwise fusion"
    return "elementwise"


def _dot_category(ins: Instr) -> str:
    """``attention`` for a dot batched over two or more dimensions (batch × heads: QKᵀ and PV, whose operands are
    both activations), ``matmul`` for the rest (a weight matmul has no batch dimension; one, as in a per-expert
    einsum, stays a matmul)."""
    m = _BATCH_DIMS.search(ins.attrs)
    return "attention" if m and len([d for d in m.group(1).split(",") if d]) >= 2 else "matmul"


def _call_category(ins: Instr) -> str:
    """A custom call by its target, else by the kernel it runs (a Mosaic call's target names none)."""
    if _ATTENTION_TARGET.search(ins.target) or _ATTENTION_TARGET.search(custom_call_kernel(ins)["kernel"]):
        return "attention"
    return "matmul" if _GEMM_TARGET.search(ins.target) else "custom-call"


def custom_call_kernel(ins: Instr) -> dict:
    """A custom call's kernel: for Mosaic (``tpu_custom_call``) the strings of its serialized body (the kernel
    function and the .py file it came from); for Triton the kernel name in its backend config."""
    out = {"target": ins.target, "op": ins.name, "op_name": ins.op_name, "kernel": "", "file": ""}
    m = _BODY.search(ins.attrs)
    if m:
        try:
            blob = base64.b64decode(m.group(1), validate=False)
        except (binascii.Error, ValueError):
            blob = b""
        words = [w.decode() for w in _WORD.findall(blob)]
        kernels = [w for w in words if "kernel" in w.lower() and not w.startswith(("tpu", "func"))]
        files = [f.decode() for f in _PYFILE.findall(blob)]
        out["kernel"] = min(kernels, key=len) if kernels else ""
        out["file"] = files[0] if files else ""
    elif "triton" in ins.target.lower():
        t = _TRITON_NAME.search(ins.attrs)
        out["kernel"] = t.group(1) if t else ""
    if not out["kernel"] and ins.op_name:
        out["kernel"] = ins.op_name.rsplit("/", 1)[-1]
    return out


def _unquote(v: str) -> str:
    return v[1:-1].replace('\\"', '"').replace("\\'", "'") if v.startswith('"') else v


def _tables(lines: list[str]) -> dict[str, dict[int, str]]:
    """The stack-frame tables before the first computation."""
    out: dict[str, dict[int, str]] = {}
    current = None
    for ln in lines:
        s = ln.strip()
        if s in ("FileNames", "FunctionNames", "FileLocations", "StackFrames"):
            current = out.setdefault(s, {})
            continue
        if not s:
            continue
        m = _TABLE_ROW.match(s)
        if current is not None and m:
            current[int(m.group(1))] = m.group(2)
        elif _COMP.match(ln):
            break
        else:
            current = None
    return out


def _frames_resolver(tables: dict[str, dict[int, str]]):
    files = {k: _unquote(v) for k, v in tables.get("FileNames", {}).items()}
    funcs = {k: _unquote(v) for k, v in tables.get("FunctionNames", {}).items()}
    locs = {k: dict(_KV.findall(v.strip("{}"))) for k, v in tables.get("FileLocations", {}).items()}
    frames = {k: dict(_KV.findall(v.strip("{}"))) for k, v in tables.get("StackFrames", {}).items()}
    cache: dict[int, list[Frame]] = {}

    def resolve(start: int) -> list[Frame]:
        if start in cache:
            return cache[start]
        out: list[Frame] = []
        fid = start
        seen = set()
        while fid and fid in frames and fid not in seen:
            seen.add(fid)
            f = frames[fid]
            loc = locs.get(int(f.get("file_location_id", 0)), {})
            if loc:
                out.append((files.get(int(loc.get("file_name_id", 0)), "?"), int(loc.get("line", 0)),
                            funcs.get(int(loc.get("function_name_id", 0)), "?")))
            fid = int(f.get("parent_frame_id", 0)) - 1  # printed parent id is the real one + 1
        cache[start] = out
        return out

    return resolve


def parse_hlo(text: str) -> HloModule:
    lines = text.splitlines()
    header = lines[0] if lines else ""
    mname = header.split()[1].rstrip(",") if header.startswith("HloModule") and len(header.split()) > 1 else "?"
    resolve = _frames_resolver(_tables(lines))
    instrs: dict[str, Instr] = {}
    comps: dict[str, list[str]] = {}
    comp = entry = ""
    for ln in lines:
        if not ln.startswith((" ", "\t")):
            m = _COMP.match(ln)
            if m and not ln.startswith("HloModule"):
                comp = m.group("name")
                comps.setdefault(comp, [])
                if ln.startswith("ENTRY"):
                    entry = comp
            continue
        m = _INSTR.match(ln)
        if not m or not comp:
            continue
        rest = m.group("rest")
        meta_m = _META.search(rest)
        body = rest[:meta_m.start()] if meta_m else rest
        op_m = _OPCODE.search(body)
        if not op_m:
            continue
        ins = Instr(m.group("name"), op_m.group("op"), comp, root=bool(m.group("root")),
                    shape=_LAYOUT.sub("", body[:op_m.start("op")]).strip(), pos=len(instrs))
        ins.operands = _operand_names(body, op_m.end())
        if ins.opcode in _KEEP_ATTRS or ins.opcode.startswith(_COLLECTIVE):
            ins.attrs = body[op_m.end():] + (rest[meta_m.end():] if meta_m else "")  # backend_config follows metadata
        if ins.opcode == "custom-call":
            t = _TARGET.search(body)
            ins.target = t.group(1) if t else ""
        cm = _CALLS.findall(body)
        ins.calls = [c.strip().lstrip("%") for group in cm for c in group.split(",")]
        if meta_m:
            kv = {k: _unquote(v) for k, v in _KV.findall(meta_m.group("m"))}
            ins.op_name = kv.get("op_name", "")
            if "source_file" in kv and "source_line" in kv:
                ins.frames = [(kv["source_file"], int(kv["source_line"]), kv.get("source_function", "?"))]
            elif "stack_frame_id" in kv:
                ins.frames = resolve(int(kv["stack_frame_id"]))
        instrs[ins.name] = ins
        comps[comp].append(ins.name)
    for ins in instrs.values():  # keep operand names that are instructions (not literals or types)
        ins.operands = [o for o in ins.operands if o in instrs and o != ins.name]
    return HloModule(mname, instrs, comps, entry)


def _operand_names(body: str, start: int) -> list[str]:
    """Names inside the opcode's parentheses (``fusion(%a, %b)``); filtered against the module later."""
    depth, i = 1, start
    while i < len(body) and depth:
        depth += {"(": 1, ")": -1}.get(body[i], 0)
        i += 1
    return _OPERAND.findall(body[start:i - 1])


def find_dumps(folder: Path) -> list[Path]:
    """Optimized-HLO text files under a dump folder (largest module per name last wins)."""
    return sorted(p for p in Path(folder).rglob("*after_optimizations.txt")
                  if "buffer-assignment" not in p.name and "memory-usage" not in p.name and "live-range" not in p.name)


DUMP_LIMIT = 512 * 1024 * 1024


def dump_text(path: Path, folder: Path) -> str:
    """An HLO dump's text, read only when it is a regular file inside ``folder`` and under ``DUMP_LIMIT`` ("" for
    one that is not: a FIFO, a link out, a device; it then adds no module)."""
    try:
        return safeio.read_bytes(path, DUMP_LIMIT, within=folder).decode("utf-8", errors="replace")
    except (safeio.Refused, FileNotFoundError):
        return ""


def hlo_dumps(folder: Path) -> tuple[list[tuple[Path, str]], list[str]]:
    """The optimized dumps under ``folder`` that are HLO text, as (path, text), and a line for each that is not
    (empty, cut before its header, not text): left out, never read as an empty program that equals every other."""
    good, bad = [], []
    for p in find_dumps(folder):
        text = dump_text(p, folder)
        if text.lstrip().startswith("HloModule"):
            good.append((p, text))
        else:
            bad.append(f"{p}: {'empty' if not text.strip() else 'not HLO text (no HloModule header)'}")
    return good, bad


def load_modules(folder: Path) -> dict[str, HloModule]:
    """Module name (e.g. ``jit_train_step``) -> parsed optimized HLO (of two compiles of one name, the larger)."""
    return largest_by_name(load_programs(folder))


def largest_by_name(programs: dict) -> dict[str, HloModule]:
    out: dict[str, HloModule] = {}
    for mod in programs.values():
        if mod.name not in out or len(mod.instrs) > len(out[mod.name].instrs):
            out[mod.name] = mod
    return out


_PROGRAM = re.compile(r"module_(\d+)\.")


def load_programs(folder: Path) -> dict[object, HloModule]:
    """Every dumped program: by its id (``module_0060.`` -> 60, the id a trace's ops carry), or by its file where
    the name holds none."""
    out: dict[object, HloModule] = {}
    for p, text in hlo_dumps(folder)[0]:
        m = _PROGRAM.match(p.name)
        out[int(m.group(1)) if m else str(p)] = parse_hlo(text)
    return out


def signature(mod: HloModule, ins: Instr) -> str:
    """A short hash of what an op computes, free of generated names: its opcode and result shape, its operands'
    shapes, and for a fusion the opcode/shape sequence of the fused computation. Equal across two compiles of
    the same op even when ``fusion.123`` became ``fusion.131``."""
    import hashlib

    parts = [ins.opcode, ins.shape, ins.target, *(mod.instrs[o].shape for o in ins.operands)]
    parts += [f"{i.opcode}:{i.shape}:{i.target}" for i in mod.fused(ins)]
    return hashlib.sha1("|".join(parts).encode()).hexdigest()[:10]


def stats(mod: HloModule) -> dict:
    """Counts that show what the compiler made of a module: instructions, fusions, matmuls, loops."""
    ops = [i.opcode for i in mod.instrs.values()]
    fused = {c for i in mod.instrs.values() if i.opcode == "fusion" for c in i.calls}
    top = [i for i in mod.instrs.values() if i.computation not in fused]
    return {"module": mod.name, "instructions": len(ops), "computations": len(mod.computations),
            "fusions": ops.count("fusion"), "matmuls": sum(o in _MATMUL for o in ops),
            "custom_calls": ops.count("custom-call"), "while_loops": ops.count("while"),
            "collectives": sum(o.startswith(_COLLECTIVE) for o in ops),
            "copies_outside_fusions": sum(i.opcode in ("copy", "transpose") for i in top)}
