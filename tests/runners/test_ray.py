"""The Ray runner against a real two-node Ray cluster on loopback, inside a private network namespace.

Ray binds some ports on all interfaces, so the cluster and the client (ray_driver.py) run under
``unshare -n -p -f --mount-proc``: only loopback exists there, and every process it starts dies with it.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from _runner_helpers import in_private_namespace

import tools.runners
from tools.errors import ToolsError

HERE = Path(__file__).parent
@pytest.fixture(scope="module")
def ray_run(tmp_path_factory) -> dict:
    pytest.importorskip("ray", reason="Ray is not installed: pip install -e '.[test]' (the `ray` extra)")
    work = tmp_path_factory.mktemp("ray")
    out = work / "result.json"
    ray_tmp = tempfile.mkdtemp(prefix="arw-ray-", dir="/tmp")  # short: Ray's socket paths must fit 107 bytes
    cmd = in_private_namespace([sys.executable, str(HERE / "ray_driver.py"), str(out), str(work), ray_tmp])
    try:
        r = subprocess.run(cmd, capture_output=True, check=False, text=True, timeout=400, cwd=HERE.parents[1])
    finally:
        shutil.rmtree(ray_tmp, ignore_errors=True)
    assert out.exists(), f"the Ray driver wrote nothing (exit {r.returncode}):\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    result = json.loads(out.read_text())
    print(json.dumps({k: v for k, v in result.items() if k.endswith("_s")}))  # timings, for the record
    assert r.returncode == 0, r.stderr[-3000:]
    return result


@pytest.mark.slow
def test_two_experiments_at_once_each_stay_on_their_node(ray_run):
    pins = {}
    for exp in ("exp-a", "exp-b"):
        e = ray_run[exp]
        for i, rnd in enumerate(e["rounds"], 1):
            assert [p["name"] for p in rnd] == [f"baseline-{i}", f"run-{i}"]
            assert [p["rc"] for p in rnd] == [0, 0], rnd
            assert [p["step_ms"] for p in rnd] == [20.0, 10.0]  # results parsed, in the round's order
        pin = e["pin"]
        assert ray_run["nodes"][pin["node_id"]] == pin["node_ip"]
        assert len(e["notes"]) == 2 and all(n["state"] == "completed" for n in e["notes"])
        for note in e["notes"]:  # both rounds ran on the node chosen at the first round
            assert note["driver_node_id"] == pin["node_id"]
            assert note["entrypoint_resources"] == {f"node:{pin['node_ip']}": 0.001}
            assert note["worker"]
        pins[exp] = pin["node_id"]
    assert pins["exp-a"] != pins["exp-b"]  # the second experiment took the idle node


@pytest.mark.slow
def test_two_real_experiments_file_into_one_lane_at_once(ray_run):
    lane = ray_run["lane"]
    versions = sorted(row["exp_id"].split("-v")[1][:3] for row in lane["ledger"])
    assert versions == ["001", "002", "003"]  # a baseline, then two variants reserved and filed side by side
    assert lane["20"]["logs"] == ["run.log"]
    for ms in ("10", "15"):
        v = lane[ms]
        assert v["verdict"] == "supported" and v["status"] == "keep", v  # faster than the 20 ms baseline
        assert v["logs"] == ["baseline-1.log", "baseline-2.log", "run-1.log", "run-2.log"]
        assert len(v["notes"]) == 2 and {n["driver_node_id"] for n in v["notes"]} == {v["pin"]["node_id"]}


@pytest.mark.slow
def test_a_hung_ray_job_is_stopped_and_its_processes_are_gone(ray_run):
    h = ray_run["hung"]
    assert h["hung_s"] == 3 and h["rc"] is None and "made no log progress for 3 s: cancelled" in h["tail"]
    assert len(h["pids"]) == 2 and h["alive_after"] == []


@pytest.mark.slow
def test_a_secret_reaches_the_arm_and_no_file_of_the_round(ray_run):
    """The round's script held `export HF_TOKEN=...`: kept under raw/profiles, and Ray echoed it into the job log."""
    s = ray_run["secret"]
    digest = hashlib.sha256(b"hf_xyz987secretvalue1").hexdigest()
    assert s["rc"] == 0 and s["seen"] == [f"SEEN {digest} []"], s
    assert s["files_holding_it"] == []


def test_ray_options_are_checked():
    with pytest.raises(ToolsError, match="runner ray: unknown option.*adress"):
        tools.runners.get("ray", {"adress": "http://x"})


@pytest.mark.slow
def test_a_loop_with_two_experiments_in_flight_on_the_cluster(ray_run):
    loop = ray_run["loop"]
    assert loop["stop_reason"].startswith("budget: runs 2 of 2") and loop["pending"] is None
    (a, b) = loop["history"]
    for h in (a, b):  # every round of an experiment ran on the node chosen at its first round
        assert h["nodes"] == [h["pin"]["node_id"]] and h["verdict"] != "crash"
    assert a["span"][0] < b["span"][1] and b["span"][0] < a["span"][1], "the two experiments ran at the same time"
