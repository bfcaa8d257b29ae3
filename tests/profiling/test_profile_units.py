"""Fast checks of the profiling pieces on small HLO texts; the real-profile tests are in the other files."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest
from click.testing import CliRunner

from tools.cli import cli
from tools.profiling import hlo, hlo_diff
from tools.profiling.attribution import Attributor, SourceLines, is_library

# The shape of what XLA makes of `log_softmax(x @ w)`: one fusion stamped with the consumer's metadata.
FUSED = """HloModule jit_step, entry_computation_layout={(f32[4,8]{1,0}, f32[8,16]{1,0})->f32[4,16]{1,0}}

FileNames
1 "/m/model.py"
2 "/usr/lib/python3/site-packages/lib/ops.py"

FunctionNames
1 "step"
2 "helper"
3 "main"

FileLocations
1 {file_name_id=1 function_name_id=1 line=10 end_line=10 column=1 end_column=5}
2 {file_name_id=1 function_name_id=1 line=11 end_line=11 column=1 end_column=5}
3 {file_name_id=2 function_name_id=2 line=99 end_line=99 column=1 end_column=5}
4 {file_name_id=1 function_name_id=3 line=30 end_line=30 column=1 end_column=5}
5 {file_name_id=1 function_name_id=1 line=12 end_line=12 column=1 end_column=5}

StackFrames
1 {file_location_id=4 parent_frame_id=0}
2 {file_location_id=1 parent_frame_id=2}
3 {file_location_id=2 parent_frame_id=2}
4 {file_location_id=3 parent_frame_id=6}
5 {file_location_id=5 parent_frame_id=2}

%fused_computation (param_0: f32[4,8], param_1: f32[8,16]) -> f32[4,16] {
  %param_0 = f32[4,8]{1,0} parameter(0)
  %param_1 = f32[8,16]{1,0} parameter(1)
  %dot.1 = f32[4,16]{1,0} dot(%param_0, %param_1), lhs_contracting_dims={1}, rhs_contracting_dims={0}, metadata={op_name="dot_general" stack_frame_id=2}
  ROOT %exp.1 = f32[4,16]{1,0} exponential(%dot.1), metadata={op_name="log_softmax/exp" stack_frame_id=3}
}

ENTRY %main (p: f32[4,8], w: f32[8,16]) -> f32[4,16] {
  %p = f32[4,8]{1,0} parameter(0)
  %w = f32[8,16]{1,0} parameter(1)
  %fusion.7 = f32[4,16]{1,0} fusion(%p, %w), kind=kOutput, calls=%fused_computation, metadata={op_name="log_softmax/exp" stack_frame_id=3}
  %tanh.2 = f32[4,16]{1,0} tanh(%fusion.7), metadata={op_name="tanh" stack_frame_id=4}
  %copy.3 = f32[4,16]{1,0} copy(%tanh.2)
  ROOT %negate.4 = f32[4,16]{1,0} negate(%copy.3), metadata={op_name="neg" stack_frame_id=5}
}
"""


def test_fusion_with_a_dot_goes_to_the_dot_line_and_is_a_matmul():
    mod = hlo.parse_hlo(FUSED)
    assert mod.source("fusion.7")[0][:2] == ("/m/model.py", 10)  # not line 11, the fused consumer
    assert mod.category("fusion.7") == "matmul"
    att = Attributor(mod, SourceLines())
    c = att.credit("fusion.7")
    assert c.frame[:2] == ("/m/model.py", 10) and c.via == "fused dot"


def test_library_frames_are_skipped_and_glue_borrows_from_its_producer():
    mod = hlo.parse_hlo(FUSED)
    att = Attributor(mod, SourceLines())
    assert is_library("/usr/lib/python3/site-packages/lib/ops.py") and not is_library("/m/model.py")
    assert att.credit("tanh.2").frame[1] == 12  # helper (library) -> the model line that called it
    assert ("/m/model.py", 30) in att.wrappers  # main(), the stack below the jitted function
    copy = att.credit("copy.3")  # no metadata: the producer's line
    assert copy.via == "producer" and copy.frame[1] == 12
    assert mod.instrs["fusion.7"].operands == ["p", "w"]


def test_signature_ignores_names():
    a = hlo.parse_hlo(FUSED)
    b = hlo.parse_hlo(FUSED.replace("fusion.7", "fusion.131").replace("fused_computation", "fused_computation.9"))
    assert hlo.signature(a, a.instrs["fusion.7"]) == hlo.signature(b, b.instrs["fusion.131"])
    assert hlo.signature(a, a.instrs["fusion.7"]) != hlo.signature(a, a.instrs["tanh.2"])


def test_canonical_text_keeps_its_contract():
    text = FUSED.replace("%dot.1", "%dot.77").replace("fusion.7", "fusion.123")
    assert hlo_diff.canonical_text(text) == hlo_diff.canonical_text(FUSED)
    assert "metadata" not in hlo_diff.canonical_text(FUSED) and "dot.#1" in hlo_diff.canonical_text(FUSED)


def test_new_commands_have_help_and_imports_stay_light():
    for args in (["profile", "hlo-diff"], ["profile", "diff"], ["profile", "summary"]):
        res = CliRunner().invoke(cli, [*args, "--help"])
        assert res.exit_code == 0 and "--json" in res.output, args
    code = ("import sys, tools.profiling.diff, tools.profiling.hlo_diff, tools.profiling.attribution; "
            "print([m for m in ('jax', 'xprof') if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


ATTN = """HloModule m, entry_computation_layout={()->f32[2,2,8,8]}

%fused_qk (p0: f32[2,8,2,4], p1: f32[2,8,2,4]) -> f32[2,2,8,8] {
  %p0 = f32[2,8,2,4]{3,2,1,0} parameter(0)
  %p1 = f32[2,8,2,4]{3,2,1,0} parameter(1)
  %t0 = f32[2,2,8,4]{3,2,1,0} transpose(%p0), dimensions={0,2,1,3}
  %t1 = f32[2,2,4,8]{3,2,1,0} transpose(%p1), dimensions={0,2,3,1}
  ROOT %dot.1 = f32[2,2,8,8]{3,2,1,0} dot(%t0, %t1), lhs_batch_dims={0,1}, lhs_contracting_dims={3}, rhs_batch_dims={0,1}, rhs_contracting_dims={2}
}

ENTRY %main () -> f32[2,2,8,8] {
  %q = f32[2,8,2,4]{3,2,1,0} parameter(0)
  %k = f32[2,8,2,4]{3,2,1,0} parameter(1)
  %w = f32[4,16]{1,0} parameter(2)
  %x = f32[16,4]{1,0} parameter(3)
  %e = f32[4,16,16]{2,1,0} parameter(4)
  %proj = f32[16,16]{1,0} dot(%x, %w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  %expert = f32[4,16,16]{2,1,0} dot(%e, %e), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={1}
  %fmha = (f32[2,2,8,4]{3,2,1,0}, u8[0]{0}) custom-call(%q, %k), custom_call_target="__cudnn$fmhaSoftmax"
  %splash = f32[2,2,8,4]{3,2,1,0} custom-call(%q, %k), custom_call_target="tpu_custom_call", backend_config="splash_mha_fwd"
  %gemm = f32[16,16]{1,0} custom-call(%x, %w), custom_call_target="__cublas$gemm"
  ROOT %fusion.2 = f32[2,2,8,8]{3,2,1,0} fusion(%q, %k), kind=kOutput, calls=%fused_qk
}
"""


def test_attention_is_told_from_weight_matmuls():
    """A dot batched over batch × heads is attention, a weight matmul or a per-expert (one batch dim) dot is a
    matmul; cuDNN's fused attention is attention by its target, a GEMM call a matmul; a fusion holding an
    attention dot is attention."""
    mod = hlo.parse_hlo(ATTN)
    assert mod.category("proj") == "matmul" and mod.category("expert") == "matmul"
    assert mod.category("fmha") == "attention" and mod.category("gemm") == "matmul"
    assert mod.category("fusion.2") == "attention"
    assert mod.category("splash") == "custom-call"  # a Mosaic call's target names no kernel: the catalog does


def test_the_step_period_is_not_stretched_by_a_traced_first_step_that_compiles():
    from tools.profiling import summary, trace

    steps = [trace.StepEvent(0, 0.0, 500e3)] + [trace.StepEvent(i, 500e3 + (i - 1) * 10e3, 9e3) for i in range(1, 6)]
    ops = [trace.OpEvent("dot.1", "jit_step", "t0", s.start_us, 8e3) for s in steps]
    st = summary._steps(trace.Trace(ops, steps, "test", []))
    assert st["period_ms"] == 10.0  # a mean of the starts would say 108 ms
    assert st["span_busy_ms"] == 6 * 8.0


def test_the_merged_busy_timeline_agrees_with_the_direct_union_on_any_window():
    import random

    from tools.profiling.trace import BusyTimeline, OpEvent, busy_time

    rng = random.Random(1)
    for _ in range(200):  # overlapping threads, zero-length ops, windows inside, across and outside the ops
        ops = [OpEvent("op", "m", f"t{rng.randrange(3)}", rng.uniform(0, 1000), rng.choice([0.0, rng.uniform(0, 50)]))
               for _ in range(rng.randrange(0, 60))]
        timeline = BusyTimeline(ops)
        for _ in range(20):
            a = rng.uniform(-50, 1050)
            b = a + rng.uniform(0, 400)
            assert abs(timeline.busy(a, b) - busy_time(ops, a, b)) < 1e-6


def test_an_experiment_id_two_lanes_share_is_refused_and_a_raw_dir_outside_raw_too(tmp_path):
    """Ids count up per lane: `v001` of two lanes is ambiguous (both named), `MODEL/LANE/EXP_ID` picks one; a record
    whose raw_dir was edited to leave raw/ is refused rather than read."""
    import pytest

    from tools.errors import InputError
    from tools.profiling.locate import profile_folder
    from tools.project import Project

    project = Project(tmp_path)
    for lane in ("a", "b"):
        (tmp_path / "raw" / "profiles" / lane).mkdir(parents=True)
    recs = [{"exp_id": "2026-12-06-v001-x", "model": "m", "lane": lane, "raw_dir": f"raw/profiles/{lane}",
             "page": f"experiments/m/{lane}/2026-12-06-v001-x.md"} for lane in ("a", "b")]
    with pytest.raises(InputError, match="m/a/2026-12-06-v001-x, m/b/2026-12-06-v001-x"):
        profile_folder(project, "2026-12-06-v001-x", recs)
    assert profile_folder(project, "m/b/2026-12-06-v001-x", recs) == (tmp_path / "raw/profiles/b").resolve()
    assert profile_folder(project, "experiments/m/a/2026-12-06-v001-x.md", recs).name == "a"
    bad = [dict(recs[0], raw_dir="raw/../..")]
    with pytest.raises(InputError, match="outside raw/"):
        profile_folder(project, "2026-12-06-v001-x", bad)
    # the agent's profile operations and `tools gap` read the same names: they took the first lane's run, and
    # refused MODEL/LANE/EXP_ID
    from tools.agent.ops_profiles import folder_of
    from tools.agent.registry import AgentError
    from tools.gap.sides import find_record

    for r in recs:
        page = tmp_path / "wiki" / r["page"]
        page.parent.mkdir(parents=True, exist_ok=True)
        page.write_text("---\n" + "".join(f"{k}: {v}\n" for k, v in r.items() if k != "page")
                        + "type: experiment\ntitle: x\n---\n\n# x\n")
    with pytest.raises(AgentError, match="more than one lane"):
        folder_of(project, "2026-12-06-v001-x")
    assert folder_of(project, "m/b/2026-12-06-v001-x") == (tmp_path / "raw/profiles/b").resolve()
    with pytest.raises(InputError, match="more than one lane"):
        find_record(project, "2026-12-06-v001-x")
    assert find_record(project, "m/a/2026-12-06-v001-x")["lane"] == "a"


SWAPPER = r"""
import os, sys, time
target, real, link = sys.argv[1:4]
end, started = time.monotonic() + float(sys.argv[4]), False
while time.monotonic() < end:
    for tmp, make, src in ((target + ".r", os.link, real), (target + ".l", os.symlink, link)):
        try:
            make(src, tmp)
        except FileExistsError:  # left by a swapper killed mid-way
            pass
        os.replace(tmp, target)
    if not started:
        print("swapping", flush=True)
        started = True
"""


@pytest.mark.slow  # the session's real profiled runs of the reference model (`profiles`)
def test_the_trace_parsed_is_the_file_checked_while_another_process_swaps_it(profiles, tmp_path):
    """A profile folder's xplane swapped, many times a millisecond, between a real file and a link out of the
    folder: each read parses the file inside or refuses the link. It never parses what the link names (the
    profiler opening the path after the check used to read whatever was there by then)."""
    from tools.errors import InputError
    from tools.profiling.trace import find_runs, read_trace

    def xplane(name):
        return sorted(find_runs(profiles[name])[-1].glob("*.xplane.pb"))[0]

    folder = tmp_path / "prof"
    run = folder / "plugins/profile/run1"
    run.mkdir(parents=True)
    target, real = run / "host.xplane.pb", tmp_path / "inside.pb"
    real.write_bytes(xplane("fp32").read_bytes())
    outside = tmp_path / "outside" / "secret.xplane.pb"
    outside.parent.mkdir()
    outside.write_bytes(xplane("bf16_ga2").read_bytes())
    os.link(real, target)
    own, secret = (len(read_trace(d).ops) for d in (folder, outside.parent))
    assert own != secret  # the two traces can be told apart
    swap = subprocess.Popen([sys.executable, "-c", SWAPPER, str(target), str(real), str(outside), "60"],
                            stdout=subprocess.PIPE, text=True)
    seen = {"own": 0, "refused": 0}
    end = time.monotonic() + 60
    try:
        assert swap.stdout.readline() == "swapping\n"
        # until both states were met (a busy machine can leave the swapper unscheduled for a while), 200 reads at least
        while (sum(seen.values()) < 200 or not all(seen.values())) and time.monotonic() < end:
            try:
                n = len(read_trace(folder).ops)
            except InputError as e:
                assert "link" in str(e) or "outside" in str(e), e
                seen["refused"] += 1
                continue
            assert n == own, "parsed the trace the link points to"
            seen["own"] += 1
    finally:
        swap.kill()
        swap.wait()
    assert seen["own"] and seen["refused"], seen  # both states were met


STEP_SCRIPT = """
import sys, jax, jax.numpy as jnp
f = jax.jit(lambda x: (x @ x).sum())
x = jnp.ones((128, 128))
f(x).block_until_ready()
with jax.profiler.trace(sys.argv[1]):
    for i in range(4):
        with jax.profiler.StepTraceAnnotation("step", step_num=i):
            f(x).block_until_ready()
"""


@pytest.mark.slow  # a real jax.profiler trace of a small program
def test_a_script_that_names_its_steps_otherwise_is_read_per_step(tmp_path):
    """A script's own `StepTraceAnnotation("step", ...)`: no step was counted (only "train" was looked for), so a
    4-step profile printed its totals as per-step times and said to wrap the steps that were wrapped."""
    from tools.profiling.trace import read_trace

    r = subprocess.run([sys.executable, "-c", STEP_SCRIPT, str(tmp_path / "trace")], capture_output=True, text=True,
                       timeout=300, env=dict(os.environ, JAX_PLATFORMS="cpu"))
    assert r.returncode == 0, r.stderr[-2000:]
    trace = read_trace(tmp_path / "trace")
    assert [s.step for s in trace.steps] == [0, 1, 2, 3]
    assert read_trace(tmp_path / "trace", step_name="step").steps == trace.steps


def _profile(folder, events, modules):
    import gzip
    import json

    run = folder / "plugins" / "profile" / "r1"
    run.mkdir(parents=True)
    with gzip.open(run / "host.trace.json.gz", "wt") as f:
        json.dump({"traceEvents": events}, f)
    (folder / "hlo").mkdir()
    for name, text in modules.items():
        (folder / "hlo" / name).write_text(text)


def test_an_op_maps_to_the_program_it_ran_in_or_to_nothing(tmp_path):
    """An op of a program with no HLO dump (an eval step's jit_loss_fn) was credited to the train step's op of the
    same name; two compiles of one name (another shape, or a copied dump) were read as the larger one; an empty
    trace read "100 % of op time credited" of a made-up 1 µs."""
    from tools.profiling.summary import render_markdown, summarize

    second = FUSED.replace('%tanh.2 = f32[4,16]{1,0} tanh(%fusion.7), metadata={op_name="tanh" stack_frame_id=4}',
                           '%tanh.2 = f32[4,16]{1,0} tanh(%fusion.7), metadata={op_name="tanh" stack_frame_id=1}\n'
                           '  %extra.9 = f32[4,16]{1,0} copy(%tanh.2)')  # the larger of the two compiles
    assert second != FUSED
    ev = lambda op, module, pid, ts: {"ph": "X", "name": op, "ts": ts, "dur": 10, "pid": 1, "tid": 1,  # noqa: E731
                                      "args": {"hlo_op": op, "hlo_module": module, "program_id": pid}}
    _profile(tmp_path / "p", [ev("tanh.2", "jit_step", 60, 0), ev("tanh.2", "jit_step", 77, 20),
                              ev("fusion.7", "jit_loss_fn", 12, 40)],
             {"module_0060.jit_step.cpu_after_optimizations.txt": FUSED,
              "module_0077.jit_step.cpu_after_optimizations.txt": second})
    s = summarize(tmp_path / "p", use_xprof=False)
    # each op in its own program (two lines: the two compiles differ there); the loss function's op has no dump,
    # so no line (it was read as fusion.7 of the train step: a matmul)
    sources = sorted((o["module"], o["source"], o["category"]) for o in s["ops"])
    assert sources == [("jit_loss_fn", "", "unmapped"), ("jit_step", "model.py:10", "elementwise"),
                       ("jit_step", "model.py:12", "elementwise")], sources
    assert s["attributed_pct"] == round(100 * 20 / 30, 2)

    _profile(tmp_path / "none", [], {})
    empty = summarize(tmp_path / "none", use_xprof=False)
    assert empty["total_op_self_us"] == 0 and empty["attributed_pct"] is None
    assert "No XLA ops in the trace" in render_markdown(empty)


def test_a_malformed_or_empty_trace_is_an_error_naming_the_file(tmp_path):
    """A string among the events, an event without `ts`, `step_num: "abc"` were Python tracebacks naming no file;
    a 0-byte xplane parsed as an empty profile and was summarised as one."""
    from tools.errors import InputError
    from tools.profiling.trace import read_trace

    op = {"ph": "X", "name": "a", "ts": 1, "dur": 1, "args": {"hlo_op": "a", "hlo_module": "m"}}
    for n, events in enumerate([["junk", op], [{**op, "ts": None}], [{"ph": "X", "ts": 1, "args": {"step_num": "x"}}],
                                [{"ph": "M", "name": "thread_name", "args": {}}, op]]):
        _profile(tmp_path / f"c{n}", events, {})
        if n in (0, 3):  # a stray string, a name event without its name: skipped, the rest read
            assert [o.op for o in read_trace(tmp_path / f"c{n}").ops] == ["a"]
            continue
        with pytest.raises(InputError, match=r"host\.trace\.json\.gz.*unreadable trace event 0"):
            read_trace(tmp_path / f"c{n}")
    empty = tmp_path / "e" / "plugins" / "profile" / "r1"
    empty.mkdir(parents=True)
    (empty / "vm.xplane.pb").write_bytes(b"")
    with pytest.raises(InputError, match=r"vm\.xplane\.pb.*an empty file"):
        read_trace(tmp_path / "e")


def test_gap_says_a_run_s_trace_is_unreadable_instead_of_no_tokens(tmp_path):
    """A truncated trace made the gap read "no tokens/s for one of the runs", exit 0, as if nothing was there."""
    import json

    kb = tmp_path / "kb"
    (kb / "wiki").mkdir(parents=True)
    for side in ("ours", "ref"):
        folder = tmp_path / side
        (folder / "hlo").mkdir(parents=True)
        (folder / "hlo" / "module_0060.jit_step.cpu_after_optimizations.txt").write_text(FUSED)
        run = folder / "trace" / "plugins" / "profile" / "r1"
        run.mkdir(parents=True)
        (run / "vm.xplane.pb").write_bytes(b"\x0a\x05cut" if side == "ours" else b"")
    r = CliRunner().invoke(cli, ["--root", str(kb), "gap", str(tmp_path / "ours"), str(tmp_path / "ref"), "--no-file",
                                 "--json"])
    out = json.loads(r.output)
    assert "no gap measured (ours: " in out["verdict"] and "vm.xplane.pb" in out["verdict"], out["verdict"]
    from tools.agent.ops_gap import GapOut  # one shape: the CLI's --json is the registry's answer, as over MCP
    assert set(out) == set(GapOut.model_fields) and "config_items" in out, set(out) ^ set(GapOut.model_fields)
    assert "the reference: " in out["verdict"] and "an empty file" in out["verdict"], out["verdict"]


def test_a_new_line_where_a_moved_line_was_is_its_own_row(tmp_path):
    """A line inserted at 186 pushed A's 186 to 187: the new line's time was added to the row of A's 186 (and its
    ops paired with that line's), so the moved line's real change read -11.8 us where it was -51.8 us."""
    from tools.profiling.diff import diff

    def side(lines, ops):
        return {"n_steps": 1, "hlo_modules": ["m"], "steps": {}, "categories": [], "total_op_self_us": 0,
                "source_lines": [{"location": loc, "self_us": us, "code": code, "function": "block"}
                                 for loc, us, code in lines],
                "ops": [{"op": n, "category": "matmul", "sig": sig, "source": src, "self_us": us, "pos": i}
                        for i, (n, sig, src, us) in enumerate(ops)]}

    a = side([("m.py:186", 150.3, "q = rope(h @ wq)"), ("m.py:190", 10.0, "x = y")],
             [("fusion.1", "s1", "m.py:186", 150.3)])
    b = side([("m.py:186", 39.9, "h = h + tanh(h)"), ("m.py:187", 98.5, "q = rope(h @ wq)"),
              ("m.py:190", 10.0, "x = y")],
             [("fusion.9", "s9", "m.py:186", 39.9), ("fusion.2", "s1", "m.py:187", 98.5)])
    d = diff(a, b, top=10)
    rows = {r["key"]: (r["a_us"], r["b_us"]) for r in d["lines"]}
    assert rows["m.py:186"] == (150.3, 98.5) and rows["m.py:186 (B)"] == (0.0, 39.9), rows
    pairs = {(r.get("a_op"), r.get("b_op")) for r in d["ops"]}
    assert ("fusion.1", "fusion.2") in pairs and ("—", "fusion.9") in pairs, d["ops"]


def test_a_gap_item_an_analysis_no_longer_lists_is_abandoned(tmp_path):
    """Run again, an analysis that no longer listed an item left its hypothesis open for the loop's queue (and an
    orphan): it is abandoned now, saying why; another author's page, and an item still listed, stay as they are."""
    from tools import pages
    from tools.agent.ops_gap import _retire
    from tools.loop.spec import LoopSpec
    from tools.project import Project
    from tools.writer import Writer

    kb = Project(tmp_path / "kb")
    folder = kb.wiki / "hypotheses" / "m" / "l"
    folder.mkdir(parents=True)
    link = "item 1 of the [gap analysis](../../../analyses/gap-x-vs-y.md)"
    for name, author in (("gap-old.md", "tools gap"), ("gap-kept.md", "tools gap"), ("gap-mine.md", "ada")):
        (folder / name).write_text(pages.render({"title": name, "type": "hypothesis", "status": "open",
                                                 "author": author}, f"# {name}\n\n{link}\n"))
    target = LoopSpec(name="", path=kb.root, model="m", lane="l", variant="", command=[], knobs={})
    out = _retire(kb, Writer(kb.wiki), target, "analyses/gap-x-vs-y.md", {"hypotheses/m/l/gap-kept.md"})
    assert out == ["hypotheses/m/l/gap-old.md"]
    status = {p.name: pages.split(p.read_text())[0]["status"] for p in folder.glob("*.md")}
    assert status == {"gap-old.md": "abandoned", "gap-kept.md": "open", "gap-mine.md": "open"}
    assert "no longer lists this difference" in (folder / "gap-old.md").read_text()


def test_an_op_without_a_program_id_or_from_xprof_still_maps(tmp_path):
    """From a review: an op matched by its module's name alone (no program id) raised KeyError, and xprof's rows,
    whose module is the program id ("60"), all came out unmapped."""
    from tools.profiling import summary as summary_mod

    ev = {"ph": "X", "name": "tanh.2", "ts": 0, "dur": 10, "pid": 1, "tid": 1,
          "args": {"hlo_op": "tanh.2", "hlo_module": "jit_step"}}
    _profile(tmp_path / "p", [ev], {"module_0060.jit_step.cpu_after_optimizations.txt": FUSED})
    s = summary_mod.summarize(tmp_path / "p", use_xprof=False)
    assert [(o["category"], o["source"]) for o in s["ops"]] == [("elementwise", "model.py:12")]
    # xprof's rows (a device plane: none on this CPU) name the module by the program id of its dump
    assert summary_mod.xprof_program("60") == 60 and summary_mod.xprof_program("jit_step") is None


def test_the_items_of_a_gap_never_claim_more_than_the_gap_together_and_what_none_touches_stays_unexplained():
    """Each item was capped at the gap on its own: four items claimed 25.1 % of a step when 18.7 % could be closed
    (the gap is net of the categories where ours is faster), and a category no item touched showed as 0 unexplained."""
    from tools.gap.compare import Side
    from tools.gap.estimate import estimate

    def side(label, cats_us, step_ms):
        summary = {"n_steps": 1, "steps": {"median_ms": step_ms},
                   "categories": [{"category": c, "self_us": us} for c, us in cats_us.items()]}
        return Side(label, {}, summary=summary, metrics={"tokens_per_s": 1e6 / step_ms, "step_time_ms": step_ms})

    # per token (1,000 tokens a step): ours spends 40 more in matmul, 20 more in reduction, 30 less in elementwise
    ours = side("a", {"matmul": 100_000, "reduction": 30_000, "elementwise": 20_000}, 150)
    ref = side("b", {"matmul": 60_000, "reduction": 10_000, "elementwise": 50_000}, 120)
    items = [{"touches": ["matmul"]}, {"touches": ["matmul"]}]
    est = estimate(items, ours, ref)
    gap = est["gap_us_per_token"]
    assert gap == pytest.approx(30.0)
    claimed = sum(it["share_pct"] for it in items) / 100 * est["ours_us_per_token"]
    assert claimed <= gap + 1e-6
    # matmul is 40 of the 60 we spend more, so 2/3 of the gap; reduction (no item) keeps its 1/3
    assert claimed == pytest.approx(20.0, rel=1e-3)
    assert est["unexplained_us_per_token"] == pytest.approx(10.0, rel=1e-3)


def test_an_empty_or_binary_hlo_dump_is_left_out_not_read_as_a_program(tmp_path):
    from tools.errors import InputError
    """A 0-byte or non-UTF-8 `*after_optimizations.txt` parsed as an empty module named `?`: two such folders were
    "Identical optimized HLO" (the runner's no-op check reads that fingerprint), and a diff of a run against its own
    folder moved every line."""
    from tools.profiling.hlo import load_programs
    from tools.profiling.hlo_diff import fingerprint, hlo_diff

    name = "module_0001.jit_step.cpu_after_optimizations.txt"
    for sub, data in (("zero", b""), ("binary", b"\x89PNG\r\n\x1a\n\xff\xfe\x00garbage")):
        (tmp_path / sub).mkdir()
        (tmp_path / sub / name).write_bytes(data)
        assert fingerprint(tmp_path / sub) is None and load_programs(tmp_path / sub) == {}
    with pytest.raises(InputError, match=r"zero/module_0001\.jit_step.*: empty"):
        hlo_diff(tmp_path / "zero", tmp_path / "binary")
    # beside a real dump, a bad one is left out and said
    (tmp_path / "good").mkdir()
    (tmp_path / "good" / name).write_text(FUSED)
    (tmp_path / "good" / "module_0002.jit_other.cpu_after_optimizations.txt").write_bytes(b"")
    d = hlo_diff(tmp_path / "good", tmp_path / "good")
    assert d["identical"] and [m["module"] for m in d["modules"]] == ["jit_step"]
    assert len(d["left_out"]) == 2 and all(line.endswith(": empty") for line in d["left_out"])
    assert fingerprint(tmp_path / "good") is not None


def test_the_side_by_side_rows_hold_mfu_and_the_speed_the_verdict_is_read_on():
    """Records keep the MFU as `mfu_causal_percent` / `mfu_noncausal_percent`; the rows read a `mfu_percent` dict no
    record has, so MFU was never compared. And the verdict read each run's fastest step (+25 %) beside a table whose
    only tokens/s row was the median (1.36x)."""
    from tools.gap.compare import Side, step_rows

    def side(tps, best, causal, noncausal):
        return Side("x", {}, metrics={"tokens_per_s": tps, "tokens_per_s_best": best, "step_time_ms": 10.0,
                                      "mfu_percent": causal, "mfu_causal_percent": causal,
                                      "mfu_noncausal_percent": noncausal})

    rows = {r["metric"]: r for r in step_rows(side(1000.0, 1200.0, 23.8, 30.1), side(1360.0, 1500.0, 32.3, 40.2))}
    assert (rows["MFU (causal FLOPs)"]["ours"], rows["MFU (causal FLOPs)"]["ref"]) == (23.8, 32.3)
    assert rows["MFU (noncausal FLOPs)"]["ratio"] == round(40.2 / 30.1, 3)
    assert rows["tokens/s, fastest steady step"]["ratio"] == 1.25 and rows["tokens/s"]["ratio"] == 1.36


def test_gap_exits_1_when_no_gap_could_be_measured(tmp_path):
    """Two folders whose speed cannot be read (HLO, no trace): "no tokens/s for one of the runs", exit 0 (a CI step
    read it as compared)."""
    from click.testing import CliRunner

    from tools.cli import cli

    for side in ("a", "b"):
        (tmp_path / side / "hlo").mkdir(parents=True)
        (tmp_path / side / "hlo" / "module_0001.jit_step.cpu_after_optimizations.txt").write_text(FUSED)
    (tmp_path / "kb" / "wiki").mkdir(parents=True)
    for extra in ([], ["--json"]):
        res = CliRunner().invoke(cli, ["--root", str(tmp_path / "kb"), "gap", str(tmp_path / "a"), str(tmp_path / "b"),
                                       "--no-file", *extra])
        assert res.exit_code == 1 and "no gap measured" in res.output, res.output


def test_profile_top_must_be_at_least_one(tmp_path):
    """`--top -260` listed 3 ops (Python's slice dropped the last 260)."""
    from click.testing import CliRunner

    from tools.cli import cli

    for cmd in (["summary", str(tmp_path)], ["diff", str(tmp_path), str(tmp_path)]):
        res = CliRunner().invoke(cli, ["profile", *cmd, "--top", "-260"])
        assert res.exit_code == 2 and "--top" in res.output, res.output


def test_one_program_each_named_apart_is_compared_as_one(tmp_path):
    """`jit_train_step` against `jit_update`: an empty table, then "Only in A" and "Only in B": a change whose only
    difference is the function's name could never be identical."""
    from tools.profiling.hlo_diff import hlo_diff, render_markdown

    for side, name in (("a", "jit_step"), ("b", "jit_update")):
        (tmp_path / side).mkdir()
        (tmp_path / side / f"module_0001.{name}.cpu_after_optimizations.txt").write_text(
            FUSED.replace("HloModule jit_step", f"HloModule {name}"))
    d = hlo_diff(tmp_path / "a", tmp_path / "b")
    assert d["identical"] and d["paired"] == ["jit_step", "jit_update"] and not d["only_in_a"], d
    assert "A's `jit_step` compared with B's `jit_update`" in render_markdown(d)


def test_a_programs_ops_run_between_the_steps_are_no_steps_time_on_a_cpu_host(tmp_path):
    """An MLP's data made between its annotated steps (`jit__randint`, 0.47 ms a step) counted as per-step op time,
    and shrank the host/idle share `tools gap` reads; a step's own ops that run past its annotation stay its."""
    from tools.profiling.summary import summarize

    def ev(op, module, ts, dur=10):
        return {"ph": "X", "name": op, "ts": ts, "dur": dur, "pid": 1, "tid": 2,
                "args": {"hlo_op": op, "hlo_module": module}}
    step = lambda n, ts: {"ph": "X", "name": "train", "ts": ts, "dur": 100, "pid": 1, "tid": 1,  # noqa: E731
                          "args": {"step_num": n}}
    events = [step(0, 0), step(1, 200), ev("tanh.2", "jit_step", 10, 80), ev("tanh.2", "jit_step", 210, 80),
              ev("tanh.2", "jit_step", 290, 20),  # past its step's end: still the step's program
              ev("rng.1", "jit__randint", 120, 50), ev("rng.1", "jit__randint", 320, 50)]
    _profile(tmp_path / "p", events, {"module_0060.jit_step.cpu_after_optimizations.txt": FUSED})
    s = summarize(tmp_path / "p", use_xprof=False)
    assert {o["module"] for o in s["ops"]} == {"jit_step"} and s["total_op_self_us"] == 180.0, s["ops"]
    assert "0.100 ms of ops of programs no annotated step ran left out" in s["op_times_from"]
    # from a review: annotations around a dispatch only (the program runs after them) hold little of the op time;
    # then every op counts (a small op landing in a 20 µs window had left the train program out)
    short = [{**step(0, 0), "dur": 20}, {**step(1, 200), "dur": 20}, ev("c.1", "jit_convert", 5, 5),
             ev("tanh.2", "jit_step", 30, 100), ev("tanh.2", "jit_step", 230, 100),
             ev("rng.1", "jit__randint", 150, 30)]
    _profile(tmp_path / "q", short, {"module_0060.jit_step.cpu_after_optimizations.txt": FUSED})
    s = summarize(tmp_path / "q", use_xprof=False)
    assert s["total_op_self_us"] == 235.0 and "left out" not in s["op_times_from"], s["op_times_from"]
