"""Hypothesis pages: a proposal as a page (``hypothesis_page``), and a page written by a person or an agent back
into a proposal (``hypothesis_from_page``). Plain data in, ``pages.Page`` out; the engine writes them."""

from __future__ import annotations

import html
import posixpath
import re
from typing import Any

from .. import pages
from ..experiments.report import experiment_path
from ..mdtext import code
from .proposal import Change, Proposal, ProposalError
from .report import _link, _pct, _prose, _tags, hypothesis_path, loop_path
from .spec import LoopSpec


_STATUS_OF_VERDICT = {"invalid": "refuted", "crash": "abandoned"}


def _fence(text: str) -> str:
    runs = re.findall(r"`+", text)
    return "`" * max(3, max((len(r) for r in runs), default=0) + 1)


def _change_md(change: Change) -> list[str]:
    out = [f"Kind `{change.kind}`" + (" (runtime only: the optimized HLO does not change)" if change.runtime_only else "")
           + f": {code(change.describe())}.", ""]
    if change.kind == "patch" and change.patch:
        patch = change.patch.replace("<!-- tools:", "<!-- tools\u200b:")  # never closes a generated region
        fence = _fence(patch)
        out += [f"{fence}diff", patch.rstrip("\n"), fence, ""]
    return out


def hypothesis_page(spec: LoopSpec, proposal: Proposal, hid: str, status: str, experiment: str | None) -> pages.Page:
    """``hypotheses/<model>/<lane>/<hid>.md``. ``status``: a hypothesis status or a verdict (``invalid`` is filed
    as refuted, ``crash`` as abandoned; the verdict itself is kept in the ``verdict`` key). ``experiment``: an exp_id
    or an experiment page path."""
    src = hypothesis_path(spec.model, spec.lane, hid)
    verdict = status if status in pages.VERDICTS else None
    hstatus = _STATUS_OF_VERDICT.get(status, status)
    if hstatus not in pages.HYPOTHESIS_STATUS:
        raise ValueError(f"status {status!r} is not a hypothesis status or a verdict")
    exp_page = ""
    if experiment:
        exp_page = experiment if experiment.endswith(".md") else experiment_path(spec.model, spec.lane, experiment)
    exp_id = posixpath.splitext(posixpath.basename(exp_page))[0] if exp_page else ""
    one_line = " ".join(proposal.statement.split())
    title = one_line if len(one_line) <= 90 else one_line[:89].rstrip() + "…"
    if hstatus == "open":
        line = "Open: not tested yet."
    elif hstatus == "testing":
        line = f"Testing in {_link(src, exp_id, exp_page)}." if exp_page else "Testing."
    else:
        line = f"**{verdict or hstatus}**" + (f" in {_link(src, exp_id, exp_page)}" if exp_page else "") + "."
    if spec.name:  # a page filed outside a loop (``tools gap``) names none
        line += f" Loop {_link(src, spec.name, loop_path(spec.name))}."
    c = proposal
    text = ["## Statement", "", _field(c.statement), "", "## Mechanism", "", _field(c.mechanism), "",
            "## Predicted signal", "", _field(c.predicted_signal), "", "## Falsification", "", _field(c.falsification),
            "", "## Change", ""] + _change_md(c.change) + [
            f"Category `{c.category}`; expected gain {_pct(c.expected_gain_pct)}, confidence {c.confidence:.2f}, "
            f"effort {c.effort:g} (score {c.score:.2f}); proposed by `{c.proposer or 'unknown'}`."]
    if c.notes:
        text += ["", _prose(c.notes)]
    body = (f"# {_prose(title)}\n\n" + pages.region("hypothesis", "\n".join(text) + "\n") + "\n"
            + pages.region("hypothesis-verdict", "## Verdict\n\n" + line + "\n"))
    meta = {"title": title, "type": "hypothesis", "tags": _tags("hypothesis", "loop", spec.model, spec.lane),
            "model": spec.model, "lane": spec.lane, "loop": spec.name or None, "status": hstatus,
            "priority": round(proposal.score, 3), "expected_gain": proposal.expected_gain_pct,
            "category": proposal.category, "author": proposal.proposer or None, "confidence": proposal.confidence,
            "effort": proposal.effort, "change": _change_dict(proposal.change), "experiment": exp_id or None,
            "verdict": verdict}
    return pages.Page(src, {k: v for k, v in meta.items() if v is not None}, body)


_HEADING_START = re.compile(r"^([ \t]{0,3})#", re.M)
_ESCAPED_HEADING = re.compile(r"^([ \t]{0,3})\\#", re.M)


def _field(text: Any) -> str:
    """One field of the page: its own lines never start a heading (``## Mechanism`` inside the statement would be
    read back as the mechanism, over the real one); the reader undoes the escape."""
    return _HEADING_START.sub(r"\1\\#", _prose(text))


def _change_dict(change: Change) -> dict:
    d: dict[str, Any] = {"kind": change.kind}
    for k in ("knobs", "env", "patch"):
        if getattr(change, k):
            d[k] = getattr(change, k)
    d["runtime_only"] = change.runtime_only  # also keeps a patch off the frontmatter's last line (see pages.split)
    return d


_SECTION_KEYS = {"statement": "statement", "hypothesis": "statement", "mechanism": "mechanism", "why": "mechanism",
                 "predicted signal": "predicted_signal", "prediction": "predicted_signal",
                 "expected signal": "predicted_signal", "falsification": "falsification",
                 "falsification criterion": "falsification", "refuted if": "falsification"}
_WORDS = {"confidence": {"low": 0.3, "medium": 0.5, "high": 0.8},
          "effort": {"trivial": 1, "low": 1, "small": 1, "medium": 3, "high": 5, "large": 5}}
_DEFAULT_SIGNAL = "tokens/s rises beyond the noise band and the loss trajectory stays within tolerance"
_DEFAULT_FALSIFICATION = "tokens/s does not rise beyond the noise band, or the semantics check fails"
CHANGE_KEYS = ("kind", "knobs", "env", "patch", "runtime_only")


def _sections(body: str) -> dict[str, str]:
    body = re.sub(r"<!--(?:(?!<!--).)*?-->", "", body, flags=re.S)  # stops at the next opening: linear
    out: dict[str, str] = {}
    parts = re.split(r"^##[ \t]+(.+?)[ \t]*#*[ \t]*$", body, flags=re.M)
    for head, text in zip(parts[1::2], parts[2::2]):
        key = _SECTION_KEYS.get(head.strip().rstrip(":").lower())
        if key and key not in out and text.strip():
            out[key] = _ESCAPED_HEADING.sub(r"\1#", html.unescape(text.strip()))
    return out


def _number(v: Any, words: dict | None = None) -> Any:
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return v
    if isinstance(v, str):
        if words and v.strip().lower() in words:
            return words[v.strip().lower()]
        m = re.search(r"[-+]?\d+(?:\.\d+)?", v)
        if m:
            return float(m.group(0))
    return v


def hypothesis_from_page(meta: dict, body: str, path: str = "") -> dict:
    """A hypothesis page (frontmatter + ``## Statement`` / ``## Mechanism`` / ``## Predicted signal`` /
    ``## Falsification``; missing sections default from the title) as a dict for ``Proposal.from_dict``.
    The ``change`` frontmatter mapping is required and checked; raises ProposalError."""
    where = f"{path}: " if path else ""
    meta = meta or {}
    title = str(meta.get("title") or "").strip() or next(
        (m.group(1).strip() for m in re.finditer(r"^#[ \t]+(.+)$", body, re.M)), "")
    s = _sections(body)
    statement = s.get("statement") or html.unescape(title)
    if not statement:
        raise ProposalError(f"{where}no statement: give the page a title or a `## Statement` section")
    change = meta.get("change")
    if not isinstance(change, dict):
        raise ProposalError(f"{where}frontmatter `change` must be a mapping with `kind` (knobs, env or patch) and "
                            "the matching `knobs`, `env` or `patch`")
    unknown = sorted(set(change) - set(CHANGE_KEYS))
    if unknown:
        raise ProposalError(f"{where}frontmatter `change` has unknown keys: {', '.join(map(str, unknown))} "
                            f"(expected {', '.join(CHANGE_KEYS)})")
    if "knobs" in change and not isinstance(change["knobs"], dict) or "env" in change and not isinstance(change["env"], dict):
        raise ProposalError(f"{where}`change.knobs` and `change.env` must be mappings")
    change = dict(change)
    if isinstance(change.get("patch"), str) and change["patch"] and not change["patch"].endswith("\n"):
        change["patch"] += "\n"  # a unified diff ends with a newline; YAML can lose the last one
    return {"statement": statement, "mechanism": s.get("mechanism") or statement,
            "predicted_signal": s.get("predicted_signal") or _DEFAULT_SIGNAL,
            "falsification": s.get("falsification") or _DEFAULT_FALSIFICATION,
            "change": change, "category": meta.get("category") or "other",
            "expected_gain_pct": _number(meta.get("expected_gain", 0.0)),
            "confidence": _number(meta.get("confidence", 0.5), _WORDS["confidence"]),
            "effort": _number(meta.get("effort", 1.0), _WORDS["effort"]),
            "proposer": str(meta.get("author") or ""), "hypothesis_page": path, "notes": str(meta.get("notes") or "")}
