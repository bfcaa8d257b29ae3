"""Source attribution on real profiles of the reference model: scan/while lines, fused dots, library frames."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
from _prof_helpers import line_row, model_line

from tools.profiling import hlo
from tools.profiling.attribution import Attributor, SourceLines

pytestmark = pytest.mark.slow
SCAN = "jax.lax.scan(micro, zero, tokens_AxMxT)"
MATMUL_LINES = ['@ c(lp["wq_LxDxHK"])', '@ c(lp["wk_LxDxGK"])', '@ c(lp["wv_LxDxGK"])', '@ c(lp["wo_LxHKxD"])',
                '@ c(lp["w_gate_LxDxF"])', '@ c(lp["w_up_LxDxF"])', '@ c(lp["w_down_LxFxD"])']
UNEMBED = 'x_BxTxD @ params["unembed_DxV"]'
LOG_SOFTMAX = "jax.nn.log_softmax(logits_BxTxV"


def _matmul_on_matmul_lines(s: dict) -> float:
    """Share of matmul-category op time credited to a line that holds a matmul (``@`` or einsum)."""
    codes = {r["location"]: r["code"] for r in s["source_lines"]}
    mm = [o for o in s["ops"] if o["category"] == "matmul"]
    on = sum(o["self_us"] for o in mm if re.search(r"@|einsum", codes.get(o["source"], "")))
    return on / sum(o["self_us"] for o in mm)


def _trap(mod, s: dict, run: str) -> float:
    """Op time the old rule (innermost frame, else none) put on the scan line or nowhere."""
    scan = model_line(SCAN)
    if run == "bf16":  # compiler glue (converts, copies) carries the scan's frames as its innermost ones
        hit = [o for o in s["ops"] if (f := mod.instrs[o["op"]].frames) and f[0][1] == scan
               and o["category"] != "control flow"]
    else:  # ops the compiler made without any metadata (in and around the while body)
        hit = [o for o in s["ops"] if not mod.source(o["op"])]
    return sum(o["self_us"] for o in hit) / s["total_op_self_us"]


@pytest.mark.parametrize("run", ["bf16", "bf16_ga2"])
def test_scan_line_does_not_soak_up_op_time(profiles, summaries, run):
    s = summaries[run]
    mod = hlo.load_modules(profiles[run])["jit_train_step"]
    trap = _trap(mod, s, run)
    assert trap > 0.05  # the trap is real in this profile
    # ... and yet only control flow (the loop's own self time) and loop glue without any other home stay there:
    # under a third of what the old rule put there. (Op times of a CPU run vary with the machine's load, so the
    # bound is relative to the same profile's trap, not a fixed share: 3.0 % of the total was seen on a busy run.)
    row = line_row(s, SCAN)
    glue_left = (row["self_us"] - row["categories"].get("control flow", 0.0)) / s["total_op_self_us"]
    print(f"{run}: trap {trap:.3f}, glue left on the scan line {glue_left:.3f}")
    assert glue_left < min(0.05, trap / 3), row
    assert s["attributed_pct"] >= 99
    assert _matmul_on_matmul_lines(s) > 0.99
    for text in MATMUL_LINES:  # every matmul line of the block gets matmul time
        assert line_row(s, text)["categories"].get("matmul", 0) > 0, text


def test_while_op_keeps_only_its_own_time(profiles, summaries):
    """With grad accumulation the scan stays a while loop; its body's ops must not count as its time."""
    from tools.profiling import trace

    s = summaries["bf16_ga2"]
    whiles = [o for o in s["ops"] if o["op"].startswith("while")]
    assert whiles and all(o["category"] == "control flow" and o["via"] == "control flow" for o in whiles)
    assert {o["source"] for o in whiles} == {f"llama_train.py:{model_line(SCAN)}"}
    tr = trace.read_trace(profiles["bf16_ga2"])
    loops = [e for e in tr.ops if e.op in {o["op"] for o in whiles}]
    wall = sum(e.dur_us for e in loops)
    own = sum(o["self_us"] for o in whiles)
    # What the body ran inside the loop's spans, read from the raw trace: the loop keeps the rest and no more.
    # (Only shares of the same profile are compared: a loaded CPU stretches the gaps between body ops.)
    body = sum(trace.busy_time([e for e in tr.ops if e is not c], c.start_us, c.start_us + c.dur_us) for c in loops)
    assert body > 0.5 * wall  # the body is most of the loop's wall time ...
    assert 0 < own < 0.5 * wall  # ... and the loop keeps only its own overhead, not the body it runs
    assert own == pytest.approx(wall - body, rel=0.02, abs=1.0)


@pytest.mark.parametrize("run", ["fp32", "bf16_ga2"])
def test_fused_dot_is_credited_to_the_dot_line(profiles, summaries, run):
    s = summaries[run]
    mod = hlo.load_modules(profiles[run])["jit_train_step"]
    sm, ue = model_line(LOG_SOFTMAX), model_line(UNEMBED)
    # The trap is real: a fusion whose own metadata names log_softmax holds the unembedding dot.
    trapped = [i for i in mod.instrs.values() if i.opcode == "fusion" and i.frames and i.frames[0][1] == sm
               and any(x.opcode == "dot" for x in mod.fused(i))]
    assert trapped
    for ins in trapped:
        o = next(o for o in s["ops"] if o["op"] == ins.name)
        assert (o["source"], o["category"], o["via"]) == (f"llama_train.py:{ue}", "matmul", "fused dot")
    assert line_row(s, UNEMBED)["categories"].get("matmul", 0) > 0
    softmax = line_row(s, LOG_SOFTMAX)
    assert softmax["self_us"] > 0 and "matmul" not in softmax["categories"]  # only the softmax work is left


HELPER = '''import jax.numpy as jnp


def squash(x):
    return jnp.tanh(x) * 2.0
'''
PROGRAM = '''import jax, jax.numpy as jnp
from helperlib import squash


def body(i, x):
    return jnp.sin(x) @ x


def step(x):
    y = squash(x)
    y = jax.lax.fori_loop(0, 3, body, y)
    return jax.lax.cond(y.sum() > 0, lambda v: v * 3.0, lambda v: v - 1.0, y)


jax.jit(step).lower(jnp.ones((8, 8))).compile()
'''


def test_library_frames_and_loop_lines_on_a_real_program(tmp_path):
    """A helper library (in a site-packages folder) and a fori_loop/cond: the op goes to the model line."""
    lib = tmp_path / "site-packages" / "helperlib"
    lib.mkdir(parents=True)
    (lib / "__init__.py").write_text(HELPER)
    prog = tmp_path / "model.py"
    prog.write_text(PROGRAM)
    env = {"PYTHONPATH": str(lib.parent), "TF_CPP_MIN_LOG_LEVEL": "3", "PATH": "/usr/bin:/bin",
           "XLA_FLAGS": f"--xla_dump_to={tmp_path / 'hlo'} --xla_dump_hlo_as_text --xla_dump_hlo_module_re=.*step.*"}
    subprocess.run([sys.executable, str(prog)], env=env, check=True, cwd=tmp_path, capture_output=True)
    mod = hlo.load_modules(tmp_path / "hlo")["jit_step"]
    att = Attributor(mod, SourceLines())
    lines = PROGRAM.splitlines()
    line_of = lambda text: next(n for n, ln in enumerate(lines, 1) if text in ln)
    tanh = next(i for i in mod.instrs.values() if i.opcode == "tanh")
    assert "site-packages" in tanh.frames[0][0]  # the library frame is the innermost one
    holder = next((i for i in mod.instrs.values() if i.opcode == "fusion" and tanh in mod.fused(i)), tanh)
    got = att.credit(holder.name)
    assert got.frame[1] == line_of("y = squash(x)") and got.frame[0] == str(prog)
    assert (prog.as_posix(), line_of("jax.lax.fori_loop")) in att.wrappers
    while_op = next(i for i in mod.instrs.values() if i.opcode == "while")
    assert att.credit(while_op.name).frame[1] == line_of("jax.lax.fori_loop")
    assert att.credit(while_op.name).via == "control flow"
    dot = next(i for i in mod.instrs.values() if i.opcode == "dot")
    assert att.credit(dot.name).frame[1] == line_of("jnp.sin(x) @ x")


QK, PV = '"btgrk,bsgk->bgrts"', '"bgrts,bsgk->btgrk"'


@pytest.mark.parametrize("run", ["fp32", "bf16_ga2"])
def test_attention_dots_are_their_own_category(summaries, run):
    """QKᵀ and PV (dots batched over batch × kv-heads) are `attention`; the weight matmuls stay `matmul`."""
    s = summaries[run]
    cats = {c["category"]: c["self_us"] for c in s["categories"]}
    assert cats.get("attention", 0) > 0 and cats.get("matmul", 0) > 0, cats
    for text in (QK, PV):
        assert line_row(s, text)["categories"].get("attention", 0) > 0, text
    for text in MATMUL_LINES + [UNEMBED]:
        assert "attention" not in line_row(s, text)["categories"], text
