"""Crashes that teach, on real failures of the reference model: an out-of-memory at a shape over a memory limit set
with ulimit, a NaN from a too-large learning rate, a shape error, and a hang of the stand-in script. Each is filed
with its kind, its frames linked (model code, the installed framework), a signature shared by the same failure at
another shape, and a signature page; `tools exp crashes` lists them."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from _exp_helpers import FAKE, LLAMA, PY, exp_run, fake
from click.testing import CliRunner

from tools import pages
from tools.cli import cli
from tools.experiments import crash_facts, crash_pages, records

FAKE_LINES = Path(FAKE).read_text().splitlines()
LIMIT_KB = 6_000_000  # ulimit -v: the address space the OOM runs get


def run(project, *args, command, code=0):
    return exp_run(project, *args, command=command, code=code, model="llama", lane="cpu", variant="tiny/cpu")


def lane(project):
    return records.lane_records(project.wiki, "llama", "cpu")


def oom_command(batch: int) -> list[str]:
    return ["bash", "-c", f"ulimit -v {LIMIT_KB}; exec {PY} llama_train.py --preset tiny --steps 3 --batch {batch}"]


@pytest.fixture
def here(project, monkeypatch):
    shutil.copy(LLAMA, project.root / "llama_train.py")
    monkeypatch.chdir(project.root)  # the model code runs from the knowledge base, as a loop's work tree does
    return project


@pytest.mark.slow
def test_a_real_oom_is_filed_with_figures_linked_frames_and_one_signature_across_shapes(here):
    project = here
    (project.wiki / "concepts").mkdir(exist_ok=True)  # what the crash's advice links where the knowledge base has it
    (project.wiki / "concepts" / "rematerialization.md").write_text("---\ntitle: Rematerialization\ntype: concept\n"
                                                                     "---\n\n# Rematerialization\n")
    for batch in (131072, 196608):
        run(project, "-m", f"batch {batch}", command=oom_command(batch), code=1)
    a, b = lane(project)
    assert a["verdict"] == b["verdict"] == "crash"
    ca, cb = a["crash"], b["crash"]
    assert ca["kind"] == cb["kind"] == "oom" and "RESOURCE_EXHAUSTED" in ca["message"]
    assert ca["oom"]["needed_bytes"] > LIMIT_KB * 1024  # the allocator's figure: more than the limit we set
    assert ca["signature"] == cb["signature"]  # the same failure at another shape
    model = [f for f in ca["frames"] if f["role"] == "model"]
    assert model and model[-1]["rel"] == "llama_train.py"
    assert any(f["role"] == "framework" and f["package"] == "jax" for f in ca["frames"])
    page = (project.wiki / a["page"]).read_text()
    assert "## Crash" in page and "kind: **oom**" in page and "one allocation needed" in page
    assert f"../../../{crash_pages.signature_path(ca['signature'])}" in page
    assert "unmatched: jax is not an ingested codebase (installed" in page  # named, with the version
    # what to try, from this crash's own figures and flags, linking the concept page the knowledge base has
    tips = page[page.index("What to try:"):page.index("Frames, innermost last")]
    assert "`batch=131072` asked for one buffer of" in tips and "(`batch=65536`)" in tips, tips
    assert "[rematerialization](../../../concepts/rematerialization.md)" in tips and "host offload" not in tips
    sig_meta, sig_body = pages.split((project.wiki / crash_pages.signature_path(ca["signature"])).read_text())
    assert sig_meta["type"] == "observation" and sig_meta["runs"] == 2 and sig_meta["kind"] == "oom"
    assert a["exp_id"] in sig_body and b["exp_id"] in sig_body
    assert "## What to try" in sig_body and "`batch=196608` asked for one buffer of" in sig_body  # the latest run
    out = CliRunner().invoke(cli, ["--root", str(project.root), "exp", "crashes", "--json"])
    (sig,) = json.loads(out.output)["signatures"]
    assert sig["count"] == 2 and sig["kind"] == "oom" and sig["last_seen"] == b["exp_id"]
    text = CliRunner().invoke(cli, ["--root", str(project.root), "exp", "crashes"]).output
    assert ca["signature"] in text and "x2" in text


@pytest.mark.slow
def test_a_real_nan_and_a_real_shape_error_get_their_kinds(here):
    project = here
    run(project, "-m", "huge lr", command=[PY, "llama_train.py", "--preset", "tiny", "--steps", "6", "--lr", "1e12"])
    run(project, "-m", "odd head dim", code=1,
        command=[PY, "llama_train.py", "--preset", "tiny", "--steps", "3", "--d-model", "63", "--n-heads", "3",
                 "--n-kv-heads", "1"])
    nan, shape = lane(project)
    assert nan["verdict"] == "invalid" and nan["crash"]["kind"] == "nan" and nan["crash"]["nan_step"] == 1
    assert shape["verdict"] == "crash" and shape["crash"]["kind"] == "shape"
    inner = [f for f in shape["crash"]["frames"] if f["role"] == "model"][-1]
    assert inner["func"] == "rope" and inner["rel"] == "llama_train.py"
    assert shape["crash"]["signature"] != nan["crash"]["signature"]
    tips = (project.wiki / nan["page"]).read_text().split("What to try:")[1]
    assert "After 1 finite step the updates made it diverge: lower `lr=1e12`" in tips, tips
    tips = (project.wiki / shape["page"]).read_text().split("What to try:")[1]
    assert "tiles them at `llama_train.py:" in tips and "rope`" in tips and "`n-heads=3`" in tips, tips


@pytest.mark.parametrize("how", ["py-spy", "faulthandler"])
def test_a_hang_is_killed_after_its_stack_is_taken(project, monkeypatch, how):
    """With py-spy on PATH its dump; without, SIGABRT to a process started with PYTHONFAULTHANDLER."""
    if how == "py-spy" and not shutil.which("py-spy"):
        pytest.skip("py-spy is not installed")
    if how == "faulthandler":
        monkeypatch.setenv("PATH", os.pathsep.join(d for d in os.environ["PATH"].split(os.pathsep)
                                                   if not (Path(d) / "py-spy").exists()))
    run(project, "--hang-after", "2", "--timeout", "60", "-m", "stuck", command=fake("--hang"), code=1)
    (r,) = lane(project)
    assert r["verdict"] == "crash" and r["crash"]["kind"] == "hang"
    assert r["reasons"][0].startswith("hung: no output for 2 s")
    stack = [f for f in r["crash"]["frames"] if f["file"].endswith("fake_train.py")]
    sleep = FAKE_LINES.index("    time.sleep(600)", FAKE_LINES.index("if a.hang:")) + 1
    assert stack and stack[-1]["func"] == "<module>" and stack[-1]["line"] == sleep  # where it hangs
    (log,) = (project.root / r["raw_dir"]).glob("*.log")
    assert "no output for 2 s: the stack of the hung process" in log.read_text()


def test_a_hang_without_a_stack_does_not_say_its_stack_is_in_the_log():
    """A remote runner cancels a silent job without taking a stack; the advice said "Its Python stack is in the
    log" of a log that held only step lines."""
    from tools.experiments.crash_advice import what_to_try

    (none,) = what_to_try({"kind": "hang", "frames": []}, {}, {})
    assert "no Python stack was taken" in none and "py-spy dump" in none and "stack is in the log" not in none
    frames = [{"role": "model", "func": "wait", "rel": "train.py", "line": 9}]
    assert "stack is in the log" in what_to_try({"kind": "hang", "frames": frames}, {}, {})[0]


def test_signatures_strip_what_changes_between_runs():
    frames = [crash_facts.Frame("/w/train.py", 10, "step", role="model", rel="train.py"),
              crash_facts.Frame("/sp/jax/_src/api.py", 5, "jit", role="framework", package="jax",
                                rel="jax/_src/api.py")]
    a = crash_facts.signature("oom", "RESOURCE_EXHAUSTED: allocating 123 bytes at 0xdeadbeef in /tmp/x/y", frames)
    b = crash_facts.signature("oom", "RESOURCE_EXHAUSTED: allocating 98765 bytes at 0x12ab in /var/z", frames)
    assert a == b and a.startswith("oom-")
    assert crash_facts.signature("oom", "RESOURCE_EXHAUSTED: allocating 1 bytes", frames[:1]) != a
    figs = crash_facts.oom_figures("Ran out of memory in memory space hbm. Used 17.5G of 15.75G hbm.\n"
                                   "Largest program allocations in hbm:\n  1. Size: 4.00G\n  2. Size: 512.0M\n")
    assert figs["used_bytes"] == int(17.5 * 2 ** 30) and figs["available_bytes"] == int(15.75 * 2 ** 30)
    assert figs["largest_bytes"] == [4 * 2 ** 30, 512 * 2 ** 20]


def test_the_first_fix_is_a_later_run_one_knob_away_that_passed():
    crashed = {"exp_id": "v1", "version": 1, "model": "m", "lane": "l", "loop_config": {"batch": 32, "remat": "none"}}
    recs = [crashed,
            {"exp_id": "v2", "version": 2, "model": "m", "lane": "l", "status": "filed", "verdict": "crash",
             "loop_config": {"batch": 32, "remat": "dots"}},
            {"exp_id": "v3", "version": 3, "model": "m", "lane": "l", "status": "filed", "verdict": "supported",
             "loop_config": {"batch": 16, "remat": "full"}, "page": "p3.md"},
            {"exp_id": "v4", "version": 4, "model": "m", "lane": "l", "status": "filed", "verdict": "inconclusive",
             "loop_config": {"batch": 32, "remat": "full"}, "page": "p4.md"}]
    fix = crash_pages.first_fix([crashed], recs)
    assert fix == {"exp_id": "v4", "page": "p4.md", "knob": "remat", "value": "full", "fixes": "v1"}


def test_a_commands_knobs_are_read_past_a_comment_and_a_bad_quote():
    """The knobs a crash page and its advice read from a command: a `bash -c` script's comment with an apostrophe
    (`# don't`) and a command the shell could not read (an unclosed quote) gave no knobs at all."""
    import shlex

    script = "ulimit -v 4000000 && exec python train.py --batch 64 --remat=full  # don't halve it"
    assert crash_pages.config_of({"command": shlex.join(["bash", "-c", script])}) == {"batch": "64", "remat": "full"}
    assert crash_pages.config_of({"command": "python train.py --name o'neil --batch 8"}) == \
        {"name": "o'neil", "batch": "8"}
    both = crash_pages.config_of({"command": shlex.join(["bash", "-c", "python a.py --lr 1e-3;python b.py --dp 2"])})
    assert both == {"lr": "1e-3", "dp": "2"}
    hashed = crash_pages.config_of({"command": shlex.join(["bash", "-c", "python a.py --tag=v#2 --n 1  # --n 9"])})
    assert hashed == {"tag": "v#2", "n": "1"}  # a '#' inside a word starts no comment


def test_framework_frames_link_to_the_ingested_codebase_only_at_its_version(tmp_path):
    wiki = tmp_path / "wiki"
    (wiki / "codebases" / "jax" / "modules").mkdir(parents=True)
    overview = wiki / "codebases" / "jax" / "overview.md"
    (wiki / "codebases" / "jax" / "modules" / "jax._src.api.md").write_text("---\ntitle: jax._src.api\n---\n")
    frame = {"file": "/x/site-packages/jax/_src/api.py", "line": 2509, "func": "block_until_ready",
             "role": "framework", "package": "jax", "rel": "jax/_src/api.py"}
    model = {"file": "/w/llama_train.py", "line": 348, "func": "main", "role": "model", "rel": "llama_train.py"}
    rec = {"crash": {"frames": [model, frame]}, "jax_version": "0.10.2",
           "script_copy": "raw/profiles/run/code/llama_train.py", "commit": "abcdef1234567890"}
    (m, f), = [crash_pages.link_frames(wiki, rec)]
    assert f["note"] == "unmatched: jax is not an ingested codebase (installed 0.10.2)" and "link" not in f
    assert m["link"] == "raw:raw/profiles/run/code/llama_train.py" and "at commit abcdef123456" in m["note"]
    overview.write_text("---\ntitle: jax codebase\ntype: codebase\nversion: 0.10.2\n---\n")
    f = crash_pages.link_frames(wiki, rec)[1]
    assert f["link"] == "codebases/jax/modules/jax._src.api.md" and f["note"] == "jax 0.10.2, as ingested"
    overview.write_text("---\ntitle: jax codebase\ntype: codebase\nversion: 0.4.30\n---\n")
    f = crash_pages.link_frames(wiki, rec)[1]
    assert "link" not in f and f["note"] == "unmatched: installed jax 0.10.2, ingested 0.4.30"
    rows = crash_pages.frames_section(crash_pages.link_frames(wiki, rec), "experiments/llama/cpu/x.md")
    assert any("`raw/profiles/run/code/llama_train.py`" in r for r in rows)  # raw/ is named, never linked


@pytest.mark.slow
def test_a_real_compile_error_from_a_bad_xla_flag(here):
    """The loop's XLA_FLAGS knob can propose a flag this XLA does not know: XLA aborts before any step."""
    project = here
    run(project, "-m", "bad flag", "--env", "XLA_FLAGS=--xla_cpu_no_such_flag=true", code=1,
        command=[PY, "llama_train.py", "--preset", "tiny", "--steps", "2"])
    (r,) = lane(project)
    assert r["verdict"] == "crash" and r["crash"]["kind"] == "compile", r["crash"]
    assert "Unknown flag in XLA_FLAGS: --xla_cpu_no_such_flag" in r["crash"]["message"]
    assert (project.wiki / crash_pages.signature_path(r["crash"]["signature"])).is_file()
    tips = (project.wiki / r["page"]).read_text().split("What to try:")[1]
    assert "The run set `XLA_FLAGS=--xla_cpu_no_such_flag=true`: a flag" in tips, tips


@pytest.mark.slow
def test_the_reference_model_silent_past_hang_after_is_hung_with_its_own_stack(here):
    """No step line for half a second while jax imports and the step compiles (on a warm machine a second was once
    enough for both): the runner takes the real process's stack (py-spy, else faulthandler), kills it, and the
    frames point into the reference model."""
    project = here
    run(project, "--hang-after", "0.5", "--timeout", "120", "-m", "silent", code=1,
        command=[PY, "llama_train.py", "--preset", "tiny", "--steps", "3"])
    (r,) = lane(project)
    assert r["verdict"] == "crash" and r["crash"]["kind"] == "hang", r["crash"]
    model = [f for f in r["crash"]["frames"] if f["role"] == "model"]
    assert model and model[0]["rel"] == "llama_train.py", r["crash"]["frames"]
    assert (project.wiki / crash_pages.signature_path(r["crash"]["signature"])).is_file()
    tips = (project.wiki / r["page"]).read_text().split("What to try:")[1]
    compiling = any("compile" in f["func"].lower() for f in r["crash"]["frames"] if f["role"] == "framework")
    said = ("It was compiling when it went silent" if compiling   # where the stack was taken: wherever the second
            else "Its Python stack is in the log; it waited at `llama_train.py:")  # without output ran out
    assert said in tips, tips


def test_a_script_run_from_another_folder_is_still_model_code(project, tmp_path_factory, monkeypatch):
    """`python /elsewhere/train.py` from the knowledge base: its frames are the model's own code, not `other`."""
    monkeypatch.chdir(project.root)
    script = tmp_path_factory.mktemp("elsewhere") / "boom.py"
    script.write_text("def step():\n    raise ValueError('boom at step 3')\n\n\nstep()\n")
    run(project, "-m", "boom", command=[PY, str(script)], code=1)
    (r,) = lane(project)
    frames = r["crash"]["frames"]
    assert [(f["role"], f.get("rel"), f["func"]) for f in frames] == [("model", "boom.py", "<module>"),
                                                                      ("model", "boom.py", "step")], frames


def test_oom_advice_from_the_allocators_figures():
    """With used and available figures (TPU: "Used 17.50G of 15.75G hbm"), the advice says how short the run was
    and the largest size that can fit at most; it moves the knobs the run has (`remat`, `grad_accum`) and links the
    concept pages the knowledge base holds."""
    from tools.experiments.crash_advice import what_to_try

    oom = {"kind": "oom", "oom": {"needed_bytes": 2 << 30, "used_bytes": 15 << 30, "available_bytes": 16 << 30,
                                  "largest_bytes": [6 << 30]}}
    tips = what_to_try(oom, {"batch": 64, "remat": "none", "grad_accum": 2}, {},
                       lambda slug: f"../../concepts/{slug}.md" if slug == "rematerialization" else None)
    assert tips[0] == "- It was 1.00 GiB short: 2.00 GiB asked for with 15.00 GiB of 16.00 GiB in use."
    assert tips[1].startswith("- `batch=64`: at most `batch=60` fits")
    assert "One allocation is 6.00 GiB (38 % of the device)" in tips[2]
    assert "(`remat=full`, or a policy saving only the matmul outputs); see [rematerialization]" in tips[3]
    assert tips[4].startswith("- `grad_accum=4` with half the micro-batch") and "see [" not in tips[4]


def test_exp_crashes_takes_the_registry_pairs_too(project):
    """docs/agents.md lists `tools exp crashes model=... lane=...`, as for every registry command: it was a usage
    error ("unexpected extra arguments")."""
    from click.testing import CliRunner

    from tools.cli import cli

    for args in (["model=m", "lane=l"], ["--model", "m", "--lane", "l"], ["--args", '{"model": "m"}']):
        r = CliRunner().invoke(cli, ["--root", str(project.root), "exp", "crashes", *args, "--json"])
        assert r.exit_code == 0 and '"signatures": []' in r.output, (args, r.output)


def test_an_allocator_warning_or_a_banner_naming_oom_does_not_make_another_error_an_oom(project, tmp_path):
    """XLA's BFC allocator warns "ran out of memory trying to allocate 2.10GiB ... not a failure" and runs on; a
    later KeyError was filed `oom` with "halve batch" advice, and the loop's memory rule then kept larger batches
    off. A real out-of-memory (a MemoryError, XLA's RESOURCE_EXHAUSTED error line, a cause in the chain) stays one."""
    warning = ("W external/xla/xla/tsl/framework/bfc_allocator.cc:306] Allocator (GPU_0_bfc) ran out of memory "
               "trying to allocate 2.10GiB with freed_by_count=0. The caller indicates that this is not a failure")
    bug = tmp_path / "bug.py"
    bug.write_text(f"import sys\nprint({warning!r}, file=sys.stderr)\nprint('OOM-safe loader ready')\n"
                   "def load_batch(step):\n    raise KeyError(f'batch {step} missing')\nload_batch(3)\n")
    exp_run(project, "-m", "keyerror", command=[PY, str(bug), "--batch", "8"], code=1)
    rec = records.lane_records(project.wiki, "m", "l")[-1]
    assert rec["crash"]["kind"] == "other" and "out of memory" not in rec["reasons"][0], rec["crash"]
    tb = 'Traceback (most recent call last):\n  File "t.py", line 3, in <module>\n    f()\n'
    for log in (f"{warning}\n{tb}MemoryError\n",
                f"{tb}RuntimeError: step failed\nE1207 12:00:00.1 123 pjrt.cc:1] RESOURCE_EXHAUSTED: Out of memory\n",
                f"{tb}jaxlib.XlaRuntimeError: RESOURCE_EXHAUSTED: allocating 12G\n\nThe above exception was the "
                f"direct cause of the following exception:\n\n{tb}RuntimeError: the step failed\n",
                "F1207 12:00:00 1 tpu.cc:9] Check failed: Ran out of memory in memory space hbm\n",
                # a launcher's prefix on every line (torchrun's `[rank0]: `, Ray's `(pid=12) `)
                "".join(f"[rank0]: {ln}\n" for ln in (*tb.splitlines(), "torch.OutOfMemoryError: CUDA out of memory")),
                "".join(f"(RayTrainWorker pid=12) {ln}\n" for ln in (*tb.splitlines(), "MemoryError"))):
        facts = crash_facts.analyze(log, "exit code 1, no JSON result line", 1)
        assert facts.kind == "oom", (log, facts.kind)
