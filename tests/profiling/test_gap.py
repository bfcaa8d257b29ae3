"""`tools gap` on real profiles of the reference model: the differences named from the HLO alone (no command
line), mapped to a loop file's knobs; an A/A pair gives none; a slower reference files nothing; a real Pallas kernel
lowered for TPU is named and matched to its source file."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import pytest

from tools.gap import compare, facts, sides
from tools.loop import reference, spec as spec_mod

KNOBS = {
    "model": "llama", "lane": "cpu", "variant": "tiny/cpu", "command": "python experiments/llama_train.py",
    "budget": {"runs": 4},
    "knobs": {"compute_dtype": {"flag": "--compute-dtype", "values": ["float32", "bfloat16"], "category": "precision"},
              "grad_accum": {"flag": "--grad-accum", "values": [1, 2], "category": "shape"},
              "remat": {"flag": "--remat", "values": ["none", "full"], "category": "memory"}},
}


@pytest.fixture(scope="module")
def side(profiles):
    return {name: sides.from_folder(folder) for name, folder in profiles.items()}


@pytest.mark.slow  # six real profiled runs of the reference model (the session's `profiles`)
def test_differences_come_from_the_hlo_alone(side):
    kinds = {d["kind"]: d for d in compare.differences(side["fp32"], side["bf16_ga2"])}
    assert {"precision", "accumulation"} <= set(kinds)
    assert kinds["precision"]["property"] == {"dtype": "bfloat16"}
    assert kinds["accumulation"]["property"] == {"grad_accum": 2}
    assert all(d["basis"] == "hlo" for d in kinds.values())  # folders carry no command line
    assert any("micro-batch loop" in e["text"] for e in kinds["accumulation"]["evidence"])
    remat = {d["kind"]: d for d in compare.differences(side["fp32"], side["fp32_remat"])}
    assert remat["remat"]["property"] == {"remat": "full"}


@pytest.mark.slow  # six real profiled runs of the reference model (the session's `profiles`)
def test_an_identical_pair_has_no_difference(side):
    assert compare.differences(side["fp32"], side["fp32_again"]) == []
    a = compare.analyze(side["fp32"], side["fp32_again"])
    assert a["items"] == []
    # one compiled program: whatever the two runs' speeds, the gap is noise between runs, never a gap to close
    assert side["fp32"].program and side["fp32"].program == side["fp32_again"].program
    assert "compiled the same optimized HLO" in a["verdict"] and not a["reference_faster"]
    assert side["fp32"].program != side["bf16_ga2"].program


@pytest.mark.slow  # six real profiled runs of the reference model (the session's `profiles`)
def test_the_items_map_to_the_loop_knobs(side, tmp_path):
    spec = spec_mod.parse(KNOBS, tmp_path / "cpu.yml")
    items = compare.differences(side["fp32"], side["bf16_ga2"])
    for it in items:
        it["basis"] = it.get("basis", "hlo")
    reference.map_items(items, spec, spec.start_config())
    knobs = {it["kind"]: it["knobs"] for it in items}
    assert knobs["precision"] == {"compute_dtype": "bfloat16"}
    assert knobs["accumulation"] == {"grad_accum": 2}
    p = reference.proposal(items[0], "ref")
    assert p.change.kind == "knobs" and p.proposer == "tools gap"


@pytest.mark.slow  # six real profiled runs of the reference model (the session's `profiles`)
def test_a_slower_reference_files_nothing(side):
    a, b = side["fp32"], side["fp32_remat"]
    fast, slow = (a, b) if a.tokens_per_s >= b.tokens_per_s else (b, a)
    out = compare.analyze(fast, slow)
    assert out["items"] == [] and not out["reference_faster"]
    assert "not faster" in out["verdict"] and "caveat" not in out["verdict"]
    # runs of two models: the verdict says their tokens are not the same work (it read as a plain gap)
    other = compare.analyze(dataclasses.replace(fast, page="experiments/llama/cpu/a.md"),
                            dataclasses.replace(slow, page="experiments/mlp/cpu/b.md"))
    assert "caveat: two models (llama and mlp)" in other["verdict"]
    back = compare.analyze(slow, fast)
    if back["gap_pct"] > compare.MIN_GAP_PCT:  # a real gap: ranked items with a share of the step each
        assert back["items"] and all(it["share_pct"] is not None for it in back["items"])
        assert [it["rank"] for it in back["items"]] == list(range(1, len(back["items"]) + 1))


def test_a_pallas_kernel_lowered_for_tpu_is_named(tmp_path):
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp
    from jax.experimental.pallas.ops.tpu import flash_attention as fa

    q = jnp.zeros((1, 2, 128, 128), jnp.float32)
    low = jax.jit(lambda q, k, v: fa.flash_attention(q, k, v)).trace(q, q, q).lower(lowering_platforms=("tpu",))
    (tmp_path / "flash.hlo.txt").write_text(low.as_text(dialect="hlo"))
    f = facts.run_facts(tmp_path)
    assert f["stage"] == "pre-optimization"
    call = next(c for c in f["custom_calls"] if c["target"] == "tpu_custom_call")
    assert "flash_attention" in call["kernel"]
    assert call["file"].endswith("jax/experimental/pallas/ops/tpu/flash_attention.py")
    catalog = [{"kernel": "flash_attention", "path": "jax/experimental/pallas/ops/tpu/flash_attention.py:100",
                "page": "kernels/jax/flash-attention.md"}, {"kernel": "other", "path": "x/y.py:1", "page": "k.md"}]
    assert compare.match_kernel(call, catalog)["page"] == "kernels/jax/flash-attention.md"
    ours = sides.Side("ours", {"custom_calls": []})
    items = compare._kernels(ours, sides.Side("ref", f), catalog)
    assert items and items[0]["property"]["page"] == "kernels/jax/flash-attention.md"
    assert Path(call["file"]).name == "flash_attention.py"
    # the op category follows the kernel the Mosaic call runs (its target, tpu_custom_call, names none)
    from tools.profiling import hlo

    mod = hlo.parse_hlo((tmp_path / "flash.hlo.txt").read_text())
    assert mod.category(call["op"]) == "attention"


def _priors(spec, items, trunk, summary):
    from tools.loop.priors import Priors

    return Priors(spec=spec, trunk=trunk, trunk_env={}, trunk_commit="", best={"exp_id": "trunk"}, attempts=[],
                  other_lanes=[], refuted=[], memory={}, open_hypotheses=[], profile=None, concepts=[], kernels=[],
                  retrospective="", guidance="", gap=items, gap_summary=summary)


@pytest.mark.slow  # six real profiled runs of the reference model (the session's `profiles`)
def test_the_sweep_adopts_every_mapped_difference_at_once_then_one_by_one(side, tmp_path):
    """Two knob-mapped items against a faster reference: the first candidate runs the reference's side of both
    (composed, measured once); once that is refuted, the single moves that close a gap come first."""
    from tools.loop.priors import Attempt
    from tools.loop.proposers.sweep import ADOPT_NOTE, GAP_NOTE, SweepProposer

    spec = spec_mod.parse(KNOBS, tmp_path / "cpu.yml")
    trunk = dict(spec.start_config(), compute_dtype="bfloat16", grad_accum=2)
    items = compare.differences(side["bf16_ga2"], side["fp32"])  # what differs, whichever run is faster today
    for n, it in enumerate(items):
        it["gain_pct"] = 10.0 - n
    reference.map_items(items, spec, trunk)
    a = {"items": items, "gap_pct": 30.0}
    summary = {"ref": "ref", "ours": "trunk", "gap_pct": a["gap_pct"]}
    first = SweepProposer().candidates(_priors(spec, a["items"], trunk, summary))
    mapped = {k: v for it in a["items"] for k, v in (it["knobs"] or {}).items()}
    assert mapped == {"compute_dtype": "float32", "grad_accum": 1}
    assert first[0].notes.startswith(ADOPT_NOTE) and first[0].change.knobs == mapped
    assert 0 < first[0].expected_gain_pct <= max(a["gap_pct"], 2.0)
    assert all(c.notes.startswith(GAP_NOTE) for c in first[1:3])
    assert not any(c.notes.startswith(ADOPT_NOTE) for c in first[1:])
    refuted = Attempt("e1", "precision", dataclasses.asdict(first[0].change), first[0].change.fingerprint(), "refuted", -4.0)
    pri = _priors(spec, a["items"], trunk, summary)
    pri.attempts = [refuted]
    again = SweepProposer().candidates(pri)
    assert not any(c.notes.startswith(ADOPT_NOTE) for c in again)
    assert {tuple(c.change.knobs) for c in again[:2]} == {("compute_dtype",), ("grad_accum",)}


def _as_record(side, tokens: float, step_ms: float, best_ms: float | None = None, command: str = ""):
    """A folder's side given what a filed run's record adds: its metrics (the runner's clock), page and command."""
    out = dataclasses.replace(side, page=f"experiments/llama/cpu/{side.label}.md", command=command)
    out.metrics = {"tokens_per_s": tokens / step_ms * 1e3, "step_time_ms": step_ms,
                   **({"tokens_per_s_best": tokens / best_ms * 1e3} if best_ms else {})}
    out.flags = {k: v for k, v in zip(command.split()[::2], command.split()[1::2])} if command else {}
    return out


@pytest.mark.slow  # six real profiled runs of the reference model (the session's `profiles`)
def test_a_run_against_its_own_folder_is_no_gap_and_no_item_claims_more_than_the_gap(side):
    """`tools gap v001 raw/profiles/...v001` said +3.3 %: the folder counted the token input's shifted target
    (s32[1,4,33]: 132 tokens, the record 128) and timed its trace's median against the record's runner median.
    And an item's "gain if closed" (per-token op time, traced medians) could exceed the verdict's gap (each run's
    fastest step): +43 % for one item of a +14 % gap."""
    fp32, bf16 = side["fp32"], side["bf16_ga2"]
    dims = compare.shape_of(fp32.facts["token_input"])[1]
    tokens = math.prod(dims[:-1]) * (dims[-1] - 1)  # the reference model's convention: inputs + shifted targets
    rec = _as_record(fp32, tokens, fp32.traced_ms * 1.01)
    a = compare.analyze(rec, dataclasses.replace(fp32))
    assert abs(a["gap_pct"]) < 0.5 and not a["reference_faster"], a["verdict"]
    assert "each run's traced median step" in a["verdict"]
    ours = _as_record(fp32, tokens, fp32.traced_ms, best_ms=fp32.traced_ms, command="--compute-dtype float32")
    ref = _as_record(bf16, tokens, bf16.traced_ms, best_ms=fp32.traced_ms / 1.10,
                     command="--compute-dtype bfloat16 --grad-accum 2")
    a = compare.analyze(ours, ref)
    assert a["reference_faster"] and abs(a["gap_pct"] - 10.0) < 0.01
    assert a["items"] and all(it["gain_pct"] is None or it["gain_pct"] <= a["gap_pct"] + 1e-6 for it in a["items"])
    est = a["estimate"]
    assert abs(est["ours_us_per_token"] / est["ref_us_per_token"] - 1.10) < 1e-3  # read on the verdict's basis
    assert any(it["basis"] == "config" for it in a["items"])  # two records: their flags are compared
    # a folder as ours has no command line: the reference's flags are not differences ("--preset tiny (ours: unset)")
    a = compare.analyze(dataclasses.replace(fp32), ref)
    assert not [it for it in a["items"] if it["basis"] == "config"], [it["what"] for it in a["items"]]


def test_two_lanes_runs_of_one_id_get_their_own_analysis_page():
    from tools.gap.page import gap_path

    a = gap_path("0003", "0001", "experiments/llama/small/0003.md", "experiments/llama/small/0001.md")
    b = gap_path("0003", "0001", "experiments/llama/large/0003.md", "experiments/llama/large/0001.md")
    c = gap_path("0003", "0001", "experiments/gemma/small/0003.md", "experiments/gemma/small/0001.md")
    assert len({a, b, c}) == 3
    assert a == "analyses/gap-llama-small-0003-vs-0001.md"
    # a folder side has no lane; a run against another lane's reference names both lanes
    assert gap_path("prof-a", "prof-b") == "analyses/gap-prof-a-vs-prof-b.md"
    assert gap_path("0003", "ref", "experiments/llama/small/0003.md", "") == "analyses/gap-llama-small-0003-vs-ref.md"
    assert gap_path("0003", "0001", "experiments/llama/small/0003.md", "experiments/llama/large/0001.md") == \
        "analyses/gap-llama-small-0003-vs-llama-large-0001.md"


def test_a_command_flag_a_mapped_knob_already_sets_is_not_a_second_item(tmp_path):
    """`--batch 16` (a config item, ours unset) stayed beside the HLO item that maps the `shape` knob (batch ×
    sequence, whose flags include --batch): a sixth item, "→ code change", for what item 3 already does."""
    spec = spec_mod.parse({**KNOBS, "knobs": {**KNOBS["knobs"], "shape": {
        "category": "shape", "flags": {"batch": "--batch", "seq_len": "--seq-len"},
        "values": [{"batch": 4, "seq_len": 32}, {"batch": 16, "seq_len": 32}]}}}, tmp_path / "l.yml")
    trunk = {"shape": {"batch": 4, "seq_len": 32}}
    items = [{"kind": "shape", "basis": "hlo", "property": {"batch": 16, "seq": 33}, "rank": 1},
             {"kind": "flag", "basis": "config", "property": {"flag": "--batch", "value": 16}, "rank": 2},
             {"kind": "flag", "basis": "config", "property": {"flag": "--lr", "value": 0.01}, "rank": 3}]
    out = reference.map_items(items, spec, trunk)
    assert [(it["kind"], it["knobs"]) for it in out] == [("shape", {"shape": {"batch": 16, "seq_len": 32}}),
                                                         ("flag", None)]
    assert out[1]["property"]["flag"] == "--lr" and [it["rank"] for it in out] == [1, 2]


def test_a_gap_page_names_each_run_with_its_model_and_lane():
    """The page said "Gap: 2026-12-07-v001-base vs 2026-12-07-v001-base" for two lanes' runs of one id, an id the
    tool itself refuses as ambiguous."""
    from tools.gap.page import render

    analysis = {"ours": "v001", "ref": "v001", "ours_page": "experiments/llama/cpu/v001.md",
                "ref_page": "experiments/llama/cpu2/v001.md", "verdict": "the reference is faster", "step": [],
                "categories_us_per_token": [], "estimate": {}, "items": [], "stages": {"ours": "optimized",
                                                                                    "ref": "optimized"},
                "gap_pct": 10.0, "reference_faster": True}
    page = render(analysis, {})
    assert page.meta["title"] == "Gap: llama/cpu/v001 vs llama/cpu2/v001"
    assert "\n# Gap: llama/cpu/v001 vs the reference llama/cpu2/v001\n" in page.body


def test_an_analysis_run_again_without_its_loop_keeps_the_knob_change_it_filed(tmp_path):
    """`tools gap A B --loop l` filed an item as the loop's knob change (runnable, effort 1); the same analysis run
    again without `--loop` rewrote the open page as a code change to write (effort 3, lower priority)."""
    import types

    from tools import pages
    from tools.agent.ops_gap import _file
    from tools.project import Project

    kb = Project(tmp_path / "kb")
    kb.wiki.mkdir(parents=True)
    # folders carry no model or lane: the analysis files under unknown/unknown, and so does this loop
    spec = spec_mod.parse({**KNOBS, "model": "unknown", "lane": "unknown"}, tmp_path / "cpu.yml")

    def analysis(knobs):
        item = {"kind": "accumulation", "basis": "hlo", "property": {"grad_accum": 2}, "rank": 1, "knobs": knobs,
                "what": "gradient accumulation 2", "gain_pct": 8.0, "share_pct": 8.0, "evidence": [],
                "touches": ["matmul"], "category": "shape"}
        return {"ours": "a", "ref": "b", "ours_page": "", "ref_page": "", "verdict": "the reference is faster",
                "step": [], "categories_us_per_token": [], "estimate": {}, "items": [item], "gap_pct": 10.0,
                "stages": {"ours": "optimized", "ref": "optimized"}, "reference_faster": True,
                "hypotheses": [], "not_filed": [], "retired": []}

    ours, ref = types.SimpleNamespace(page=None), types.SimpleNamespace(label="b")
    first = analysis({"grad_accum": 2})
    _file(kb, first, ours, ref, spec)
    (path,) = first["hypotheses"]
    before = (kb.wiki / path).read_text()
    assert pages.split(before)[0]["change"]["knobs"] == {"grad_accum": 2}
    again = analysis(None)
    _file(kb, again, ours, ref, None)
    assert (kb.wiki / path).read_text() == before
    assert again["hypotheses"] == [] and "mapped to a loop's knobs" in again["not_filed"][0]
    assert not again["retired"]  # still this analysis's item: not abandoned either
    # a page a person edited, its change a sentence: read as no knob change (it raised AttributeError)
    text = (kb.wiki / path).read_text()
    (kb.wiki / path).write_text(text.replace("change:", "change: use flash attention\nold_change:", 1))
    third = analysis(None)
    _file(kb, third, ours, ref, None)
    assert third["hypotheses"] == [path]


def test_runs_of_two_models_or_a_crashed_run_are_refused(tmp_path):
    """A one-layer run against a two-layer one read "the reference is +113 % faster" and filed `--n-layers 1` as
    the fix; a run that crashed was compared as if its steps were a speed."""
    from tools.errors import InputError
    from tools.project import Project

    shape = {"n_layers": 2, "d_model": 64, "n_heads": 4, "n_kv_heads": 4, "d_ff": 192, "vocab": 256, "seq_len": 32,
             "batch": 4}
    ours = compare.Side("v001", {}, shape=dict(shape))
    ref = compare.Side("v003", {}, shape={**shape, "n_layers": 1, "batch": 16})
    with pytest.raises(InputError, match=r"two different models \(n_layers 2 vs 1\)"):
        compare.same_model(ours, ref)
    compare.same_model(ours, compare.Side("v004", {}, shape={**shape, "batch": 16, "seq_len": 64}))  # allowed
    compare.same_model(ours, compare.Side("folder", {}))  # a folder reports no shape: nothing to hold against
    kb = Project(tmp_path / "kb")
    for rec, said in (({"exp_id": "v004", "verdict": "crash", "status": "filed", "crash": "exit 3"}, "exit 3"),
                      ({"exp_id": "v005", "verdict": "invalid", "status": "filed"}, "invalid"),
                      ({"exp_id": "v006", "status": "in_progress"}, "still running")):
        with pytest.raises(InputError, match=f"{said}.*compare a run that finished"):
            sides.from_record(kb, rec)


def test_an_analysis_run_again_with_nothing_to_close_retires_its_hypotheses_and_links_them(tmp_path):
    """Run again on runs that no longer differ, the analysis said "nothing filed" and left its page claiming the old
    gap and its hypotheses open; retired hypotheses were linked from no page (lint: orphan)."""
    import types

    from tools import pages
    from tools.agent.ops_gap import _file
    from tools.project import Project

    kb = Project(tmp_path / "kb")
    kb.wiki.mkdir(parents=True)
    spec = spec_mod.parse({**KNOBS, "model": "llama", "lane": "cpu"}, tmp_path / "cpu.yml")
    item = {"kind": "accumulation", "basis": "hlo", "property": {"grad_accum": 2}, "rank": 1,
            "knobs": {"grad_accum": 2}, "what": "gradient accumulation 2", "gain_pct": 8.0, "share_pct": 8.0,
            "evidence": [], "touches": ["matmul"], "category": "shape"}

    def analysis(items, verdict):
        return {"ours": "a", "ref": "b", "ours_page": "", "ref_page": "", "verdict": verdict, "step": [],
                "categories_us_per_token": [], "estimate": {}, "items": items, "gap_pct": 10.0 if items else 0.4,
                "stages": {"ours": "optimized", "ref": "optimized"}, "reference_faster": bool(items),
                "hypotheses": [], "not_filed": [], "retired": []}

    ours, ref = types.SimpleNamespace(page=None), types.SimpleNamespace(label="b")
    first = analysis([item], "the reference is +10.0 % faster")
    _file(kb, first, ours, ref, spec)
    (hyp,) = first["hypotheses"]
    again = analysis([], "the two runs compiled the same optimized HLO: nothing filed")
    _file(kb, again, ours, ref, spec)
    assert again["retired"] == [hyp]
    assert pages.split((kb.wiki / hyp).read_text())[0]["status"] == "abandoned"
    page = (kb.wiki / again["page"]).read_text()
    assert "same optimized HLO" in page and "+10.0 %" not in page
    assert "hypotheses/llama/cpu/" in page and hyp.rsplit("/", 1)[1] in page  # the retired page is linked


def test_a_command_flag_item_claims_no_gain_it_never_estimated():
    """"command flag --batch 16 (ours: unset)" was filed as "raises tokens/s by about +0.0 %": a flag item touches
    no op category, so its share of the step is none, not zero."""
    item = {"kind": "flag", "basis": "config", "property": {"flag": "--batch", "value": "16"}, "rank": 3,
            "knobs": None, "what": "command flag --batch 16 (ours: unset)", "gain_pct": 0.0, "share_pct": 0.0,
            "evidence": [], "touches": [], "category": "other"}
    p = reference.proposal(item, "v001")
    assert "+0.0 %" not in p.statement and "no share of the step" in p.statement
    hlo = {**item, "kind": "accumulation", "basis": "hlo", "touches": ["matmul"], "gain_pct": 8.0}
    assert "+8.0 %" in reference.proposal(hlo, "v001").statement
