"""The LLM proposer's prompt, built by code from the priors: deterministic (same priors, same text), saved with the
run for audit.

Three parts: ``system`` (the role and the rules of the method), two cacheable context blocks — ``stable`` (the
loop, the engineer's guidance, the knob space, knowledge-base concepts and kernels: changes rarely, so it stays a
cache hit across iterations) and ``state`` (trunk, refuted and tried changes, category memory, profile,
retrospective) — and the ``ask`` (this iteration's instructions: plateau rule, budget). ``tool_schema`` is the
forced tool's input schema: PROPOSAL_SCHEMA with the knob space spelled out and ``env`` as name/value pairs, so a
strict endpoint (no free-form objects) can still express every change.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from typing import Any

import yaml

from ..experiments.crash_advice import what_to_try
from .priors import Attempt, Priors
from .proposal import PROPOSAL_SCHEMA, ProposalError
from .spec import Knob, LoopSpec

TOOL_NAME = "propose"
TOOL_DESCRIPTION = ("Submit the single next experiment: one falsifiable hypothesis with exactly one change "
                    "(one mechanism) against the trunk.")
MAX_CONCEPTS, MAX_KERNELS, MAX_OTHER_LANES, MAX_HYPOTHESES = 20, 60, 30, 20
MAX_EXCERPT, MAX_DUMP, MAX_PATCH_LINES = 600, 4000, 12

SYSTEM = f"""You are the proposer of an autoresearch loop that makes one model's training step faster on one piece \
of hardware. Each iteration runs exactly one experiment: one change against the current trunk, measured with \
interleaved repeats, and kept only if it beats the trunk beyond noise. Every result, win or loss, is filed in the \
knowledge base and comes back to you as priors.

Rules:
- Exactly one change of one kind: `knobs` (values from the declared knob space only), `env` (environment variables \
such as XLA_FLAGS, added on top of the trunk's) or `patch` (a unified diff against the model code). One mechanism \
per run, so the result can be attributed.
- Falsifiable: say what the metrics or the profile show if it is right, and which result refutes it.
- Never propose a change listed as refuted or already tried; those lists are authoritative.
- Rank by expected gain x confidence / effort. Ground the mechanism in the profile, the knowledge base and the \
results so far; follow the engineer's guidance.
- Answer only by calling the `{TOOL_NAME}` tool."""


@dataclass(frozen=True)
class Prompt:
    system: str
    stable: str
    state: str
    ask: str

    @property
    def cached(self) -> list[str]:
        return [self.stable, self.state]

    def markdown(self) -> str:
        """The whole prompt as one document (``prompt.md`` in the experiment)."""
        return (f"<!-- system -->\n{self.system}\n\n<!-- context: cached -->\n{self.stable}\n\n"
                f"<!-- state: cached -->\n{self.state}\n\n<!-- ask -->\n{self.ask}\n")


def render(priors: Priors) -> Prompt:
    return Prompt(SYSTEM, _stable(priors), _state(priors), _ask(priors))


def _stable(p: Priors) -> str:
    s = p.spec
    out = [f"# Loop `{s.name}`: model {s.model}, lane {s.lane}, variant {s.variant}",
           f"Command: `{' '.join(s.command)}`"]
    if s.description:
        out.append(s.description.strip())
    if s.target:
        out.append("Target: " + ", ".join(f"{k} {v:g}" for k, v in sorted(s.target.items())))
    out.append(f"Code surface for patches: `{s.code}`" if s.code else "No code surface: patches are not possible.")
    out += ["", "## Guidance from the engineer (program.md)", "", p.guidance.strip() or "(none)"]
    out += ["", "## Knob space (the first value is where the trunk started)", ""]
    out += [_knob_line(k) for k in s.knobs.values()] or ["(no knobs declared)"]
    if p.knob_effects:
        out += ["", "## Knob effects measured elsewhere", "", _dump(p.knob_effects)]
    if p.concepts:
        out += ["", "## Concepts from the knowledge base", ""]
        for c in p.concepts[:MAX_CONCEPTS]:
            excerpt = " ".join(str(c.get("excerpt", "")).split())[:MAX_EXCERPT]
            out.append(f"- **{c.get('title', '?')}** ({c.get('path', '')}): {excerpt}")
        out += _more(p.concepts, MAX_CONCEPTS)
    if p.kernels:
        out += ["", "## Kernels that exist in the ingested repositories", ""]
        out += [f"- {k.get('name', '?')} — {k.get('backend', '?')} — {k.get('category', '?')}"
                + (f" ({k['path']})" if k.get("path") else "") for k in p.kernels[:MAX_KERNELS]]
        out += _more(p.kernels, MAX_KERNELS)
    return "\n".join(out)


def _state(p: Priors) -> str:
    out = ["# Where the loop stands", "", "## Trunk (the current frontier)", "",
           "Knobs: " + (_json(p.trunk) if p.trunk else "(none)")]
    if p.trunk_env:
        out.append("Extra env: " + _json(p.trunk_env))
    if p.trunk_commit:
        out.append(f"Model code commit: {p.trunk_commit}")
    if p.best:
        out += ["Best record:", _dump(p.best)]
    out += _repairs(p)
    out += ["", "## Refuted: never propose these again", ""]
    out += [_attempt_line(a) for a in p.refuted] or ["(none)"]
    out += ["", "## Already tried in this loop (oldest first; refuted ones are listed above): do not repeat", ""]
    refuted = {a.fingerprint for a in p.refuted}
    out += [_attempt_line(a) for a in p.attempts if a.fingerprint not in refuted] or [
        "(none)" if p.attempts else "(none yet: this is the first experiment)"]
    if p.other_lanes:
        out += ["", "## Results on other lanes and models of this knowledge base (latest)", ""]
        out += [_attempt_line(a) for a in p.other_lanes[-MAX_OTHER_LANES:]]
        out += ([f"- ({len(p.other_lanes) - MAX_OTHER_LANES} older not shown)"]
                if len(p.other_lanes) > MAX_OTHER_LANES else [])
    if p.memory:
        out += ["", "## Category memory", "", "| category | tried | supported | refuted | best gain % | closed |",
                "|---|---|---|---|---|---|"]
        for cat, m in sorted(p.memory.items()):
            out.append(f"| {cat} | {m.get('tried', 0)} | {m.get('supported', 0)} | {m.get('refuted', 0)} | "
                       f"{m.get('best_gain_pct', '')} | {'yes' if m.get('closed') else ''} |")
    if p.open_hypotheses:
        out += ["", "## Open hypotheses in the knowledge base (people's first)", ""]
        for h in p.open_hypotheses[:MAX_HYPOTHESES]:
            head = h.get("title") or h.get("statement") or h.get("path") or "?"
            rest = {k: v for k, v in h.items() if k not in ("title", "body") and v not in (None, "", [], {})}
            out.append(f"- {head}: {_json(rest)}")
        out += _more(p.open_hypotheses, MAX_HYPOTHESES)
    if p.gap_summary:
        out += ["", f"## Gap to the reference `{p.gap_summary.get('ref')}` (trunk `{p.gap_summary.get('ours')}`): "
                    f"{p.gap_summary.get('verdict')}", "",
                "Measured differences, ranked by the share of the trunk's step each accounts for; closing them is "
                "the shortest way to the reference's speed:", ""]
        for it in p.gap[:MAX_HYPOTHESES]:
            change = _json(it["knobs"]) if it.get("knobs") else "a code change (no declared knob produces it)"
            ev = "; ".join(f"{e['side']}: {e['text']}" for e in it.get("evidence") or [])
            out.append(f"- {it.get('rank')}. {it['what']} [{it['basis']}; {it.get('share_pct')} % of the step, "
                       f"about {it.get('gain_pct')} % if closed] → {change}. Evidence: {ev}")
        out += _more(p.gap, MAX_HYPOTHESES)
        mapped: dict = {}
        for it in p.gap:
            if it.get("knobs") and not set(it["knobs"]) & set(mapped):
                mapped.update(it["knobs"])
        if len(mapped) > 1:
            out += ["", f"All mapped items at once, one run (each alone may sit inside the noise band): "
                        f"{_json(mapped)}"]
    if p.screens:
        out += ["", "## Screened moves (knob moves against the trunk, flag moves in one process, XLA-flag moves in "
                    "processes: a ranking, not a verdict)", "",
                "Ruled out ones would be slower, no faster, or invalid on this trunk; propose the others first, best "
                "screened gain first:", ""]
        for m in sorted(p.screens.values(), key=lambda m: -(m.get("gain_pct") or -1e9))[:MAX_HYPOTHESES]:
            lo, hi = m.get("interval_pct") or [None, None]
            gain = "no reading" if m.get("gain_pct") is None else f"{m['gain_pct']:+.1f} %" + (
                f" [{lo:+.1f}, {hi:+.1f}]" if lo is not None else "")
            then = {"confirm": "to confirm", "unscreened": f"to confirm (no reading: {m.get('problem')})"}.get(
                str(m.get("outcome")), f"ruled out: {m.get('why')}")
            if m.get("confirmed_by"):
                then = f"its own experiment since: {m['confirmed_by']} (see the history above)"
            out.append(f"- {_json((m.get('change') or {}).get('knobs') or {})}: {gain}, losses {m.get('losses')}, "
                       f"{then}")
        out += _more(list(p.screens), MAX_HYPOTHESES)
    if p.profile:
        out += ["", "## Latest profile of the trunk", "", _dump(p.profile)]
    if p.retrospective.strip():
        out += ["", "## Last retrospective", "", p.retrospective.strip()]
    return "\n".join(out)


def repairable(p: Priors) -> list[Attempt]:
    """Crashed patches of this loop that may still be repaired (once each; a repair that crashed may not)."""
    repaired = {a.repair_of for a in p.attempts if a.repair_of}
    return [a for a in p.attempts if a.verdict == "crash" and (a.change or {}).get("kind") == "patch"
            and not a.repair_of and a.exp_id not in repaired and not a.lane]


def _repairs(p: Priors) -> list[str]:
    todo = repairable(p)
    if not todo:
        return []
    out = ["", "## Crashed patches you may repair once (set `repair_of` to the exp_id)", ""]
    for a in todo[-3:]:
        c = a.crash or {}
        out.append(f"- `{a.exp_id}`: {c.get('kind', 'crash')}: {c.get('message', '')[:300]}")
        for f in c.get("frames") or []:
            where = f"{f['package']}/" if f.get("package") else ""
            out.append(f"    - {f.get('role')} `{where}{f.get('rel')}:{f.get('line')}` in `{f.get('func')}`"
                       + (f": `{f['code']}`" if f.get("code") else ""))
        tips = what_to_try(c, a.config, dict((a.change or {}).get("env") or {}))
        if tips:
            out.append("  what to try, from its figures and knobs:\n" + "\n".join(f"  {t}" for t in tips))
        out.append("  the patch:\n\n```diff\n" + str((a.change or {}).get("patch", ""))[:4000] + "\n```")
    return out


def _ask(p: Priors) -> str:
    out = [f"Propose the next experiment for loop `{p.spec.name}` by calling `{TOOL_NAME}`."]
    if p.avoid_category:
        out.append(f"Plateau rule: the last experiments were all `{p.avoid_category}` changes. Do NOT propose a "
                   f"`{p.avoid_category}` change this time; pick another category.")
    if p.prefer_switch:
        out.append("Several runs in a row did not improve the trunk: switch to a different category.")
    refusals = getattr(p, "refusals", None) or []  # set by the engine when it refused proposals this iteration
    if refusals:
        out.append("Already refused in this iteration, do not propose again:\n" + "\n".join(
            f"- {r.get('change', '?')} ({r.get('category', '?')}): {r.get('why', '')}" for r in refusals))
    if p.spec.code:
        at = f" at commit {p.trunk_commit}" if p.trunk_commit else ""
        out.append(f"A `patch` is a unified diff against `{p.spec.code}`{at}.")
    else:
        out.append("Use a `knobs` or `env` change: this loop has no code surface.")
    if p.budget_left:
        out.append("Budget left: " + ", ".join(f"{k} {v:g}" for k, v in sorted(p.budget_left.items())) + ".")
    return "\n\n".join(out)


def repair_feedback(error: str) -> str:
    return (f"That proposal was rejected: {error}. Call `{TOOL_NAME}` again with the whole proposal corrected "
            "(every required field, exactly one change of one kind).")


def duplicate_feedback(attempt: Attempt | None, fingerprint: str) -> str:
    what = (f"{attempt.exp_id} (verdict: {attempt.verdict or 'unknown'})" if attempt else "an earlier experiment")
    return (f"That change duplicates {what}, fingerprint {fingerprint}: the loop refuses duplicates. Call "
            f"`{TOOL_NAME}` again with a different change, one not in the refuted or already-tried lists.")


def tool_schema(spec: LoopSpec) -> dict:
    """PROPOSAL_SCHEMA with ``change.knobs`` spelled out from the knob space and ``change.env`` as pairs."""
    schema = copy.deepcopy(PROPOSAL_SCHEMA)
    change = schema["properties"]["change"]
    kinds = [k for k in change["properties"]["kind"]["enum"]
             if not (k == "knobs" and not spec.knobs) and not (k == "patch" and not spec.code)]
    change["properties"]["kind"]["enum"] = kinds
    if spec.knobs:
        change["properties"]["knobs"] = {
            "type": "object", "additionalProperties": False,
            "description": "only the knobs that change, each set to one of its declared values",
            "properties": {name: _value_schema(k) for name, k in spec.knobs.items()}}
    else:
        change["properties"].pop("knobs")
    change["properties"]["env"] = {
        "type": "array", "description": "environment variables to set on top of the trunk's (e.g. XLA_FLAGS)",
        "items": {"type": "object", "additionalProperties": False, "required": ["name", "value"],
                  "properties": {"name": {"type": "string"}, "value": {"type": "string"}}}}
    if not spec.code:
        change["properties"].pop("patch")
    return schema


def tool_input_to_dict(inp: dict) -> dict:
    """The tool's input as Proposal.from_dict reads it (env pairs back to a mapping)."""
    d = copy.deepcopy(inp)
    change = d.get("change")
    if isinstance(change, dict) and isinstance(change.get("env"), list):
        env = {}
        for item in change["env"]:
            if not isinstance(item, dict) or not isinstance(item.get("name"), str) or "value" not in item:
                raise ProposalError("change.env must be a list of {name, value} pairs")
            env[item["name"]] = str(item["value"])
        change["env"] = env
    return d


def _value_schema(k: Knob) -> dict:
    desc = f"{k.category}; declared values: {_json(k.values)}"
    if all(_primitive(v) for v in k.values):
        return {"enum": list(k.values), "description": desc}
    return {"anyOf": [_const(v) for v in k.values], "description": desc}


def _const(v: Any) -> dict:
    if isinstance(v, dict):
        return {"type": "object", "additionalProperties": False, "required": sorted(v),
                "properties": {str(key): _const(val) for key, val in v.items()}}
    if isinstance(v, list):
        return {"type": "array", "description": f"exactly {_json(v)}"}
    return {"const": v}


def _primitive(v: Any) -> bool:
    return v is None or isinstance(v, (str, int, float, bool))


def _knob_line(k: Knob) -> str:
    how = f"env {k.env}" if k.env else (f"flags {_json(k.flags)}" if k.flags else f"flag {k.flag}")
    return f"- `{k.name}` ({k.category}; {how}): {_json(k.values)}" + (" — changes the math" if k.semantics else "")


def _attempt_line(a: Attempt) -> str:
    gain = f", {a.gain_pct:+.1f} %" if a.gain_pct is not None else ""
    where = f" [{a.lane}]" if a.lane else ""
    line = (f"- {a.exp_id}{where} {a.category}: {_change_text(a.change)} → {a.verdict or '?'}{gain}"
            f"{', kept' if a.kept else ''} (fingerprint {a.fingerprint})")
    return line + (f" — {a.statement.strip()}" if a.statement.strip() else "")


def _change_text(c: dict) -> str:
    kind = c.get("kind", "?")
    if kind == "patch":
        lines = [ln for ln in str(c.get("patch", "")).splitlines()
                 if ln.startswith(("+", "-")) and not ln.startswith(("+++", "---"))]
        shown = "; ".join(ln.strip() for ln in lines[:MAX_PATCH_LINES])
        more = f"; … {len(lines) - MAX_PATCH_LINES} more lines" if len(lines) > MAX_PATCH_LINES else ""
        return f"patch `{shown}{more}`"
    return f"{kind} {_json(c.get(kind) or {})}"


def _more(items: list, cap: int) -> list[str]:
    return [f"- ({len(items) - cap} more not shown)"] if len(items) > cap else []


def _json(v: Any) -> str:
    return json.dumps(v, sort_keys=True, separators=(", ", ": "), default=str)


def _dump(v: Any) -> str:
    text = yaml.safe_dump(json.loads(json.dumps(v, default=str)), sort_keys=True, allow_unicode=True,
                          default_flow_style=False, width=110).strip()
    return text if len(text) <= MAX_DUMP else text[:MAX_DUMP] + f"\n… ({len(text) - MAX_DUMP} characters cut)"
