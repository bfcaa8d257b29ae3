"""Device-seconds per verdict: what the loop's answers cost on the machine. Every run's arms count (baseline reruns,
profiled runs, the reference's), measured by the runner's own clock (``runs.device_seconds``); the baseline,
calibration and reference checks are the loop's overhead, apart from its experiments and its screens (waves of moves
in one process, ``screening``)."""

from __future__ import annotations


def device_time(state: dict) -> dict:
    """Per experiment, per verdict, per kept gain and per frontier move, from the state document. States saved
    before experiments carried their cost give ``None`` where it is not known."""
    history = state.get("history") or []
    cut = float((state.get("usage") or {}).get("interrupted_s") or 0.0)  # runs a stop cut off, run again since
    total = float((state.get("usage") or {}).get("device_s") or 0.0) + cut
    known = [float(h["device_s"]) for h in history if isinstance(h.get("device_s"), (int, float))]
    verdicts: dict[str, dict] = {}
    for h in history:
        d = verdicts.setdefault(str(h.get("verdict") or "unknown"), {"experiments": 0, "device_s": 0.0})
        d["experiments"] += 1
        d["device_s"] = round(d["device_s"] + float(h.get("device_s") or 0.0), 1)
    for d in verdicts.values():
        d["mean_s"] = round(d["device_s"] / d["experiments"], 1)
    kept = sum(bool(h.get("kept")) for h in history)
    spent = sum(known)
    moves, before = [], 0.0  # differences of the rounded totals, so the moves add up to the total shown
    for i, row in enumerate(state.get("frontier") or []):
        at = row.get("device_s_total")
        moves.append({"iteration": row.get("iteration", 0), "exp_id": row.get("exp_id"),
                      "description": "baseline" if i == 0 else row.get("description"),
                      "gain_pct": row.get("gain_pct"), "device_s_total": at,
                      "device_s_since_previous": None if at is None else round(round(at, 1) - round(before, 1), 1)})
        before = at if at is not None else before
    complete = len(known) == len(history)
    waves = state.get("screens") or []
    screens_s = sum(float(w.get("device_s") or 0.0) for w in waves)
    return {"total_s": round(total, 1), "experiments": len(history),
            "experiments_s": round(spent, 1) if complete else None,
            "screens": len(waves), "screens_s": round(screens_s, 1), "interrupted_s": round(cut, 1),
            "overhead_s": round(total - spent - screens_s - cut, 1) if complete else None,
            "per_experiment_s": round(spent / len(known), 1) if known and complete else None,
            # what a kept gain cost: the experiments and the screens that ranked them (the search, not the set-up)
            "per_kept_gain_s": round((spent + screens_s) / kept, 1) if kept and complete else None,
            "per_verdict": verdicts, "frontier": moves}


def _s(v: float) -> str:
    return f"{v:.1f}" if abs(v) < 10 else f"{v:,.0f}"


def markdown(dt: dict) -> list[str]:
    """The loop page's section."""
    if not dt["total_s"]:
        return ["## Device time", "", "No device time recorded yet.", ""]
    out = ["## Device time", "",
           f"{_s(dt['total_s'])} device-seconds in all (every arm of every run, by the runner's clock)"
           + (f": {_s(dt['experiments_s'])} s on {dt['experiments']} experiments, "
              + (f"{_s(dt['screens_s'])} s on {dt['screens']} screen(s), " if dt.get("screens") else "")
              + (f"{_s(dt['interrupted_s'])} s on runs a stop cut off (run again), " if dt.get("interrupted_s") else "")
              + f"{_s(dt['overhead_s'])} s on the "
              f"baseline, calibration and reference checks; **{_s(dt['per_experiment_s'])} s per experiment**"
              if dt.get("experiments_s") is not None and dt["experiments"] else "")
           + (f", **{_s(dt['per_kept_gain_s'])} s per kept gain**" if dt.get("per_kept_gain_s") else "") + ".", ""]
    if dt["per_verdict"]:
        out += ["| verdict | experiments | device-seconds | per experiment |", "|---|---:|---:|---:|"]
        out += [f"| {v} | {d['experiments']} | {_s(d['device_s'])} | {_s(d['mean_s'])} |"
                for v, d in sorted(dt["per_verdict"].items(), key=lambda kv: -kv[1]["device_s"])]
        out.append("")
    moves = [m for m in dt["frontier"][1:] if m["device_s_since_previous"] is not None]
    if moves:
        out += ["| frontier move | over the baseline | device-seconds since the previous move | in all |",
                "|---|---:|---:|---:|"]
        out += [f"| {m['description'] or m['exp_id']} | "
                f"{'—' if m['gain_pct'] is None else format(m['gain_pct'], '+.1f') + ' %'} | "
                f"{_s(m['device_s_since_previous'])} | {_s(m['device_s_total'])} |" for m in moves]
        out.append("")
    return out
