"""Loop pages, built from the loop state (plain data in, ``pages.Page`` out; the engine writes them).

``loop_page``: the lane's memory page (status, best, frontier, hypotheses, categories, knobs).
``observation_page``: what one run taught. The retrospective page is in ``retro_page``. Hypothesis pages (a proposal as a page, and a page back) are in ``hypotheses``.
Everything generated sits inside ``pages.region(...)``: text written outside survives regeneration.
"""

from __future__ import annotations

import html
import posixpath
from typing import Any

from .. import pages
from ..experiments.report import experiment_path
from ..mdtext import code, escape, number
from . import memory as mem
from .combos import combinations
from .combos import markdown as combo_markdown
from .device_time import device_time
from .device_time import markdown as device_markdown
from .reference import gap_section
from .screen_table import markdown as screen_markdown
from .spec import LoopSpec

EXPLORER = "explore/loops/{name}/"  # the built site's page for one loop (tools/sitegen/loops.py)


# ------------------------------------------------------------------ small formatting helpers

def loop_path(name: str) -> str:
    return f"loops/{name}.md"


def retrospective_path(name: str, n: int) -> str:
    return f"analyses/{name}-retrospective-{n}.md"


def observation_path(model: str, lane: str, exp_id: str) -> str:
    return f"observations/{model}/{lane}/{exp_id}.md"


def hypothesis_path(model: str, lane: str, hid: str) -> str:
    return f"hypotheses/{model}/{lane}/{hid}.md"


def _rel(src: str, target: str) -> str:
    """Relative markdown link target from the page ``src`` to the page ``target`` (both wiki-relative)."""
    return posixpath.relpath(target, posixpath.dirname(src) or ".")


def _link(src: str, label: str, target: str) -> str:
    return f"[{label}]({_rel(src, target).replace(' ', '%20')})" if target else label


def _num(v: Any, nd: int = 1) -> str:
    return number(v, nd) if isinstance(v, (int, float)) else "—"


def _pct(v: Any) -> str:
    return f"{v:+.2f} %" if isinstance(v, (int, float)) and not isinstance(v, bool) else "—"


def _gain_band(gain: Any, band: Any, interval: Any = None) -> str:
    """The gain, its 95 % interval over the interleaved rounds when known, and the band it had to clear."""
    if not isinstance(gain, (int, float)):
        return "—"
    ci = (f" [{interval[0]:+.1f}, {interval[1]:+.1f}]" if isinstance(interval, (list, tuple)) and len(interval) == 2
          and all(isinstance(x, (int, float)) for x in interval) else "")
    return _pct(gain) + ci + (f" (band ±{band:.2f})" if isinstance(band, (int, float)) else "")


def _duration(s: Any) -> str:
    s = int(round(float(s or 0)))
    if s >= 3600:
        return f"{s // 3600} h {s % 3600 // 60:02d} min"
    return f"{s // 60} min {s % 60:02d} s" if s >= 60 else f"{s} s"


def _prose(text: Any) -> str:
    """Free text from a proposer or a person: markdown kept, raw HTML shown as text."""
    return html.escape(str(text or "").strip(), quote=False)


def _cell(text: Any) -> str:
    return escape(str(text or "")) or "—"


def _exp_page(spec: LoopSpec, exp_id: str, state: dict) -> str:
    """The experiment page of ``exp_id`` (from the history or the frontier, else where the runner files it)."""
    for e in (state.get("history") or []) + (state.get("frontier") or []):
        if e.get("exp_id") == exp_id and e.get("page"):
            return str(e["page"])
    return experiment_path(spec.model, spec.lane, exp_id) if exp_id else ""


def _chained(frontier: list[dict]) -> float | None:
    """The frontier's gain over the baseline: the engine chains each move's interleaved gain (the stored tokens/s
    of runs made at different times drift with the machine; the ratio of two of them is not a measurement)."""
    last = frontier[-1] if frontier else {}
    if isinstance(last.get("gain_pct"), (int, float)) and len(frontier) > 1:
        return float(last["gain_pct"])
    return _gain_over(last.get("tokens_per_s"), frontier[0].get("tokens_per_s")) if frontier else None


def _gain_over(tps: Any, base: Any) -> float | None:
    if isinstance(tps, (int, float)) and isinstance(base, (int, float)) and base:
        return 100 * (tps / base - 1)
    return None


def _config(cfg: dict) -> str:
    return ", ".join(code(f"{k}={mem.value_key(v) if isinstance(v, (dict, list)) else v}") for k, v in cfg.items()) or "—"


# ------------------------------------------------------------------ the loop page

def _status(spec: LoopSpec, state: dict) -> str:
    u = state.get("usage") or {}
    it, status = int(state.get("iteration") or 0), str(state.get("status") or "running")
    parts = [f"{u.get('runs', 0)} runs", f"{_duration(u.get('wall_s'))} of wall time"]
    if u.get("llm_tokens"):
        parts.append(f"{int(u['llm_tokens']):,} LLM tokens" + (f" (${u['cost_usd']:.3f})" if u.get("cost_usd") else ""))
    if u.get("device_s"):
        parts.append(f"{_duration(u['device_s'])} of device time")
    head = (f"**Stopped** after {it} iterations" if status == "stopped" else f"**Running**: {it} iterations so far")
    lines = [f"{head}: {', '.join(parts)}."
             + (f" Stop reason: {_prose(state['stop_reason'])}." if state.get("stop_reason") else ""), ""]
    target = ", ".join(f"{k.replace('_per_s', '/s').replace('_percent', ' %')} ≥ {v:,g}" for k, v in spec.target.items())
    budget = ", ".join(f"{k} {_num(u.get(k, 0), 0 if k != 'cost_usd' else 3)} of {v:,g}" for k, v in spec.budget.items())
    lines += [f"Model `{spec.model}`, lane `{spec.lane}`, variant `{spec.variant}`; proposer `{spec.proposer}`, runner "
              f"`{spec.runner}`; target {target or 'none'}; budget {budget or 'none'}. Started {state.get('started', '—')},"
              f" updated {state.get('updated', '—')}. Every run of the lane, the loop's and others': the "
              + _link(loop_path(spec.name), "model page", f"models/{spec.model}-{spec.lane}.md") + ".", "",
              "This page is the lane's **memory page**: the next proposal reads it (every hypothesis and its verdict,"
              " the categories tried, closed topics and knob coverage) before it proposes. It is regenerated after"
              " every iteration; write notes outside the generated regions and they stay."]
    pending = state.get("pending") or []
    for pend in [pending] if isinstance(pending, dict) else pending:
        what = (pend.get("proposal") or {}).get("statement") or "a run"
        lines += ["", f"Iteration {pend.get('iteration', it + 1)} is in progress ({pend.get('phase', 'proposed')}): "
                      f"{_prose(what)}"]
    return "\n".join(lines) + "\n"


def _best(spec: LoopSpec, state: dict, src: str) -> str:
    trunk, frontier = state.get("trunk") or {}, state.get("frontier") or []
    if not trunk.get("exp_id"):
        return "## Best so far\n\nNo baseline yet.\n"
    base = frontier[0] if frontier else {}
    gain = _chained(frontier)
    mfu = f" (MFU {trunk['mfu_percent']:.2f} %)" if isinstance(trunk.get("mfu_percent"), (int, float)) else ""
    line = (f"{_link(src, trunk['exp_id'], _exp_page(spec, trunk['exp_id'], state))} at "
            f"**{_num(trunk.get('tokens_per_s'))} tokens/s**{mfu}")
    if base and base.get("exp_id") != trunk["exp_id"]:
        # the gain is chained from the interleaved comparisons, not the two runs' own medians (which drift apart)
        line += (f", **{_pct(gain)}** over the baseline {_link(src, base['exp_id'], _exp_page(spec, base['exp_id'], state))}"
                 f" ({_num(base.get('tokens_per_s'))} tokens/s in its own run) after {len(frontier) - 1} frontier "
                 "moves, chained from each move's interleaved comparison")
    else:
        line += ": the baseline, no change has beaten it yet"
    out = ["## Best so far", "", line + ".", "", f"- configuration: {_config(trunk.get('config') or {})}"]
    if trunk.get("env"):
        out.append(f"- extra environment: {_config(trunk['env'])}")
    if trunk.get("commit"):
        out.append(f"- model code commit `{trunk['commit']}`")
    return "\n".join(out) + "\n"


def _frontier(spec: LoopSpec, state: dict, src: str, name: str) -> str:
    frontier = state.get("frontier") or []
    base = (frontier[0] if frontier else {}).get("tokens_per_s")
    out = ["## Frontier", "", "Every move of the trunk; the first row is the baseline.", "",
           "| iteration | experiment | tokens/s | gain of the step | over the baseline | change |",
           "|---:|---|---:|---:|---:|---|"]
    for i, f in enumerate(frontier):
        step = f.get("step_gain_pct", _gain_over(f.get("tokens_per_s"), frontier[i - 1].get("tokens_per_s"))) if i else None
        over = f.get("gain_pct", _gain_over(f.get("tokens_per_s"), base)) if i else None
        out.append(f"| {f.get('iteration', 0)} | {_link(src, str(f.get('exp_id')), _exp_page(spec, str(f.get('exp_id')), state))}"
                   f" | {_num(f.get('tokens_per_s'))} | {'—' if i == 0 else _pct(step)} | "
                   f"{'—' if i == 0 else _pct(over)} | "
                   f"{'baseline' if i == 0 else code(f.get('description') or '—')} |")
    if not frontier:
        out.append("| — | no baseline yet | | | | |")
    out += ["", f"The staircase plot (every run as a point coloured by verdict, the frontier as a step line, a click "
                f"opens the run) is drawn here on the built site, and on its page `{EXPLORER.format(name=name)}`.", "",
            f'<div class="arw-loop-plot" data-loop="{html.escape(name, quote=True)}"></div>']
    return "\n".join(out) + "\n"


def _hypotheses(spec: LoopSpec, state: dict, src: str) -> str:
    history = sorted(state.get("history") or [], key=lambda e: int(e.get("iteration") or 0))
    out = ["## Hypotheses in order", "",
           "| iteration | experiment | category | change | statement | verdict | gain vs trunk [95 % interval] | kept |",
           "|---:|---|---|---|---|---|---:|---|"]
    for e in history:
        links = [_link(src, "hypothesis", str(e["hypothesis_page"]))] if e.get("hypothesis_page") else []
        if e.get("exp_id"):  # what the run taught (the engine files one observation per run)
            obs = observation_path(spec.model, spec.lane, str(e["exp_id"]))
            links.append(_link(src, "observation", obs))
        hyp = f" ({'; '.join(links)})" if links else ""
        out.append(f"| {e.get('iteration', '—')} | {_link(src, str(e.get('exp_id') or 'run'), str(e.get('page') or ''))} | "
                   f"{_cell(e.get('category'))} | {code(e.get('describe') or '—')} | {_cell(e.get('statement'))}{hyp} | "
                   f"{_cell(e.get('verdict'))} | {_gain_band(e.get('gain_pct'), e.get('noise_band_pct'), e.get('interval_pct'))} | "
                   f"{'**kept**' if e.get('kept') else '—'} |")
    if not history:
        out.append("| — | no hypothesis tested yet | | | | | | |")
    return "\n".join(out) + "\n"


def _category_table(memory: dict[str, dict]) -> list[str]:
    out = ["| category | tried | supported | refuted | inconclusive | invalid | crash | kept | best gain | last iteration | closed |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for c, m in memory.items():
        out.append(f"| {c} | {m['tried']} | {m['supported']} | {m['refuted']} | {m['inconclusive']} | {m['invalid']} | "
                   f"{m['crash']} | {m['kept']} | {_pct(m['best_gain_pct'])} | "
                   f"{'—' if m['last_iteration'] is None else m['last_iteration']} | {'**closed**' if m['closed'] else ''} |")
    return out


def _categories(state: dict, memory: dict[str, dict]) -> str:
    history = state.get("history") or []
    closed = mem.closed_topics(memory)
    cat, n = mem.streak(history)
    out = ["## Categories", ""] + _category_table(memory) + [""]
    out.append(f"Closed topics (≥ {mem.CLOSE_AFTER_REFUTED} refuted, none supported; worth a run only with new "
               "evidence): "
               + (", ".join(f"**{c}**" for c in closed) if closed else "none") + ".")
    out += ["", f"Current streak: {n} in a row from `{cat}`." if n else "No streak yet.",
            f"Iterations since the last frontier move: {mem.since_frontier_move(history)}."]
    return "\n".join(out) + "\n"


def _values(xs: list) -> str:
    return ", ".join(code(mem.value_key(x) if isinstance(x, (dict, list)) or x == "" else x) for x in xs) or "—"


def _tags(*tags: str) -> list[str]:
    return list(dict.fromkeys(t for t in tags if t))


def _knob_table(coverage: dict[str, dict], spec: LoopSpec) -> list[str]:
    out = ["| knob | category | values | tried | untried |", "|---|---|---:|---|---|"]
    for k, c in coverage.items():
        out.append(f"| `{k}` | {spec.knobs[k].category} | {c['values']} | {_values(c['tried'])} | {_values(c['untried'])} |")
    return out


def _coverage_total(coverage: dict[str, dict]) -> tuple[int, int]:
    return sum(len(c["tried"]) for c in coverage.values()), sum(c["values"] for c in coverage.values())


def _knobs(spec: LoopSpec, state: dict) -> str:
    cov = mem.knob_coverage(spec, state.get("history") or [])
    if not cov:
        return "## Knob coverage\n\nThe loop file declares no knobs: every change is an env change or a code patch.\n"
    tried, total = _coverage_total(cov)
    return "\n".join(["## Knob coverage", "", f"{tried} of {total} declared values have run.", ""]
                     + _knob_table(cov, spec)) + "\n"


def _retros(state: dict, src: str) -> str:
    retros = state.get("retrospectives") or []
    out = ["## Retrospectives", ""]
    for r in retros:
        label = f"retrospective at iteration {r.get('iteration')}"
        moved = "moved" if r.get("frontier_moved") else "had not moved"
        why = f" ({_prose(r['why'])})" if r.get("why") else ""
        out.append(f"- {_link(src, label, str(r.get('page') or ''))}{why}: the frontier {moved} since the one before")
    if not retros:
        out.append("No retrospective yet.")
    return "\n".join(out) + "\n"


def _earlier(spec: LoopSpec, state: dict, src: str) -> str:
    """The runs a ``--fresh`` start replaced: their retrospectives and observations stay in the wiki, linked
    from here (they were orphans once the page was made from the new run alone)."""
    out = ["## Earlier runs of this loop", ""]
    for e in state.get("earlier") or []:
        if not isinstance(e, dict):
            continue
        best = f", best {e['best']} ({_pct(e['gain_pct'])})" if e.get("best") and e.get("gain_pct") is not None else ""
        out.append(f"- started {e.get('started') or '—'}: {e.get('experiments', 0)} experiment(s){best}; "
                   f"{_prose(str(e.get('stop_reason') or 'no stop recorded'))}")
        retros = e.get("retrospectives") if isinstance(e.get("retrospectives"), list) else []
        out += [f"    - {_link(src, f'retrospective {n}', str(page))}" for n, page in enumerate(retros, 1)]
        model, lane = str(e.get("model") or spec.model), str(e.get("lane") or spec.lane)  # its own, before an edit
        said = e.get("observations") if isinstance(e.get("observations"), list) else []
        obs = [_link(src, str(x), observation_path(model, lane, str(x))) for x in said]
        if obs:
            out.append("    - observations: " + ", ".join(obs))
    return "\n".join(out) + "\n"


def loop_page(spec: LoopSpec, state: dict, memory: dict[str, dict]) -> pages.Page:
    """``loops/<name>.md``: the loop's status, best, frontier, hypotheses, categories, knobs, retrospectives."""
    name = str(state.get("name") or spec.name)
    src = loop_path(name)
    body = (f"# Loop: {name}\n\n" + pages.region("loop-status", _status(spec, state))
            + "\n" + pages.region("loop-best", _best(spec, state, src))
            + ("\n" + pages.region("loop-gap", gap) if (gap := gap_section(state, src)) else "")
            + "\n" + pages.region("loop-frontier", _frontier(spec, state, src, name))
            + "\n" + pages.region("loop-device-time", "\n".join(device_markdown(device_time(state))))
            + ("\n" + pages.region("loop-combinations", "\n".join(combos)) if (combos := combo_markdown(
                combinations(state))) else "")
            + ("\n" + pages.region("loop-screens", "\n".join(screens)) if (screens := screen_markdown(state)) else "")
            + "\n" + pages.region("loop-hypotheses", _hypotheses(spec, state, src))
            + "\n" + pages.region("loop-categories", _categories(state, memory))
            + "\n" + pages.region("loop-knobs", _knobs(spec, state))
            + "\n" + pages.region("loop-retrospectives", _retros(state, src))
            + ("\n" + pages.region("loop-earlier", _earlier(spec, state, src)) if state.get("earlier") else ""))
    meta = {"title": f"Loop: {name}", "type": "loop", "tags": _tags("loop", spec.model, spec.lane),
            "model": spec.model, "lane": spec.lane, "variant": spec.variant,
            "status": str(state.get("status") or "running"), "stop_reason": state.get("stop_reason") or None,
            "best": (state.get("trunk") or {}).get("exp_id") or None,
            # the home page's loop table reads these two: the trunk's tokens/s, the chained gain over the baseline
            "best_tokens_per_s": (state.get("trunk") or {}).get("tokens_per_s"),
            "gain_pct": ((state.get("frontier") or [{}])[-1]).get("gain_pct")}
    return pages.Page(src, {k: v for k, v in meta.items() if v is not None}, body)


# ------------------------------------------------------------------ observation of one run

_PHRASES = {"supported": "made the step faster", "refuted": "made the step slower",
            "inconclusive": "did not settle the question", "invalid": "changed the model's math, so its speed does not count",
            "crash": "crashed"}


def _profile_sentence(record: dict) -> str:
    note = record.get("attribution_note")
    if isinstance(note, str) and note.strip():
        return note.strip().rstrip(".") + "."
    d = record.get("profile_diff")
    if isinstance(d, str) and d.strip():
        return d.strip().rstrip(".") + "."
    if not isinstance(d, dict):
        return ""
    moves = []
    for key, label in (("categories", "op category"), ("lines", "source line"), ("ops", "op")):
        rows = [r for r in d.get(key) or [] if isinstance(r, dict) and isinstance(r.get("delta_us"), (int, float))]
        if rows:
            r = max(rows, key=lambda r: abs(r["delta_us"]))
            moves.append(f"{label} {code(r.get('key'))} {r['delta_us']:+.1f} µs per step")
    step = d.get("step_ms")
    head = (f"In the profile the traced step went {step[0]} → {step[1]} ms"
            if isinstance(step, (list, tuple)) and len(step) == 2 and None not in step else "In the profile")
    return f"{head}; largest moves: {'; '.join(moves)}." if moves else (head + "." if step else "")


def observation_page(spec: LoopSpec, entry: dict, record: dict) -> pages.Page:
    """``observations/<model>/<lane>/<exp_id>.md``: what one run taught, in a sentence or two made from its data."""
    exp_id = str(entry.get("exp_id") or record.get("exp_id"))
    src = observation_path(spec.model, spec.lane, exp_id)
    verdict = str(entry.get("verdict") or record.get("verdict") or "inconclusive")
    gain = entry.get("gain_pct", record.get("gain_pct"))
    band = entry.get("noise_band_pct", record.get("noise_band_pct"))
    what = entry.get("describe") or record.get("description") or "the change"
    first = f"{code(what)} ({entry.get('category') or record.get('category') or 'other'}) {_PHRASES.get(verdict, verdict)}"
    if isinstance(gain, (int, float)):
        side = ("within" if isinstance(band, (int, float)) and abs(gain) <= band else "beyond")
        first += f": tokens/s {_pct(gain)}" + (f", {side} the noise band of ±{band:.2f} %" if isinstance(band, (int, float)) else "")
    reasons = [str(r) for r in (record.get("reasons") or entry.get("reasons") or [])]
    if verdict == "crash" and reasons:
        first += f" ({_prose(reasons[0])})"
    first += "; it was kept on the trunk." if entry.get("kept") else "."
    sem = record.get("semantics") or {}
    second = ""
    if sem.get("status") == "ok":
        second = (f"The loss trajectory matched its reference (max |Δloss| {sem.get('max_abs_delta')} ≤ {sem.get('tol')}"
                  f" over {sem.get('steps')} steps).")
    elif sem.get("status") == "changed":
        second = f"The loss trajectory moved: {_prose(sem.get('reason'))}."
    elif sem.get("status"):
        second = f"Semantics unchecked: {_prose(sem.get('reason') or 'no reference')}."
    prof = _profile_sentence(record)
    exp_page = str(entry.get("page") or record.get("page") or experiment_path(spec.model, spec.lane, exp_id))
    out = [" ".join(x for x in (first, second, prof) if x), "",
           f"- experiment: {_link(src, exp_id, exp_page)}"]
    if entry.get("hypothesis_page"):
        out.append(f"- hypothesis: {_link(src, _cell(entry.get('statement') or 'the hypothesis'), str(entry['hypothesis_page']))}")
    out.append(f"- loop: {_link(src, spec.name, loop_path(spec.name))}, iteration {entry.get('iteration', '—')}")
    if reasons:
        out += ["", "Why this verdict:", ""] + [f"- {_prose(r)}" for r in reasons]
    title = f"{what} → {verdict}"
    meta = {"title": title, "type": "observation", "tags": _tags("observation", "loop", spec.model, spec.lane),
            "experiment": exp_id, "source": loop_path(spec.name)}
    return pages.Page(src, meta, f"# {escape(title)}\n\n" + pages.region("observation", "\n".join(out) + "\n"))
