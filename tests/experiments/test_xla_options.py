"""XLA flags as per-compile options (tools/experiments/xla_options.py): which flags one process can run as options,
and, with real JAX on the CPU, that an arm compiled with a flag as an option is the program the flag in XLA_FLAGS
gives (a witness process's), that another option is caught, and that an option XLA refuses stops the process with
a reason."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from _exp_helpers import REPO

from tools.experiments import pairs, xla_options

PAIRS = REPO / "experiments" / "llama_pairs.py"
TINY = "--preset tiny"
YNN = "xla_cpu_experimental_ynn_fusion_type"


def test_the_flags_both_arms_share_stay_in_the_process_and_each_arm_compiles_its_own():
    assert xla_options.parse("--xla_a=1  --xla_b --xla_c='x y'") == {"xla_a": "1", "xla_b": "true", "xla_c": "x y"}
    assert xla_options.parse("") == {} and xla_options.parse(None) == {}
    assert xla_options.parse("--flagfile=f") is None and xla_options.parse("--xla_a='unclosed") is None
    (common, a, b), why = xla_options.split({"XLA_FLAGS": "--xla_keep=1 --xla_x=dot", "PATH": "p"},
                                            {"XLA_FLAGS": "--xla_keep=1 --xla_x=eltwise --xla_new=2", "PATH": "p"})
    assert why == "" and common == "--xla_keep=1" and a == {"xla_x": "dot"}
    assert b == {"xla_x": "eltwise", "xla_new": "2"}
    assert xla_options.split({}, {"XLA_FLAGS": "--xla_x=1"})[0] == (None, {}, {"xla_x": "1"})
    assert "beyond XLA_FLAGS" in xla_options.split({"A": "1"}, {"A": "2", "XLA_FLAGS": "--xla_x=1"})[1]
    assert "acts on the process" in xla_options.split({}, {"XLA_FLAGS": "--xla_force_host_platform_device_count=8"})[1]
    # a dump and Compiled.as_text() order a backend_config's keys differently: the same program
    one = 'ENTRY %main.1 {\n  %f.2 = f32[2]{0} fusion(%p.3), backend_config={"b":1,"a":[]}\n}\n'
    two = 'ENTRY %main.7 {\n  %f.9 = f32[2]{0} fusion(%p.8), backend_config={"a":[],"b":1}\n}\n'
    assert xla_options.same_program(one, two) and not xla_options.same_program(one, two.replace("f32[2]", "f32[3]"))


def _run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    full = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"} | env
    return subprocess.run([sys.executable, str(PAIRS), *args], capture_output=True, text=True, timeout=600, env=full)


@pytest.mark.slow  # four processes of real JAX compiles: 20 s
def test_an_arm_compiled_with_the_flag_as_an_option_is_the_program_xla_flags_give(tmp_path):
    planned = pairs.Planned(sys.executable, REPO / "experiments" / "llama_train.py", TINY.split(), TINY.split(),
                            {}, {YNN: "dot"})
    both = _run([f"--a={TINY}", f"--b={TINY}", f'--b-options={json.dumps({YNN: "dot"})}', "--rounds", "1",
                 "--block-steps", "8", "--hlo-dir", str(tmp_path / "pairs")], {})
    assert both.returncode == 0, both.stderr[-2000:]
    out = json.loads(both.stdout.strip().splitlines()[-1])
    # XLA_FLAGS says "dot"; the option is the proto's enum name
    assert out["b"]["options"] == {YNN: "LIBRARY_FUSION_TYPE_DOT"} and out["a"]["options"] == {}
    witness = _run([f"--a={TINY}", f"--b={TINY}", "--witness", "--hlo-dir", str(tmp_path / "w")],
                   {"XLA_FLAGS": f"--{YNN}=dot"})
    assert witness.returncode == 0 and json.loads(witness.stdout.strip().splitlines()[-1])["witness"], witness.stderr
    assert not any('"step"' in ln for ln in witness.stdout.splitlines())  # it compiles and runs no step
    assert pairs.options_hold(planned, tmp_path / "pairs", {"b": tmp_path / "w"}) == ""
    # the flag changed the program: arm A (no option) is not the witness's
    assert not xla_options.same_program((tmp_path / "pairs" / "a.txt").read_text(),
                                        (tmp_path / "w" / "a.txt").read_text())
    # a witness of another flag value: the option's program is not it, and the check says so
    other = _run([f"--a={TINY}", f"--b={TINY}", "--witness", "--hlo-dir", str(tmp_path / "o")], {})
    assert other.returncode == 0, other.stderr[-2000:]
    why = pairs.options_hold(planned, tmp_path / "pairs", {"b": tmp_path / "o"})
    assert why.startswith(f"arm b compiled with `--{YNN}=dot` as options is another program"), why
    # an option XLA does not take: the process stops before any step, naming it
    refused = _run([f"--a={TINY}", f"--b={TINY}", '--b-options={"xla_no_such_flag": "1"}', "--rounds", "1"], {})
    assert refused.returncode == 3 and not any('"step"' in ln for ln in refused.stdout.splitlines())
    assert "xla_no_such_flag" in json.loads(refused.stdout.strip().splitlines()[-1])["refused_option"]


@pytest.mark.slow
def test_a_screen_leaves_out_the_move_whose_option_xla_refuses_and_ranks_the_rest(tmp_path):
    from tools.experiments import screen
    from tools.experiments.sides import Side
    from tools.runners import Arm
    from tools.runners import get as get_runner

    script = REPO / "experiments" / "llama_train.py"
    ynn = pairs.Planned(sys.executable, script, TINY.split(), TINY.split(), {}, {YNN: "dot"})
    refused = pairs.Planned(sys.executable, script, TINY.split(), TINY.split(), {}, {"xla_no_such_flag": "1"})
    side = screen.side(ynn, [refused], Side([sys.executable, str(script), *TINY.split()], {}, tmp_path, []), 2,
                       tmp_path / "hlo")
    assert "--skip-refused" in side.command
    (proc,) = get_runner("local").run_round([Arm("screen", side.command, tmp_path / "screen.log", side.env,
                                                 side.cwd, 600)])
    assert proc.rc == 0, proc.tail
    crash, (b, c) = screen.read(proc, 2, "min", 600)
    # the refused move has no reading and names the refusal; the other move was compiled and timed beside the trunk
    assert crash is None and c.gain_pct is None and "xla_no_such_flag" in c.problem, c
    assert b.gain_pct is not None and not b.problem and b.losses == "ok", b
    assert sorted(p.name for p in (tmp_path / "hlo").iterdir()) == ["a.txt", "b.txt"]
