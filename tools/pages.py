"""The page model: page types, their frontmatter, generated regions, parse and render.

A page is markdown with YAML frontmatter. Common keys: title, type, tags, created, updated.
Each type adds its own keys (TYPES below). Text between ``<!-- tools:begin NAME -->`` and
``<!-- tools:end NAME -->`` is owned by the generator; everything else belongs to people and agents
and survives every regeneration.
"""

from __future__ import annotations

import datetime as _dt
import re
from dataclasses import dataclass
from typing import Any

import yaml

# generated regions, part of the pages API (tools/regions.py)
from .regions import drop_empty_regions, merge_body, region, regions  # noqa: F401

COMMON_KEYS = ("title", "type", "tags", "created", "updated")

EXPERIMENT_STATUS = ("in_progress", "filed")
VERDICTS = ("supported", "refuted", "inconclusive", "invalid", "crash", "baseline", "calibration")
# baseline: the reference a lane's runs are compared with; calibration: an A/A run measuring the lane's noise.
# Neither is a verdict on a hypothesis.
HYPOTHESIS_STATUS = ("open", "testing", "supported", "refuted", "inconclusive", "abandoned")
BACKENDS = ("tpu", "gpu-triton", "gpu-mosaic", "interpret", "unknown")
KERNEL_CATEGORIES = (
    "attention", "paged/ragged attention", "matmul/gemm", "quantized matmul",
    "moe/grouped matmul", "normalization", "activation/GLU", "cross-entropy/loss",
    "collective/communication", "ssm/scan/linear-recurrence", "rotary/positional",
    "sampling/top-k", "fft/convolution", "moe routing/dispatch", "residual/hyper-connections", "crypto/fhe/other",
)
KERNEL_KINDS = ("library", "test", "benchmark", "example")
STABILITY = ("stable", "experimental", "research", "deprecated")
# What a loop's hypotheses are about (tools/loop/proposal.py keeps the same tuple).
LOOP_CATEGORIES = ("shape", "precision", "memory", "compiler", "kernel", "parallelism", "data", "code", "other")
LOOP_STATUS = ("running", "stopped")


@dataclass(frozen=True)
class Key:
    name: str
    required: bool = False
    choices: tuple[str, ...] | None = None
    kind: type | tuple[type, ...] | None = None  # expected Python type after YAML load


@dataclass(frozen=True)
class PageType:
    name: str
    folder: str  # where pages of this type live under wiki/ ("" = anywhere)
    keys: tuple[Key, ...] = ()
    sections: tuple[str, ...] = ()  # "## Heading" sections a complete page has
    summary: str = ""


_num = (int, float)
TYPES: dict[str, PageType] = {}


def _register(t: PageType) -> PageType:
    TYPES[t.name] = t
    return t


_register(PageType("source", "sources", (
    Key("url"), Key("path"), Key("authors", kind=list), Key("year", kind=int),
), summary="A paper, doc or post under raw/sources, summarized"))
_register(PageType("codebase", "codebases", (
    Key("repo", True, kind=str), Key("commit"), Key("remote"), Key("path", True, kind=str),
), sections=("Performance-relevant surfaces",), summary="An ingested code repository"))
_register(PageType("concept", "concepts", (
    Key("aliases", kind=list),
), summary="An optimization idea or mechanism, linked to where it appears"))
_register(PageType("kernel", "kernels", (
    Key("repo", True, kind=str), Key("commit"), Key("path", True, kind=str),
    Key("line", True, kind=int), Key("backend", True, BACKENDS),
    Key("category", True, KERNEL_CATEGORIES), Key("kind", True, KERNEL_KINDS),
    Key("stability", False, STABILITY), Key("vendored_from"),
), summary="A Pallas kernel found in an ingested repository"))
_register(PageType("model", "models", (
    Key("model", True, kind=str), Key("lane", kind=str), Key("hardware"),
    Key("references", kind=list),
), summary="A model under optimization: variants, baseline and current best"))
_register(PageType("hypothesis", "hypotheses", (
    Key("model"), Key("status", False, HYPOTHESIS_STATUS), Key("priority", kind=_num),
    Key("expected_gain"), Key("lane", kind=str), Key("loop", kind=str), Key("category", False, LOOP_CATEGORIES),
    Key("author", kind=str), Key("confidence", kind=_num), Key("effort", kind=_num), Key("change", kind=dict),
    Key("experiment"),
), summary="A falsifiable idea to try"))
_register(PageType("experiment", "experiments", (
    Key("model", True, kind=str), Key("lane", True, kind=str), Key("variant", kind=str),
    Key("hypothesis"), Key("commit"), Key("exp_id", kind=str),
    Key("status", True, EXPERIMENT_STATUS), Key("verdict", False, VERDICTS),
    Key("metrics", kind=dict), Key("loop", kind=str), Key("category", False, LOOP_CATEGORIES),
), sections=("Hypothesis under test", "Setup", "Results", "Profile", "HLO", "Verdict"),
    summary="One run, its metrics and its verdict"))
_register(PageType("observation", "observations", (
    Key("experiment"), Key("source"),
), summary="Something seen in a profile, a run or a source"))
_register(PageType("analysis", "analyses", (), summary="A synthesis across pages"))
_register(PageType("loop", "loops", (
    Key("model", True, kind=str), Key("lane", True, kind=str), Key("variant", kind=str),
    Key("status", False, LOOP_STATUS), Key("stop_reason", kind=str), Key("best"),
    Key("best_tokens_per_s", kind=(int, float)), Key("gain_pct", kind=(int, float)),
), summary="An autoresearch loop over one lane: hypotheses in order, frontier, categories, stop reason"))
_register(PageType("index", "", (), summary="A listing page"))
_register(PageType("log", "", (), summary="The append-only record of operations"))

CONTENT_TYPES = tuple(t for t in TYPES if t not in ("index", "log"))


# ---------------------------------------------------------------- parse / render

# A leading `---` line, the YAML (group 1), then a `---` or `...` line. Public: tools.wikiscan reuses it.
FRONTMATTER_RE = re.compile(r"\A---[ \t]*\r?\n(.*?)\r?\n(?:---|\.\.\.)[ \t]*(?:\r?\n|\Z)", re.S)


# libyaml's loader is ~7x faster and loads the same values; fall back to pure Python without it.
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class FrontmatterError(ValueError):
    pass


MAX_EXPANDED_NODES = 100_000   # YAML aliases may repeat a node; what they expand to is bounded
MAX_EXPANDED_CHARS = 4_000_000


def _expanded(node, memo: dict) -> tuple[int, int]:
    """(nodes, characters) ``node`` stands for once every alias is expanded; shared nodes are counted once per
    reference but computed once, so a "billion laughs" document is measured in time linear in its size."""
    key = id(node)
    if key in memo:
        return memo[key]
    memo[key] = (1, 0)  # a recursive alias (a node holding itself) counts as one node
    if isinstance(node, yaml.ScalarNode):
        out = (1, len(node.value))
    else:
        items = node.value if isinstance(node, yaml.SequenceNode) else [x for kv in node.value for x in kv]
        n, c = 1, 0
        for child in items:
            cn, cc = _expanded(child, memo)
            n, c = n + cn, c + cc
        out = (n, c)
    memo[key] = out
    return out


def load_yaml(text: str, loader=None):
    """YAML through a safe loader, with aliases bounded: a document whose aliases expand past
    ``MAX_EXPANDED_NODES`` nodes or ``MAX_EXPANDED_CHARS`` characters is refused (FrontmatterError) instead of
    growing to gigabytes in every reader (search, index, lint, the site, MCP). Without an anchor there is no
    alias, and nothing extra to do."""
    loader_cls = loader or _LOADER
    if "&" not in text or "*" not in text:
        return yaml.load(text, Loader=loader_cls)  # noqa: S506 - a safe loader
    ld = loader_cls(text)
    try:
        node = ld.get_single_node()
        if node is None:
            return None
        n, c = _expanded(node, {})
        if n > MAX_EXPANDED_NODES or c > MAX_EXPANDED_CHARS:
            raise FrontmatterError(f"YAML aliases expand to {n:,} nodes and {c:,} characters (more than "
                                   f"{MAX_EXPANDED_NODES:,} / {MAX_EXPANDED_CHARS:,}: an alias bomb?); not read")
        return ld.construct_document(node)
    finally:
        ld.dispose()


def split(text: str) -> tuple[dict[str, Any] | None, str]:
    """Return (frontmatter or None when absent, body). Raises FrontmatterError on bad YAML."""
    m = FRONTMATTER_RE.match(text)
    if not m:
        return None, text
    try:  # the newline the pattern consumed: a block scalar that ends the frontmatter keeps its last newline
        meta = load_yaml(m.group(1) + "\n")
    except FrontmatterError:
        raise
    except (yaml.YAMLError, ValueError, RecursionError):
        # Bad input is rare: re-read it with the pure-Python loader, whose error marks are exact.
        try:
            meta = load_yaml(m.group(1), yaml.SafeLoader)
        except FrontmatterError:
            raise
        except RecursionError:
            raise FrontmatterError("invalid YAML frontmatter: nested too deep") from None
        except (yaml.YAMLError, ValueError) as e:  # ValueError: impossible dates such as 2026-13-45
            mark = getattr(e, "problem_mark", None)
            where = f" (line {mark.line + 2})" if mark else ""
            raise FrontmatterError(f"invalid YAML frontmatter{where}: {getattr(e, 'problem', e)}") from None
    if meta is None:
        meta = {}
    if not isinstance(meta, dict):
        raise FrontmatterError("frontmatter is not a mapping")
    return meta, text[m.end():]


# libyaml's dumper too: ~4x faster, and byte-identical output on 4,121 pages of real and hostile wikis.
class _Dumper(getattr(yaml, "CSafeDumper", yaml.SafeDumper)):
    pass


def _str_rep(dumper, data):
    style = "|" if "\n" in data else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)


_Dumper.add_representer(str, _str_rep)


def ordered_meta(meta: dict[str, Any]) -> dict[str, Any]:
    """Common keys first, then the type's keys in schema order, then any others sorted."""
    t = TYPES.get(str(meta.get("type", "")))
    order = list(COMMON_KEYS) + ([k.name for k in t.keys] if t else [])
    out = {k: meta[k] for k in order if k in meta}
    for k in sorted(k for k in meta if k not in out):
        out[k] = meta[k]
    return out


def render(meta: dict[str, Any], body: str) -> str:
    fm = yaml.dump(ordered_meta(meta), Dumper=_Dumper, sort_keys=False,
                   allow_unicode=True, default_flow_style=False, width=100)
    body = body.lstrip("\n")
    if not body.endswith("\n"):
        body += "\n"
    return f"---\n{fm}---\n\n{body}"


# ---------------------------------------------------------------- the page object

@dataclass
class Page:
    """A page to write: ``path`` is relative to wiki/ (posix), ``meta`` its frontmatter."""

    path: str
    meta: dict[str, Any]
    body: str
    preserve_meta: tuple[str, ...] = ("created",)  # keys an existing page keeps
    keep_regions: bool = False  # keep regions of an existing page that this generator did not produce
    owned_meta: tuple[str, ...] = ()  # keys only the generator writes: one it leaves out is gone from the page (a
    #                                   hand-added key stays; a `vendored_from` that no longer holds went stale)

    @property
    def type(self) -> str:
        return str(self.meta.get("type", ""))


def today() -> str:
    return _dt.date.today().isoformat()


# ---------------------------------------------------------------- validation

@dataclass(frozen=True, order=True)
class Problem:
    path: str
    field: str
    problem: str
    severity: str = "error"  # error | warning
    line: int | None = None

    def __str__(self) -> str:
        where = f"{self.path}:{self.line}" if self.line else self.path
        return f"{where}: {self.field}: {self.problem}"


def _is_date(v: Any) -> bool:
    if isinstance(v, _dt.date):
        return True
    return isinstance(v, str) and bool(re.fullmatch(r"\d{4}-\d{2}-\d{2}([ T].*)?", v))


def validate(path: str, meta: dict[str, Any] | None, body: str = "") -> list[Problem]:
    """Check frontmatter against the page model. Never raises."""
    if meta is None:
        return [Problem(path, "frontmatter", "missing")]
    out: list[Problem] = []
    ptype = meta.get("type")
    if not ptype:
        out.append(Problem(path, "type", "missing"))
    elif not isinstance(ptype, str) or ptype not in TYPES:
        out.append(Problem(path, "type", f"unknown type {ptype!r} (expected one of {', '.join(TYPES)})"))
    if not meta.get("title"):
        out.append(Problem(path, "title", "missing"))
    elif isinstance(meta["title"], (list, dict, bool)):  # `title: [a, b]`: a name 123 or a date reads as text
        out.append(Problem(path, "title", f"must be text, not a {type(meta['title']).__name__}"))
    tags = meta.get("tags")
    if tags is not None and not (isinstance(tags, list) and all(isinstance(t, (str, int, float)) for t in tags)):
        out.append(Problem(path, "tags", "must be a list of strings"))
    for k in ("created", "updated"):
        if k in meta and meta[k] is not None and not _is_date(meta[k]):
            out.append(Problem(path, k, f"not a date: {meta[k]!r}"))
    t = TYPES.get(ptype) if isinstance(ptype, str) else None
    if t is None:
        return out
    for key in t.keys:
        v = meta.get(key.name)
        if v is None or v == "":
            if key.required:
                out.append(Problem(path, key.name, "missing (required for type " + t.name + ")"))
            continue
        if key.choices and v not in key.choices:
            out.append(Problem(path, key.name, f"invalid value {v!r} (expected one of {', '.join(key.choices)})"))
        elif key.kind and not isinstance(v, key.kind) or (key.kind is int and isinstance(v, bool)):
            want = key.kind.__name__ if isinstance(key.kind, type) else "number"
            out.append(Problem(path, key.name, f"expected {want}, got {type(v).__name__}"))
    if t.name == "experiment" and meta.get("status") == "filed" and not meta.get("verdict"):
        out.append(Problem(path, "verdict", "missing on a filed experiment"))
    if t.name == "experiment" and meta.get("verdict") == "supported" and not meta.get("metrics"):
        out.append(Problem(path, "metrics", "a supported experiment has no metrics"))
    if body and t.sections:
        heads = set(re.findall(r"^#{2,3}\s+(.+?)\s*#*\s*$", body, re.M))
        for s in t.sections:
            if not any(h.lower().startswith(s.lower()) for h in heads):
                out.append(Problem(path, "sections", f"missing section '## {s}'", "warning"))
    return out
