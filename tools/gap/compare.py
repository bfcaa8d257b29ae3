"""Two runs compared on evidence: where the step time goes per token, what the compiler made of each (from
``gap/facts.py``), and, as a separate source, the flags and environment they ran with. Every difference is a gap item
with its evidence, the categories of op time it touches, the share of our step it accounts for, and a neutral
``property`` (``{"dtype": "bfloat16"}``, ``{"grad_accum": 2}``) that a loop file's knobs can be matched against
(``loop/reference.py``). Items rest on the HLO and the profile; ``basis: config`` marks the ones that rest on the
command line or environment, which a reference from another codebase may not share."""

from __future__ import annotations

import math
import shlex
from dataclasses import dataclass, field

from ..errors import InputError
from . import config
from .estimate import HOST, align_tokens, estimate, per_token, speeds
from .facts import low_precision_share, shape_of

MIN_GAP_PCT = 3.0          # a reference less than this much faster (tokens/s, its own runs) has no gap to close
DTYPE_SHARE_POINTS = 10.0  # matmul FLOP shares in 16-bit that differ by fewer points are the same precision
FLAG_ENV = ("XLA_FLAGS", "LIBTPU_INIT_ARGS")


@dataclass
class Side:
    """One run as the comparison needs it."""
    label: str                                   # experiment id, or the folder's name
    facts: dict
    summary: dict | None = None                  # the profile summary (tools/profiling/summary.py)
    metrics: dict = field(default_factory=dict)  # the record's metrics (tokens/s, MFU, step time, memory)
    flags: dict = field(default_factory=dict)    # the command's --flags (from the record; {} without one)
    env_flags: dict = field(default_factory=dict)  # XLA_FLAGS / LIBTPU_INIT_ARGS parts: name -> value
    page: str = ""                               # wiki-relative experiment page ("" for a folder)
    folder: str = ""
    command: str = ""                            # the record's command line ("" for a folder)
    codebase: str = ""                           # the ingested codebase its code is ("" when not known)
    config: list = field(default_factory=list)   # that codebase's performance settings as run (gap/config.py)

    shifted: bool = False  # the token input holds one more position than the step trains on (inputs + targets)
    shape: dict = field(default_factory=dict)    # the model's shape as the run reported it (n_layers, d_model, ...)
    program: str = ""                            # the optimized HLO's fingerprint ("" when none was dumped)

    @property
    def tokens_per_step(self) -> float | None:
        m = self.metrics
        if m.get("tokens_per_s") and m.get("step_time_ms"):
            return float(m["tokens_per_s"]) * float(m["step_time_ms"]) / 1e3
        dims = shape_of(self.facts.get("token_input") or "")[1]
        if dims and self.shifted and dims[-1] > 1:
            dims = [*dims[:-1], dims[-1] - 1]
        return float(math.prod(dims)) if dims else None

    @property
    def traced_ms(self) -> float | None:
        return ((self.summary or {}).get("steps") or {}).get("median_ms")

    @property
    def step_ms(self) -> float | None:
        if self.metrics.get("step_time_ms"):
            return float(self.metrics["step_time_ms"])
        return ((self.summary or {}).get("steps") or {}).get("median_ms")

    @property
    def tokens_per_s(self) -> float | None:
        if self.metrics.get("tokens_per_s"):
            return float(self.metrics["tokens_per_s"])
        t, s = self.tokens_per_step, self.step_ms
        return t / s * 1e3 if t and s else None


def flag_parts(value: str) -> dict[str, str]:
    """``--a=1 --b`` -> {"--a": "1", "--b": ""}."""
    out = {}
    for tok in shlex.split(value or ""):
        k, _, v = tok.partition("=")
        out[k] = v
    return out


def step_rows(ours: Side, ref: Side) -> list[dict]:
    def row(name, a, b, unit=""):
        ratio = (b / a) if a and b else None
        return {"metric": name, "ours": a, "ref": b, "ratio": round(ratio, 3) if ratio else None, "unit": unit}
    om, rm = ours.metrics, ref.metrics
    rows = [row("step time", ours.step_ms, ref.step_ms, "ms"), row("tokens per step", ours.tokens_per_step,
                                                                   ref.tokens_per_step),
            row("tokens/s", ours.tokens_per_s, ref.tokens_per_s)]
    if om.get("tokens_per_s_best") and rm.get("tokens_per_s_best"):  # the basis the verdict is read on
        rows.append(row("tokens/s, fastest steady step", om["tokens_per_s_best"], rm["tokens_per_s_best"]))
    rows.append(row("tokens/s per chip", om.get("tokens_per_s_per_chip"), rm.get("tokens_per_s_per_chip")))
    for basis in ("noncausal", "causal"):  # a record keeps the MFU on each basis as its own figure
        rows.append(row(f"MFU ({basis} FLOPs)", _number(om.get(f"mfu_{basis}_percent")),
                        _number(rm.get(f"mfu_{basis}_percent")), "%"))
    rows.append(row("matmul GFLOP per step (HLO)", sum((ours.facts.get("matmul_flops") or {}).values()) / 1e9,
                    sum((ref.facts.get("matmul_flops") or {}).values()) / 1e9))
    rows.append(row("peak memory", om.get("memory_gb"), rm.get("memory_gb"), "GB"))
    rows.append(row("parameter bytes (HLO)", ours.facts.get("parameter_bytes"), ref.facts.get("parameter_bytes")))
    return [r for r in rows if r["ours"] is not None or r["ref"] is not None]


def _number(v) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


# ----------------------------------------------------------------------------- differences


def _item(kind: str, what: str, category: str, touches: list[str], prop: dict, evidence: list[dict],
          basis: str = "hlo", ours=None, ref=None) -> dict:
    return {"kind": kind, "what": what, "category": category, "touches": touches, "property": prop,
            "evidence": evidence, "basis": basis, "ours": ours, "ref": ref}


def _ev(side: str, text: str, where: str = "") -> dict:
    return {"side": side, "text": text, "where": where}


def _precision(o: Side, r: Side) -> list[dict]:
    so, sr = low_precision_share(o.facts.get("requested_flops") or {}), low_precision_share(
        r.facts.get("requested_flops") or {})
    if so is None or sr is None or abs(so - sr) * 100 < DTYPE_SHARE_POINTS:
        return []
    dtype = "bfloat16" if sr > so else "float32"

    def line(side: Side) -> str:
        f = side.facts.get("requested_flops") or {}
        parts = ", ".join(f"{k} {v / 1e6:.1f} MFLOP" for k, v in sorted(f.items(), key=lambda kv: -kv[1]))
        return f"matmul FLOPs per step by dtype: {parts} ({side.facts.get('requested_from')})"
    where = lambda s: (s.facts.get("top_dots") or [{}])[0].get("line", "")  # noqa: E731
    return [_item("precision", f"matmuls in {dtype}: {sr:.0%} of the reference's matmul FLOPs are 16-bit, "
                               f"{so:.0%} of ours", "precision", ["matmul", "attention", "elementwise fusion", "data movement"],
                  {"dtype": dtype}, [_ev("ours", line(o), where(o)), _ev("ref", line(r), where(r))],
                  ours=f"{so:.0%} 16-bit", ref=f"{sr:.0%} 16-bit")]


def _loops(side: Side, role: str) -> list[dict]:
    return [w for w in side.facts.get("while_loops") or [] if w["role"] == role]


def _accumulation(o: Side, r: Side) -> list[dict]:
    lo, lr = _loops(o, "accumulation"), _loops(r, "accumulation")
    no = (lo[0].get("trip_count") or 0) if lo else 1
    nr = (lr[0].get("trip_count") or 0) if lr else 1
    if no == nr:
        return []
    ev = [_ev(s, f"micro-batch loop `{w['op']}` runs {w.get('trip_count') or '?'} times ({w['op_name']})",
              w.get("line", "")) for s, ws in (("ours", lo), ("ref", lr)) for w in ws]
    ev += [_ev(s, "no loop holds the forward and backward pass: one batch per step") for s, ws in
           (("ours", lo), ("ref", lr)) if not ws]
    return [_item("accumulation", f"gradient accumulation over {nr or '?'} micro-batches (ours: {no})", "shape",
                  ["control flow", "data movement", HOST], {"grad_accum": nr}, ev, ours=no, ref=nr)]


def _batch(side: Side) -> tuple[int, int] | None:
    """(global batch, sequence) from the token input: ``s32[A,M,T]`` (A micro-batches of M) or ``s32[B,T]``."""
    dims = shape_of(side.facts.get("token_input") or "")[1]
    if len(dims) < 2:
        return None
    return math.prod(dims[:-1]), dims[-1]


def _shape(o: Side, r: Side) -> list[dict]:
    bo, br = _batch(o), _batch(r)
    if not bo or not br or bo == br:
        return []
    top = lambda s: ", ".join(f"{d['shape']} ← lhs {d['lhs']}" for d in (s.facts.get("top_dots") or [])[:2])  # noqa
    ev = [_ev("ours", f"token input {o.facts['token_input']}; main dots {top(o)}"),
          _ev("ref", f"token input {r.facts['token_input']}; main dots {top(r)}")]
    return [_item("shape", f"batch × sequence {br[0]} × {br[1]} per step (ours {bo[0]} × {bo[1]})", "shape",
                  [HOST, "control flow", "data movement", "elementwise fusion"], {"batch": br[0], "seq": br[1]}, ev,
                  ours=f"{bo[0]}×{bo[1]}", ref=f"{br[0]}×{br[1]}")]


def _remat_kind(f: dict) -> str:
    return "none" if not f.get("remat_ops") else "full" if f.get("remat_dots") else "selective"


def _remat(o: Side, r: Side) -> list[dict]:
    ko, kr = _remat_kind(o.facts), _remat_kind(r.facts)
    if ko == kr:
        return []
    ev = [_ev(s, f"{side.facts.get('remat_ops', 0)} ops recomputed in the backward pass (op names under "
                 f"`checkpoint`/`remat` inside `transpose(...)`), {side.facts.get('remat_dots', 0)} of them matmuls")
          for s, side in (("ours", o), ("ref", r))]
    return [_item("remat", f"rematerialization {kr} (ours: {ko})", "memory", ["matmul", "attention", "elementwise fusion"],
                  {"remat": kr}, ev, ours=ko, ref=kr)]


def _scan(o: Side, r: Side) -> list[dict]:
    so, sr = bool(_loops(o, "layers")), bool(_loops(r, "layers"))
    if so == sr:
        return []
    ev = [_ev(s, f"loop `{w['op']}` over {w.get('trip_count') or '?'} layers ({w['op_name']})", w.get("line", ""))
          for s, side in (("ours", o), ("ref", r)) for w in _loops(side, "layers")]
    return [_item("layer_scan", f"layers {'in a scan (one compiled layer body)' if sr else 'unrolled (no scan)'} "
                                f"(ours: {'scan' if so else 'unrolled'})", "compiler",
                  ["control flow", "data movement"], {"scan": sr}, ev, ours=so, ref=sr)]


def _fusions(o: Side, r: Side) -> list[dict]:
    fo, fr = o.facts.get("custom_fusions") or {}, r.facts.get("custom_fusions") or {}
    out = []
    for kind in sorted(set(fo) | set(fr)):
        a, b = fo.get(kind, 0), fr.get(kind, 0)
        if (a == 0) == (b == 0):
            continue
        out.append(_item("fusion", f"{b} `{kind}` fusions (ours {a}): a fusion emitter the reference's compile used",
                         "compiler", ["matmul", "attention", "elementwise fusion"], {"fusion": kind, "on": b > 0},
                         [_ev("ours", f"{a} fusions of kind {kind} in {o.facts.get('module')}"),
                          _ev("ref", f"{b} fusions of kind {kind} in {r.facts.get('module')}")], ours=a, ref=b))
    return out


def _kernels(o: Side, r: Side, catalog: list[dict]) -> list[dict]:
    def names(side):
        return {c["kernel"] or c["target"]: c for c in side.facts.get("custom_calls") or []}
    ko, kr = names(o), names(r)
    out = []
    for name, c in sorted(kr.items()):
        if name in ko:
            continue
        hit = match_kernel(c, catalog)
        where = f"{hit['path']}" if hit else c.get("file", "")
        ev = [_ev("ref", f"custom call `{c['op']}` → `{c['target']}` running `{name}`"
                         + (f" from {c['file']}" if c.get("file") else ""), where)]
        if hit:
            ev.append(_ev("catalog", f"kernel catalog: `{hit['kernel']}` ({hit.get('backend')}, "
                                     f"{hit.get('category')})", hit.get("page", "")))
        ev.append(_ev("ours", "no such custom call: " + (", ".join(sorted(ko)) + " instead" if ko else
                                                        "the same work is compiled from plain HLO ops")))
        out.append(_item("kernel", f"the reference runs kernel `{name}`" + (f" ({hit['kernel']} in the catalog)"
                                                                            if hit else ""), "kernel",
                         ["matmul", "attention", "elementwise fusion", "reduction", "custom-call"],
                         {"kernel": name, "file": c.get("file", ""), "page": (hit or {}).get("page", "")}, ev,
                         ours="—", ref=name))
    return out


def match_kernel(call: dict, catalog: list[dict]) -> dict | None:
    """The catalog entry of a custom call's kernel: same defining file (path suffix), then the same function."""
    f, name = call.get("file") or "", (call.get("kernel") or "").strip("_")
    best = None
    for k in catalog:
        path = str(k.get("path") or "").split(":", 1)[0]
        same_file = bool(f and path and (f.endswith(path) or path.endswith(f.rsplit("site-packages/", 1)[-1])))
        same_name = bool(name and name in {str(k.get("kernel") or "").strip("_"), str(k.get("function") or "").strip("_")})
        score = 2 * same_file + same_name
        if score and (best is None or score > best[0]):
            best = (score, k)
    return best[1] if best else None


def _collectives(o: Side, r: Side) -> list[dict]:
    co, cr = o.facts.get("collectives") or {}, r.facts.get("collectives") or {}
    out = []
    for kind in sorted(set(co) | set(cr)):
        if co.get(kind, 0) == cr.get(kind, 0):
            continue
        bo = (o.facts.get("collective_bytes") or {}).get(kind, 0)
        br = (r.facts.get("collective_bytes") or {}).get(kind, 0)
        out.append(_item("collective", f"{cr.get(kind, 0)} `{kind}` per step, {br / 1e6:.1f} MB "
                                       f"(ours {co.get(kind, 0)}, {bo / 1e6:.1f} MB)", "parallelism",
                         ["collective"], {"collective": kind, "count": cr.get(kind, 0)},
                         [_ev("ours", f"{co.get(kind, 0)} × {kind}, {bo} bytes"),
                          _ev("ref", f"{cr.get(kind, 0)} × {kind}, {br} bytes")], ours=co.get(kind, 0),
                         ref=cr.get(kind, 0)))
    return out


def _config(o: Side, r: Side) -> list[dict]:
    """Compiler flags and command flags set otherwise: only where both sides are runs with a record (a folder has
    no command line and no environment: its flags are not known, not unset)."""
    out: list[dict] = []
    if not (o.page and r.page):
        return out
    for k in sorted(set(o.env_flags) | set(r.env_flags)):
        a, b = o.env_flags.get(k), r.env_flags.get(k)
        if a == b:
            continue
        shown = lambda v: "unset" if v is None else (f"{k}={v}" if v else k)  # noqa: E731
        out.append(_item("xla_flag", f"compiler flag {shown(b)} (ours: {shown(a)})", "compiler",
                         ["matmul", "attention", "elementwise fusion", "data movement", "collective"],
                         {"xla_flag": k, "value": b}, [_ev("ours", shown(a)), _ev("ref", shown(b))], basis="config",
                         ours=shown(a), ref=shown(b)))
    for k in sorted(set(o.flags) | set(r.flags)):
        a, b = o.flags.get(k), r.flags.get(k)
        if a == b or b is None:
            continue
        out.append(_item("flag", f"command flag {k} {b} (ours: {a if a is not None else 'unset'})", "other", [],
                         {"flag": k, "value": b}, [_ev("ours", f"{k} {a}"), _ev("ref", f"{k} {b}")], basis="config",
                         ours=a, ref=b))
    return out


ARCHITECTURE = ("n_layers", "d_model", "n_heads", "n_kv_heads", "d_ff", "vocab")  # what a token's work is


def same_model(ours: Side, ref: Side) -> None:
    """Refuse two runs whose reported shapes are different models: a token of a one-layer model is not the work of
    a token of a two-layer one, and the gap filed "--n-layers 1" as the way to be faster."""
    differ = [f"{k} {ours.shape[k]} vs {ref.shape[k]}" for k in ARCHITECTURE
              if k in ours.shape and k in ref.shape and ours.shape[k] != ref.shape[k]]
    if differ:
        raise InputError(f"{ours.label} vs {ref.label}", f"two different models ({', '.join(differ)}): their tokens "
                         "are not the same work; compare runs of one model (batch and sequence may differ)")


def differences(ours: Side, ref: Side, catalog: list[dict] | None = None) -> list[dict]:
    items = (_precision(ours, ref) + _accumulation(ours, ref) + _shape(ours, ref) + _remat(ours, ref)
             + _scan(ours, ref) + _fusions(ours, ref) + _kernels(ours, ref, catalog or []) + _collectives(ours, ref))
    config.attach_evidence(items, ours, ref)
    return items + _config(ours, ref) + config.items(ours, ref)


def analyze(ours: Side, ref: Side, catalog: list[dict] | None = None, measured: tuple[float, str] | None = None
            ) -> dict:
    """The whole comparison: step rows, per-token categories, the differences, and, when the reference is faster,
    the ranked gap items (a slower or equal reference gets none). ``measured``: (gap %, how) from an interleaved
    comparison of the two, which outranks the single runs' own speeds."""
    align_tokens(ours, ref)
    diffs = differences(ours, ref, catalog)
    to, tr, how = speeds(ours, ref)
    gap_pct = round(100 * (tr / to - 1), 2) if to and tr else None
    if measured is not None:
        gap_pct, how = round(measured[0], 2), measured[1]
    same = bool(ours.program) and ours.program == ref.program  # one compiled program: any gap is the machine's
    faster = gap_pct is not None and gap_pct > MIN_GAP_PCT and not same
    totals = (1e6 / to, 1e6 / to / (1 + gap_pct / 100)) if to and gap_pct is not None and gap_pct > -100 else (None,
                                                                                                              None)
    est = estimate(diffs, ours, ref, totals)
    items = sorted(diffs, key=lambda i: (i["basis"] != "hlo", -(i.get("gain_pct") or 0), i["kind"])) if faster else []
    for n, it in enumerate(items, 1):
        it["rank"] = n
    po, pr = per_token(ours, totals[0]), per_token(ref, totals[1])
    cats = [{"category": c, "ours": round(po.get(c, 0.0), 5), "ref": round(pr.get(c, 0.0), 5)}
            for c in sorted(set(po) | set(pr), key=lambda c: -(po.get(c, 0.0) + pr.get(c, 0.0)))]
    unread = "; ".join(f"{who}: {side.summary['unreadable']}" for who, side in (("ours", ours), ("the reference", ref))
                       if side.summary and side.summary.get("unreadable"))
    verdict = (f"no tokens/s for one of the runs: no gap measured{f' ({unread})' if unread else ''}"
               if gap_pct is None else
               f"the two runs compiled the same optimized HLO: the {gap_pct:+.1f} % tokens/s between them ({how}) is "
               "noise between runs, nothing to close, nothing filed" if same else
               f"the reference is {gap_pct:+.1f} % faster in tokens/s ({how})" if faster else
               f"the reference is not faster ({gap_pct:+.1f} % tokens/s, {how}; under the {MIN_GAP_PCT:g} % floor): "
               "nothing to close, nothing filed")
    models = [side.page.split("/")[1] for side in (ours, ref) if side.page.startswith("experiments/")
              and side.page.count("/") >= 3]
    if len(models) == 2 and models[0] != models[1]:  # a token of one model is not the work of a token of the other
        verdict += (f"; caveat: two models ({models[0]} and {models[1]}): their tokens are not the same work, so "
                    "tokens/s compares their speed only as far as their work per token is alike")
    return {"ours": ours.label, "ref": ref.label, "ours_page": ours.page, "ref_page": ref.page,
            "gap_pct": gap_pct, "reference_faster": faster, "verdict": verdict,
            "step": step_rows(ours, ref), "categories_us_per_token": cats, "estimate": est,
            "items": items, "differences": diffs if not faster else [],
            "stages": {"ours": ours.facts.get("stage"), "ref": ref.facts.get("stage")},
            "config_items": [i["what"] for i in items if i["basis"] == "config"],
            "codebases": {role: {"codebase": side.codebase, "settings": config.table(side)}
                          for role, side in (("ours", ours), ("ref", ref)) if side.codebase}}
