"""Experiment records: the frontmatter of experiment pages, read back from wiki/."""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path

import yaml

from .. import pages, safeio
from ..errors import InputError

log = logging.getLogger(__name__)
PAGE_LIMIT = 16 * 1024 * 1024

# libyaml when present: ~7x faster than the pure-Python loader (0.4 vs 2.9 ms per experiment page here), and a
# run reads its lane twice. Same SafeConstructor, so the same values.
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

VERSION = re.compile(r"^(?P<date>\d{4}-\d{2}-\d{2})-v(?P<n>\d{3,})-(?P<slug>.+)\.md$")


def load_experiments(wiki_dir: Path | str, under: str = "") -> list[dict]:
    """Every experiment page under ``wiki/experiments`` (or its folder ``under``, e.g. ``<model>/<lane>``): its
    frontmatter plus ``page`` (path relative to wiki/), ordered by model, lane and version. A page whose
    frontmatter does not parse, or holds a value of the wrong kind where a run's figures belong (a hand edit), is
    logged and left out: one such page never stops the commands of its lane, nor of any other."""
    wiki = Path(wiki_dir)
    pages = []
    for p in sorted((wiki / "experiments" / under).rglob("*.md")):
        try:
            pages.append((p.relative_to(wiki).as_posix(), _frontmatter(p, wiki)))
        except InputError as e:
            log.warning("%s: left out (%s)", p, e.problem)
    return records_of(pages)


def records_of(pages) -> list[dict]:
    """The experiment records of pages already read: (wiki-relative path, frontmatter) pairs. Ordered and checked as
    ``load_experiments``; a page left out is logged."""
    out, problems = records_and_problems(pages)
    for rel, why in problems:
        log.warning("wiki/%s: left out (%s)", rel, why)
    return out


def records_and_problems(pages) -> tuple[list[dict], list[tuple[str, str]]]:
    """``records_of``'s records, and (wiki-relative path, why) for each experiment page left out, for the caller
    to report (the site's scan hands its own pages, so a 5,000-run lane's pages are not parsed twice, and names
    each page left out among its build warnings)."""
    out, problems = [], []
    for rel, meta in pages:
        if not meta or meta.get("type") != "experiment" or not rel.startswith("experiments/"):
            continue
        if why := shape_problem(meta):
            problems.append((rel, why))
            continue
        rec = dict(meta)
        rec["page"] = rel
        m = VERSION.match(rel.rsplit("/", 1)[-1])
        rec.setdefault("version", int(m.group("n")) if m else 0)
        out.append(rec)
    out.sort(key=lambda r: (str(r.get("model")), str(r.get("lane")), int(r.get("version") or 0), r["page"]))
    return out, problems


_KINDS = {"exp_id": (str,), "model": (str,), "lane": (str,), "variant": (str,), "verdict": (str,), "status": (str,),
          "role": (str,), "baseline": (str,), "metrics": (dict,), "crash": (dict,), "timing": (dict,),
          "calibration": (dict,), "config": (dict,), "gain_pct": (int, float), "noise_band_pct": (int, float)}
_FIGURES = ("tokens_per_s", "mfu_percent", "step_time_ms", "memory_gb", "peak_memory_gb")


def shape_problem(meta: dict) -> str:
    """Why an experiment page's frontmatter cannot be read as a run ("" when it can): no ``exp_id``, or a key of the
    wrong kind."""
    if not meta.get("exp_id"):
        return "no `exp_id`"
    for key, kinds in _KINDS.items():
        v = meta.get(key)
        if v is not None and (isinstance(v, bool) or not isinstance(v, kinds)):
            return f"`{key}` is {v!r}, not a {' or '.join(k.__name__ for k in kinds)}"
    v = meta.get("version")
    if v is not None and (isinstance(v, bool) or not (isinstance(v, int) or re.fullmatch(r"[0-9]{1,9}", str(v)))):
        # "²" is a digit to str.isdigit and no number to int(); 5,000 digits pass isdigit and int() refuses them
        return f"`version` is {v!r}, not a number"
    for key in _FIGURES:
        f = (meta.get("metrics") or {}).get(key)
        if f is not None and (isinstance(f, bool) or not isinstance(f, (int, float))):
            return f"`metrics.{key}` is {f!r}, not a number"
    return ""


def _frontmatter(p: Path, wiki: Path) -> dict | None:
    """A page's frontmatter; None for what is not a page to read (a FIFO, a link out of wiki/, a dangling link, a
    huge file), which is logged and skipped so one such file never stops a lane's commands."""
    try:
        text = safeio.read_text(p, PAGE_LIMIT, within=wiki)
    except FileNotFoundError:  # a dangling link, or a page removed while we listed
        log.warning("%s: not read (no such file)", p)
        return None
    except safeio.Refused as e:
        log.warning("%s: not read (%s)", p, e)
        return None
    m = pages.FRONTMATTER_RE.match(text)
    if m:
        try:
            meta = pages.load_yaml(m.group(1) + "\n", _LOADER)
        except pages.FrontmatterError as e:
            raise InputError(p, str(e)) from None
        except (yaml.YAMLError, ValueError, RecursionError):
            meta = None
        if isinstance(meta, dict):
            return meta
    try:  # the reference parser decides, and words the error
        return pages.split(text)[0]
    except pages.FrontmatterError as e:
        raise InputError(p, str(e)) from None


def lane_records(wiki_dir: Path | str, model: str, lane: str) -> list[dict]:
    """The lane's pages (they live in ``experiments/<model>/<lane>/``: only that folder is read)."""
    return [r for r in load_experiments(wiki_dir, f"{model}/{lane}") if r.get("model") == model and r.get("lane") == lane]


def next_version(lane_dir: Path, ledger_rows: list[dict]) -> int:
    """One more than the highest version among the lane's pages and ledger rows."""
    seen = [int(m.group("n")) for p in lane_dir.glob("*.md") if (m := VERSION.match(p.name))]
    for r in ledger_rows:
        m = re.search(r"-v(\d{3,})-", str(r.get("exp_id") or ""))
        if m:
            seen.append(int(m.group(1)))
    return max(seen, default=0) + 1


def shape_key_of(r: dict) -> str | None:
    """The record's shape key (``verdict.shape_key`` of its result); None for old records that stored no shape."""
    if r.get("shape_key"):
        return str(r["shape_key"])
    if isinstance(r.get("shape"), dict):
        return json.dumps(r["shape"], sort_keys=True)
    return None


def shape_labels(keys: list[str | None]) -> dict:
    """A short label per shape key: the fields that differ between the shapes (``—`` when there is one shape)."""
    known = [k for k in keys if k]
    if len(set(known)) <= 1:
        return {k: "—" for k in keys}
    shapes = {k: json.loads(k) for k in set(known)}
    fields = sorted({f for d in shapes.values() for f in d
                     if len({json.dumps(x.get(f), sort_keys=True) for x in shapes.values()}) > 1})
    out = {k: ", ".join(f"{f}={shapes[k].get(f)}" for f in fields) for k in shapes}
    out[None] = "unrecorded"
    return out


def _same_shape(r: dict, shape_key: str | None) -> bool:
    """``shape_key`` None: any shape. A record with no stored shape (filed before shapes were) matches any."""
    k = shape_key_of(r)
    return shape_key is None or k is None or k == shape_key


def usable(r: dict) -> str | None:
    """Why a record cannot be a baseline or a comparison point (None: it can)."""
    if r.get("status") != "filed":
        return f"it is {r.get('status') or 'not filed'}"
    if r.get("verdict") in ("crash", "invalid"):
        return f"it was filed {r['verdict']}"
    if r.get("role") == "calibration":
        return "it is a calibration run"
    if not (r.get("metrics") or {}).get("tokens_per_s"):
        return "it has no tokens/s"
    return None


def kept(records: list[dict]) -> list[dict]:
    return [r for r in records if r.get("ledger_status") == "keep" and usable(r) is None]


def baseline_for(records: list[dict], variant: str, shape_key: str | None = None) -> dict | None:
    """The latest usable baseline run of a variant (of that shape when ``shape_key`` is given): crashed and
    invalid runs are never a baseline."""
    bs = [r for r in records if r.get("variant") == variant and r.get("role") == "baseline" and usable(r) is None
          and _same_shape(r, shape_key)]
    return bs[-1] if bs else None


def best_for(records: list[dict], variant: str, shape_key: str | None = None) -> dict | None:
    ks = [r for r in kept(records) if r.get("variant") == variant and _same_shape(r, shape_key)]
    return max(ks, key=lambda r: r["metrics"]["tokens_per_s"]) if ks else None


def calibration_for(records: list[dict], variant: str, shape_key: str | None = None,
                    pairs: bool = False) -> dict | None:
    """The latest filed A/A calibration of a variant (of that shape) measured as the coming rounds are: of processes,
    or of in-process pairs (``pairs``). Pairs fall back to a calibration of processes (their noise is larger: a wider
    floor, never a narrower one); processes never take one of pairs."""
    cs = [r for r in records if r.get("variant") == variant and r.get("role") == "calibration"
          and r.get("status") == "filed" and (r.get("calibration") or {}).get("rounds") and _same_shape(r, shape_key)]
    same = [r for r in cs if bool(r.get("pairs")) == pairs]
    if same:
        return same[-1]
    return next((r for r in reversed(cs) if not r.get("pairs")), None) if pairs else None


def semantics_reference(records: list[dict], shape_key: str) -> dict | None:
    """The earliest same-shape baseline or semantics-ok run with a loss trajectory (never crashed or invalid)."""
    for r in records:
        if r.get("status") == "filed" and r.get("loss_trajectory") and r.get("verdict") not in ("crash", "invalid") \
                and shape_key_of(r) == shape_key \
                and (r.get("role") == "baseline" or (r.get("semantics") or {}).get("status") == "ok"):
            return r
    return None


def find(records: list[dict], exp_id: str) -> dict | None:
    return next((r for r in records if r.get("exp_id") == exp_id), None)
