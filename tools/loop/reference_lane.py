"""The loop's reference lane (``reference:`` in the loop file): the reference run, made once (profiled, like any run,
on ``<lane>-reference``) or named by experiment id; the gap page of each trunk against it; and, for ``target:
reference``, an interleaved check of the trunk against the reference on that lane (the reference is its baseline, so
the runner reruns it between the trunk's rounds); and the "gap to reference" region of the lane's model page. The
engine calls these at its steps."""

from __future__ import annotations

from .. import pages
from ..errors import ToolsError
from ..experiments.report import model_path
from ..experiments.runner import run_experiment
from . import gather, runs
from .reference import gap_against, gap_section, measured

CHECK_MARGIN = 0.9  # run an interleaved check once the trunk's own tokens/s is within this factor of the target


def ensure_reference(loop) -> None:
    """Make or find the reference run once; its exp_id, lane and tokens/s go into the state."""
    spec, s = loop.spec, loop.state
    if not spec.reference or (s.reference or {}).get("exp_id"):
        return
    command = spec.reference_command
    if not command:
        from ..gap.sides import find_record

        rec = find_record(loop.project, spec.reference)
        if rec is None:
            raise ToolsError(f"loop {spec.name}: reference {spec.reference!r} is no experiment here (give an "
                             "experiment id or a command)")
    else:
        cwd = loop.workspace.prepare("000").cwd
        loop.say(f"reference: {' '.join(command)}")
        run = runs.runspec(spec, spec.start_config(), {}, cwd, description="loop reference",
                           slug=f"{spec.name}-reference", hypothesis="The reference the loop closes the gap to.",
                           extra={"loop": spec.name, "iteration": 0, "loop_role": "reference",
                                  "loop_started": s.started}, baseline=True)
        run.command, run.lane, run.profile = command, spec.reference_lane, True
        out = run_experiment(loop.project, run, loop.writer)
        if out.verdict in ("crash", "invalid"):
            raise ToolsError(f"loop {spec.name}: the reference run {out.exp_id} was filed {out.verdict}: "
                             f"{'; '.join(out.reasons)} (wiki/{out.page})")
        rec = dict(out.record, page=out.page)
        s.usage["device_s"] += runs.device_seconds(rec)
    s.reference = {"exp_id": rec["exp_id"], "model": rec.get("model"), "lane": rec.get("lane"),
                   "page": rec.get("page"), "tokens_per_s": (rec.get("metrics") or {}).get("tokens_per_s"),
                   "pages": []}
    loop.save()
    loop.say(f"  → reference {rec['exp_id']}: {s.reference['tokens_per_s']} tokens/s  wiki/{rec.get('page')}")


def write_gap_page(loop) -> str | None:
    """The analysis page of the current trunk against the reference (once per trunk)."""
    from ..gap.page import render

    spec, s = loop.spec, loop.state
    if not s.reference or not s.trunk:
        return None
    trunk_rec = next((r for r in gather.records.lane_records(loop.project.wiki, spec.model, spec.lane)
                      if r.get("exp_id") == s.trunk["exp_id"]), None)
    ref_rec = gather.reference_record(loop.project, spec, s.to_dict())
    cfg, kern = dict(s.trunk.get("config") or {}), gather.kernels(loop.project, "")
    analysis = gap_against(loop.project, spec, trunk_rec, ref_rec, cfg, kern, measured(s.reference, s.trunk["exp_id"]))
    if analysis and not analysis["reference_faster"] and analysis.get("differences") and \
            measured(s.reference, s.trunk["exp_id"]) is None:
        # the programs differ, yet one profiled run each says the reference is not faster: on a busy machine that
        # is one noisy reading, so measure the two interleaved, and let that decide
        interleaved_check(loop)
        if (m := measured(s.reference, s.trunk["exp_id"])) is not None:
            analysis = gap_against(loop.project, spec, trunk_rec, ref_rec, cfg, kern, m)
    if not analysis:
        return None
    page = render(analysis, {}, spec.model, spec.lane)
    loop.writer.write_page(page)
    pages = s.reference.setdefault("pages", [])
    if page.path not in pages:
        pages.append(page.path)
    s.reference["last"] = {"page": page.path, "trunk_exp": s.trunk["exp_id"], "items": len(analysis["items"]),
                           "gap_pct": analysis.get("gap_pct"),
                           "remaining": [it["what"] for it in analysis["items"]][:8],
                           "unexplained_us_per_token": (analysis.get("estimate") or {}).get("unexplained_us_per_token")}
    loop.save()
    return page.path


def check(loop) -> None:
    """``target: {reference: PCT}``: when the trunk's own tokens/s comes near the target, or its gap page lists no
    item left, measure it against the reference interleaved (the reference lane's baseline is the reference
    run), and keep the ratio for the gate."""
    spec, s = loop.spec, loop.state
    pct = spec.target.get("reference")
    ref = s.reference or {}
    if pct is None or not ref.get("tokens_per_s") or not s.trunk or (ref.get("check") or {}).get(
            "trunk_exp") == s.trunk["exp_id"]:
        return
    own = float(s.trunk.get("tokens_per_s") or 0) / float(ref["tokens_per_s"]) * 100
    why = same_program(loop)
    if why:  # nothing left to measure: the two runs are one program
        s.reference["check"] = {"exp_id": None, "page": None, "trunk_exp": s.trunk["exp_id"], "ratio_pct": 100.0,
                                "own_pct": round(own, 2), "how": why}
        loop.save()
        loop.say(f"  → trunk at 100 % of the reference: {why}")
        return
    last = ref.get("last") or {}
    same = last.get("trunk_exp") == s.trunk["exp_id"] and last.get("items") == 0  # the HLO shows nothing to close
    if own < pct * CHECK_MARGIN and not same:  # single runs on a busy machine: measure what the evidence says is near
        return
    interleaved_check(loop)


def same_program(loop) -> str:
    """Why the trunk is the reference's own program ("" when it is not): the same command line, environment and
    model code commit, and the same optimized HLO (its fingerprint, read from the compiled program, not from
    anything the program reports). Then its speed is the reference's by construction, and a noisy interleaved
    reading below the target must not keep the loop going."""
    spec, s = loop.spec, loop.state
    ref_rec = gather.reference_record(loop.project, spec, s.to_dict())
    trunk_rec = next((r for r in gather.records.lane_records(loop.project.wiki, spec.model, spec.lane)
                      if r.get("exp_id") == s.trunk["exp_id"]), None)
    if not ref_rec or not trunk_rec:
        return ""
    fp = trunk_rec.get("hlo_fingerprint")
    same = fp and fp == ref_rec.get("hlo_fingerprint") and all(
        trunk_rec.get(k) == ref_rec.get(k) for k in ("command", "commit", "script_sha256")) and \
        dict(trunk_rec.get("env") or {}) == dict(ref_rec.get("env") or {})
    return (f"the trunk runs the reference's own command, environment and code, compiled to the same HLO "
            f"(fingerprint {fp})") if same else ""


def interleaved_check(loop) -> None:
    """The trunk against the reference, interleaved on the reference lane (its baseline is the reference run): the
    ratio goes into ``state.reference.check``."""
    spec, s = loop.spec, loop.state
    ref = s.reference or {}
    own = float(s.trunk.get("tokens_per_s") or 0) / float(ref.get("tokens_per_s") or 1) * 100
    cwd = loop.workspace.prepare("000").cwd
    run = runs.runspec(spec, s.trunk["config"], s.trunk.get("env") or {}, cwd,
                       description="trunk against the reference (interleaved)", slug=f"{spec.name}-reference-check",
                       hypothesis="The trunk runs as fast as the reference.",
                       extra={"loop": spec.name, "iteration": s.iteration, "loop_role": "reference-check",
                              "loop_started": s.started}, compare_to=ref["exp_id"], compare_cwd=cwd)
    run.lane, run.profile = ref.get("lane") or spec.reference_lane, False
    loop.say(f"reference check: trunk {s.trunk['exp_id']} against {ref['exp_id']}, interleaved")
    out = run_experiment(loop.project, run, loop.writer)
    gain = out.record.get("gain_pct")
    s.usage["device_s"] += runs.device_seconds(out.record)
    s.reference["check"] = {"exp_id": out.exp_id, "page": out.page, "trunk_exp": s.trunk["exp_id"],
                            "ratio_pct": round(100 + gain, 2) if gain is not None else None, "own_pct": round(own, 2)}
    loop.save()
    loop.say(f"  → trunk at {s.reference['check']['ratio_pct']} % of the reference (interleaved)  wiki/{out.page}")


def write_model_gap(loop) -> str | None:
    """The region ``gap-<loop>`` of the lane's model page: how much of the gap is closed, what remains, the gap
    pages (the model page keeps regions other writers made, so filing the next run leaves it)."""
    spec, s = loop.spec, loop.state
    path = model_path(spec.model, spec.lane)
    if not s.reference or not (loop.project.wiki / path).is_file():
        return None
    text = gap_section(s.to_dict(), path, heading=f"## Gap to the reference: loop `{spec.name}`")
    if not text:
        return None
    loop.writer.write_page(pages.Page(path, {}, pages.region(f"gap-{spec.name}", text), keep_regions=True))
    return path
