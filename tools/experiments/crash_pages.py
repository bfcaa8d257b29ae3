"""Crashes that teach: each frame of a crashed run linked into the knowledge base, and one page per crash signature.

- Frames: model code links to the run's own copy of its script (``raw/profiles/<run>/code/``) at the run's commit;
  an ingested codebase frame (``raw/code/<slug>/...``) to its module page; an installed framework frame
  (``site-packages/jax/...``) to the module page of the ingested codebase of that name when its version matches
  the installed one, else it is named unmatched, with both versions.
- ``observations/crashes/<signature>.md``: every run that hit the signature, what their configurations share, and
  the first fix: a later run of the same lane whose configuration differs from a crashed one in one knob and
  that did not crash.
Reads pages; returns page objects for the writer."""

from __future__ import annotations

import posixpath
from pathlib import Path

from .. import mdtext, pages
from .crash_advice import what_to_try

CRASH_DIR = "observations/crashes"
MAX_FRAMES = 25


def signature_path(signature: str) -> str:
    return f"{CRASH_DIR}/{signature}.md"


def _module_name(rel: str) -> str:
    mod = rel.removesuffix(".py").replace("/", ".")
    return mod.removesuffix(".__init__")


def _codebase_meta(wiki: Path, slug: str) -> dict | None:
    p = wiki / "codebases" / slug / "overview.md"
    try:
        meta, _ = pages.split(p.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, pages.FrontmatterError):
        return None
    return meta or {}


def _module_page(wiki: Path, slug: str, rel: str) -> str | None:
    """The module page of ``rel`` in codebase ``slug``: tried as given and under a ``src/`` layout."""
    from ..ingest.codebase_pages import module_page_path  # a path rule, no ingest run

    for cand in (rel, f"src/{rel}"):
        for mod in {_module_name(cand), _module_name(rel)}:
            path = module_page_path(slug, mod)
            if (wiki / path).is_file():
                return path
    return None


def installed_version(frame_file: str, package: str) -> str | None:
    """The version of ``package`` installed where the frame's file lives (its ``*.dist-info`` beside it)."""
    import re

    path = Path(frame_file)
    for parent in path.parents:
        if parent.name in ("site-packages", "dist-packages"):
            norm = re.sub(r"[-_.]+", "_", package).lower()
            for d in sorted(parent.glob("*.dist-info")):
                name, _, ver = d.name.removesuffix(".dist-info").partition("-")
                if re.sub(r"[-_.]+", "_", name).lower() == norm and ver:
                    return ver
            return None
    return None


def link_frames(wiki: Path, rec: dict) -> list[dict]:
    """The record's crash frames (innermost last), each with ``link`` (a wiki path, with ``#L<line>`` where the
    page has no anchor) or ``note`` saying why it has none."""
    crash = rec.get("crash") or {}
    versions = {k.removesuffix("_version"): str(v) for k, v in (rec.get("versions") or {}).items()}
    if rec.get("jax_version"):
        versions.setdefault("jax", str(rec["jax_version"]))
    out = []
    for f in (crash.get("frames") or [])[-MAX_FRAMES:]:
        f = dict(f)
        role, rel = f.get("role"), f.get("rel") or ""
        if role == "model" and rec.get("script_copy") and posixpath.basename(rel) == posixpath.basename(
                rec["script_copy"]):
            f["link"] = f"raw:{rec['script_copy']}"
            f["note"] = f"the run's copy of {rel}" + (f" at commit {rec['commit'][:12]}" if rec.get("commit") else "")
        elif role == "model":
            f["note"] = f"model code {rel}" + (f" at commit {rec['commit'][:12]}" if rec.get("commit") else "")
        elif role == "ingested":
            page = _module_page(wiki, f["package"], rel)
            f["link"] = page or f"codebases/{f['package']}/overview.md"
            if not page:
                f["note"] = "no module page for this file"
        elif role == "framework":
            meta = _codebase_meta(wiki, f["package"])
            have = (meta or {}).get("version")
            want = versions.get(f["package"]) or installed_version(f["file"], f["package"])
            page = _module_page(wiki, f["package"], rel) if meta is not None else None
            if meta is None:
                f["note"] = f"unmatched: {f['package']} is not an ingested codebase" + (
                    f" (installed {want})" if want else "")
            elif have and want and str(have) != str(want):
                f["note"] = f"unmatched: installed {f['package']} {want}, ingested {have}"
            else:
                f["link"] = page or f"codebases/{f['package']}/overview.md"
                if have and want:
                    f["note"] = f"{f['package']} {want}, as ingested"
        out.append(f)
    return out


def frames_section(frames: list[dict], src: str) -> list[str]:
    """Markdown lines: the linked frames, innermost last, for the experiment page at ``src``."""
    if not frames:
        return []
    out = ["| # | where | function | role | linked |", "|---:|---|---|---|---|"]
    for n, f in enumerate(frames, 1):
        where = mdtext.code(f"{f.get('rel') or f['file']}:{f['line']}")
        link = f.get("link") or ""
        if link.startswith("raw:"):
            shown = mdtext.code(link[4:])  # raw/ is outside the site: named, not linked
        elif link:
            shown = f"[{mdtext.escape(posixpath.basename(link).removesuffix('.md'))}]" \
                    f"({posixpath.relpath(link, posixpath.dirname(src))})"
        else:
            shown = "—"
        if f.get("note"):
            shown += f" ({mdtext.escape(f['note'])})"
        out.append(f"| {n} | {where} | {mdtext.code(f.get('func', ''))} | {f.get('role', '')} | {shown} |")
    return out


def concept_slugs(wiki: Path) -> frozenset[str]:
    """The concept pages the knowledge base has (``concepts/<slug>.md``): what crash advice may link to."""
    try:
        return frozenset(p.name.removesuffix(".md") for p in (wiki / "concepts").iterdir()
                         if p.name.endswith(".md") and p.is_file() and not p.is_symlink())
    except OSError:
        return frozenset()


def advice(rec: dict, src: str, concepts: frozenset[str]) -> list[str]:
    """"What to try" bullets for the crash of ``rec``, concept links relative to the page at ``src``."""
    link = lambda slug: (posixpath.relpath(f"concepts/{slug}.md", posixpath.dirname(src))  # noqa: E731
                         if slug in concepts else None)
    return what_to_try(rec.get("crash") or {}, config_of(rec), dict(rec.get("env") or {}), link)


def crash_section(rec: dict, frames: list[dict], src: str, concepts: frozenset[str] = frozenset()) -> list[str]:
    """"## Crash" for an experiment page: kind, signature page, message, figures, what to try, linked frames."""
    c = rec.get("crash") or {}
    if not c:
        return []
    sig = c.get("signature", "")
    out = ["## Crash", "", f"- kind: **{c.get('kind')}**; signature "
           f"[{mdtext.code(sig)}]({posixpath.relpath(signature_path(sig), posixpath.dirname(src))})",
           f"- message: {mdtext.code(c.get('message', '')[:300])}"]
    oom = c.get("oom") or {}
    if oom:
        out.append("- memory: " + _oom_words(oom))
    if c.get("nan_step") is not None:
        out.append(f"- first non-finite loss at step {c['nan_step']}")
    for ln in [x for x in (c.get("error_lines") or []) if x not in c.get("message", "")][-3:]:
        out.append(f"- XLA/JAX: {mdtext.code(ln[:200])}")
    tips = advice(rec, src, concepts)
    if tips:
        out += ["", "What to try:", "", *tips]
    rows = frames_section(frames, src)
    if rows:
        out += ["", "Frames, innermost last:", "", *rows]
    return out + [""]


def _gb(b) -> str:
    return f"{b / 2 ** 30:.2f} GiB"


def _oom_words(oom: dict) -> str:
    parts = []
    if oom.get("needed_bytes"):
        parts.append(f"one allocation needed {_gb(oom['needed_bytes'])}")
    if oom.get("used_bytes"):
        parts.append(f"used {_gb(oom['used_bytes'])} of {_gb(oom.get('available_bytes') or 0)}")
    if oom.get("largest_bytes"):
        parts.append("largest allocations " + ", ".join(_gb(b) for b in oom["largest_bytes"]))
    return "; ".join(parts) or "no figures printed"


def config_of(r: dict) -> dict:
    """A run's configuration: the loop's knobs, else its command's --flags (what a crashed run has too: it
    reported nothing)."""
    if r.get("loop_config"):
        return dict(r["loop_config"])
    words = _words(str(r.get("command") or ""), comments=False)
    for i, w in enumerate(words[:-1]):  # a shell's script (`bash -c "ulimit ...; exec python x.py --batch 8"`)
        if w == "-c" and " " in words[i + 1]:
            words = words[:i] + _words(words[i + 1], comments=True) + words[i + 2:]
            break
    out = {}
    for i, w in enumerate(words):
        if w.startswith("--") and len(w) > 2:
            name, eq, val = w[2:].partition("=")
            nxt = words[i + 1] if i + 1 < len(words) else ""
            out[name] = val if eq else (nxt if nxt and not nxt.startswith("--") else True)
    return out


def _words(command: str, comments: bool) -> list[str]:
    """A command's words as the shell reads them: in a script, ``;``, ``&&`` and ``|`` stand apart and a ``#``
    comment (``# don't``) is dropped. A command the shell itself could not read (an unclosed quote) is split at
    whitespace, so its flags are still found."""
    import shlex

    lex = shlex.shlex(_uncommented(command) if comments else command, posix=True, punctuation_chars=comments)
    lex.whitespace_split, lex.commenters = True, ""
    try:
        return list(lex)
    except ValueError:
        return [w.strip("'\"") for w in command.split()]


def _uncommented(script: str) -> str:
    """A shell script without its comments: a ``#`` that starts a word outside quotes, to the end of its line
    (``--tag=a#b`` keeps its ``#``, as the shell does)."""
    out, quote, i = [], "", 0
    while i < len(script):
        c = script[i]
        if quote:
            if c == "\\" and quote == '"':
                out.append(script[i:i + 2])
                i += 2
                continue
            quote = "" if c == quote else quote
        elif c in "'\"":
            quote = c
        elif c == "\\":
            out.append(script[i:i + 2])
            i += 2
            continue
        elif c == "#" and (not out or out[-1][-1:] in ("", " ", "\t", "\n", ";", "&", "|", "(")):
            end = script.find("\n", i)
            i = len(script) if end == -1 else end
            continue
        out.append(c)
        i += 1
    return "".join(out)


def first_fix(crashed: list[dict], lane_recs: list[dict]) -> dict | None:
    """A later run of the same lane whose configuration differs from a crashed one in exactly one knob and did not
    crash: ``{exp_id, page, knob, value, fixes}``."""
    for c in crashed:
        cfg = config_of(c)
        later = [r for r in lane_recs if int(r.get("version") or 0) > int(c.get("version") or 0)
                 and r.get("lane") == c.get("lane") and r.get("model") == c.get("model")]
        for r in later:
            if r.get("verdict") in ("crash", "invalid") or r.get("status") != "filed":
                continue
            rc = config_of(r)
            diff = [k for k in set(cfg) | set(rc) if cfg.get(k) != rc.get(k)]
            if len(diff) == 1:
                return {"exp_id": r["exp_id"], "page": r.get("page"), "knob": diff[0], "value": rc.get(diff[0]),
                        "fixes": c["exp_id"]}
    return None


def signature_page(signature: str, runs: list[dict], all_recs: list[dict],
                   concepts: frozenset[str] = frozenset()) -> pages.Page:
    """The page of one crash signature: its runs (oldest first), what their configurations share, the first fix."""
    path = signature_path(signature)
    runs = sorted(runs, key=lambda r: (str(r.get("date") or ""), int(r.get("version") or 0), r["exp_id"]))
    c = runs[-1].get("crash") or {}
    rel = lambda p: posixpath.relpath(p, posixpath.dirname(path))  # noqa: E731
    cfgs = [config_of(r) for r in runs]
    common = {k: v for k, v in cfgs[0].items() if all(x.get(k) == v for x in cfgs[1:])} if cfgs else {}
    fix = first_fix(runs, all_recs)
    body = [f"# Crash {mdtext.code(signature)}", "",
            f"Kind **{c.get('kind')}**: {mdtext.code((c.get('message') or '')[:300])}", ""]
    if c.get("oom"):
        body += [f"Memory (latest run): {_oom_words(c['oom'])}.", ""]
    inner = [f for f in (c.get("frames") or []) if f.get("role") in ("model", "framework", "ingested")][-2:]
    if inner:
        body += ["Innermost frames: " + "; ".join(mdtext.code(f"{f.get('rel') or f['file']}:{f['line']} "
                                                              f"{f.get('func')}") for f in inner) + ".", ""]
    tips = advice(runs[-1], path, concepts)
    if tips:
        body += ["## What to try", "", "From the latest run's figures and configuration:", "", *tips, ""]
    body += ["## Runs", "", "| run | lane | configuration | reason |", "|---|---|---|---|"]
    for r, cfg in zip(runs, cfgs):
        body.append(f"| [{mdtext.code(r['exp_id'])}]({rel(r['page'])}) | {mdtext.escape(str(r.get('lane')))} | "
                    f"{mdtext.escape(', '.join(f'{k}={v}' for k, v in cfg.items()) or '—')} | "
                    f"{mdtext.escape('; '.join(r.get('reasons') or [])[:200])} |")
    body += ["", "## In common", "",
             (", ".join(mdtext.code(f"{k}={v}") for k, v in common.items()) if common else "nothing") + ".", ""]
    body += ["## First fix", ""]
    if fix:
        body.append(f"[{mdtext.code(fix['exp_id'])}]({rel(fix['page'])}) ran {mdtext.code(fix['knob'])}="
                    f"{mdtext.code(str(fix['value']))} where {mdtext.code(fix['fixes'])} crashed, and did not crash.")
    else:
        body.append("None yet: no later run of the lane that differs in one knob has passed.")
    meta = {"title": f"Crash {signature}", "type": "observation", "tags": ["crash", c.get("kind") or "other"],
            "experiment": runs[-1].get("page"), "signature": signature, "kind": c.get("kind"), "runs": len(runs),
            "last_seen": runs[-1]["exp_id"], "fix": fix and fix["exp_id"]}
    return pages.Page(path, {k: v for k, v in meta.items() if v is not None},
                      pages.region("crash", "\n".join(body) + "\n"))


def signatures(recs: list[dict]) -> list[dict]:
    """Every signature in ``recs``: count, kind, message, last seen, lanes (for `tools exp crashes`)."""
    by: dict[str, list[dict]] = {}
    for r in recs:
        sig = (r.get("crash") or {}).get("signature")
        if sig:
            by.setdefault(sig, []).append(r)
    out = []
    for sig, runs in by.items():
        runs.sort(key=lambda r: (str(r.get("date") or ""), int(r.get("version") or 0)))
        c = runs[-1]["crash"]
        out.append({"signature": sig, "kind": c.get("kind"), "count": len(runs), "message": c.get("message", "")[:200],
                    "last_seen": runs[-1]["exp_id"], "lanes": sorted({f"{r.get('model')}/{r.get('lane')}" for r in runs}),
                    "page": signature_path(sig)})
    return sorted(out, key=lambda s: (-s["count"], s["signature"]))
