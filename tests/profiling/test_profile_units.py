"""Fast checks of the profiling pieces on small HLO texts; the real-profile tests are in the other files."""

from __future__ import annotations

import subprocess
import sys

from click.testing import CliRunner

from tools.cli import cli
from tools.profiling import hlo
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
    assert hlo.canonical_text(text) == hlo.canonical_text(FUSED)
    assert "metadata" not in hlo.canonical_text(FUSED) and "dot.#1" in hlo.canonical_text(FUSED)


def test_new_commands_have_help_and_imports_stay_light():
    for args in (["profile", "hlo-diff"], ["profile", "diff"], ["profile", "summary"]):
        res = CliRunner().invoke(cli, [*args, "--help"])
        assert res.exit_code == 0 and "--json" in res.output, args
    code = ("import sys, tools.profiling.diff, tools.profiling.hlo_diff, tools.profiling.attribution; "
            "print([m for m in ('jax', 'xprof') if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
