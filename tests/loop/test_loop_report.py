"""Loop memory and pages from a synthetic loop state: counts, closed topics, links, order, ranking, round trips.

Golden files in tests/loop/golden/ (regenerate with UPDATE_GOLDEN=1 and read the diff)."""

from __future__ import annotations

import copy
import os
from pathlib import Path

import pytest

from tools import pages, wikiscan
from tools import mdscan
from tools.loop import hypotheses, memory, report, retro_page
from tools.loop.proposal import Change, Proposal, ProposalError
from tools.loop.spec import parse
from tools.writer import Writer

GOLDEN = Path(__file__).parent / "golden"
TODAY = "2026-11-20"

SPEC = parse({
    "name": "cpu-loop", "model": "llama", "lane": "cpu-loop", "variant": "small/cpu",
    "command": "python train.py", "proposer": "llm", "target": {"tokens_per_s": 120000},
    "budget": {"runs": 20, "cost_usd": 5},
    "knobs": {
        "compute_dtype": {"flag": "--compute-dtype", "values": ["float32", "bfloat16"], "category": "precision"},
        "scan": {"flag": "--scan", "values": [False, True], "category": "compiler"},
        "remat": {"flag": "--remat", "values": ["none", "full", "dots_saveable"], "category": "memory"},
        "shape": {"category": "shape", "values": [{"batch": 16, "seq_len": 128}, {"batch": 32, "seq_len": 64}],
                  "flags": {"batch": "--batch", "seq_len": "--seq-len"}},
    }}, Path("loops/cpu-loop.yml"))
START = SPEC.start_config()
PATCH = "--- a/model.py\n+++ b/model.py\n@@ -1 +1 @@\n-x = attn(q, k)\n+x = flash(q, k)  # ``` fenced\n"


def exp_id(n: int) -> str:
    return f"2026-11-01-v{n + 1:03d}-cpu-loop-{n:03d}"


def entry(n: int, category: str, change: Change, verdict: str, gain: float | None, kept: bool = False,
          config: dict | None = None, statement: str = "") -> dict:
    return {"iteration": n, "exp_id": exp_id(n), "page": f"experiments/llama/cpu-loop/{exp_id(n)}.md",
            "hypothesis_page": f"hypotheses/llama/cpu-loop/{n:03d}-h.md", "category": category,
            "change": vars(change).copy(), "fingerprint": change.fingerprint(), "describe": change.describe(),
            "verdict": verdict, "gain_pct": gain, "noise_band_pct": 1.5,
            "tokens_per_s": None if gain is None else 1000 * (1 + gain / 100), "kept": kept, "proposer": "llm",
            "statement": statement or f"{change.describe()} makes the step faster", "expected_gain_pct": 5.0,
            "confidence": 0.5, "effort": 1.0, "reasons": [f"tokens/s {gain} % vs trunk"] if gain is not None else [],
            "config": config if config is not None else dict(START, **change.knobs)}


BF16 = {**START, "compute_dtype": "bfloat16"}
HISTORY = [
    entry(1, "precision", Change("knobs", knobs={"compute_dtype": "bfloat16"}), "supported", 12.0, kept=True),
    entry(2, "compiler", Change("knobs", knobs={"scan": True}), "refuted", -9.0, config={**BF16, "scan": True}),
    entry(3, "memory", Change("knobs", knobs={"remat": "full"}), "refuted", -20.0, config={**BF16, "remat": "full"}),
    entry(4, "memory", Change("env", env={"XLA_FLAGS": "--xla_remat_a"}), "refuted", -4.0, config=BF16),
    entry(5, "memory", Change("patch", patch=PATCH), "refuted", -3.0, config=BF16),
    entry(6, "memory", Change("knobs", knobs={"remat": "dots_saveable"}), "refuted", -2.5,
          config={**BF16, "remat": "dots_saveable"}),
    entry(7, "kernel", Change("patch", patch=PATCH.replace("flash", "splash")), "invalid", 30.0, config=BF16),
    entry(8, "memory", Change("env", env={"XLA_FLAGS": "--xla_remat_b"}), "refuted", -6.0, config=BF16),
    entry(9, "compiler", Change("env", env={"XLA_FLAGS": "--xla_fast"}), "supported", 4.0, kept=True, config=BF16),
    entry(10, "shape", Change("knobs", knobs={"shape": {"batch": 32, "seq_len": 64}}), "inconclusive", 0.4,
          config={**BF16, "shape": {"batch": 32, "seq_len": 64}}),
    entry(11, "shape", Change("knobs", knobs={"shape": {"batch": 16, "seq_len": 128}}), "crash", None, config=BF16),
]


def state(history=HISTORY) -> dict:
    spent = 64.0  # device-seconds: the baseline's, then each experiment's (a crash stops early), as the engine counts
    frontier = [{"iteration": 0, "exp_id": exp_id(0), "tokens_per_s": 1000.0, "mfu_percent": None, "gain_pct": 0.0,
                 "description": "baseline", "device_s_total": spent}]
    history = [dict(e) for e in history]
    for e in history:
        e["device_s"] = 31.5 if e["verdict"] == "crash" else 150.0 + 10 * e["iteration"]
        spent += e["device_s"]
        e["device_s_total"] = spent
        if e["kept"]:
            frontier.append({"iteration": e["iteration"], "exp_id": e["exp_id"], "page": e["page"],
                             "tokens_per_s": round(frontier[-1]["tokens_per_s"] * (1 + e["gain_pct"] / 100), 1),
                             "mfu_percent": 31.5, "step_gain_pct": e["gain_pct"], "description": e["describe"],
                             # as the engine files it: the interleaved gains chained over the baseline
                             "gain_pct": round(100 * ((1 + frontier[-1]["gain_pct"] / 100)
                                                      * (1 + e["gain_pct"] / 100) - 1), 3),
                             "device_s_total": spent})
    last = frontier[-1]
    return {"name": "cpu-loop", "model": "llama", "lane": "cpu-loop", "variant": "small/cpu", "status": "stopped",
            "stop_reason": "double plateau: two retrospectives with no frontier move",
            "started": "2026-11-01T10:00:00+00:00", "updated": "2026-11-01T11:02:03+00:00",
            "iteration": len(history),
            "trunk": {"exp_id": last["exp_id"], "config": BF16, "env": {"XLA_FLAGS": "--xla_fast"}, "commit": "abc1234",
                      "tokens_per_s": last["tokens_per_s"], "mfu_percent": last["mfu_percent"]},
            "frontier": frontier, "history": list(history),
            "retrospectives": [{"iteration": 6, "page": "analyses/cpu-loop-retrospective-1.md", "frontier_moved": True},
                               {"iteration": 11, "page": "analyses/cpu-loop-retrospective-2.md",
                                "frontier_moved": False}],
            "usage": {"runs": 12, "wall_s": 3723.4, "llm_tokens": 48210, "cost_usd": 0.4213, "device_s": spent},
            "pending": None}


def proposal(statement, kind="knobs", gain=5.0, conf=0.5, effort=1.0, category="compiler", **change) -> Proposal:
    return Proposal(statement, "because", "tokens/s up", "tokens/s flat", Change(kind, **change), category, gain, conf,
                    effort, "llm")


UNTRIED = [
    proposal("low score", gain=2.0, conf=0.5, effort=2.0, knobs={"scan": False}),                 # 0.5
    proposal("best: a kernel", gain=20.0, conf=0.6, effort=3.0, category="kernel", kind="patch", patch=PATCH + "+y\n"),  # 4
    proposal("tied second, first given", gain=6.0, conf=0.5, effort=1.0, category="parallelism", kind="env",
             env={"XLA_FLAGS": "--xla_tpu_megacore"}),                                             # 3
    proposal("tied second, given later", gain=3.0, conf=1.0, effort=1.0, kind="env", env={"XLA_FLAGS": "--z"}),  # 3
    proposal("closed topic idea", gain=50.0, conf=0.9, effort=1.0, category="memory", kind="env",
             env={"XLA_FLAGS": "--xla_remat_c"}),                                                   # 45
    proposal("already tried", gain=99.0, conf=1.0, effort=1.0, knobs={"scan": True}),             # dropped
    proposal("best: a kernel (duplicate)", gain=20.0, conf=0.6, effort=3.0, category="kernel", kind="patch",
             patch=PATCH + "+y\n"),                                                                 # dropped
]


# ------------------------------------------------------------------ memory

def test_memory_counts_verdicts_and_closes_a_topic_after_five_refutations():
    m = memory.compute(HISTORY)
    assert list(m)[:9] == list(pages.LOOP_CATEGORIES)
    assert m["memory"] == {"tried": 5, "supported": 0, "refuted": 5, "invalid": 0, "inconclusive": 0, "crash": 0,
                           "kept": 0, "best_gain_pct": -2.5, "last_iteration": 8, "closed": True}
    assert m["compiler"]["refuted"] == 1 and m["compiler"]["supported"] == 1 and m["compiler"]["kept"] == 1
    assert m["compiler"]["best_gain_pct"] == 4.0 and not m["compiler"]["closed"]
    assert m["kernel"]["invalid"] == 1 and m["kernel"]["best_gain_pct"] is None  # an invalid speedup is no gain
    assert m["shape"]["crash"] == 1 and m["shape"]["last_iteration"] == 11
    assert m["data"]["tried"] == 0 and memory.closed_topics(m) == ["memory"]
    # four refutations are not enough; five with one supported are not closed either
    assert not memory.compute(HISTORY[:7])["memory"]["closed"]
    late_win = HISTORY + [entry(12, "memory", Change("knobs", knobs={"remat": "none"}), "supported", 3.0, True)]
    assert not memory.compute(late_win)["memory"]["closed"]
    assert memory.compute([{"iteration": 0, "category": None, "verdict": "inconclusive"}])["other"]["tried"] == 0


def test_knob_coverage_streak_and_frontier_idle_count():
    cov = memory.knob_coverage(SPEC, HISTORY)
    assert cov["compute_dtype"] == {"values": 2, "tried": ["bfloat16", "float32"], "untried": []}
    assert cov["remat"] == {"values": 3, "tried": ["dots_saveable", "full", "none"], "untried": []}
    assert cov["scan"] == {"values": 2, "tried": [False, True], "untried": []}
    assert cov["shape"]["tried"] == [{"batch": 16, "seq_len": 128}, {"batch": 32, "seq_len": 64}]
    early = memory.knob_coverage(SPEC, HISTORY[:1])
    assert early["scan"]["untried"] == [True] and early["remat"]["untried"] == ["full", "dots_saveable"]
    no_config = [dict(HISTORY[1], config={})]  # without a config the change's knobs count
    assert memory.knob_coverage(SPEC, no_config, include_start=False)["scan"]["tried"] == [True]
    assert memory.knob_coverage(SPEC, no_config)["scan"]["tried"] == [False, True]  # the baseline ran False
    assert memory.streak(HISTORY) == ("shape", 2)
    assert memory.streak(HISTORY[:6]) == ("memory", 4)
    assert memory.streak([]) == ("", 0)
    assert memory.since_frontier_move(HISTORY) == 2
    assert memory.since_frontier_move(HISTORY[:8]) == 7
    assert memory.since_frontier_move(HISTORY[1:8]) == 7  # nothing kept: every iteration
    assert memory.change_kinds(HISTORY) == {"knobs": 6, "single_knob": 6, "env": 3, "patch": 2}


# ------------------------------------------------------------------ loop page

def _links(page: pages.Page) -> list[str]:
    wp = wikiscan.parse_page(page.path, pages.render(page.meta, page.body))
    return [mdscan.resolve(page.path, mdscan.split_target(ln.target)[0]) for ln in wp.links if ln.kind == "md"]


def test_loop_page_links_orders_and_validates():
    s = state()
    page = report.loop_page(SPEC, s, memory.compute(s["history"]))
    assert page.path == "loops/cpu-loop.md" and page.type == "loop"
    assert [p for p in pages.validate(page.path, page.meta, page.body) if p.severity == "error"] == []
    assert page.meta["best"] == exp_id(9) and page.meta["status"] == "stopped"
    assert page.meta["stop_reason"].startswith("double plateau")
    body = page.body
    assert set(pages.regions(body)) == {"loop-status", "loop-best", "loop-frontier", "loop-device-time",
                                        "loop-hypotheses", "loop-categories", "loop-knobs", "loop-retrospectives"}
    assert "memory page" in pages.regions(body)["loop-status"]
    assert "1 h 02 min of wall time" in body and "48,210 LLM tokens ($0.421)" in body
    links = _links(page)
    for e in HISTORY:  # every hypothesis links its experiment and its hypothesis page, relative to loops/
        assert f"(../{e['page']})" in body and e["page"] in links
        assert f"(../{e['hypothesis_page']})" in body
    assert f"experiments/llama/cpu-loop/{exp_id(0)}.md" in links  # the baseline, from the frontier table
    assert "analyses/cpu-loop-retrospective-2.md" in links
    rows = [ln for ln in pages.regions(body)["loop-hypotheses"].splitlines() if ln.startswith("| ") and ln[2].isdigit()]
    assert [int(r.split("|")[1]) for r in rows] == list(range(1, 12))  # in iteration order
    assert "| supported | +12.00 % (band ±1.50) | **kept** |" in rows[0]
    frontier = pages.regions(body)["loop-frontier"]
    assert frontier.count("\n| ") == 4  # header, baseline, 2 moves (the separator row starts with |-)
    assert "+16.48 %" in frontier  # 1.12 * 1.04 over the baseline
    assert '<div class="arw-loop-plot" data-loop="cpu-loop"></div>' in frontier
    cats = pages.regions(body)["loop-categories"]
    assert "| memory | 5 | 0 | 5 |" in cats and "**closed**" in cats and "**memory**" in cats
    assert "2 in a row from `shape`" in cats
    knobs = pages.regions(body)["loop-knobs"]
    assert "9 of 9 declared values have run" in knobs and "| `remat` | memory | 3 |" in knobs
    assert '`shape={"batch": 16, "seq_len": 128}`' in pages.regions(body)["loop-best"]


def test_loop_page_keeps_what_people_write_and_handles_a_fresh_state(tmp_path):
    w = Writer(tmp_path / "wiki", today=TODAY)
    fresh = dict(state([]), status="running", stop_reason=None, trunk=None, frontier=[], retrospectives=[],
                 pending={"iteration": 1, "phase": "running", "proposal": {"statement": "bf16 <b>faster</b>"}})
    page = report.loop_page(SPEC, fresh, memory.compute([]))
    assert "stop_reason" not in page.meta and "best" not in page.meta
    assert "No baseline yet." in page.body and "no hypothesis tested yet" in page.body
    assert "Iteration 1 is in progress (running): bf16 &lt;b&gt;faster&lt;/b&gt;" in page.body
    w.write_page(page)
    path = tmp_path / "wiki/loops/cpu-loop.md"
    path.write_text(path.read_text() + "\n## Notes by a person\n\nTry the splash kernel next.\n")
    s = state()
    assert w.write_page(report.loop_page(SPEC, s, memory.compute(s["history"]))) == "updated"
    text = path.read_text()
    assert "Try the splash kernel next." in text and exp_id(11) in text and "No baseline yet." not in text


def test_loop_page_matches_golden_file():
    s = state()
    page = report.loop_page(SPEC, s, memory.compute(s["history"]))
    _golden("loop_page.md", pages.render(page.meta, page.body))


def _golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("UPDATE_GOLDEN"):
        path.parent.mkdir(exist_ok=True)
        path.write_text(text)
    assert text == path.read_text()


# ------------------------------------------------------------------ retrospective

def test_retrospective_ranks_untried_ideas_and_says_what_next():
    s = state()
    page = retro_page.retrospective_page(SPEC, s, memory.compute(s["history"]), UNTRIED, 2)
    assert page.path == "analyses/cpu-loop-retrospective-2.md" and page.type == "analysis"
    assert [p for p in pages.validate(page.path, page.meta, page.body) if p.severity == "error"] == []
    body = page.body
    assert "frontier stuck for **2** iterations (last move at iteration 9)" in body
    assert "single-knob : structural = 6 : 5" in body
    assert "Never tried: parallelism, data, code, other." in body
    table = body.split("## Untried ideas, best first")[1].split("## What next")[0]
    ranked = [ln.split("|")[2].strip() for ln in table.splitlines() if ln.startswith("| ") and ln[2].isdigit()]
    assert ranked == ["closed topic idea", "best: a kernel", "tied second, first given", "tied second, given later",
                      "low score"]  # by score; ties keep their order; tried and duplicate ideas dropped
    assert "| memory (closed topic) |" in table and "| 45.00 |" in table
    nxt = body.split("## What next")[1]
    assert "Next: best: a kernel (kernel," in nxt and "score 4.00" in nxt  # the closed topic is skipped
    assert "Leave the closed topics alone: memory." in nxt
    assert "(../loops/cpu-loop.md)" in body
    _golden("retrospective.md", pages.render(page.meta, page.body))


def test_what_next_switches_away_from_a_stuck_streak():
    hist = HISTORY[:1] + [entry(i, "compiler", Change("knobs", knobs={"scan": i % 2 == 0}), "refuted", -1.0)
                          for i in range(2, 6)]
    s = state(hist)
    ideas = [proposal("more compiler", gain=10.0), proposal("a shape idea", gain=4.0, category="shape",
                                                            knobs={"shape": {"batch": 32, "seq_len": 64}})]
    body = retro_page.retrospective_page(SPEC, s, memory.compute(hist), ideas, 1).body
    assert "Next: a shape idea (shape," in body and "away from `compiler`" in body
    body = retro_page.retrospective_page(SPEC, s, memory.compute(hist), [], 1).body
    assert "No untried idea is left" in body and "| — | no untried idea |" in body


# ------------------------------------------------------------------ observations

def test_observation_pages_say_what_one_run_taught():
    ok = {"semantics": {"status": "ok", "max_abs_delta": 0.004, "tol": 0.03, "steps": 12},
          "reasons": ["tokens/s +12.00 % vs baseline, noise band ±1.50 %", "semantics held"],
          "profile_diff": {"step_ms": (20.1, 17.9), "categories": [{"key": "fusion", "a_us": 900.0, "b_us": 700.0,
                                                                    "delta_us": -200.0}],
                           "lines": [{"key": "model.py:12", "a_us": 1.0, "b_us": 51.0, "delta_us": 50.0}], "ops": []}}
    page = report.observation_page(SPEC, HISTORY[0], ok)
    assert page.path == f"observations/llama/cpu-loop/{exp_id(1)}.md" and page.type == "observation"
    assert page.meta["experiment"] == exp_id(1) and page.meta["source"] == "loops/cpu-loop.md"
    assert not [p for p in pages.validate(page.path, page.meta, page.body) if p.severity == "error"]
    first = pages.regions(page.body)["observation"].split("\n")[0]
    assert "`compute_dtype=bfloat16` (precision) made the step faster: tokens/s +12.00 %, beyond the noise band" in first
    assert "kept on the trunk" in first and "max |Δloss| 0.004 ≤ 0.03 over 12 steps" in first
    assert "20.1 → 17.9 ms" in first and "op category `fusion` -200.0 µs" in first
    assert f"(../../../{HISTORY[0]['page']})" in page.body and "(../../../loops/cpu-loop.md)" in page.body
    inc = report.observation_page(SPEC, HISTORY[9], {"attribution_note": "Nothing moved in the profile"})
    assert "within the noise band of ±1.50 %" in inc.body and "Nothing moved in the profile." in inc.body
    bad = report.observation_page(SPEC, HISTORY[6], {"semantics": {"status": "changed", "reason": "max |Δloss| 0.2"},
                                                     "reasons": ["semantics changed: <loss>"]})
    assert "changed the model's math" in bad.body and "The loss trajectory moved: max |Δloss| 0.2." in bad.body
    assert "&lt;loss&gt;" in bad.body and "<loss>" not in bad.body
    crash = report.observation_page(SPEC, HISTORY[10], {"reasons": ["the run timed out after 600 s"]})
    assert "crashed (the run timed out after 600 s)." in crash.body


# ------------------------------------------------------------------ hypothesis pages

def test_hypothesis_page_round_trips_through_the_page_reader(tmp_path):
    p = Proposal("Flash attention <script>x</script> cuts the attention time", "fewer HBM round trips",
                 "attention ops shrink in the profile", "tokens/s flat or semantics changed",
                 Change("patch", patch=PATCH + "+<!-- tools:end hypothesis -->\n"), "kernel", 8.0, 0.6, 3.0, "llm")
    page = hypotheses.hypothesis_page(SPEC, p, "007-flash", "open", None)
    assert page.path == "hypotheses/llama/cpu-loop/007-flash.md"
    assert not [x for x in pages.validate(page.path, page.meta, page.body) if x.severity == "error"]
    m = page.meta
    assert (m["model"], m["lane"], m["loop"], m["status"], m["category"], m["author"]) == \
        ("llama", "cpu-loop", "cpu-loop", "open", "kernel", "llm")
    assert m["priority"] == 1.6 and m["expected_gain"] == 8.0 and m["change"]["kind"] == "patch"
    assert "experiment" not in m and "Open: not tested yet." in page.body
    assert "<script>" not in page.body and "````diff" in page.body  # the patch holds ``` so the fence is longer
    assert set(pages.regions(page.body)) == {"hypothesis", "hypothesis-verdict"}  # the patch did not close a region
    Writer(tmp_path, today=TODAY).write_page(page)
    meta, body = pages.split((tmp_path / page.path).read_text())
    back = Proposal.from_dict(hypotheses.hypothesis_from_page(meta, body, page.path))
    assert (back.statement, back.mechanism, back.predicted_signal, back.falsification) == \
        (p.statement, p.mechanism, p.predicted_signal, p.falsification)
    assert back.change == p.change and back.category == "kernel" and back.score == p.score
    assert back.proposer == "llm" and back.hypothesis_page == page.path
    filed = hypotheses.hypothesis_page(SPEC, p, "007-flash", "invalid", f"experiments/llama/cpu-loop/{exp_id(7)}.md")
    assert filed.meta["status"] == "refuted" and filed.meta["verdict"] == "invalid"
    assert filed.meta["experiment"] == exp_id(7)
    assert f"**invalid** in [{exp_id(7)}](../../../experiments/llama/cpu-loop/{exp_id(7)}.md)" in filed.body
    testing = hypotheses.hypothesis_page(SPEC, p, "007-flash", "testing", exp_id(7))
    assert f"Testing in [{exp_id(7)}](../../../experiments/llama/cpu-loop/{exp_id(7)}.md)" in testing.body
    assert hypotheses.hypothesis_page(SPEC, p, "x", "crash", None).meta["status"] == "abandoned"
    with pytest.raises(ValueError, match="not a hypothesis status"):
        hypotheses.hypothesis_page(SPEC, p, "x", "maybe", None)


def test_hand_written_hypothesis_pages_are_read_tolerantly_but_the_change_strictly():
    meta = {"title": "Turn on scan over layers", "type": "hypothesis", "category": "compiler", "confidence": "high",
            "effort": "small", "expected_gain": "+5 %", "author": "alexey", "change": {"kind": "knobs",
                                                                                        "knobs": {"scan": True}}}
    d = hypotheses.hypothesis_from_page(meta, "# Turn on scan over layers\n\nI think it helps.\n")
    p = Proposal.from_dict(d)
    assert p.statement == "Turn on scan over layers" == p.mechanism
    assert "noise band" in p.predicted_signal and "noise band" in p.falsification
    assert (p.confidence, p.effort, p.expected_gain_pct, p.proposer) == (0.8, 1.0, 5.0, "alexey")
    body = ("# T\n\n## Statement\n\nScan cuts compile time.\n\n## Why\n\nOne layer body.\n\n"
            "## Predicted signal\n\nCompile drops.\n")
    d = hypotheses.hypothesis_from_page({"change": {"kind": "knobs", "knobs": {"scan": True}}}, body)
    assert (d["statement"], d["mechanism"], d["predicted_signal"], d["category"]) == \
        ("Scan cuts compile time.", "One layer body.", "Compile drops.", "other")
    with pytest.raises(ProposalError, match="frontmatter `change` must be a mapping"):
        hypotheses.hypothesis_from_page({"title": "No change given"}, "")
    with pytest.raises(ProposalError, match="unknown keys: flag"):
        hypotheses.hypothesis_from_page({"title": "x", "change": {"kind": "knobs", "flag": "--scan"}}, "")
    with pytest.raises(ProposalError, match="no statement"):
        hypotheses.hypothesis_from_page({"change": {"kind": "env", "env": {"A": "1"}}}, "no heading here\n")
    with pytest.raises(ProposalError, match="one mechanism per run"):  # from_dict checks the rest of the change
        Proposal.from_dict(hypotheses.hypothesis_from_page({"title": "x", "change": {"kind": "env"}}, ""))


def test_every_page_links_resolve_in_a_written_wiki(tmp_path):
    """Write all page kinds plus the pages they point at; every markdown link lands on a page."""
    s = state()
    w = Writer(tmp_path, today=TODAY)
    mem = memory.compute(s["history"])
    made = [report.loop_page(SPEC, s, mem), retro_page.retrospective_page(SPEC, s, mem, UNTRIED, 2),
            report.observation_page(SPEC, HISTORY[0], {}), hypotheses.hypothesis_page(
                SPEC, UNTRIED[1], "001-h", "supported", HISTORY[0]["page"])]
    targets = {f"experiments/llama/cpu-loop/{exp_id(n)}.md" for n in range(12)} | \
        {e["hypothesis_page"] for e in HISTORY} | {r["page"] for r in s["retrospectives"]} | {p.path for p in made} | \
        {"models/llama-cpu-loop.md"} | {report.observation_path("llama", "cpu-loop", e["exp_id"]) for e in HISTORY}
    for rel in targets:
        w.write_page(pages.Page(rel, {"title": rel, "type": "analysis"}, "x\n"))
    for p in made:
        w.write_page(p)
    for p in made:
        for target in _links(p):
            assert (tmp_path / target).is_file(), (p.path, target)


def test_sweep_promotes_an_inconclusive_gain_measured_once():
    from tools.loop.priors import Attempt, Priors
    from tools.loop.proposers.sweep import SweepProposer

    a = Attempt("e1", "precision", {"kind": "knobs", "knobs": {"dtype": "bf16"}}, "f", "inconclusive", 12.0,
                run_key="k1", trunk_exp="base", repeats=4)  # adaptive: the first measure went to the cap
    def priors(attempts):
        return Priors(SPEC, SPEC.start_config(), {}, "", {"exp_id": "base"}, attempts, [], [], {}, [], None, [], [],
                      "", "")
    promo = SweepProposer()._promotions(priors([a]), set())
    assert len(promo) == 1 and promo[0].repeats >= 8 and promo[0].change.knobs == {"dtype": "bf16"}
    again = Attempt("e2", "precision", a.change, "f", "inconclusive", 3.0, run_key="k1", trunk_exp="base", repeats=8)
    assert SweepProposer()._promotions(priors([a, again]), set()) == []
    # a pairs run of 24 rounds: a promotion at the loop's 2x repeats would add none, and admission refuses it as a
    # duplicate every time it is proposed: it is not proposed
    pairs_run = Attempt("e3", "precision", a.change, "f", "inconclusive", 5.0, run_key="k3", trunk_exp="base",
                        repeats=24)
    assert SweepProposer()._promotions(priors([pairs_run]), set()) == []


def test_the_sweep_does_not_undo_a_supported_keep_until_a_keep_it_may_depend_on():
    from tools.loop.priors import Attempt, Priors
    from tools.loop.proposers.sweep import SweepProposer

    bf16 = dict(START, compute_dtype="bfloat16")
    kept = Attempt("e1", "precision", {"kind": "knobs", "knobs": {"compute_dtype": "bfloat16"}}, "f1", "supported",
                   11.0, kept=True, config=bf16, run_key="k1", trunk_exp="base")
    # scan filed as a kernel move here: a category precision does not depend on (compiler is: XLA flags)
    scan = Attempt("e2", "kernel", {"kind": "knobs", "knobs": {"scan": True}}, "f2", "supported", 4.0, kept=True,
                   config=dict(bf16, scan=True), run_key="k2", trunk_exp="e1")

    def moves(attempts, trunk):
        sweep = SweepProposer()
        p = Priors(SPEC, trunk, {}, "", {"exp_id": attempts[-1].exp_id}, attempts, [], [], {}, [], None, [], [],
                   "", "")
        return {c.change.describe() for c in sweep.candidates(p)}, {r["change"]: r["why"] for r in sweep.refused}

    # bf16 kept (supported), then scan (precision does not depend on it): float32 again is refused, with
    # the experiment that measured it; scan=False undoes the last keep, refused too
    got, refused = moves([kept, scan], dict(bf16, scan=True))
    assert "compute_dtype=float32" not in got and "scan=False" not in got
    assert refused["compute_dtype=float32"].startswith("it undoes e1 (supported, +11.0 %, kept)")
    assert "remat=full" in got  # the rest of the space is untouched
    # a memory keep since (bf16 halves what remat saves: they may depend): float32 is worth a run again
    remat = Attempt("e3", "memory", {"kind": "knobs", "knobs": {"remat": "full"}}, "f3", "supported", 3.0,
                    kept=True, config=dict(bf16, scan=True, remat="full"), run_key="k3", trunk_exp="e2")
    got, refused = moves([kept, scan, remat], dict(bf16, scan=True, remat="full"))
    assert "compute_dtype=float32" in got and "compute_dtype=float32" not in refused
    # ... expected as its keep measured it, backwards (a user's loops ran such undos as "no prior: exploratory",
    # +2 %, tied with moves never tried, and refuted them at -16 %): after every move with no prior
    sweep = SweepProposer()
    ranked = sweep.candidates(Priors(SPEC, dict(bf16, scan=True, remat="full"), {}, "", {"exp_id": "e3"},
                                     [kept, scan, remat], [], [], {}, [], None, [], [], "", ""))
    undo = next(c for c in ranked if c.change.describe() == "compute_dtype=float32")
    assert undo.expected_gain_pct == pytest.approx(100 * (1 / 1.11 - 1), abs=0.05), undo.expected_gain_pct
    assert ranked.index(undo) == len(ranked) - 1 and "before a keep it may depend on" in undo.notes, \
        [(c.change.describe(), c.expected_gain_pct) for c in ranked]
    # only a supported single-knob keep is undone by its reversal: an inconclusive one kept nothing to undo
    got, _ = moves([Attempt("e1", "precision", kept.change, "f1", "inconclusive", 2.0, config=bf16, run_key="k1",
                            trunk_exp="base")], START)
    assert "compute_dtype=bfloat16" in got
    # a move inconclusive at no gain on an earlier trunk, with only keeps since that it does not depend on (a scan
    # keep, for a memory move), is not confirmed again; after a keep it may depend on (precision), it is
    nogain = Attempt("e2", "memory", {"kind": "knobs", "knobs": {"remat": "full"}}, "f4", "inconclusive", -1.5,
                     config=dict(START, remat="full"), run_key="k4", trunk_exp="base")
    on_scan = Attempt("e3", "compiler", scan.change, "f2", "supported", 4.0, kept=True, config=dict(START, scan=True),
                      run_key="k5", trunk_exp="base")
    got, refused = moves([nogain, on_scan], dict(START, scan=True))
    assert "remat=full" not in got and refused["remat=full"].startswith("inconclusive at -1.5 % on earlier"), refused
    on_bf16 = Attempt("e3", "precision", kept.change, "f1", "supported", 11.0, kept=True, config=bf16, run_key="k6",
                      trunk_exp="base")
    got, _ = moves([nogain, on_bf16], bf16)
    assert "remat=full" in got


def test_the_retrospective_lists_what_the_sweep_set_aside_and_why():
    s = state()
    aside = [{"change": "compute_dtype=float32", "why": "it undoes e1 (supported, +11.0 %, kept)"},
             {"change": "remat=full", "why": "the screen before iteration 4: no faster | than the trunk"},
             {"change": "remat=full", "why": "a duplicate row"}]
    body = retro_page.retrospective_page(SPEC, s, memory.compute(s["history"]), UNTRIED, 2, aside).body
    section = body.split("## Set aside on this trunk", 1)[1].split("## What next", 1)[0]
    rows = [ln for ln in section.splitlines() if ln.startswith("| `")]
    assert rows[0] == "| `compute_dtype=float32` | it undoes e1 (supported, +11.0 %, kept) |"
    assert len(rows) == 2 and "\\|" in rows[1]  # one row per move; a pipe in a reason does not split the table
    assert "## Set aside" not in retro_page.retrospective_page(SPEC, s, memory.compute(s["history"]), UNTRIED, 2).body


def test_a_sweep_statement_names_an_empty_start_value():
    from tools.loop.priors import Priors
    from tools.loop.proposers.sweep import SweepProposer
    from tools.loop.spec import Knob

    spec = copy.deepcopy(SPEC)
    spec.knobs["ynn"] = Knob("ynn", ["", "--xla_cpu_experimental_ynn_fusion_type=dot"], env="XLA_FLAGS",
                             category="compiler")
    p = Priors(spec, spec.start_config(), {}, "", {"exp_id": "base"}, [], [], [], {}, [], None, [], [], "", "")
    statements = [x.statement for x in SweepProposer().untried(p) if "ynn" in x.change.knobs]
    assert statements and "(from unset)" in statements[0] and "(from )" not in statements[0]


def test_after_a_keep_moves_that_may_depend_on_it_are_re_ranked_and_a_refuted_one_tried_again():
    from tools.loop.priors import Attempt, Priors
    from tools.loop.proposers.sweep import SweepProposer

    def att(n, cat, knobs, verdict, gain, kept=False):
        ch = Change("knobs", knobs=knobs)
        return Attempt(f"e{n}", cat, vars(ch).copy(), ch.fingerprint(), verdict, gain, kept=kept, run_key=f"k{n}",
                       trunk_exp="base")

    def moves(attempts, trunk=None):
        p = Priors(SPEC, trunk or SPEC.start_config(), {}, "", {"exp_id": "t"}, attempts, [], [], {}, [], None, [], [],
                   "", "")
        return {c.change.describe(): c for c in SweepProposer(promote=False).candidates(p)}

    remat = att(1, "memory", {"remat": "full"}, "refuted", -20.0)
    scan = att(2, "compiler", {"scan": True}, "refuted", -9.0)
    before = moves([remat, scan])
    assert "remat=full" not in before and "scan=True" not in before  # refuted on this trunk: not again
    # a shape change is kept: remat's trade-off may have moved with it, scan's not
    shape = att(3, "shape", {"shape": {"batch": 32, "seq_len": 64}}, "supported", 8.0, kept=True)
    after = moves([remat, scan, shape], dict(SPEC.start_config(), shape={"batch": 32, "seq_len": 64}))
    assert "remat=full" in after and "scan=True" not in after
    assert "before a keep it may depend on (discounted)" in after["remat=full"].notes
    # its old evidence counts as another lane's would: less confidence than one run on this trunk gives (0.55)
    assert after["remat=full"].confidence == 0.5 and after["remat=full"].expected_gain_pct == -20.0
    # an invalid move stays out whatever was kept since
    bad = att(4, "memory", {"remat": "dots_saveable"}, "invalid", 30.0)
    assert "remat=dots_saveable" not in moves([bad, shape], dict(SPEC.start_config(), shape={"batch": 32, "seq_len": 64}))
