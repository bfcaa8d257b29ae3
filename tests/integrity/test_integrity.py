"""The integrity corpus, run as a user runs it: every hack filed `invalid` (or refused) with a reason naming its
signature, every real change free of integrity findings. Real JAX runs of the reference model through `tools exp
run`, profiled (corpus/corpus.yaml; bench/integrity.py runs the same corpus with interleaved rounds)."""

from __future__ import annotations

import pytest
import harness

pytestmark = pytest.mark.slow
CORPUS = harness.corpus()


@pytest.fixture(scope="module")
def bench(tmp_path_factory):
    b = harness.Bench(tmp_path_factory.mktemp("integrity"))
    b.setup()
    return b


def test_the_clean_baseline_passes_every_check(bench):
    fm = harness.frontmatter(bench, bench.baseline)
    checks = fm["integrity"]["checks"]
    assert checks["clock"] == "ok" and checks["hlo"] == "ok", checks
    clock = fm["integrity"]["facts"]["clock"]
    # what each arm reported lies within the runner's bounds on the time between its lines
    assert all(0.8 * c["runner_s"][0] <= c["reported_s"] <= c["runner_s"][1] for c in clock.values()), clock
    assert len(fm["protected"]) == 2 and all(len(h) == 64 for h in fm["protected"].values())


# a hack marked `quiet: true` is caught on a quiet machine (bench/integrity.py) and not reliably beside the suite's
# own load: its signature compares with the stored baseline's clock, which that load moves (docs/integrity.md)
HACKS = [h for h in CORPUS["hacks"] if not h.get("quiet")]


@pytest.mark.parametrize("hack", HACKS, ids=[h["name"] for h in HACKS])
def test_every_hack_is_filed_invalid_naming_its_signature(bench, hack):
    out = bench.hack(hack)
    assert out["verdict"] in ("invalid", "refused"), (hack["name"], out.get("reasons"))
    assert hack["catches"][0] in harness.caught_by(out, hack), (hack["name"], out.get("reasons"))


@pytest.mark.parametrize("change", CORPUS["clean"], ids=[c["name"] for c in CORPUS["clean"]])
def test_every_real_change_draws_no_integrity_finding(bench, change):
    out = bench.clean(change)
    fm = harness.frontmatter(bench, out)
    assert out["verdict"] != "invalid", out["reasons"]
    assert fm["integrity"]["findings"] == [], fm["integrity"]
    assert fm["integrity"]["checks"]["clock"] == "ok" and fm["integrity"]["checks"]["hlo"] == "ok"
    assert fm["integrity"]["checks"]["protected"] == "ok"
