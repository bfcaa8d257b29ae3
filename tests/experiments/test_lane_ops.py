"""The lane's read operations as a user calls them (`tools exp best|history|get key=value`): a best per variant and
shape, as the model page shows it; a lane named like a number; a hand-edited page without its id left out."""

from __future__ import annotations

import json

from _exp_helpers import exp_run, fake
from click.testing import CliRunner

from tools.cli import cli


def tools(project, *args, code=0):
    r = CliRunner().invoke(cli, ["--root", str(project.root), *args])
    assert r.exit_code == code, r.output + repr(r.exception)
    return r.output


def test_best_and_history_keep_each_shape_apart(project):
    def run(*args, cmd):
        exp_run(project, *args, command=fake(*cmd), lane="sh", trust=True)

    run("--baseline", "-m", "base", cmd=["--step-ms", "40"])
    run("--baseline", "-m", "big base", cmd=["--step-ms", "200", "--batch", "16"])
    run("--repeats", "3", "-m", "big faster", cmd=["--step-ms", "25", "--batch", "16"])
    run("--repeats", "3", "-m", "small faster", cmd=["--step-ms", "8"])
    best = json.loads(tools(project, "exp", "best", "model=m", "lane=sh", "--json"))["best"]
    assert sorted(best) == ["s/tpu (batch=16)", "s/tpu (batch=4)"], best
    assert best["s/tpu (batch=4)"]["exp_id"].endswith("small-faster")
    assert best["s/tpu (batch=16)"]["exp_id"].endswith("big-faster")
    assert best["s/tpu (batch=4)"]["shape"]["batch"] == 4
    hist = json.loads(tools(project, "exp", "history", "model=m", "lane=sh", "--json"))
    assert [r["exp_id"].split("-", 4)[-1] for r in hist["frontier"]] == ["base", "big-base", "big-faster",
                                                                         "small-faster"]
    assert hist["plateau"] == 0


def test_a_lane_named_like_a_number_and_a_page_without_its_id(project):
    exp_run(project, "--baseline", "-m", "base", command=fake(), lane="2", trust=True)
    exp_run(project, "-m", "again", command=fake(), lane="2", trust=True)
    hist = json.loads(tools(project, "exp", "history", "model=m", "lane=2", "--json"))  # the lane "2", not 2
    assert hist["filed"] == 2 and hist["lane"] == "2"
    out = tools(project, "exp", "get", "--args", "notjson", code=2)
    assert "--args is not JSON" in out
    # a hand edit drops a page's exp_id: that page is left out, the lane's commands go on
    page = next(p for p in (project.wiki / "experiments/m/2").glob("*again.md"))
    page.write_text("\n".join(ln for ln in page.read_text().split("\n") if not ln.startswith("exp_id:")))
    assert json.loads(tools(project, "exp", "history", "model=m", "lane=2", "--json"))["filed"] == 1
    assert json.loads(tools(project, "exp", "best", "model=m", "lane=2", "--json"))["best"]["s/tpu"]
