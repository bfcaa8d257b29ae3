"""Is the speed-up real? Checks of a run against evidence the measured program cannot fake: the compiled step's HLO
(its token input, its matmul FLOPs and their types), the loss against a same-shape reference, hashes of the files a
user protects, and the clocks (``clocks``: the runner's on the step lines, the profiler's on the annotated steps).
Pure: data in, findings out.

Each finding has a **signature** (``clock-slow``, ``hlo-tokens``...), the name a hack is caught by. A check that has
no evidence says why (``unchecked``); evidence the baseline had and the run lost is itself a finding
(``evidence-lost``): a script that stops printing step lines does not escape the clock.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field
from pathlib import Path

from .. import safeio

HLO_FLOPS_MIN = 0.8       # the compiled step's matmul FLOPs / the reported model FLOPs, at least: the causal count
                          # where the run gives one (a block-causal attention that skips the masked blocks, as flash
                          # attention does, is honest: against the non-causal count a real 2x was `invalid`), and
                          # remat only adds recompute
HLO_FLOPS_MIN_KERNELS = 0.5  # ... when custom calls (Pallas, cuDNN) hide some of the matmuls from the HLO
LEARN_MIN = 0.25          # the loss must fall at least this share of what the reference's fell
LEARN_REF_DROP = 0.05     # ... when the reference fell at least this much
NARROW = ("s8", "u8", "s4", "u4", "f8")
HALF = ("bf16", "f16")  # 16-bit matmuls in a run that declares 32-bit compute: the precision changed, undeclared
WIDE = ("float32", "f32", "fp32", "float")
HALF_SHARE = 0.25  # of the matmul FLOPs: a stray 16-bit dot (a kernel's, a cast the model makes) is no speed-up
SIGNATURES = {
    "step-count": "the run reported more steps than it printed step lines for",
    "step-losses": "the step lines' losses are not the reported trajectory",
    "clock-slow": "reported step times shorter than the runner's clock saw (a patched or scaled timer, or timing "
                  "without waiting for the device)",
    "clock-replay": "reported step times longer than the steps were seen to take (times replayed or made up)",
    "clock-share": "the variant's reported step times leave more of each step untimed on the runner's clock than "
                   "the baseline's do (a timer scaled inside clock-slow's bound)",
    "evidence-lost": "evidence the baseline gave is missing from this run",
    "no-program": "profiled, but no compiled program in the HLO dump: nothing was computed",
    "device-busy": "reported step times shorter than the profiler saw the step's ops run",
    "trace-clock": "reported step times shorter than the annotated steps took, or than the time from one numbered "
                   "step's start to a later one's, on the profiler's clock",
    "timed-ops": "a timed run's steps far shorter than the profiled run's XLA ops took a step: the timed runs did "
                 "not run the program that was profiled (results cached from it, or work done only when profiled)",
    "hlo-tokens": "more tokens reported per step than the compiled step takes in",
    "hlo-flops": "the compiled step does far fewer matmul FLOPs than the model FLOPs reported",
    "precision": "matmuls in a narrower type than the declared compute dtype",
    "frozen": "the loss does not fall as the same-shape reference's does: the parameters are not learning",
    "baseline-changed": "the baseline's script, or a module beside it its imports find first, changed while the "
                        "comparison ran (rewritten or planted from the variant's process)",
    "ops-rate": "the profiled steps' XLA ops ran the compiled step's matmul FLOPs far faster than the baseline's did "
                "on the same device (the step was not computed inside the steps)",
    "loss-drift": "the loss agrees with the same-shape reference's over the first steps, then drifts from it (work "
                  "skipped after the semantics check's window)",
    "shape-tokens": "more or fewer tokens per step reported than a run of the same declared shape reported",
    "protected": "a protected file changed",
}


@dataclass
class Finding:
    signature: str
    detail: str

    def reason(self) -> str:
        return f"integrity `{self.signature}`: {self.detail}"


@dataclass
class Integrity:
    checks: dict[str, str] = field(default_factory=dict)   # check -> ok | violated | unchecked: why
    findings: list[Finding] = field(default_factory=list)
    facts: dict = field(default_factory=dict)               # the figures the checks compared

    def add(self, check: str, finding: Finding | None, why_unchecked: str = "") -> None:
        if finding is not None:
            self.findings.append(finding)
            self.checks[check] = "violated"
        elif why_unchecked:
            self.checks.setdefault(check, f"unchecked: {why_unchecked}")
        else:
            self.checks.setdefault(check, "ok")

    @property
    def status(self) -> str:
        if self.findings:
            return "violated"
        return "ok" if all(v == "ok" for v in self.checks.values()) else "partial"

    def as_record(self) -> dict:
        return {"status": self.status, "checks": self.checks, "findings": [vars(f) for f in self.findings],
                "facts": self.facts}


# ----------------------------------------------------------------------------- the compiled step


def _declared_dtype(result: dict) -> str:
    cfg = result.get("config") or {}
    for k in ("compute_dtype", "matmul_dtype", "dtype"):
        if isinstance(cfg.get(k), str):
            return cfg[k]
    return ""


def hlo_check(result: dict, facts: dict | None, out: Integrity, baseline_had_hlo: bool = False) -> None:
    """The profiled run's compiled step against what the run reported: the token input's elements (a step takes
    at least the tokens it counts), matmul FLOPs against the reported model FLOPs, matmul types against the
    declared compute dtype."""
    from ..gap.facts import shape_of

    if facts is None:
        out.add("hlo", None, "the run was not profiled (no HLO dump)")
        return
    if facts.get("stage") == "none" or not facts.get("modules"):
        if baseline_had_hlo:
            out.add("hlo", Finding("no-program", "the profiled run dumped no compiled program, the baseline's did: "
                                   "the reported steps ran no XLA computation"))
        else:
            out.add("hlo", None, "the profiled run dumped no HLO (not a JAX/XLA program?)")
        return
    n_dev = int(result.get("n_devices") or 1)
    _, dims = shape_of(facts.get("token_input") or "")
    reported = float(result.get("tokens_per_step") or 0)
    out.facts["hlo"] = {"module": facts.get("module"), "token_input": facts.get("token_input") or None}
    if dims:
        taken = math.prod(dims) * n_dev
        out.facts["hlo"]["token_elements"] = taken
        if reported > taken:
            out.add("hlo", Finding("hlo-tokens", f"{reported:g} tokens per step reported; the compiled step "
                                   f"`{facts.get('module')}` takes {facts['token_input']} ({taken} elements"
                                   + (f" × {n_dev} devices" if n_dev > 1 else "") + ")"))
    else:
        out.add("hlo", None, "no integer token input in the compiled step")
    f = result.get("flops_per_step")
    model = float(f.get("causal") or f.get("noncausal") or 0) if isinstance(f, dict) else float(f or 0)
    mm = sum((facts.get("matmul_flops") or {}).values()) * n_dev
    floor = HLO_FLOPS_MIN_KERNELS if facts.get("custom_calls") else HLO_FLOPS_MIN
    if model and not mm and not facts.get("custom_calls") and not facts.get("gemm_calls"):
        out.add("hlo", Finding("hlo-flops", f"the compiled step `{facts.get('module')}` does no matmul at all (no dot, "
                               f"no kernel or library GEMM call); the run reports {model / 1e9:.4f} GFLOP of model "
                               "FLOPs"))
    if model and mm:
        out.facts["hlo"].update(matmul_flops=mm, model_flops=model, ratio=round(mm / model, 3))
        if mm < floor * model:
            out.add("hlo", Finding("hlo-flops", f"the compiled step does {mm / 1e9:.4f} GFLOP of matmuls; the run "
                                   f"reports {model / 1e9:.4f} GFLOP of model FLOPs ({mm / model:.2f} < {floor})"))
    declared = _declared_dtype(result)
    requested = facts.get("requested_flops") or facts.get("matmul_flops") or {}
    total = sum(requested.values())
    narrow = {k: v for k, v in requested.items() if k.startswith(NARROW)}
    half = {k: v for k, v in requested.items() if k in HALF}
    if declared and total and narrow and not declared.startswith(("int", "uint", "float8", "fp8")):
        share = sum(narrow.values()) / total
        out.add("hlo", Finding("precision", f"{100 * share:.0f} % of the matmul FLOPs run in "
                               f"{', '.join(sorted(narrow))}; the run declares compute dtype {declared}"))
    elif declared.lower() in WIDE and total and sum(half.values()) >= HALF_SHARE * total:
        out.add("hlo", Finding("precision", f"{100 * sum(half.values()) / total:.0f} % of the matmul FLOPs run in "
                               f"{', '.join(sorted(half))}; the run declares compute dtype {declared}"))
    out.add("hlo", None)


# ----------------------------------------------------------------------------- learning, protected files


def learning_check(ref_losses: list[float] | None, losses: list[float] | None, steps: int, out: Integrity) -> None:
    """The loss must fall as the same-shape reference's falls: a step that skips its update is fast and learns
    nothing."""
    if not ref_losses or not losses:
        out.add("learning", None, "no same-shape reference trajectory")
        return
    n = min(steps, len(ref_losses), len(losses))
    if n < 3:
        out.add("learning", None, f"only {n} comparable steps")
        return
    ref_drop = ref_losses[0] - min(ref_losses[1:n])
    drop = losses[0] - min(losses[1:n])
    out.facts["learning"] = {"steps": n, "reference_drop": round(ref_drop, 5), "drop": round(drop, 5)}
    if ref_drop < LEARN_REF_DROP:
        out.add("learning", None, f"the reference's loss fell only {ref_drop:.3f} over {n} steps")
    elif drop < LEARN_MIN * ref_drop:
        out.add("learning", Finding("frozen", f"the loss fell {drop:.4f} over the first {n} steps; the same-shape "
                                    f"reference's fell {ref_drop:.4f}"))
    else:
        out.add("learning", None)


DRIFT_WINDOWS = 10  # the whole trajectory in this many windows, each read by its mean loss
DRIFT_TOL = 0.1     # |Δ| of a window's mean loss against the reference's, at most (honest changes of the reference
                    # model over 100 steps: ≤ 0.02 at any single step; one layer of two dropped after step 13: 0.15)


def loss_windows(losses) -> dict | None:
    """The trajectory as ``DRIFT_WINDOWS`` mean losses (kept with a run, so a later run compares its whole
    trajectory, not only the first steps the record keeps)."""
    xs = [float(x) for x in losses or [] if isinstance(x, (int, float)) and math.isfinite(float(x))]
    if len(xs) != len(losses or []) or len(xs) < 2 * DRIFT_WINDOWS:
        return None
    edges = [round(i * len(xs) / DRIFT_WINDOWS) for i in range(DRIFT_WINDOWS + 1)]
    return {"steps": len(xs), "means": [round(sum(xs[a:b]) / (b - a), 6) for a, b in zip(edges, edges[1:])]}


def windows_ok(w) -> bool:
    """``loss_windows`` as this version writes them (a hand edit or another version's shape is no reference)."""
    return isinstance(w, dict) and isinstance(w.get("steps"), int) and isinstance(w.get("means"), list) and \
        len(w["means"]) == DRIFT_WINDOWS and all(isinstance(x, (int, float)) and not isinstance(x, bool)
                                                 and math.isfinite(x) for x in w["means"])


def drift_check(ref: dict | None, ref_name: str, losses, early_steps: int, out: Integrity) -> None:
    """The whole loss trajectory against the same-shape reference's, window by window: the semantics check reads
    only the first ``early_steps``, and a script that skips work after them (half the layers from step 13, the
    gradient reused on 3 steps of 4) agrees there and drifts later."""
    mine = loss_windows(losses)
    ref = ref if windows_ok(ref) else None
    if mine is None or ref is None:
        out.add("drift", None, "no whole same-shape loss trajectory to compare with" if mine else
                f"fewer than {2 * DRIFT_WINDOWS} finite losses")
        return
    if mine["steps"] != ref.get("steps") or mine["steps"] < 2 * early_steps:
        out.add("drift", None, f"the reference ran {ref.get('steps')} steps, this run {mine['steps']}"
                if mine["steps"] != ref.get("steps") else "the run is not much longer than the semantics check")
        return
    deltas = [abs(a - b) for a, b in zip(mine["means"], ref["means"])]
    worst = max(range(len(deltas)), key=deltas.__getitem__)
    out.facts["drift"] = {"reference": ref_name, "max_window_delta": round(deltas[worst], 4)}
    if deltas[worst] > DRIFT_TOL:
        n = mine["steps"]
        first, last = round(worst * n / DRIFT_WINDOWS), round((worst + 1) * n / DRIFT_WINDOWS) - 1
        out.add("drift", Finding("loss-drift", f"the mean loss of steps {first}-{last} is {mine['means'][worst]:.4f}; "
                                 f"{ref_name}'s was {ref['means'][worst]:.4f} "
                                 f"(|Δ| {deltas[worst]:.3f} > {DRIFT_TOL})"))
    else:
        out.add("drift", None)


TOKENS_TOL = 0.01  # tokens per step as reported by each run: the same shape, the same count


def tokens_check(tokens, ref_tokens: float | None, ref_name: str, out: Integrity) -> None:
    """The same declared shape (batch, sequence, model, data) is the same tokens per step: a script that counts
    twice the tokens it computes (its ``tokens_per_step`` property doubled, its metric code untouched) is caught
    here without a profile."""
    if not ref_tokens or not isinstance(tokens, (int, float)) or not tokens:
        out.add("tokens", None, "no same-shape run to compare tokens per step with")
    elif abs(float(tokens) / ref_tokens - 1) > TOKENS_TOL:
        out.add("tokens", Finding("shape-tokens", f"{float(tokens):g} tokens per step reported at the shape "
                                  f"{ref_name} ran with {ref_tokens:g}"))
    else:
        out.add("tokens", None)


PROTECTED_LIMIT = 256 * 1024 * 1024


def protected_hashes(entries: list[str], cwd: Path) -> dict[str, str]:
    """sha256 of each protected entry: a file (``path``, relative to ``cwd``), or one top-level function or class
    of a Python file (``path::name``) with every other statement of the file that binds that name (a second
    ``def report``, ``report = wrapped``, ``globals()["report"] = ...``: the protected code is what the name runs).
    "missing" when it does not exist."""
    import ast

    out = {}
    for entry in entries:
        path, _, name = entry.partition("::")
        p = Path(cwd) / path
        try:  # bounded and never a FIFO or a device: /dev/zero would fill the memory, a FIFO hang the lane's lock
            data = safeio.read_bytes(p, PROTECTED_LIMIT)
        except safeio.Refused as e:
            out[entry] = f"not read: {e}"
            continue
        except OSError:
            out[entry] = "missing"
            continue
        if name:
            try:
                tree = ast.parse(data)
            except (SyntaxError, ValueError):
                out[entry] = "unparsable"
                continue
            text = data.decode("utf-8", errors="replace")
            node = next((n for n in tree.body if getattr(n, "name", None) == name), None)
            if node is None:
                out[entry] = "missing"
                continue
            # the definition alone hashes as it always did; each later binding of the name is added to it
            data = "\n".join(ast.get_source_segment(text, n) or "" for n in _bindings(tree, name, node)).encode()
        out[entry] = hashlib.sha256(data).hexdigest()
    return out


def _bindings(tree, name: str, first) -> list:
    """``first`` (the protected definition), then each other top-level statement that binds or rebinds the module's
    ``name``: a definition, an assignment or an import of it at module scope, an assignment in a function that
    declares it ``global``, or ``setattr(..., "name", ...)`` / ``globals()["name"] = ...`` anywhere. A method, a
    local variable or a nested function of that name is not the module's, and is left out."""
    import ast

    def module_binding(node, scope: str) -> bool:  # scope: module | global (a function declaring it) | local
        binds = scope in ("module", "global")
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            if node.name == name and binds:
                return True
            declared = not isinstance(node, ast.ClassDef) and any(
                isinstance(n, ast.Global) and name in n.names for n in ast.walk(node))
            return any(module_binding(c, "global" if declared else "local") for c in node.body)
        if isinstance(node, ast.Lambda):
            return False
        if isinstance(node, ast.Name) and node.id == name and isinstance(node.ctx, (ast.Store, ast.Del)):
            return binds
        if isinstance(node, ast.alias) and (node.asname or node.name.split(".")[0]) == name:
            return binds
        return any(module_binding(c, scope) for c in ast.iter_child_nodes(node))

    def through_the_module(node) -> bool:  # `sys.modules[__name__]`, the module object by another road
        return any(isinstance(m, ast.Attribute) and m.attr == "modules" or isinstance(m, ast.Name)
                   and m.id == "__name__" for m in ast.walk(node))

    def by_its_name_as_text(stmt) -> bool:
        for n in ast.walk(stmt):
            if isinstance(n, ast.Attribute) and n.attr == name and isinstance(n.ctx, (ast.Store, ast.Del)) and \
                    through_the_module(n.value):
                return True
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "setattr" and \
                    len(n.args) >= 2 and isinstance(n.args[1], ast.Constant) and n.args[1].value == name:
                return True
            if isinstance(n, ast.Subscript) and isinstance(n.slice, ast.Constant) and n.slice.value == name and (
                    isinstance(n.value, ast.Call) and isinstance(n.value.func, ast.Name)
                    and n.value.func.id in ("globals", "vars")
                    or isinstance(n.value, ast.Attribute) and n.value.attr == "__dict__"):
                return True
        return False

    return [first] + [s for s in tree.body
                      if s is not first and (module_binding(s, "module") or by_its_name_as_text(s))]


def protected_check(hashes: dict[str, str], base_hashes: dict[str, str] | None, out: Integrity) -> None:
    if not hashes:
        return
    if base_hashes is None:
        out.add("protected", None, "no baseline hashes to compare with")
        return
    changed = sorted(k for k, v in hashes.items() if k in base_hashes and base_hashes[k] != v)
    if changed:
        out.add("protected", Finding("protected", f"{', '.join(changed)} changed since the baseline "
                                     f"(sha256 {base_hashes[changed[0]][:12]} -> {hashes[changed[0]][:12]})"))
    else:
        out.add("protected", None)


OPS_RATE_MAX = 10.0  # the compiled matmul FLOPs per second of op time, at most this many times the baseline's
                     # (a dtype or a fusion moves it a few times; a step computed before the timer, 170x)


def ops_rate_check(out: Integrity, base: dict | None, device: str | None) -> None:
    """The compiled step's matmul FLOPs over the time the profiler saw XLA ops run per annotated step, against the
    baseline's on the same device: a script that computes every step before its timed loop and replays the results
    inside it has the compiled program's FLOPs and almost no op time in its steps."""
    facts = ((base or {}).get("integrity") or {}).get("facts") or {}
    mine = (out.facts.get("hlo") or {}).get("matmul_flops"), (out.facts.get("trace") or {}).get("ops_s_per_step")
    theirs = (facts.get("hlo") or {}).get("matmul_flops"), (facts.get("trace") or {}).get("ops_s_per_step")
    same_device = device and device == ((base or {}).get("metrics") or {}).get("device_kind")
    if not (all(mine) and all(theirs) and same_device):
        return
    rate, base_rate = mine[0] / mine[1], theirs[0] / theirs[1]
    out.facts["ops_rate"] = {"gflops_per_s": round(rate / 1e9, 3), "baseline_gflops_per_s": round(base_rate / 1e9, 3)}
    if rate > OPS_RATE_MAX * base_rate:
        out.add("trace", Finding("ops-rate", f"the compiled step's {mine[0] / 1e9:.4f} GFLOP of matmuls in "
                                 f"{mine[1] * 1e3:.3f} ms of XLA ops a step is {rate / 1e9:.1f} GFLOP/s; the "
                                 f"baseline's ran at {base_rate / 1e9:.1f} GFLOP/s on this {device} "
                                 f"(> {OPS_RATE_MAX:g}x: the step was not computed inside the steps)"))


def evidence_check(out: Integrity, base: dict | None) -> None:
    """A check the baseline passed on evidence that this run no longer gives (its clock: step lines gone)."""
    checks = (base or {}).get("checks") or {}
    for name in ("clock", "hlo", "trace"):
        mine = out.checks.get(name, "")
        if checks.get(name) == "ok" and mine.startswith("unchecked") and "not profiled" not in mine \
                and "arrived together" not in mine and "keeps no clock" not in mine:
            # the lines were printed: a late reader, or a remote runner that times no line, is not lost evidence
            out.add(name + "-evidence", Finding("evidence-lost", f"the `{name}` check passed on the baseline and "
                                                f"has no evidence here: {mine.removeprefix('unchecked: ')}"))
