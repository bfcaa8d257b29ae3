"""What every `tools` subcommand shares: the project it acts on, the exit code for skipped inputs, the --llm options,
and names from inputs made safe for a terminal."""

from __future__ import annotations

import re
from pathlib import Path

import click

from ..errors import EXIT_SKIPS  # noqa: F401  (the commands' name for it)
from ..project import Project

pass_project = click.make_pass_decorator(Project)

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def llm_options(fn):
    """--provider, --model, --base-url, --api-key-env: how a command that has an --llm mode reaches a model."""
    for opt in reversed((
            click.option("--provider", default="anthropic", show_default=True, help="With --llm: anthropic or openai."),
            click.option("--model", default=None, help="With --llm: the model (default: the provider's default)."),
            click.option("--base-url", default=None, help="With --llm: the endpoint (an OpenAI-compatible server, a proxy)."),
            click.option("--api-key-env", default=None,
                         help="With --llm: the environment variable holding the key (never written anywhere)."))):
        fn = opt(fn)
    return fn


def printable(text) -> str:
    """A name from an input, safe for a terminal: control characters (escape sequences, tabs, newlines, bidi
    overrides) shown as ``\\x1b``-style escapes instead of acting on the terminal."""
    return _CONTROL.sub(lambda m: m.group(0).encode("unicode_escape").decode("ascii"), str(text))


def must_start(command: list[str], env: dict[str, str]) -> None:
    """A command that cannot start is a usage error (exit 2): no run is filed and no version number is used."""
    import os

    from ..runners.process import start_problem

    if not command:
        raise click.UsageError("no command to run: put it after `--`")
    why = start_problem(command, Path.cwd(), dict(os.environ, **env))
    if why:
        click.echo(f"error: cannot start '{printable(command[0])}': {printable(why)}; nothing was run or filed",
                   err=True)
        raise SystemExit(2)


class _Finite(click.ParamType):
    """A finite number above (or from) zero: ``nan`` compares false with everything, so a gate given it is off."""

    name = "number"

    def __init__(self, allow_zero: bool, most: float = float("inf")):
        self.allow_zero, self.most = allow_zero, most

    def convert(self, value, param, ctx):
        import math

        try:
            v = float(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not a number", param, ctx)
        if not math.isfinite(v) or v < 0 or (v == 0 and not self.allow_zero) or v > self.most:
            self.fail(f"{value!r}: a finite number {'from' if self.allow_zero else 'above'} 0"
                      + (f", at most {self.most:g}" if math.isfinite(self.most) else ""), param, ctx)
        return v


POSITIVE, NON_NEGATIVE, SECONDS = _Finite(False), _Finite(True), _Finite(False, most=1e7)


def runner_options(pairs: tuple[str, ...]) -> dict:
    """``--runner-option KEY=VALUE`` pairs as the runner's options, each value read as YAML."""
    import yaml

    from ..errors import InputError

    out = {}
    for pair in pairs:
        k, eq, v = pair.partition("=")
        if not eq or not k.strip():
            raise InputError("--runner-option", f"{pair!r} is not KEY=VALUE")
        try:
            out[k.strip()] = yaml.safe_load(v) if v.strip() else ""
        except yaml.YAMLError as e:
            raise InputError("--runner-option", f"{k}: {v!r} is not a YAML value ({e})") from None
    return out
