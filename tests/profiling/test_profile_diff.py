"""`tools profile diff` on real profiles: ops matched across compiles, lines first, JSON out; attribution_note."""

from __future__ import annotations

import copy
import json

import pytest
from _prof_helpers import line_row, model_line
from click.testing import CliRunner

from tools.cli import cli
from tools.profiling import diff

pytestmark = pytest.mark.slow
GATE = '@ c(lp["w_gate_LxDxF"])'


def test_generated_names_do_not_line_up_but_matches_do(summaries):
    a, b = summaries["fp32"], summaries["fp32_remat"]
    sa = {o["op"]: (o["source"], o["category"], o["sig"]) for o in a["ops"]}
    sb = {o["op"]: (o["source"], o["category"], o["sig"]) for o in b["ops"]}
    # The trap is real: many names exist in both compiles but name different ops.
    assert sum(1 for n in set(sa) & set(sb) if sa[n] != sb[n]) >= 10
    d = diff.diff(a, b, top=10_000)
    rows = d["ops"]
    assert d["matched"]["exact"] >= 0.8 * len(a["ops"])
    for r in rows:
        if r["match"] == "exact":
            assert sa[r["a_op"]] == sb[r["b_op"]]
        if r["match"] in ("exact", "line", "shape"):
            assert r["a_op"] in sa and r["b_op"] in sb
    renamed = [r for r in rows if r["match"] == "exact" and r["a_op"] != r["b_op"]]
    assert renamed and all(r["key"] == f"{r['a_op']} → {r['b_op']}" for r in renamed)
    # every op of both runs is in exactly one row
    assert sorted(r["a_op"] for r in rows if r["a_op"] != "—") == sorted(sa)
    assert sorted(r["b_op"] for r in rows if r["b_op"] != "—") == sorted(sb)
    # remat recomputes the forward: B has more ops, on the same lines
    assert d["matched"]["only in B"] > d["matched"]["only in A"]


def test_same_program_matches_every_op_exactly(summaries):
    d = diff.diff(summaries["fp32"], summaries["fp32_again"], top=10_000)
    assert d["matched"]["exact"] == len(summaries["fp32"]["ops"])
    assert not d["matched"]["only in A"] and not d["matched"]["only in B"]


def test_diff_cli_markdown_and_json(profiles):
    a, b = str(profiles["fp32"]), str(profiles["fp32_remat"])
    res = CliRunner().invoke(cli, ["profile", "diff", a, b, "--top", "5"])
    assert res.exit_code == 0, res.output
    out = res.output
    assert out.index("**Source lines**") < out.index("**Ops**") < out.index("**Categories**")
    assert " → " in out and "exact" in out
    res = CliRunner().invoke(cli, ["profile", "diff", a, b, "--json", "--top", "5"])
    data = json.loads(res.output)
    assert {"lines", "ops", "categories", "matched", "step_ms", "op_time_ms"} <= set(data)
    deltas = [abs(r["delta_us"]) for r in data["lines"]]
    assert deltas == sorted(deltas, reverse=True) and len(data["lines"]) == 5
    assert all(r["key"].startswith("llama_train.py:") and "code" in r for r in data["lines"])


def test_a_line_that_only_moved_is_matched_to_its_old_place(summaries):
    a = summaries["fp32"]
    b = copy.deepcopy(a)  # the same run, as if two lines had been inserted above every line of the model
    for r in b["source_lines"]:
        r["location"] = f"llama_train.py:{r['line'] + 2}"
    for o in b["ops"]:
        o["source"] = f"llama_train.py:{int(o['source'].split(':')[1]) + 2}" if o["source"] else ""
    d = diff.diff(a, b, top=10_000)
    assert all(r["delta_us"] == 0 for r in d["lines"])
    assert d["matched"]["exact"] == len(a["ops"])
    r = next(r for r in d["lines"] if r["key"] == f"llama_train.py:{model_line(GATE)}")
    assert r["moved_to"] == f"llama_train.py:{model_line(GATE) + 2}"


def _faster(s: dict, text: str, factor: float) -> dict:
    """``s`` with the op time of one model line scaled by ``factor`` (what a faster kernel there would show)."""
    out = copy.deepcopy(s)
    row = line_row(out, text)
    cut = row["self_us"] * (1 - factor)
    row["self_us"] *= factor
    for cat, t in row["categories"].items():
        c = next(c for c in out["categories"] if c["category"] == cat)
        c["self_us"] -= t * (1 - factor)
    out["total_op_self_us"] -= cut
    if (out.get("steps") or {}).get("median_ms") and out.get("n_steps"):
        out["steps"]["median_ms"] -= cut / out["n_steps"] / 1e3  # the step is shorter by what the ops saved
    return out


def test_attribution_note_says_where_a_gain_came_from(summaries):
    base = summaries["fp32"]
    same = copy.deepcopy(base)  # the same op times (timings of real reruns are noise on a shared machine)
    # Op time did not move while the traced step shortened: a +20 % gain is idle/host time.
    shorter = copy.deepcopy(base)
    shorter["steps"]["median_ms"] = base["steps"]["median_ms"] / 1.2
    note = diff.attribution_note(base, shorter, 20.0)
    assert note and "idle/host time" in note and "ms" in note and "+20.0 %" in note
    # A user's report: the note took the step change from the timed gain, so traces that went the other way (or did
    # not move) were read as explaining it; and runs of the same optimized HLO got lines that "moved most".
    assert diff.attribution_note(base, same, 20.0).startswith("The traced runs do not show the +20.0 % tokens/s gain")
    assert diff.attribution_note(shorter, base, 20.0).startswith("The traced runs do not show")
    assert diff.attribution_note(base, shorter, 20.0, same_hlo=True).startswith("Both runs compiled the same")
    # A line made much faster: op time explains the gain, and the note names that line.
    var = _faster(base, GATE, 0.1)
    saved_ms = (base["total_op_self_us"] - var["total_op_self_us"]) / base["n_steps"] / 1e3
    step = base["steps"]["median_ms"]
    gain = 100 * (step / (step - saved_ms) - 1)
    note = diff.attribution_note(base, var, gain)
    assert note.startswith("Op time explains most of the") and f"llama_train.py:{model_line(GATE)}" in note
    assert "(100% of the step-time change)" in note
    # A slowdown from op time reads the same way round: going back (from the shorter step) loses 1 - 1/(1 + gain)
    # of the tokens/s (not -gain, which is far off once the profiled line holds a large share of the step)
    back = diff.attribution_note(var, base, 100 * (1 / (1 + gain / 100) - 1))
    assert back.startswith("Op time explains") and "tokens/s loss" in back and "(100% of the step-time change)" in back
    # Not enough data.
    assert diff.attribution_note(base, same, 0.0) is None
    assert diff.attribution_note({}, same, 5.0) is None
    assert diff.attribution_note(base, {"steps": {}}, 5.0) is None


def test_without_an_hlo_dump_ops_fall_back_to_names(profiles, summaries, tmp_path):
    import shutil

    from tools.profiling import summary

    shutil.copytree(profiles["fp32"] / "trace", tmp_path / "trace")  # the trace alone, no HLO dump
    bare = summary.summarize(tmp_path, use_xprof=False)
    assert bare["attributed_pct"] == 0 and all(not o["sig"] for o in bare["ops"])
    d = diff.diff(bare, summaries["fp32"], top=10_000)
    assert d["matched"]["name"] == len(bare["ops"]) and all(r["delta_us"] == 0 for r in d["ops"])
    # the same trace on both sides: no line or category moved ("unmapped -4102", a line "+738.9" were shown), and
    # both the diff and the summary say why the mapping is missing
    assert d["lines"] == [] and d["categories"] == [] and "A has no optimized-HLO dump" in d["note"]
    assert "**Note:** A has no optimized-HLO dump" in diff.render_markdown(d)
    assert "No optimized-HLO dump beside the trace" in summary.render_markdown(bare)
