"""What the compiler made of one run, read from its HLO alone: matmul FLOPs by dtype, the token input's shape, while
loops and what they loop over (micro-batches or layers), rematerialized ops, fusion kinds, custom calls (Pallas/Mosaic
and Triton kernels by name), collectives, parameter bytes. Plain data, so two runs compare key by key
(``gap/compare.py``) whatever program made them: nothing here needs the command line."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

from ..profiling import hlo as hlo_mod
from ..profiling.hlo import HloModule, Instr

_DIMS = re.compile(r"(lhs|rhs)_(contracting|batch)_dims=\{([\d,]*)\}")
_SHAPE = re.compile(r"^\(?([a-z]+\d*)\[([\d,]*)\]")
_TRIP = re.compile(r'"known_trip_count":\{"n":"(\d+)"\}')
_FUSION_KIND = re.compile(r"kind=(k[A-Za-z]+)")
_CUSTOM_FUSION = re.compile(r'"fusion_config":\{"kind":"([^"]+)"')
_INT_TYPES = ("s8", "s16", "s32", "s64", "u8", "u16", "u32", "u64")
_BYTES = {"pred": 1, "s8": 1, "u8": 1, "f8e4m3fn": 1, "f8e5m2": 1, "s16": 2, "u16": 2, "f16": 2, "bf16": 2,
          "s32": 4, "u32": 4, "f32": 4, "s64": 8, "u64": 8, "f64": 8, "c64": 8, "c128": 16}
REMAT_WORDS = ("checkpoint", "remat")
HLO_TEXTS = ("*before_optimizations.txt", "*.hlo.txt", "*.hlo")


def shape_of(text: str) -> tuple[str, list[int]]:
    """``bf16[4,32,64]`` -> ("bf16", [4, 32, 64]); a tuple or a scalar gives its first element or []."""
    m = _SHAPE.match(text.strip())
    if not m:
        return "", []
    return m.group(1), [int(d) for d in m.group(2).split(",") if d]


def _prod(xs) -> int:
    out = 1
    for x in xs:
        out *= x
    return out


def nbytes(text: str) -> int:
    dtype, dims = shape_of(text)
    return _BYTES.get(dtype, 4) * _prod(dims) if dtype else 0


# ----------------------------------------------------------------------------- loading


def load(folder: Path) -> tuple[dict[str, HloModule], str]:
    """The run's HLO modules and which stage they are: the optimized dump when there is one, else pre-optimization
    text (``*before_optimizations.txt``, or a lowered module saved as ``*.hlo.txt``)."""
    folder = Path(folder)
    mods = hlo_mod.load_modules(folder)
    if mods:
        return mods, "optimized"
    out = _texts(folder)
    return out, "pre-optimization" if out else "none"


def _texts(folder: Path) -> dict[str, HloModule]:
    out: dict[str, HloModule] = {}
    for pattern in HLO_TEXTS:
        for p in sorted(folder.rglob(pattern)):
            text = hlo_mod.dump_text(p, folder)
            if text.startswith("HloModule"):
                m = hlo_mod.parse_hlo(text)
                if m.name not in out or len(m.instrs) > len(out[m.name].instrs):
                    out[m.name] = m
    return out


# ----------------------------------------------------------------------------- one module


def multiplicity(mod: HloModule) -> dict[str, int]:
    """How many times each computation runs per execution of the module: a while body its trip count times its
    caller's (an unknown trip count counts once, and is reported as unknown)."""
    called = {c for i in mod.instrs.values() for c in i.calls}
    roots = [mod.entry] if mod.entry else [c for c in mod.computations if c not in called]
    mult: dict[str, int] = {r: 1 for r in roots}
    todo = list(roots)
    while todo:
        comp = todo.pop()
        for name in mod.computations.get(comp, []):
            ins = mod.instrs[name]
            times = (trip_count(ins) or 1) if ins.opcode == "while" else 1
            for c in ins.calls:
                m = mult[comp] * times
                if mult.get(c, 0) < m:
                    mult[c] = m
                    todo.append(c)
    return mult


def trip_count(ins: Instr) -> int | None:
    m = _TRIP.search(ins.attrs)
    return int(m.group(1)) if m else None


def dot_flops(mod: HloModule, ins: Instr) -> tuple[str, int, list[int]]:
    """(operand dtype, FLOPs, lhs shape) of one dot: 2 × result elements × contracted size."""
    dims = {(a, b): [int(x) for x in v.split(",") if x] for a, b, v in _DIMS.findall(ins.attrs)}
    lhs = mod.instrs.get(ins.operands[0]) if ins.operands else None
    ldtype, lshape = shape_of(lhs.shape) if lhs else ("", [])
    _, out = shape_of(ins.shape)
    k = _prod(lshape[d] for d in dims.get(("lhs", "contracting"), []) if d < len(lshape)) if lshape else 1
    return ldtype or shape_of(ins.shape)[0], 2 * _prod(out) * k, lshape


def _under(ins: Instr, word: str) -> bool:
    return word in ins.op_name


def loop_role(mod: HloModule, ins: Instr) -> str:
    """``accumulation``: the body holds the forward and the backward pass (a micro-batch loop); ``layers``: a loop
    inside the forward or the backward pass (a scan over layers); else ``other``."""
    if "jvp(" in ins.op_name or "transpose(" in ins.op_name:
        return "layers"
    inner = [i for c in ins.calls for n in _reachable(mod, c) for i in [mod.instrs[n]]]
    names = [i.op_name for i in inner if i.op_name]
    if any("transpose(" in n for n in names) and any("transpose(" not in n for n in names):
        return "accumulation"
    return "other"


def _reachable(mod: HloModule, comp: str) -> list[str]:
    out, todo, seen = [], [comp], set()
    while todo:
        c = todo.pop()
        if c in seen:
            continue
        seen.add(c)
        for n in mod.computations.get(c, []):
            out.append(n)
            todo.extend(mod.instrs[n].calls)
    return out


def module_facts(mod: HloModule) -> dict:
    mult = multiplicity(mod)
    flops: Counter = Counter()
    dots = []
    fusion_kinds: Counter = Counter()
    custom_fusions: Counter = Counter()
    customs, collectives, loops = [], Counter(), []
    coll_bytes: Counter = Counter()
    remat_ops = remat_dots = gemms = 0
    for ins in mod.instrs.values():
        times = mult.get(ins.computation, 1)
        if ins.opcode in ("dot", "convolution"):
            dtype, f, lshape = dot_flops(mod, ins)
            flops[dtype] += f * times
            dots.append({"op": ins.name, "dtype": dtype, "flops": f * times, "lhs": lshape,
                         "shape": ins.shape, "line": _frame(ins)})
        if any(w in ins.op_name for w in REMAT_WORDS) and "transpose(" in ins.op_name:
            remat_ops += 1
            remat_dots += ins.opcode in ("dot", "convolution")
        if ins.opcode == "fusion":
            k = _FUSION_KIND.search(ins.attrs)
            fusion_kinds[k.group(1) if k else "?"] += 1
            c = _CUSTOM_FUSION.search(ins.attrs)
            if c:
                custom_fusions[c.group(1).strip("_")] += 1
        elif ins.opcode == "custom-call" and not hlo_mod._GEMM_TARGET.search(ins.target):
            customs.append(hlo_mod.custom_call_kernel(ins))
        elif ins.opcode == "custom-call":
            gemms += times  # a library GEMM (cuBLAS, oneDNN): a matmul the dot count does not see
        elif ins.opcode.startswith(hlo_mod._COLLECTIVE):
            kind = ins.opcode.removesuffix("-start").removesuffix("-done")
            if not ins.opcode.endswith("-done"):
                collectives[kind] += times
                coll_bytes[kind] += nbytes(ins.shape) * times
            if ins.opcode.endswith("-start"):
                collectives[kind + " (async)"] += times
        elif ins.opcode == "while":
            loops.append({"op": ins.name, "trip_count": trip_count(ins), "role": loop_role(mod, ins),
                          "line": _frame(ins), "op_name": ins.op_name})
    entry = mod.computations.get(mod.entry, [])
    params = [mod.instrs[n] for n in entry if mod.instrs[n].opcode == "parameter"]
    tokens = max((p for p in params if shape_of(p.shape)[0] in _INT_TYPES and len(shape_of(p.shape)[1]) >= 2),
                 key=lambda p: _prod(shape_of(p.shape)[1]), default=None)
    dots.sort(key=lambda d: -d["flops"])
    return {"module": mod.name, "instructions": len(mod.instrs),
            "matmul_flops": dict(flops), "top_dots": dots[:5], "n_dots": len(dots), "gemm_calls": gemms,
            "fusions": sum(fusion_kinds.values()), "fusion_kinds": dict(fusion_kinds),
            "custom_fusions": dict(custom_fusions), "custom_calls": customs,
            "collectives": dict(collectives), "collective_bytes": dict(coll_bytes),
            "while_loops": loops, "remat_ops": remat_ops, "remat_dots": remat_dots,
            "token_input": tokens.shape if tokens else "",
            "parameter_bytes": sum(nbytes(p.shape) for p in params)}


def _frame(ins: Instr) -> str:
    if not ins.frames:
        return ""
    f, ln, _ = ins.frames[0]
    return f"{Path(f).name}:{ln}"


def run_facts(folder: Path) -> dict:
    """Facts of a run's main program (the module with the most matmul FLOPs; a train step), with the names of all
    modules read. ``requested_flops``: matmul FLOPs by dtype in the program as written (the pre-optimization dump,
    when there is one; a CPU compile runs bf16 dots in f32, so the optimized dtypes alone hide what was asked).
    Empty when the folder holds no HLO."""
    folder = Path(folder)
    mods, stage = load(folder)
    if not mods:
        return {"stage": "none", "modules": []}
    facts = [module_facts(m) for m in mods.values()]
    main = max(facts, key=lambda f: (sum(f["matmul_flops"].values()), f["gemm_calls"] + len(f["custom_calls"]),
                                     f["instructions"]))
    customs = [c for f in facts for c in f["custom_calls"]]
    before = _texts(folder) if stage == "optimized" else {}
    requested = module_facts(before[main["module"]])["matmul_flops"] if main["module"] in before else {}
    return dict(main, stage=stage, modules=sorted(mods), custom_calls=customs,
                gemm_calls=sum(f["gemm_calls"] for f in facts),
                requested_flops=requested or main["matmul_flops"],
                requested_from="pre-optimization HLO" if requested else stage + " HLO")


def low_precision_share(flops: dict) -> float | None:
    """Share of matmul FLOPs done in a 16-bit or narrower type (None: no matmuls)."""
    total = sum(flops.values())
    if not total:
        return None
    low = sum(v for k, v in flops.items() if k in ("bf16", "f16") or k.startswith(("f8", "s8", "u8", "s4")))
    return low / total
def dumps(facts: dict) -> str:
    return json.dumps(facts, sort_keys=True, default=str)
