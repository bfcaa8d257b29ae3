"""A remote arm's secrets (forwarded, or set with --env) reach the arm, and only that arm, and no file the runner
keeps: the round's script under raw/profiles held `export HF_TOKEN=...`, xpk packed it into the workload's manifest
and Ray echoed it into the job log."""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import pytest

import tools.runners
from tools.runners import Arm

HF, WANDB = "hf_abc123secretvalue9", "wandb-0123456789abcdef-secret"
SEE = ("import hashlib, os\n"
       "def h(k):\n"
       "    v = os.environ.get(k)\n"
       "    return hashlib.sha256(v.encode()).hexdigest()[:16] if v else 'none'\n"
       "carriers = sorted(k for k in os.environ if k.startswith('_AR_S'))\n"
       "print('SEEN', h('HF_TOKEN'), h('WANDB_API_KEY'), 'carriers=' + ','.join(carriers), flush=True)\n")


def _digest(v: str) -> str:
    return hashlib.sha256(v.encode()).hexdigest()[:16]


# named as secrets, whatever they look like: spaces, five characters, a service account key of many lines
ODD = {"DB_PASSWORD": "correct horse battery staple", "API_KEY": "ab12z",
       "GCP_CREDENTIALS": '{"type": "service_account",\n "private_key": "-----BEGIN PRIVATE KEY-----\\nMIIEv"}'}


def _arms(raw: Path) -> list[Arm]:
    cmd = [sys.executable, "-c", SEE]
    return [Arm("baseline-1", cmd, raw / "baseline-1.log", timeout=60),
            Arm("run-1", cmd, raw / "run-1.log", env={"HF_TOKEN": HF, **ODD}, timeout=60)]


@pytest.mark.parametrize("runner, options", [
    ("template", {"poll_s": 0.1, "forward_env": ["WANDB_API_KEY"]}),
    ("xpk", {"poll_s": 0.1, "forward_env": ["WANDB_API_KEY"], "cluster": "c1", "project": "p1", "zone": "z1",
             "tpu_type": "v5litepod-8", "docker_image": "img"}),
])
def test_secrets_reach_their_arm_and_no_file(fake_state, tmp_path, monkeypatch, runner, options):
    monkeypatch.setenv("WANDB_API_KEY", WANDB)
    raw = tmp_path / "raw" / "exp-v001"
    procs = tools.runners.get(runner, options).run_round(_arms(raw))
    assert [p.rc for p in procs] == [0, 0], [p.tail for p in procs]
    seen = [next(ln.split()[1:] for ln in p.log.read_text().splitlines() if ln.startswith("SEEN")) for p in procs]
    assert seen[0] == ["none", _digest(WANDB), "carriers="]  # the variant's secret never reaches the baseline
    assert seen[1] == [_digest(HF), _digest(WANDB), "carriers="]
    for f in tmp_path.rglob("*"):  # the kept script, job notes, logs, the stubs' record of every call
        if f.is_file():
            data = f.read_bytes()
            assert HF.encode() not in data and WANDB.encode() not in data, f
            assert not any(v.encode() in data or v[:20].encode() in data for v in ODD.values()), f
    script = next((raw / "remote").glob("*.sh")).read_text()
    assert "_AR_S1_HF_TOKEN" in script and "export HF_TOKEN=" in script


def test_a_submit_that_does_not_pass_its_environment_on_fails_the_arm_saying_so(fake_state, tmp_path):
    """Over ssh (or with `sbatch --export=NONE`) the job's environment is not the submit's: the arm ran with an
    empty HF_TOKEN and said nothing."""
    raw = tmp_path / "raw" / "exp-v001"
    runner = tools.runners.get("template", {"poll_s": 0.1,
                                            "submit": "env -u _AR_S0_HF_TOKEN sbatch --parsable {script}"})
    procs = runner.run_round(_arms(raw)[1:])
    assert procs[0].rc not in (0, None)
    assert "HF_TOKEN did not reach the job" in procs[0].log.read_text()
    assert "SEEN" not in procs[0].log.read_text()


def test_hide_secrets_false_writes_them_into_the_script_as_asked(fake_state, tmp_path):
    raw = tmp_path / "raw" / "exp-v001"
    runner = tools.runners.get("template", {"poll_s": 0.1, "hide_secrets": False,
                                            "submit": "env -u _AR_S0_HF_TOKEN sbatch --parsable {script}"})
    (proc,) = runner.run_round(_arms(raw)[1:])
    assert proc.rc == 0, proc.tail
    assert _digest(HF) in proc.log.read_text()
    assert HF in next((raw / "remote").glob("*.sh")).read_text()
