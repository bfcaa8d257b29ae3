"""Screens as data (``screening`` runs them): which screened moves still speak for the current trunk, and the loop
page's section (each wave, what each move measured against its trunk in one process, and what the loop did with
it: confirmed on its own, or ruled out and why; its gain believed once read among its wave, ``shrink``)."""

from __future__ import annotations

import json

from .proposal import may_depend

CLEARLY_SLOWER_PCT = 5.0  # a move this much slower at the top of its screen's interval stays ruled out after a keep


def change_key(knobs: dict) -> str:
    return json.dumps(knobs, sort_keys=True, default=str)


def current(state: dict, env_knobs: frozenset[str] | set[str] = frozenset()) -> dict[str, dict]:
    """change key -> the latest screen row of that move that still holds: made on this trunk, or on an earlier one
    when no keep since then was in a category the move may depend on (``proposal.DEPENDS``), nor an environment
    change (an XLA flag recompiles every program: a change of its own environment, or of a knob in ``env_knobs``) or
    a code patch. Across such a keep two findings still hold: losses that left the trunk's (the move changes the
    model's math, whatever the trunk) and a move slower by more than ``CLEARLY_SLOWER_PCT`` at the top of its
    interval (a keep of a few percent does not turn it around). The kept move itself and the rest are screened
    again. A move whose own experiment ran after its screen is marked ``confirmed_by`` that experiment: the sweep
    reads the experiment, not the screen, and the move is not screened again until a keep it may depend on."""
    kept = [(h.get("iteration") or 0, str(h.get("category") or ""), _changes_env(h.get("change") or {}, env_knobs))
            for h in state.get("history") or [] if h.get("kept")]
    ran = [(h.get("iteration") or 0, change_key((h.get("change") or {}).get("knobs") or {}), h.get("exp_id"))
           for h in state.get("history") or [] if (h.get("change") or {}).get("kind", "knobs") == "knobs"]
    out: dict[str, dict] = {}
    for w in state.get("screens") or []:
        since = [(c, env) for i, c, env in kept if i >= (w.get("iteration") or 0)]
        for m in w.get("moves") or []:
            if w.get("processes_error" if m.get("screened_in") == "processes" else "error"):
                continue  # the part of the screen that failed speaks for none of its moves
            knobs = (m.get("change") or {}).get("knobs") or {}
            moved = any(env or may_depend(str(m.get("category") or ""), c) for c, env in since)
            if not knobs or (moved and not holds_across_keeps(m)):
                continue
            key = change_key(knobs)
            # its own experiment since the screen speaks louder than the screen (the sweep's own evidence), across
            # the keeps it does not depend on as the screen would: the move is not screened again on their account
            confirmed = next((e for i, k, e in ran if k == key and i >= (w.get("iteration") or 0)), None)
            out[key] = dict(m, wave=w.get("iteration"), trunk_exp=w.get("trunk_exp"), confirmed_by=confirmed)
    return out


def _changes_env(change: dict, env_knobs) -> bool:
    return bool(change.get("env")) or change.get("kind", "knobs") != "knobs" or \
        any(k in env_knobs for k in change.get("knobs") or {})


def holds_across_keeps(m: dict) -> bool:
    if m.get("losses") == "changed":
        return True
    hi = (m.get("interval_pct") or [None, None])[1]
    return m.get("outcome") == "slower" and isinstance(hi, (int, float)) and hi < -CLEARLY_SLOWER_PCT


OUTCOMES = {"confirm": "to confirm", "unscreened": "to confirm (no reading)", "slower": "ruled out: slower",
            "no gain": "ruled out: no faster", "broken": "ruled out: invalid or broken"}


def _pct(v) -> str:
    return "—" if not isinstance(v, (int, float)) else f"{v:+.1f} %"


def markdown(state: dict) -> list[str]:
    waves = state.get("screens") or []
    if not waves:
        return []
    out = ["## Screens", "",
           "Before the first proposal on a trunk, its untried flag moves ran together in one process against it "
           "(rotating blocks, read as the loop's statistic reads a run), and its environment moves (an XLA flag) "
           "as processes alternating with the trunk's, to rank them: a screen rules out, it never decides. A move "
           "it lets through is confirmed by an experiment of its own.", ""]
    for w in waves:
        failed = [f"the screen in one process failed: {w['error']}" if w.get("error") else "",
                  f"the screen in processes failed: {w['processes_error']}" if w.get("processes_error") else ""]
        out.append(f"**Before iteration {w.get('iteration')}**, on trunk `{w.get('trunk_exp')}`: "
                   f"{len(w.get('moves') or [])} moves, {w.get('device_s')} device-seconds"
                   + (f"; in one process, {w['rounds_why']}" if w.get("rounds_why") else "")
                   + "".join(f"; {f}" for f in failed if f) + "".join(
                       f"; in {how}, {f['moves']} readings whose true gains spread about ±{f['spread_pct']:.1f} % "
                       f"(σ {f['round_sd_pct']:.1f} % per round)" for how, f in (w.get("shrink") or {}).items())
                   + ".")
        out += ["", "| move | screened in | rounds | gain | believed | 95 % interval | losses | outcome |",
                "|---|---|---:|---:|---:|---|---|---|"]
        for m in sorted(w.get("moves") or [], key=lambda m: -(m.get("gain_pct") or -1e9)):
            lo, hi = m.get("interval_pct") or [None, None]
            interval = "—" if lo is None else f"[{lo:+.1f}, {hi:+.1f}] %"
            losses = m.get("losses") or "unchecked"
            if m.get("loss_diff") is not None:
                losses += f" ({m['loss_diff']})"
            what = OUTCOMES.get(m.get("outcome"), m.get("outcome") or "")
            if m.get("problem"):
                what += f": {m['problem']}"
            out.append(f"| `{m.get('describe')}` | {m.get('screened_in') or 'one process'} | {m.get('rounds')} | "
                       f"{_pct(m.get('gain_pct'))} | {_pct(m.get('believed_pct'))} | {interval} | {losses} | {what} |")
        out.append("")
    return out
