"""`tools loop`: the autoresearch loop over one lane (start, resume, status, stop, retro)."""

from __future__ import annotations

import contextlib
import json

import click

from .common import pass_project


@click.group(name="loop")
def loop() -> None:
    """Propose, change, run, judge, keep or discard, learn: until a budget, the target or a double plateau."""


def _say(quiet: bool):
    return (lambda msg: None) if quiet else click.echo


@contextlib.contextmanager
def _interruptible():
    """Ctrl-C / SIGTERM during a run: say how to go on, exit as a stopped process does (130 / 143)."""
    from ..loop.engine import LoopInterrupted

    try:
        yield
    except LoopInterrupted as e:
        click.echo(str(e), err=True)
        raise SystemExit(e.exit_code) from None


def _print_end(state: dict, as_json: bool) -> None:
    if as_json:
        from ..loop.status import summary

        click.echo(json.dumps(summary(state), sort_keys=True))
        return
    t = state.get("trunk") or {}
    click.echo(f"loop {state['name']}: {state['status']} after {state['iteration']} iterations"
               + (f" ({state['stop_reason']})" if state.get("stop_reason") else ""))
    click.echo(f"  trunk {t.get('exp_id')}: tokens/s {t.get('tokens_per_s')}; "
               f"frontier moves {max(0, len(state.get('frontier') or []) - 1)}")
    click.echo(f"  page wiki/loops/{state['name']}.md")


def _end(state: dict, as_json: bool) -> None:
    """The final status of a start or resume; a loop stopped by an error exits 1 (a script must not read it as
    done)."""
    _print_end(state, as_json)
    if str(state.get("stop_reason") or "").startswith("error:"):
        raise SystemExit(1)


@loop.command(name="start")
@click.argument("loop_file")
@click.option("--fresh", is_flag=True, help="Discard the loop's state and start over (pages and runs stay).")
@click.option("--iterations", type=click.IntRange(0), default=None, help="Pause after N iterations (resume continues).")
@click.option("--json", "as_json", is_flag=True, help="Print the final status as JSON.")
@click.option("--quiet", "-q", is_flag=True, help="No progress lines.")
@pass_project
def start(project, loop_file, fresh, iterations, as_json, quiet) -> None:
    """Start the loop described by LOOP_FILE (a path, or NAME for loops/NAME.yml).

    \b
    tools loop start loops/llama-cpu.yml
    """
    from ..loop.engine import start as run

    project.require_wiki()
    with _interruptible():
        _end(run(project, loop_file, _say(quiet or as_json), fresh, iterations), as_json)


@loop.command(name="resume")
@click.argument("name")
@click.option("--iterations", type=click.IntRange(0), default=None, help="Pause after N more iterations.")
@click.option("--json", "as_json", is_flag=True, help="Print the final status as JSON.")
@click.option("--quiet", "-q", is_flag=True, help="No progress lines.")
@pass_project
def resume(project, name, iterations, as_json, quiet) -> None:
    """Continue loop NAME from its state on disk (after a stop, a pause or a kill -9)."""
    from ..loop.engine import resume as run

    with _interruptible():
        _end(run(project, name, _say(quiet or as_json), iterations), as_json)


@loop.command(name="status")
@click.argument("name")
@click.option("--json", "as_json", is_flag=True, help="Print the status as JSON.")
@click.option("--history", "last", default=None, type=click.IntRange(0), help="The last N iterations (0: all; "
              "default: all as text, 50 as JSON, as the registry answers).")
@click.option("--state", "whole", is_flag=True, help="With --json: also the whole state file.")
@pass_project
def status(project, name, as_json, last, whole) -> None:
    """Where loop NAME stands: trunk, frontier, each iteration's verdict, budgets used."""
    from ..agent.registry import call

    args = {"name": name, "state": whole or not as_json,  # the registry's answer, the same for an agent
            **({"history": last} if last is not None else {} if as_json else {"history": 0})}
    s = call(project, "loop.status", args)
    if as_json:
        click.echo(json.dumps(s, sort_keys=True))
        return
    state = s["state"]
    _print_end(state, False)
    click.echo(f"  driver {'running' if s['driver_running'] else 'not running'}; pending {', '.join(s['pending']) or '—'}; "
               f"usage " + ", ".join(f"{k} {v:g}" for k, v in state["usage"].items()))
    for h in s["history"]:
        gain = f"{h['gain_pct']:+.2f} %" if h.get("gain_pct") is not None else "—"
        click.echo(f"  {h['iteration']:>3} {h['category']:<11} {h['verdict'] or '':<12} {gain:>9} "
                   f"{'KEPT ' if h['kept'] else ''}{h['describe']}")


@loop.command(name="stop")
@click.argument("name")
@pass_project
def stop(project, name) -> None:
    """Ask loop NAME to stop after the iteration in flight (a retrospective is written first)."""
    from ..loop.state import request_stop

    alive = request_stop(project, name)
    click.echo(f"loop {name}: stop requested" + ("" if alive else " (no driver is running: it applies at the next "
                                                                  "start or resume)"))


@loop.command(name="retro")
@click.argument("name")
@pass_project
def retro(project, name) -> None:
    """Write a retrospective of loop NAME now (analysis page: coverage, stuck count, top untried ideas)."""
    from ..loop import engine, state as st
    from ..loop.spec import load

    paths = st.LoopPaths(project, name)
    if st.driver_alive(paths):
        raise click.ClickException(f"loop {name} is running; its driver writes retrospectives itself")
    lp = engine.Loop(project, load(paths.spec))
    if st.load(paths) is None:
        raise click.ClickException(f"{paths.state}: no such loop state")
    click.echo(f"wiki/{lp.retrospective(why='asked for with `tools loop retro`', manual=True)}")


@loop.command(name="strays")
@click.option("--remove", is_flag=True, help="Remove them (work trees first, then branches).")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per stray.")
@pass_project
def strays(project, remove, as_json) -> None:
    """Work trees and `loop/*` branches earlier versions left in a repository enclosing the knowledge base.

    Loops now keep their branches in a repository of their own unless `code:` names a checkout's top folder;
    this lists what older versions made in the enclosing repository, and removes it with --remove.
    """
    from ..loop import strays as mod

    found = mod.find(project)
    if remove:
        found = mod.remove(found)
    for s in found:
        if as_json:
            click.echo(json.dumps(s.to_dict(), sort_keys=True))
            continue
        state = "removed" if s.removed else (f"NOT removed: {s.problem}" if s.problem else "stray")
        click.echo(f"{s.kind:<8} {s.name}  (loop {s.loop}, repository {s.repo}): {state}")
    if not as_json:
        if not found:
            click.echo("no stray work trees or branches")
        elif not remove:
            click.echo("`tools loop strays --remove` removes them (the user's own checkout is not touched)")
    if any(s.problem for s in found):
        raise SystemExit(1)


@loop.command(name="finalize")
@click.argument("name")
@click.option("--patches", "patches_dir", default=None, type=click.Path(file_okay=False),
              help="Also write a `git format-patch` series of every kept change to this folder.")
@click.option("--pr", is_flag=True, help="Push each branch to --remote and open a draft pull request with `gh`.")
@click.option("--remote", default="origin", show_default=True, help="With --pr: where branches are pushed.")
@click.option("--base", default="main", show_default=True, help="With --pr: the branch the pull requests target.")
@click.option("--verify/--no-verify", default=True, show_default=True,
              help="Measure each branch alone against the baseline's commit, interleaved, on the loop's runner; a "
                   "branch whose gain does not hold alone is reported and not offered as a pull request.")
@click.option("--json", "as_json", is_flag=True, help="Print the branches, settings and pull requests as JSON.")
@pass_project
def finalize(project, name, patches_dir, pr, remote, base, verify, as_json) -> None:
    """Turn loop NAME's kept changes into reviewable branches perf/NAME/<n>-<change> (each alone from the
    baseline's commit, or stacked when it does not apply alone), perf/NAME/all with PERF.md, each commit message
    carrying the evidence. The user's checkout is never modified; nothing is pushed without --pr."""
    import json
    from pathlib import Path

    from ..loop import state as st
    from ..loop.finalize import finalize as run

    if st.driver_alive(st.LoopPaths(project, name)):
        raise click.ClickException(f"loop {name} is running: stop it first (tools loop stop {name})")
    out = run(project, name, Path(patches_dir) if patches_dir else None, pr, remote, base, verify)
    if as_json:
        click.echo(json.dumps({k: v for k, v in out.items() if k != "perf_md"}, default=str))
        return
    click.echo(f"loop {name}: {out['kept']} kept change(s)")
    for b in out["branches"]:
        v = b.get("verified")
        alone = f"  alone: {v['verdict']} {v.get('gain_pct')} %" if v else ""
        click.echo(f"  {b['branch']}  {b['exp_id']}{alone}" + (f"  ({b['note']})" if b["note"] else ""))
    for br in out.get("not_holding") or []:
        click.echo(f"  {br}: its gain does not hold alone (not offered as a pull request)")
    for s_ in out["settings"]:
        click.echo(f"  setting #{s_['n']} {s_['exp_id']}: {s_['knobs'] or s_['env']} ({s_['why']}: see PERF.md)")
    if out.get("combined"):
        click.echo(f"  {out['combined']}  every change, with PERF.md")
    for p in out["prs"]:
        click.echo(f"  draft PR {p['url']}  ({p['branch']})")
    if out["patches"]:
        click.echo(f"  {len(out['patches'])} patches in {patches_dir}")
    for gone in out.get("removed") or []:
        click.echo(f"  {gone}  deleted (an earlier finalize's, not made again)")
    click.echo(f"  loops/{name}/PERF.md")
