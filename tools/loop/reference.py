"""Gap items (``tools/gap/compare.py``) against a loop file's knobs: the knob change that produces the reference's side
of a difference, when the loop declares one, and the items as proposals or hypothesis pages. A knob is matched by
what its name or flag says it sets (``dtype``, ``accum``, ``batch``/``seq``, ``remat``, ``scan``, an ``XLA_FLAGS``
value naming the flag or fusion), and its value by the reference's measured side; nothing here runs anything."""

from __future__ import annotations

import re
from typing import Any

from .. import pages
from ..errors import InputError
from ..project import Project
from .proposal import Change, Proposal
from .spec import Knob, LoopSpec

AUTHOR = "tools gap"
_LOW = {"bfloat16", "bf16", "float16", "f16"}
_HIGH = {"float32", "f32", "fp32"}
_OFF = ("none", "off", "no", "false", "nothing", "")


def _words(knob: Knob) -> str:
    return " ".join([knob.name, knob.flag, knob.env, *knob.flags.keys(), *knob.flags.values()]).lower()


def _same(a: Any, b: Any) -> bool:
    return str(a).lower() == str(b).lower()


def knob_change(item: dict, spec: LoopSpec, trunk: dict) -> dict | None:
    """``{knob: value}`` that gives the trunk the reference's side of ``item``; None when no declared knob can (or
    the trunk already holds that value)."""
    prop = item.get("property") or {}
    for knob in spec.knobs.values():
        value = _value(knob, item["kind"], prop, trunk)
        if value is not _NONE and not _same(trunk.get(knob.name), value) and value in knob.values:
            return {knob.name: value}
    return None


_NONE = object()


def _value(knob: Knob, kind: str, prop: dict, trunk: dict) -> Any:
    words, vals = _words(knob), knob.values
    if kind == "precision" and "dtype" in words and "param" not in knob.name:
        want = _LOW if prop["dtype"] == "bfloat16" else _HIGH
        return next((v for v in vals if str(v).lower() in want), _NONE)
    if kind == "accumulation" and re.search(r"accum|micro", words) and not knob.flags:
        return next((v for v in vals if _same(v, prop["grad_accum"])), _NONE)
    if kind == "shape" and "batch" in words:
        if knob.flags:  # a mapping knob moving batch and sequence (and maybe accumulation) together
            seq_key = next((k for k in knob.flags if "seq" in k), None)
            batch_key = next((k for k in knob.flags if "batch" in k), None)
            for v in vals:
                if batch_key and _same(v.get(batch_key), prop["batch"]) and (
                        not seq_key or str(v.get(seq_key)) in (str(prop["seq"]), str(prop["seq"] - 1))):
                    return v
            return _NONE
        return next((v for v in vals if _same(v, prop["batch"])), _NONE)
    if kind == "remat" and re.search(r"remat|checkpoint", words):
        want = prop["remat"]
        for v in vals:
            s = str(v).lower()
            if want == "none" and (v is False or s in _OFF) or want == "full" and (v is True or s == "full") or \
                    want == "selective" and re.search(r"dots|save|selective|policy", s):
                return v
        return _NONE
    if kind == "layer_scan" and "scan" in words:
        return next((v for v in vals if isinstance(v, bool) and v == prop["scan"]), _NONE)
    if kind == "fusion" and knob.env:
        word = prop["fusion"].split("_")[0].lower()
        if prop.get("on"):
            return next((v for v in vals if word and word in str(v).lower()), _NONE)
        return next((v for v in vals if word not in str(v).lower()), _NONE) if any(
            word in str(v).lower() for v in vals) else _NONE
    if kind == "xla_flag" and knob.env:
        flag, value = prop["xla_flag"], prop.get("value")
        if value is None:  # the reference does not set it
            return next((v for v in vals if flag not in str(v)), _NONE) if any(flag in str(v) for v in vals) else _NONE
        return next((v for v in vals if f"{flag}={value}" in str(v) or (not value and flag in str(v))), _NONE)
    if kind == "kernel":
        parts = {p for p in re.split(r"[_\W]+", str(prop.get("kernel") or "").lower()) if len(p) > 3} - {"kernel"}
        if "attention" in parts and "attention" in words or parts & set(re.split(r"[_\W]+", words)):
            return next((v for v in vals if isinstance(v, str) and set(re.split(r"[_\W]+", v.lower())) & parts),
                        _NONE)
    if kind == "config_knob" and prop.get("setting") in (knob.name, knob.flag.lstrip("-").replace("-", "_")):
        return next((v for v in vals if _same(v, prop.get("value"))), _NONE)
    if kind == "flag" and knob.flag == prop.get("flag"):
        return next((v for v in vals if _same(v, prop.get("value"))), _NONE)
    return _NONE


def map_items(items: list[dict], spec: LoopSpec | None, trunk: dict) -> list[dict]:
    """Each item with ``knobs`` (its knob change, or None), in place. A config item asking for a knob an HLO item
    already maps is dropped: the HLO evidence speaks for it. Ranks are renumbered."""
    taken: set[str] = set()
    drop = []

    def flags_of(names: set[str]) -> set[str]:  # the command flags the knobs an HLO item maps set
        knobs = [spec.knobs[n] for n in names if spec and n in spec.knobs]
        return {k.flag for k in knobs if k.flag} | {f for k in knobs for f in (k.flags or {}).values()}

    for it in sorted(items, key=lambda i: i["basis"] != "hlo"):
        ch = knob_change(it, spec, trunk) if spec else None
        flag = (it.get("property") or {}).get("flag") if it.get("kind") == "flag" else None
        if it["basis"] == "config" and (ch and set(ch) & taken or flag and flag in flags_of(taken)):
            drop.append(it)
        it["knobs"] = ch
        taken |= set(ch or {})
    items[:] = [it for it in items if not any(it is d for d in drop)]
    for n, it in enumerate(items, 1):
        it["rank"] = n
    return items


def proposal(item: dict, ref: str, category_default: str = "other") -> Proposal:
    """A gap item as a proposal: a knob change when ``item['knobs']`` is set, else a code change to write."""
    gain = float(item.get("gain_pct") or 0.0)
    touches = ", ".join(item.get("touches") or []) or "step time"
    ev = "; ".join(f"{e['side']}: {e['text']}" + (f" ({e['where']})" if e.get("where") else "")
                   for e in item.get("evidence") or [])
    knobs = item.get("knobs")
    change = Change("knobs", knobs=dict(knobs)) if knobs else Change("patch", patch="")
    cat = item.get("category") or category_default
    # a command-line difference no op time was put on (`--batch 16`, ours unset): no estimate, never "+0.0 %"
    guessed = item.get("gain_pct") is not None and (item.get("touches") or item["basis"] == "hlo")
    return Proposal(
        statement=(f"Doing what the reference {ref} does ({item['what']}) raises tokens/s by about {gain:+.1f} %."
                   if guessed else f"Doing what the reference {ref} does ({item['what']}) may change tokens/s: a "
                   "command-line difference this analysis puts no share of the step on (measure it)."),
        mechanism=f"Measured difference to the reference, from {item['basis'].upper() if item['basis'] == 'hlo' else 'the command line'}: {ev}.",
        predicted_signal=f"tokens/s beyond the noise band, and our µs per token in {touches} falls toward the "
                         f"reference's",
        falsification="tokens/s within the noise band or slower, or the loss trajectory moves beyond the tolerance",
        change=change, category=cat if cat in pages.LOOP_CATEGORIES else category_default,
        expected_gain_pct=round(gain, 2), confidence=0.7 if item["basis"] == "hlo" else 0.5,
        effort=1.0 if knobs else 3.0, proposer=AUTHOR,
        notes=("knob change from the loop file" if knobs else
               f"no declared knob produces this: a code change ({_code_hint(item)})"))


def _code_hint(item: dict) -> str:
    p = item.get("property") or {}
    if item["kind"] == "kernel":
        return f"call the kernel `{p.get('kernel')}`" + (f" from {p['file']}" if p.get("file") else "") + \
            (f", catalog page {p['page']}" if p.get("page") else "")
    if item["kind"] == "xla_flag":
        return f"set {p.get('xla_flag')}" + (f"={p['value']}" if p.get("value") else "")
    return "change the model code to match the reference's side"


_CACHE: dict[tuple, dict] = {}


def measured(state_ref: dict | None, trunk_exp: str | None) -> tuple[float, str] | None:
    """(gap %, how) from the loop's interleaved check of this trunk against the reference, when there is one."""
    check = (state_ref or {}).get("check") or {}
    ratio = check.get("ratio_pct")
    if not trunk_exp or check.get("trunk_exp") != trunk_exp or not ratio:
        return None
    return 100 * (100 / float(ratio) - 1), check.get("how") or f"measured interleaved in {check.get('exp_id')}"


def gap_against(project: Project, spec: LoopSpec, trunk_rec: dict | None, ref_rec: dict | None,
                trunk_cfg: dict, catalog: list[dict] | None = None, interleaved: tuple[float, str] | None = None
                ) -> dict | None:
    """The gap analysis of the trunk against the reference, items mapped to this loop's knobs (None without a
    profile on either side), the gap read from ``interleaved`` (see ``measured``) when given. Computed once per
    (trunk, reference, measure)."""
    from ..gap import compare, sides

    if not trunk_rec or not ref_rec:
        return None
    key = (project.root, trunk_rec.get("exp_id"), ref_rec.get("exp_id"), json_key(trunk_cfg), interleaved)
    if key not in _CACHE:
        try:
            ours, ref = sides.from_record(project, trunk_rec), sides.from_record(project, ref_rec)
            if spec.reference_codebase and ref.codebase != spec.reference_codebase:
                sides.with_codebase(project, ref, spec.reference_codebase, ref.command)
        except InputError:
            return None
        analysis = compare.analyze(ours, ref, catalog or [], interleaved)
        map_items(analysis["items"], spec, trunk_cfg)
        _CACHE[key] = analysis
    return _CACHE[key]


def json_key(d: dict) -> str:
    import json
    return json.dumps(d, sort_keys=True, default=str)


def summary_line(analysis: dict | None, state_ref: dict | None, trunk: dict | None, start_tps: float | None) -> str:
    """"X % closed (trunk at Y % of the reference's tokens/s, how measured)" in words, for the loop page, the
    model page and the retrospective ("" before both sides are measured)."""
    ref = state_ref or {}
    rtps, ttps = ref.get("tokens_per_s"), (trunk or {}).get("tokens_per_s")
    if not rtps or not ttps:
        return ""
    check = ref.get("check") or {}
    if check.get("trunk_exp") == (trunk or {}).get("exp_id") and check.get("ratio_pct") is not None:
        ratio, how = check["ratio_pct"], check.get("how") or f"measured interleaved in {check.get('exp_id')}"
    else:
        ratio, how = 100 * ttps / rtps, "each run's own measure"
    at = f"trunk at {ratio:.1f} % of the reference's tokens/s ({how})"
    if start_tps and rtps > start_tps:
        # the share of the start's gap closed, on the same measure as the ratio
        closed = (ratio / 100 * rtps - start_tps) / (rtps - start_tps)
        head = f"{100 * min(max(closed, 0), 1):.0f} % closed ({at})"
    else:
        head = at
    left = ""
    if analysis and analysis.get("items"):
        left = f"; {len(analysis['items'])} items remain"
        un = (analysis.get("estimate") or {}).get("unexplained_us_per_token")
        if un is not None:
            left += f", {un:.4f} µs per token unexplained by any"
    return head + left


def gap_section(state: dict, src: str, heading: str = "## Gap to the reference") -> str:
    """``heading`` for the loop page, a retrospective and the model page: how much is closed, what remains, the
    gap pages, links relative to the page ``src`` ("" for a loop without a reference)."""
    import posixpath

    from ..mdtext import code, escape

    ref = state.get("reference") or {}
    if not ref.get("exp_id"):
        return ""
    rel = lambda t: posixpath.relpath(t, posixpath.dirname(src))  # noqa: E731
    frontier = state.get("frontier") or []
    start = frontier[0].get("tokens_per_s") if frontier else None
    last = ref.get("last") or {}
    line = summary_line(None, ref, state.get("trunk"), start)
    head = f"Reference [{code(ref['exp_id'])}]({rel(ref['page'])})" if ref.get("page") else f"Reference {code(ref['exp_id'])}"
    out = [heading, "", f"{head} at {ref.get('tokens_per_s')} tokens/s. Gap to reference: "
           f"{escape(line) or 'not measured'}."]
    if last.get("remaining"):
        out += ["", "Remaining items (the latest gap page, trunk " + code(last.get("trunk_exp", "")) + "):", ""]
        out += [f"- {escape(w)}" for w in last["remaining"]]
    if ref.get("pages"):
        out += ["", "Gap pages: " + ", ".join(f"[{posixpath.basename(p).removesuffix('.md')}]({rel(p)})"
                                                for p in ref["pages"]) + "."]
    return "\n".join(out) + "\n"
