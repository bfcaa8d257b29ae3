"""The loop file: one lane (model, lane, variant), the command, the knob space, the target, the budgets,
the proposer and the runner. YAML at ``loops/<name>.yml`` in the knowledge base.

```yaml
model: llama
lane: cpu-loop
variant: small/cpu
command: python experiments/llama_train.py --preset small --steps 10
code: experiments            # the change surface for code patches: a folder (made a git repo if it is not one)
knobs:
  compute_dtype: {flag: --compute-dtype, values: [float32, bfloat16], category: precision}
  scan: {flag: --scan, values: [false, true], category: compiler}              # booleans: --scan / --no-scan
  shape:                                                                        # several flags move together
    category: shape
    values: [{batch: 16, seq_len: 128}, {batch: 32, seq_len: 64}]
    flags: {batch: --batch, seq_len: --seq-len}
  ynn: {env: XLA_FLAGS, values: ["", "--xla_cpu_experimental_ynn_fusion_type=dot"], category: compiler}
target: {tokens_per_s: 120000}       # or {mfu_percent: 40}
budget: {runs: 10, wall_s: 3600}     # also llm_tokens, cost_usd, device_s
proposer: sweep                      # sweep | llm | queue
runner: local
repeats: {min: 2, max: 5}
calibrate: 5                         # A/A rounds after the baseline (0: the default noise floor)
statistic: min                       # read each run by its fastest steady step (a shared machine); auto: the
                                     # steadier reading over the lane's rounds; default median
compile_cache: true                  # timed runs share JAX's compile cache (.tools-cache/jax-compile); default true
pairs: true                          # knob moves of the reference model: rounds as blocks of two processes
                                     # (tools exp run --pairs), 24 rounds (or pairs: N); env knobs and patches
                                     # keep processes; default false
screen: true                         # with pairs: before confirming, every untried flag move of the trunk in one
                                     # process, 4 rounds (or screen: N), to rank them and drop the clearly slower
                                     # and the broken (tools/loop/screening.py); default false
reference: python experiments/llama_train.py --preset small --batch 32   # or an experiment id (docs/gap.md)
reference_codebase: maxtext          # the ingested codebase the reference runs (found from its command if not given)
hang_s: 300                          # silent this long: hung (its Python stack taken, then killed)
memory: {tolerance_pct: 5, max_gb: 16}   # a gain with peak memory up > 5 % counts only while the peak is <= 16 GB
```
With ``reference:`` the loop runs that command once (profiled, on the lane ``<lane>-reference``), and every
iteration's priors get the gap items of the current trunk against it; ``target: reference`` (or
``{reference: 95}``: percent of the reference's tokens/s) stops the loop when the trunk reaches it, measured
interleaved.
The first value of each knob is the trunk's starting value.
"""

from __future__ import annotations

import json
import re
import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ..errors import InputError
from ..experiments.stats import STATISTICS
from .proposal import CATEGORIES
from .spec_values import _budget, _count, _positive, _protected, _rounds, _target, _unknown, _yes_no

NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]*")
BUDGET_KEYS = ("runs", "wall_s", "llm_tokens", "cost_usd", "device_s")
TARGET_KEYS = ("tokens_per_s", "mfu_percent", "reference")
# rounds of a pairs experiment with `pairs: true`: a round costs a block of steps per arm, not two processes, and
# on recorded A/A rounds (bench/noise_model.py --kind pairs) 24 rounds in two processes kept false `supported`
# under 1 % and found a true +10 % gain 9 times in 10, quiet and under load; 6 rounds found it 7 times in 10
PAIRS_ROUNDS = 24
# rounds of a screen wave with `screen: true`: it only ranks (never a verdict); 4 rounds of blocks tell a move 10 %
# slower from one that is not, and what a screen lets through is confirmed at PAIRS_ROUNDS. Both are the most a
# wave or a confirmation runs: on a quiet lane fewer find what they must (loop/power.py: screen_rounds,
# confirmation_rounds)
SCREEN_ROUNDS = 4


@dataclass
class Knob:
    name: str
    values: list[Any]
    flag: str = ""                                  # one flag: --flag VALUE (booleans: --flag / --no-flag)
    flags: dict[str, str] = field(default_factory=dict)  # a mapping value sets several flags
    env: str = ""                                   # an environment variable (XLA_FLAGS parts are appended)
    category: str = "other"
    semantics: bool = False                         # declared to change the math (kept to test the check)
    reference: Any = None                           # the semantics reference value (default: first value)

    @property
    def start(self) -> Any:
        return self.values[0]

    def declared(self, value: Any) -> tuple[bool, Any]:
        """(found, the declared value ``value`` stands for): one of its own type, or a number equal to a declared
        number (a proposal's 2.0 is the declared 2). ``value in values`` took 2.0 for 2 and 1 for true, and the
        command got ``--accum 2.0``."""
        for v in self.values:
            if type(v) is type(value) and v == value:
                return True, v
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        for v in self.values:
            if number and isinstance(v, (int, float)) and not isinstance(v, bool) and v == value:
                return True, v
        return False, None

    def args(self, value: Any) -> list[str]:
        """Command-line arguments for ``value``."""
        if self.env:
            return []
        if self.flags:
            if not isinstance(value, dict):
                raise InputError(f"knob {self.name}", f"value {value!r} must be a mapping of {sorted(self.flags)}")
            return [a for k, flag in self.flags.items() if k in value for a in _flag(flag, value[k])]
        return _flag(self.flag, value)


def _flag(flag: str, value: Any) -> list[str]:
    if isinstance(value, bool):
        return [flag] if value else ["--no-" + flag.removeprefix("--")]
    if value is None or value == "":
        return []
    return [flag, str(value)]


@dataclass
class LoopSpec:
    name: str
    path: Path
    model: str
    lane: str
    variant: str
    command: list[str]
    knobs: dict[str, Knob]
    code: str = ""
    config_file: str = ""             # in ``code``: the launch script or YAML config `tools loop finalize` edits
    cwd: str = "."
    target: dict[str, float] = field(default_factory=dict)
    budget: dict[str, float] = field(default_factory=dict)
    proposer: str = "sweep"
    proposer_options: dict[str, Any] = field(default_factory=dict)
    runner: str = "local"
    runner_options: dict[str, Any] = field(default_factory=dict)
    min_repeats: int = 2
    max_repeats: int = 5
    timeout_s: float = 1800.0
    profile: bool = True
    parallel: int = 1
    description: str = ""
    calibrate: int = 0                # A/A rounds after the baseline: the lane's measured noise sets the bands
    statistic: str = "median"         # a run's tokens/s in comparisons: median steady step, or ``min`` (fastest)
    compile_cache: bool = True        # timed arms share JAX's compile cache (the profiled run never does)
    pairs: bool = False               # interleaved rounds as in-process pairs where the arms differ in flags only
    pairs_rounds: int = 0             # rounds of a pairs experiment (``pairs: N``; ``pairs: true``: PAIRS_ROUNDS)
    screen_rounds: int = 0            # rounds of a screen wave (``screen: N``; ``screen: true``: SCREEN_ROUNDS); 0: off
    reference: str = ""               # an experiment id, or a command run once as the reference (docs/gap.md)
    reference_codebase: str = ""      # the ingested codebase the reference runs (its knob defaults in the gap)
    hang_s: float | None = None       # no output for this long: the run is hung (stack taken, killed)
    memory_tol_pct: float = 5.0       # peak memory growth that holds a gain back ...
    memory_max_gb: float | None = None  # ... unless the peak stays under this (a batch move is a trade)
    trust_step_times: bool = False      # a simulated lane: its step times are taken as reported, unchecked by a clock
    protected: list[str] = field(default_factory=list)  # files (globs) no patch may touch; hashed with every run

    @property
    def reference_command(self) -> list[str]:
        """The reference as a command ([] when it names an experiment: one word without a path separator)."""
        words = shlex.split(self.reference) if self.reference else []
        if len(words) <= 1 and not any("/" in w for w in words):
            return []
        if self.runner == "local" and words[0] in ("python", "python3"):
            words[0] = sys.executable
        return words

    @property
    def reference_lane(self) -> str:
        return f"{self.lane}-reference"

    def start_config(self) -> dict[str, Any]:
        return {k.name: k.start for k in self.knobs.values()}

    def command_for(self, config: dict[str, Any]) -> list[str]:
        """The base command with every flag knob's value appended (the script's last flag wins). On the local
        runner a bare ``python`` / ``python3`` is the interpreter running `tools`, whatever PATH finds first (a venv
        need not be activated); name a path to run another."""
        out = list(self.command)
        if self.runner == "local" and out and out[0] in ("python", "python3"):
            out[0] = sys.executable
        for name, knob in self.knobs.items():
            if name in config and not knob.env:
                out += knob.args(config[name])
        return out

    def env_for(self, config: dict[str, Any], extra: dict[str, str] | None = None) -> dict[str, str]:
        """Environment of a configuration: env knobs (same variable: joined with spaces), then ``extra``."""
        env: dict[str, str] = {}
        for name, knob in self.knobs.items():
            v = config.get(name)
            if knob.env and not (v is None or v is False or v == ""):  # 0 is a value (`0 in (False,)` dropped it)
                env[knob.env] = f"{env.get(knob.env, '')} {v}".strip()
        for k, v in (extra or {}).items():
            env[k] = f"{env.get(k, '')} {v}".strip() if k in env and k.endswith("_FLAGS") else v
        return env


class _UniqueKeys(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
    """A key given twice in a loop file is an error: YAML keeps the last, so a second `budget:` or a knob declared
    twice silently replaced the first."""

    def construct_mapping(self, node, deep=False):
        seen: dict = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                first = seen.get(key)
                seen[key] = seen.get(key, key_node.start_mark.line + 1)
            except TypeError:  # an unhashable key: the constructor says what is wrong with it
                continue
            if first is not None:  # `{runs: 5, runs: 50}` on one line too
                raise yaml.constructor.ConstructorError(
                    None, None, f"the key {key!r} is given twice (lines {first} and {key_node.start_mark.line + 1}): "
                    "the second would silently replace the first", key_node.start_mark)
        return super().construct_mapping(node, deep)


def load(path: Path) -> LoopSpec:
    path = Path(path)
    from ..pages import FrontmatterError, load_yaml
    from ..safeio import Refused, read_text

    try:
        data = load_yaml(read_text(path, 4 * 1024 * 1024, within=path.parent), _UniqueKeys)
    except FileNotFoundError:
        raise InputError(path, "no such loop file (write one, see docs/loop.md)") from None
    except Refused as e:
        raise InputError(path, f"not read: {e}") from None
    except FrontmatterError as e:
        raise InputError(path, str(e)) from None
    except (yaml.YAMLError, ValueError, RecursionError) as e:
        raise InputError(path, f"not valid YAML: {e}") from None
    return parse(data, path)


def parse(data: Any, path: Path) -> LoopSpec:
    try:
        return _parse(data, path)
    except (TypeError, ValueError, AttributeError) as e:  # a value of the wrong kind somewhere
        raise InputError(path, f"a value has the wrong type or form: {e}") from None


KEYS = ("name", "description", "model", "lane", "variant", "command", "code", "cwd", "config_file", "knobs", "target",
        "budget", "memory", "repeats", "proposer", "runner", "timeout_s", "profile", "parallel", "calibrate",
        "statistic", "compile_cache", "pairs", "screen", "hang_s", "protected", "reference", "reference_codebase",
        "trust_step_times")
KNOB_KEYS = ("flag", "flags", "env", "values", "category", "semantics", "reference")


def _parse(data: Any, path: Path) -> LoopSpec:
    if not isinstance(data, dict):
        raise InputError(path, "a loop file is a YAML mapping")
    _unknown(path, "", data, KEYS)
    for kname, k in (data.get("knobs") or {}).items() if isinstance(data.get("knobs"), dict) else ():
        if isinstance(k, dict):
            _unknown(path, f"knob `{kname}`: ", k, KNOB_KEYS)
    name = str(data.get("name") or path.stem)
    for key in ("model", "lane", "variant", "command"):
        if not data.get(key):
            raise InputError(path, f"missing `{key}`")
    for key in ("model", "lane"):
        if not NAME.fullmatch(str(data[key])):
            raise InputError(path, f"`{key}` must be letters, digits, '.', '_' or '-'")
    if not NAME.fullmatch(name) or ".." in name or name.endswith((".", ".lock")):  # it names git branches too
        raise InputError(path, f"the loop name {name!r} must be letters, digits, '.', '_' or '-', with no '..' and "
                               "no '.' or '.lock' at its end (it names the branches loop/<name>/... and "
                               "perf/<name>/...)")
    cmd = data["command"]
    command = shlex.split(cmd) if isinstance(cmd, str) else [str(a) for a in cmd]
    knobs = {}
    if not isinstance(data.get("knobs") or {}, dict):
        raise InputError(path, "`knobs` is a mapping of knob name to {flag|flags|env, values, category}")
    for kname, k in (data.get("knobs") or {}).items():
        if not isinstance(k, dict) or not isinstance(k.get("values"), list) or not k["values"]:
            raise InputError(path, f"knob `{kname}`: needs a non-empty `values` list")
        if sum(bool(k.get(x)) for x in ("flag", "flags", "env")) != 1:
            raise InputError(path, f"knob `{kname}`: give exactly one of `flag`, `flags`, `env`")
        if k.get("flags") and not all(isinstance(v, dict) for v in k["values"]):
            raise InputError(path, f"knob `{kname}`: with `flags`, every value is a mapping of {sorted(k['flags'])}")
        if k.get("flags"):  # a misspelt key would be dropped from the command while the page claims it ran
            for v in k["values"]:
                if set(v) - set(k["flags"]):
                    raise InputError(path, f"knob `{kname}`: value {v} names {sorted(set(v) - set(k['flags']))}, "
                                           f"which `flags` does not (it names {sorted(k['flags'])})")
        distinct = {json.dumps(v, sort_keys=True, default=str) for v in k["values"]}
        if len(distinct) < len(k["values"]):  # a value written twice: a typo for another, most likely
            raise InputError(path, f"knob `{kname}`: a value is listed twice in {k['values']}")
        cat = str(k.get("category") or "other")
        if cat not in CATEGORIES:
            raise InputError(path, f"knob `{kname}`: category {cat!r} is not one of {', '.join(CATEGORIES)}")
        knobs[str(kname)] = Knob(str(kname), list(k["values"]), str(k.get("flag") or ""), dict(k.get("flags") or {}),
                                 str(k.get("env") or ""), cat,
                                 _yes_no(path, f"knob `{kname}`: semantics", k.get("semantics", False)),
                                 k.get("reference", k["values"][0]))
    raw_target = data.get("target") or {}
    if raw_target == "reference":
        raw_target = {"reference": 100}
    if not isinstance(raw_target, dict):
        raise InputError(path, "`target` is a mapping ({tokens_per_s: N}, {mfu_percent: N}, {reference: PCT}) or "
                               "`reference`")
    target = {str(k): _target(path, str(k), v) for k, v in raw_target.items()}
    budget = _budget(path, data.get("budget"))
    for k in target:
        if k not in TARGET_KEYS:
            raise InputError(path, f"target `{k}`: expected one of {', '.join(TARGET_KEYS)}")
    for k, v in budget.items():
        if k not in BUDGET_KEYS:
            raise InputError(path, f"budget `{k}`: expected one of {', '.join(BUDGET_KEYS)}")
        if not v > 0 or v == float("inf"):
            raise InputError(path, f"budget `{k}` is a positive number, not {v!r}")
    if not budget:
        raise InputError(path, "give a `budget` (runs, wall_s, llm_tokens, cost_usd or device_s): "
                               "the loop stops only on a budget, the target or a double plateau")
    mem = data.get("memory") or {}
    if not isinstance(mem, dict) or set(mem) - {"tolerance_pct", "max_gb"}:
        raise InputError(path, "`memory` is a mapping {tolerance_pct: PCT, max_gb: GB}")
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0 for v in mem.values()
               if v is not None):
        raise InputError(path, f"`memory`: tolerance_pct and max_gb are non-negative numbers, not {mem}")
    rep = data.get("repeats") or {}
    rep = {"min": rep, "max": rep} if isinstance(rep, int) and not isinstance(rep, bool) else rep
    if not isinstance(rep, dict) or set(rep) - {"min", "max"} or not all(
            isinstance(v, int) and not isinstance(v, bool) for v in rep.values()):
        raise InputError(path, f"`repeats` is a whole number or a mapping {{min: N, max: N}} of them, not {rep!r}")
    timeout = _positive(path, "timeout_s", 1800 if data.get("timeout_s") is None else data["timeout_s"])
    for key, least in (("calibrate", 0), ("parallel", 1)):
        if key in data:
            _count(path, key, data[key], least)
    prop, runner = data.get("proposer") or "sweep", data.get("runner") or "local"
    for key, value in (("proposer", prop), ("runner", runner)):
        if not isinstance(value, (str, dict)):
            raise InputError(path, f"`{key}` is a name or a mapping {{name: ..., options}}, not {value!r}")
    runner_name = runner if isinstance(runner, str) else str(runner.get("name", "local"))
    from ..runners import RUNNERS  # the table only: a runner's own module loads when a loop runs it

    if runner_name not in RUNNERS:
        raise InputError(path, f"`runner`: {runner_name!r} is not one of {', '.join(RUNNERS)}")
    config_file = str(data.get("config_file") or "")
    if config_file and (Path(config_file).is_absolute() or ".." in Path(config_file).parts):
        raise InputError(path, f"`config_file` {config_file!r}: a path inside the `code` folder's repository")

    spec = LoopSpec(
        name=name, path=path, model=str(data["model"]), lane=str(data["lane"]), variant=str(data["variant"]),
        command=command, knobs=knobs, code=str(data.get("code") or ""), cwd=str(data.get("cwd") or "."),
        config_file=config_file,
        target=target, budget=budget,
        proposer=prop if isinstance(prop, str) else str(prop.get("name", "sweep")),
        proposer_options={} if isinstance(prop, str) else {k: v for k, v in prop.items() if k != "name"},
        runner=runner_name,
        runner_options={} if isinstance(runner, str) else {k: v for k, v in runner.items() if k != "name"},
        min_repeats=int(rep.get("min", 2)), max_repeats=int(rep.get("max", 5)),
        timeout_s=timeout, profile=_yes_no(path, "profile", data.get("profile", True)),
        parallel=int(data.get("parallel", 1)), description=str(data.get("description") or ""),
        calibrate=int(data.get("calibrate", 0)), statistic=str(data.get("statistic") or "median"),
        compile_cache=_yes_no(path, "compile_cache", data.get("compile_cache", True)),
        pairs=bool(data.get("pairs", False)), pairs_rounds=_pairs_rounds(path, data.get("pairs", False)),
        screen_rounds=_rounds(path, "screen", data.get("screen", False), SCREEN_ROUNDS),
        hang_s=_positive(path, "hang_s", data.get("hang_s")),
        memory_tol_pct=float(mem.get("tolerance_pct", 5.0)),
        memory_max_gb=None if mem.get("max_gb") is None else float(mem["max_gb"]),
        protected=_protected(path, data.get("protected")),
        reference=" ".join(map(shlex.quote, data["reference"])) if isinstance(data.get("reference"), list)
        else str(data.get("reference") or ""),
        reference_codebase=str(data.get("reference_codebase") or ""),
        trust_step_times=_yes_no(path, "trust_step_times", data.get("trust_step_times", False)))
    if "reference" in spec.target and not spec.reference:
        raise InputError(path, "`target: reference` needs a `reference:` (an experiment id or a command)")
    if spec.min_repeats < 2:
        raise InputError(path, "repeats.min must be at least 2: a verdict needs interleaved repeats")
    if spec.max_repeats < spec.min_repeats:
        raise InputError(path, "repeats.max must be at least repeats.min")
    if spec.parallel < 1:
        raise InputError(path, "parallel must be at least 1")
    if spec.screen_rounds and not spec.pairs:
        raise InputError(path, "`screen` needs `pairs` (a screen runs the moves in one process, as pairs do)")
    if spec.statistic not in STATISTICS:
        raise InputError(path, f"statistic must be one of {', '.join(STATISTICS)}, not {spec.statistic!r}")
    return spec


def _pairs_rounds(path: Path, value) -> int:
    """``pairs:``: false, true (PAIRS_ROUNDS rounds a pairs experiment) or the number of rounds (at least 2)."""
    return _rounds(path, "pairs", value, PAIRS_ROUNDS)


