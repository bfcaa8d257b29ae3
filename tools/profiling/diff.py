"""Op-by-op and source-line deltas between two profile summaries (per-step times)."""

from __future__ import annotations


def _per_step(s: dict) -> float:
    return float(max(s.get("n_steps") or 1, 1))


def diff(a: dict, b: dict, top: int = 15) -> dict:
    pa, pb = _per_step(a), _per_step(b)
    ops = _delta({k: v / pa for k, v in a["all_ops"].items()}, {k: v / pb for k, v in b["all_ops"].items()})
    la = {r["location"]: r["self_us"] / pa for r in a["source_lines"]}
    lb = {r["location"]: r["self_us"] / pb for r in b["source_lines"]}
    ca = {c["category"]: c["self_us"] / pa for c in a["categories"]}
    cb = {c["category"]: c["self_us"] / pb for c in b["categories"]}
    return {
        "a": a["folder"], "b": b["folder"],
        "step_ms": (a["steps"].get("median_ms"), b["steps"].get("median_ms")),
        "op_time_ms": (a["total_op_self_us"] / pa / 1e3, b["total_op_self_us"] / pb / 1e3),
        "ops": ops[:top], "lines": _delta(la, lb)[:top], "categories": _delta(ca, cb),
    }


def _delta(a: dict[str, float], b: dict[str, float]) -> list[dict]:
    rows = [{"key": k, "a_us": round(a.get(k, 0.0), 3), "b_us": round(b.get(k, 0.0), 3),
             "delta_us": round(b.get(k, 0.0) - a.get(k, 0.0), 3)} for k in set(a) | set(b)]
    return sorted(rows, key=lambda r: -abs(r["delta_us"]))


def render_markdown(d: dict) -> str:
    sa, sb = d["step_ms"]
    oa, ob = d["op_time_ms"]
    out = [f"A: `{d['a']}`", f"B: `{d['b']}`", "",
           f"Median traced step: {sa} ms → {sb} ms; op self time per step {oa:.3f} ms → {ob:.3f} ms.", ""]
    for title, rows in (("Source lines", d["lines"]), ("Ops", d["ops"]), ("Categories", d["categories"])):
        out += [f"**{title}** (µs per step, largest change first)", "", "| | A | B | Δ |", "|---|---:|---:|---:|"]
        out += [f"| `{r['key']}` | {r['a_us']:.1f} | {r['b_us']:.1f} | {r['delta_us']:+.1f} |" for r in rows]
        out.append("")
    return "\n".join(out)
