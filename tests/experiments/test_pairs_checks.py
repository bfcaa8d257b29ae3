"""In-process pairs without running a model: which arms one process may run (`pairs.plan`), each arm's blocks on
the runner's clock (`pairs.clock_check`: an honest log passes, a slowed timer and replayed times are caught), and
the lane's noise model kept apart for rounds of pairs."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tools.experiments import integrity, noise, pairs
from tools.experiments.arms import ArmResult
from tools.experiments.sides import Side
from tools.runners.process import Proc

REPO = Path(__file__).resolve().parents[2]
LLAMA = REPO / "tools" / "templates" / "llama_train.py"


def test_plan_pairs_flag_only_changes_of_the_reference_model(tmp_path, monkeypatch):
    base = Side([sys.executable, str(LLAMA), "--preset", "tiny"], {}, tmp_path)
    var = Side([sys.executable, str(LLAMA), "--preset", "tiny", "--remat", "full"], {}, tmp_path)
    planned, why = pairs.plan(base, var, "local")
    assert why == "" and planned == pairs.Planned(sys.executable, LLAMA.resolve(), ["--preset", "tiny"],
                                                  ["--preset", "tiny", "--remat", "full"])
    assert not planned.options and planned.env(var) == ({}, [])
    cmd = pairs.side(planned, var, 6).command
    assert cmd[1] == str(pairs.SCRIPT) and cmd[cmd.index("--model") + 1] == str(LLAMA.resolve())
    # "--b=" keeps a lone flag ("--scan") one value: "--b --scan" would read as two options
    assert "--b=--preset tiny --remat full" in cmd and cmd[cmd.index("--rounds") + 1] == "6"

    monkeypatch.delenv("XLA_FLAGS", raising=False)
    flagged = Side(var.command, {"XLA_FLAGS": "--xla_foo"}, tmp_path)
    xla, why = pairs.plan(base, flagged, "local")
    assert why == "" and xla.options_b == {"xla_foo": "true"} and not xla.options_a and xla.xla_flags is None
    # the process gets no XLA_FLAGS of its own: each arm compiles with its own as options
    assert xla.env(flagged) == ({}, ["XLA_FLAGS"])
    cmd = pairs.side(xla, flagged, 6).command
    assert '--b-options={"xla_foo": "true"}' in cmd and not any(c.startswith("--a-options") for c in cmd)
    swapped = xla.swapped()
    assert swapped.options_a == {"xla_foo": "true"} and swapped.flags_b == xla.flags_a
    assert "environment" in pairs.plan(base, Side(var.command, {"OTHER": "1"}, tmp_path), "local")[1]
    assert "acts on the process" in pairs.plan(base, Side(var.command, {"XLA_FLAGS": "--xla_dump_to=/x"}, tmp_path),
                                               "local")[1]
    assert "not `--xla_name=value`" in pairs.plan(base, Side(var.command, {"XLA_FLAGS": "--flagfile=f"}, tmp_path),
                                                  "local")[1]
    # the same environment said two ways (the baseline's record keeps the variable, the variant inherits it)
    monkeypatch.setenv("JAX_PLATFORMS", "cpu")
    assert pairs.plan(Side(base.command, {"JAX_PLATFORMS": "cpu"}, tmp_path), var, "local")[1] == ""
    assert "environment" in pairs.plan(Side(base.command, {}, tmp_path, ["JAX_PLATFORMS"]), var, "local")[1]
    (tmp_path / "elsewhere").mkdir()
    assert "different folders" in pairs.plan(base, Side(var.command, {}, tmp_path / "elsewhere"), "local")[1]
    assert "runs each arm where it is sent" in pairs.plan(base, var, "xpk")[1]
    other = tmp_path / "train.py"
    other.write_text("def main():\n    pass\n")
    assert "different scripts" in pairs.plan(base, Side([sys.executable, str(other)], {}, tmp_path), "local")[1]
    plain = Side([sys.executable, str(other)], {}, tmp_path)
    assert "does not build its step as the reference model does" in pairs.plan(plain, plain, "local")[1]
    assert "is not `python <script>.py flags`" in pairs.plan(Side(["bash", "run.sh"], {}, tmp_path), var,
                                                            "local")[1]


def _pairs_log(tmp_path: Path, scale: float = 1.0, gap: float = 0.010, k: int = pairs.BLOCK_STEPS) -> ArmResult:
    """A pairs process's log and the runner's clock: 2 arms x 3 blocks of ``k`` steps, each step really ``gap`` s
    apart on the runner's clock (every line read on its own), reported as ``scale`` times that."""
    lines, clock, t, offset = [], [], 0.0, 0
    res = {"schema": pairs.SCHEMA, "rounds": 3, "block_steps": k}
    step = {"a": 0, "b": 0}
    times = {"a": [], "b": []}
    blocks = {"a": [], "b": []}
    for r in range(3):
        for arm in ("a", "b") if r % 2 == 0 else ("b", "a"):
            block = []
            for _ in range(k):
                t += gap
                n = step[arm]
                line = json.dumps({"arm": arm, "step": n, "loss": 5.0 - n / 100, "step_time_s": gap * scale})
                lines.append(line)
                offset += len(line) + 1
                clock.append((round(t, 6), offset))
                times[arm].append(gap * scale)
                block.append(n)
                step[arm] += 1
            blocks[arm].append(block)
            t += 0.050  # the other arm's block, or the start of the next round
    for arm in ("a", "b"):
        res[arm] = {"blocks": blocks[arm], "result": {"step_times_s": times[arm],
                                                      "losses": [5.0 - n / 100 for n in range(step[arm])]}}
    log = tmp_path / "pairs.log"
    log.write_text("\n".join(lines) + "\n" + json.dumps(res) + "\n")
    return ArmResult("pairs", Proc(0, False, t, log, "", clock=clock), res, kind="pairs")


def test_each_block_is_timed_on_the_runners_clock(tmp_path):
    out = integrity.Integrity()
    pairs.clock_check(_pairs_log(tmp_path), out)
    assert out.checks == {"clock": "ok"} and not out.findings
    # 3 blocks of 8 steps: 7 timed gaps each; the other arm's blocks between them never count
    assert pairs.BLOCK_STEPS == 8 and out.facts["clock"]["pairs-b"]["steps"] == 21
    assert abs(out.facts["clock"]["pairs-b"]["reported_s"] - 0.21) < 1e-9

    slowed = integrity.Integrity()
    pairs.clock_check(_pairs_log(tmp_path, scale=0.6, gap=0.02), slowed)
    assert {f.signature for f in slowed.findings} == {"clock-slow"}

    replayed = integrity.Integrity()
    pairs.clock_check(_pairs_log(tmp_path, scale=2.0, gap=0.02), replayed)
    assert {f.signature for f in replayed.findings} == {"clock-replay"}
    # a block bounds its gaps with one step's slack (the first line's read): a timer at 0.6x needs 8-step blocks
    short = integrity.Integrity()
    pairs.clock_check(_pairs_log(tmp_path, scale=0.6, gap=0.02, k=4), short)
    assert not short.findings


def test_only_the_blocks_asked_for_are_rounds(tmp_path):
    def proc(out: dict) -> Proc:
        log = tmp_path / "pairs.log"
        log.write_text(json.dumps(out) + "\n")
        return Proc(0, False, 3.0, log, "")

    times = [0.01] * (1 + 2 * pairs.BLOCK_STEPS)
    blocks = [list(range(1 + i * pairs.BLOCK_STEPS, 1 + (i + 1) * pairs.BLOCK_STEPS)) for i in range(2)]
    arm = {"blocks": blocks, "result": {"step_times_s": times, "tokens_per_step": 512, "losses": [5.0] * len(times)}}
    good = {"schema": pairs.SCHEMA, "rounds": 2, "block_steps": pairs.BLOCK_STEPS, "warmup_steps": 1, "a": arm,
            "b": arm}
    whole, base, var = pairs.split("pairs", proc(good), 60, None)
    assert whole.crash is None and len(base) == len(var) == 2 and all(a.ok for a in base + var)
    # each round reads its block's steps, the first in the warm-up slot (the clock times the gaps after it)
    assert var[1].result["step_times_s"] == [times[s] for s in blocks[1]] and var[1].pairs == "b"
    assert abs(whole.proc.wall_s - 2 * sum(a.proc.wall_s for a in var)) < 1e-9
    # the second process runs the variant as arm A: its rounds follow the first's, each arm read as its own
    b_arm = dict(arm, result=dict(arm["result"], step_times_s=[0.02] * len(times)))
    _, base2, var2 = pairs.split("pairs-swapped", proc(dict(good, b=b_arm)), 60, None, swapped=True, first_round=3)
    assert [a.name for a in base2 + var2] == ["baseline-3", "baseline-4", "run-3", "run-4"]
    assert [a.pairs for a in base2 + var2] == ["b", "b", "a", "a"]
    assert base2[0].result["step_times_s"][0] == 0.02 and var2[0].result["step_times_s"][0] == 0.01
    twice = dict(good, b=dict(arm, blocks=[blocks[0], blocks[0]]))  # one block read as two rounds
    short = dict(good, a=dict(arm, result=dict(arm["result"], step_times_s=times[:5])))
    for bad in (twice, short, dict(good, block_steps=1)):
        whole, base, var = pairs.split("pairs", proc(bad), 60, None)
        assert whole.crash.startswith("bad JSON field `blocks`") and not base and not var, whole.crash
    whole, _, _ = pairs.split("pairs", Proc(1, False, 3.0, tmp_path / "pairs.log", ""), 60, None)
    assert whole.crash and "exit code 1" in whole.crash


def test_an_arm_without_clock_evidence_leaves_the_check_unchecked(tmp_path):
    whole = _pairs_log(tmp_path, k=2)  # one timed gap per block, three in all per arm: checked
    out = integrity.Integrity()
    pairs.clock_check(whole, out)
    assert out.checks["clock"] == "ok"
    whole.result["a"]["blocks"] = [[0], [2], [4]]  # arm a's blocks give the clock nothing to time
    out = integrity.Integrity()
    pairs.clock_check(whole, out)
    assert out.checks["clock"].startswith("unchecked: pairs-a: only 0 timed steps") and out.status == "partial"


def test_missing_step_lines_and_wrong_losses_are_findings(tmp_path):
    whole = _pairs_log(tmp_path)
    text = whole.proc.log.read_text().splitlines()
    whole.proc.log.write_text("\n".join(ln for ln in text if '"step": 5,' not in ln) + "\n")
    out = integrity.Integrity()
    pairs.clock_check(whole, out)
    assert {f.signature for f in out.findings} == {"step-count"}

    whole = _pairs_log(tmp_path)
    whole.result["b"]["result"]["losses"][2] = 9.0
    out = integrity.Integrity()
    pairs.clock_check(whole, out)
    assert [f.signature for f in out.findings] == ["step-losses"] and "pairs-b" in out.findings[0].detail


def test_rounds_of_pairs_have_a_noise_model_of_their_own():
    def rec(i, ratios, pairs_rec):
        base = [1000.0] * len(ratios)
        return {"exp_id": f"e{i}", "variant": "tiny/cpu", "status": "filed", "verdict": "inconclusive",
                "interleaved": True, "pairs": pairs_rec,
                "runs_tokens_per_s": {"baseline": base, "variant": [1000.0 * r for r in ratios]}}

    process = [rec(i, [1.2, 0.85, 1.1, 0.9], None) for i in range(3)]        # σ ~15 % per round
    inproc = [rec(10 + i, [1.02, 0.99, 1.01, 0.98], {"rounds": 4}) for i in range(3)]  # σ ~2 %
    lane = process + inproc
    proc_model = noise.lane_noise(lane, "tiny/cpu")
    pairs_model = noise.lane_noise(lane, "tiny/cpu", pairs=True)
    assert proc_model.experiments == pairs_model.experiments == 3
    assert pairs_model.sigma_pct < 5 < proc_model.sigma_pct


def test_a_calibration_counts_for_the_rounds_it_was_measured_as():
    from tools.experiments import records

    def cal(i, pairs_rec):
        return {"exp_id": f"c{i}", "variant": "tiny/cpu", "role": "calibration", "status": "filed",
                "pairs": pairs_rec, "calibration": {"rounds": 5, "pair_sd_pct": 2.0 if pairs_rec else 9.0}}

    process, inproc = cal(1, None), cal(2, {"rounds": 5})
    # pairs take a pairs calibration, newest first; processes never take one (its σ is not theirs: narrower)
    assert records.calibration_for([process, inproc], "tiny/cpu", pairs=True)["exp_id"] == "c2"
    assert records.calibration_for([process, inproc], "tiny/cpu")["exp_id"] == "c1"
    assert records.calibration_for([inproc], "tiny/cpu") is None
    # pairs without one of their own fall back to the processes' (wider: a floor never narrower than theirs)
    assert records.calibration_for([process], "tiny/cpu", pairs=True)["exp_id"] == "c1"

    # a lane calibrated as pairs only (a loop with `pairs: true`): processes are floored by the larger of the
    # default and the pairs calibration's σ, with the default band
    from tools.experiments import comparison, stats

    quiet = comparison.current_noise([inproc], "tiny/cpu", None, "median")
    assert quiet.sigma_floor_pct == stats.DEFAULT_PAIR_SD_PCT and quiet.band_pct == stats.RUN_TO_RUN_FLOOR_PCT
    busy = dict(inproc, calibration={"rounds": 5, "pair_sd_pct": 6.0})
    assert comparison.current_noise([busy], "tiny/cpu", None, "median").sigma_floor_pct == 6.0
    assert comparison.current_noise([busy], "tiny/cpu", None, "median", pairs=True).band_pct == stats.MIN_BAND_PCT
