"""`tools exp gate`: a CI performance gate. The command under test runs interleaved against a named baseline's
command (its recorded command and environment, with the lane's calibration), through the same runner, integrity
checks and statistics as `tools exp run`, and is filed like any run. The gate reads the verdict:

- exit 0: no regression: the 95 % interval of the change does not lie wholly below ``-max_regression_pct`` (with
  ``strict``, it must lie wholly above it: an undecided interval fails too);
- exit 1: a regression beyond it (or the command crashed);
- exit 3: incomparable: the run was filed ``invalid`` (another shape, a changed loss trajectory, an integrity
  finding) or the baseline could not be measured again, so no speed verdict holds;
- exit 2: usage (no such baseline, no command) — raised before anything runs.

It prints one JSON verdict: ``comparable`` with the reasons, the gain and its interval, the rounds and the pages."""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path

from ..errors import InputError
from ..gitrun import git
from ..project import Project
from . import baselines, records, stats
from .runner import RunSpec, run_experiment
from .sides import script_changed, script_of

DEFAULT_MAX_REGRESSION_PCT = 2.0
DEFAULT_REPEATS = 4       # rounds before the gate's first look (an even count: the arm order has alternated evenly)
DEFAULT_MAX_REPEATS = 12  # rounds it may add while its estimate is a regression its interval does not yet decide


@dataclass
class GateResult:
    exit_code: int
    verdict: dict


def gate(project: Project, name: str, command: list[str], cwd: Path, model: str | None = None,
         lane: str | None = None, max_regression_pct: float = DEFAULT_MAX_REGRESSION_PCT,
         repeats: int = DEFAULT_REPEATS, max_repeats: int = DEFAULT_MAX_REPEATS, statistic: str = "median",
         timeout: float = 1800.0, echo: bool = False,
         strict: bool = False, baseline_cwd: Path | None = None, runner: str = "local",
         runner_options: dict | None = None) -> GateResult:
    """``baseline_cwd``: a checkout of the baseline's code (in CI, the pull request's base commit) where the
    baseline's command runs; without it, it runs in this checkout, and only its script's saved copy (when there
    is one) is the baseline's own code. ``repeats`` rounds, then (``max_repeats`` above them) more at every second
    round while the interval is undecided and the estimate lies below the limit (``strict``: while undecided), up
    to ``max_repeats``: a slowdown the first rounds could not decide on a noisy lane is measured until they do,
    not passed as undecided; ``max_repeats`` 0: exactly ``repeats`` rounds."""
    hi = max(max_repeats, repeats) if max_repeats else 0
    base = baselines.get(project, name, model, lane)
    prior = records.find(records.lane_records(project.wiki, base["model"], base["lane"]), base["exp_id"])
    if prior is None:  # the page was removed, or the entry edited by hand
        raise InputError(project.wiki / baselines.STORE,
                         f"baseline {name!r} names {base['exp_id']}, which is not a filed run of "
                         f"{base['model']}/{base['lane']}: tag another with `tools exp baseline tag {name} EXP_ID`")
    ran_in = _ran_in(project.root, prior)
    if baseline_cwd is None and (lost := _code_lost(project, prior, ran_in)):  # nothing is run: nothing filed
        return GateResult(3, {"baseline": name, "baseline_exp": base["exp_id"], "exp_id": None, "page": None,
                              "verdict": "not run", "gain_pct": None, "interval_pct": None, "rounds": None,
                              "max_regression_pct": max_regression_pct, "tokens_per_s": None,
                              "baseline_tokens_per_s": base.get("tokens_per_s"), "comparable": False,
                              "regression": None, "why": lost, "reasons": [lost]})
    spec = RunSpec(model=base["model"], lane=base["lane"], variant=base["variant"], command=list(command),
                   compare_to=base["exp_id"], repeats=max(2, repeats), max_repeats=hi, statistic=statistic,
                   settled=_settled(max_regression_pct, strict),
                   description=f"gate against {name}", slug=f"gate-{name}",
                   hypothesis=f"no slower than baseline {name} ({base['exp_id']}) by more than {max_regression_pct:g} %",
                   timeout=timeout, echo=echo, cwd=cwd,
                   compare_cwd=_ran_in(baseline_cwd, prior, inside=project.root) if baseline_cwd else None,
                   compare_checkout=baseline_cwd is not None,
                   # what the baseline protected, hashed where it ran: a change to it makes the run invalid (exit 3)
                   protected=sorted(prior.get("protected") or {}), protected_root=ran_in,
                   runner=runner, runner_options=dict(runner_options or {}))
    out = run_experiment(project, spec)
    rec = out.record
    timing = rec.get("timing") or {}
    interval = timing.get("interval_pct")
    verdict = {"baseline": name, "baseline_exp": base["exp_id"], "exp_id": out.exp_id, "page": f"wiki/{out.page}",
               "verdict": out.verdict, "gain_pct": rec.get("gain_pct"), "interval_pct": interval,
               "confidence_pct": timing.get("confidence_pct"),
               "rounds": timing.get("rounds"), "max_regression_pct": max_regression_pct,
               "tokens_per_s": out.metrics.get("tokens_per_s"), "baseline_tokens_per_s": base.get("tokens_per_s"),
               "reasons": list(out.reasons), "notes": list(rec.get("notes") or []),
               "baseline_code": str(spec.compare_cwd) if spec.compare_cwd else "this checkout (the script's saved "
                                                                                 "copy where there is one)",
               "calibrated": bool(rec.get("calibrated_by"))}
    if out.stopped_by:  # a cancelled CI job is no regression: exit as a stopped process does, as `exp run` does
        return GateResult(143 if out.stopped_by == "SIGTERM" else 130,
                          {**verdict, "comparable": False, "regression": None, "decided": False,
                           "why": f"stopped by {out.stopped_by} before a verdict: nothing was decided"})
    if out.verdict == "crash":
        late = next((r for r in out.reasons if "timed out" in r), "")
        return GateResult(1, {**verdict, "comparable": True, "regression": True, "decided": True,
                              "why": f"the command did not finish: {late}" if late else
                              "the command crashed (its page says how)"})
    apart = _incomparable(project, base, rec)
    if out.verdict == "invalid" or not interval or apart:
        why = "no speed verdict holds: " + ("; ".join(apart or out.reasons) or "no interleaved timing")
        return GateResult(3, {**verdict, "comparable": False, "regression": None, "decided": False, "why": why,
                              "reasons": apart + verdict["reasons"]})
    slower = interval[1] < -max_regression_pct
    decided = slower or interval[0] >= -max_regression_pct  # the interval lies wholly on one side of the limit
    # an adaptive gate's looks share the 5 %: each look's interval is wider (99 % at 5 looks), and says so
    conf = timing.get("confidence_pct") or 95.0
    shown = f"{conf:g} % interval [{interval[0]:+.2f}, {interval[1]:+.2f}] %"
    if slower:
        why = f"slower: the whole {shown} lies below -{max_regression_pct:g} %"
    elif decided:
        why = f"no regression: the whole {shown} lies above -{max_regression_pct:g} %"
    else:
        why = (f"undecided after {timing.get('rounds')} rounds: the {shown} straddles -{max_regression_pct:g} % "
               f"(more rounds, --max-repeats, or a calibrated lane would decide it)"
               + ("; --strict fails it" if strict else "; passed without --strict"))
    code = 1 if slower or (strict and not decided) else 0
    return GateResult(code, {**verdict, "comparable": True, "regression": slower, "decided": decided, "why": why})


def _settled(limit: float, strict: bool):
    """When the gate may stop adding rounds: its interval lies wholly on one side of ``-limit``, or (not
    ``strict``) its estimate does not lie below it: it passes, undecided, as a fixed count of rounds would. Stopping
    there never makes a regression verdict more likely, and every look has its share of the error (``stats.looks``)."""
    def settled(t: stats.Timing) -> bool:
        lo, hi = t.interval_pct
        return hi < -limit or lo >= -limit or (not strict and t.gain_pct >= -limit)
    return settled


def _ran_in(checkout: Path, rec: dict, inside: Path | None = None) -> Path:
    """The folder a record ran in, at the same place under ``checkout``: a record's folder is relative to the
    knowledge base, which sits at ``inside``'s place in its git repository (a checkout of that repository holds it
    there too). ``checkout`` itself when the record names no folder, or an absolute one, or it is not there."""
    ran = Path(str(rec.get("cwd") or ""))
    if not rec.get("cwd") or ran.is_absolute():
        return checkout
    at = Path()
    if inside is not None:
        top = git(inside, "rev-parse", "--show-toplevel", check=False)
        if top and inside.resolve().is_relative_to(Path(top).resolve()):
            at = inside.resolve().relative_to(Path(top).resolve())
    where = checkout / at / ran
    return where if where.is_dir() else checkout


def _code_lost(project: Project, rec: dict, ran_in: Path) -> str:
    """Why the baseline's own code cannot run here, without a checkout of it: its script changed since it ran and
    the copy it saved is not in this knowledge base (a fresh clone: raw/profiles is not committed). The gate would
    measure this checkout's script on both sides."""
    script = script_of(shlex.split(rec.get("command") or ""), ran_in)
    copy = rec.get("script_copy")
    if script is None or not script_changed(script, rec) or (copy and (project.root / copy).is_file()):
        return ""
    return (f"no speed verdict holds: the script of the baseline `{rec.get('exp_id')}` changed since it ran and its "
            "saved copy is not here, so both sides would run this checkout's script; give --baseline-cwd a checkout "
            "of the base commit (the workflow `tools init --ci github` writes does)")


def _incomparable(project: Project, base: dict, rec: dict) -> list[str]:
    """Why the gated run and the baseline measure different things: another shape (tokens per step, batch,
    sequence), another device kind or count."""
    prior = records.find(records.lane_records(project.wiki, base["model"], base["lane"]), base["exp_id"]) or {}
    out = []
    a, b = records.shape_key_of(prior), records.shape_key_of(rec)
    if a and b and a != b:
        out.append("another shape: " + _differing(a, b))
    pm, rm = prior.get("metrics") or {}, rec.get("metrics") or {}
    for key in ("device_kind", "n_devices", "platform"):
        if pm.get(key) is not None and rm.get(key) is not None and pm[key] != rm[key]:
            out.append(f"another {key.replace('_', ' ')}: {pm[key]} for the baseline, {rm[key]} here")
    return out


_HEADLINE = {0: "passed: no regression", 1: "failed: a regression", 3: "incomparable: no speed verdict",
             130: "stopped (Ctrl-C): nothing was decided", 143: "stopped (SIGTERM): nothing was decided"}


def summary_markdown(result: GateResult) -> str:
    """The verdict as a job summary: the headline, the figures, the reasons and where the run is filed."""
    v = result.verdict
    lo_hi = v.get("interval_pct") or [None, None]
    rows = [("verdict", v["verdict"]), ("gain", _pct(v.get("gain_pct"))),
            ("interval", f"[{_pct(lo_hi[0])}, {_pct(lo_hi[1])}]" if lo_hi[0] is not None else "—"),
            ("rounds", v.get("rounds") or "—"), ("tokens/s", f"{_or_dash(v.get('tokens_per_s'))} (baseline "
                                                             f"{_or_dash(v.get('baseline_tokens_per_s'))})"),
            ("allowed", f"-{v['max_regression_pct']:g} %"), ("baseline", f"{v['baseline']} ({v['baseline_exp']})"),
            ("run", f"{v['exp_id']}: {v['page']}" if v.get("exp_id") else "none (nothing was run)")]
    head = _HEADLINE.get(result.exit_code, str(result.exit_code))
    if result.exit_code == 0 and v.get("decided") is False:
        head = "passed, undecided: no regression shown either way"
    lines = [f"## Performance gate {head}", "",
             v.get("why", ""), "", "| | |", "|---|---|", *[f"| {k} | {val} |" for k, val in rows], ""]
    lines += [f"- {r}" for r in v.get("reasons", [])]
    return "\n".join(lines) + "\n\n"


def _or_dash(x) -> str:
    return "—" if x is None else str(x)


def _pct(x) -> str:
    return "—" if x is None else f"{x:+.2f} %"


def _differing(a: str, b: str) -> str:
    """``batch 4 -> 16``: the keys two shape keys (JSON objects) disagree on, else both whole."""
    import json

    try:
        x, y = json.loads(a), json.loads(b)
    except ValueError:
        return f"the baseline ran {a}, this run {b}"
    if not (isinstance(x, dict) and isinstance(y, dict)):
        return f"the baseline ran {a}, this run {b}"
    keys = sorted(set(x) | set(y), key=str)
    return ", ".join(f"{k} {x.get(k, '—')} -> {y.get(k, '—')}" for k in keys if x.get(k) != y.get(k))
