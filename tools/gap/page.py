"""The gap analysis as a page: ``analyses/gap-<ours>-vs-<ref>.md``, the two runs side by side, time per token by
category (a bar per run), the items ranked by estimated gain with their evidence, the knob change or code change each
asks for and its hypothesis page. Plain data in, ``pages.Page`` out; the writer writes it."""

from __future__ import annotations

import posixpath

from .. import pages
from ..mdtext import code, escape, number, slugify

BAR = 30  # characters of the longest bar


def gap_path(ours: str, ref: str, ours_page: str = "", ref_page: str = "") -> str:
    """The analysis page of ``ours`` against ``ref``; a run is named with its model and lane (two lanes may give
    their runs the same id, and one lane's analysis must not overwrite the other's)."""
    def lane(page: str) -> str:
        parts = page.removeprefix("experiments/").split("/")
        return "-".join(parts[:2]) if page.startswith("experiments/") and len(parts) == 3 else ""

    lo, lr = lane(ours_page), lane(ref_page)
    if lo and lo == lr:
        return f"analyses/gap-{slugify(lo)[:60]}-{slugify(ours)[:60]}-vs-{slugify(ref)[:60]}.md"
    name = [slugify(f"{ln}-{label}" if ln else label)[:90] for ln, label in ((lo, ours), (lr, ref))]
    return f"analyses/gap-{name[0]}-vs-{name[1]}.md"


def _named(label: str, page: str) -> str:
    """A run as MODEL/LANE/EXP_ID where its page says (an id alone is ambiguous across lanes), else as given."""
    parts = page.removeprefix("experiments/").split("/")
    return f"{parts[0]}/{parts[1]}/{label}" if page.startswith("experiments/") and len(parts) == 3 else label


def _link(src: str, label: str, target: str) -> str:
    if not target:
        return label
    return f"[{label}]({posixpath.relpath(target, posixpath.dirname(src)).replace(' ', '%20')})"


def _num(v, nd: int = 3) -> str:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return "—"
    return number(v, nd if abs(v) < 1000 else 0)


def _pct(v) -> str:
    return f"{v:+.1f} %" if isinstance(v, (int, float)) else "—"


def _bars(cats: list[dict]) -> list[str]:
    top = max((max(c["ours"], c["ref"]) for c in cats), default=0) or 1
    out = ["```text"]
    for c in cats:
        for side in ("ours", "ref"):
            n = round(BAR * c[side] / top)
            out.append(f"{c['category'][:18]:<18} {side:<4} {'█' * n:<{BAR}} {c[side]:.3f}")
    return out + ["```"]


def _settings(codebases: dict) -> list[str]:
    """Each side's performance settings when its code is an ingested codebase (its overview's knob defaults, and
    what its command overrides)."""
    out = []
    for role, label in (("ref", "the reference"), ("ours", "ours")):
        cb = codebases.get(role)
        if not cb:
            continue
        out += ["", f"## Configuration of {label}: codebase {code(cb['codebase'])}", ""]
        if not cb["settings"]:
            out.append("Its overview lists no setting of remat, scan, attention, accumulation or sharding.")
            continue
        out += ["| setting | concept | value | from |", "|---|---|---|---|"]
        for st in cb["settings"]:
            frm = "the command" if st["source"] == "command" else (
                f"default, {code(st['where'])}" if st.get("where") else "default")
            out.append(f"| {code(st['key'])} | {escape(st['concept'])} | {code(st['value'])} | {frm} |")
    return out


def render(analysis: dict, hypothesis_pages: dict[int, str], model: str = "", lane: str = "") -> pages.Page:
    """``hypothesis_pages``: item rank -> wiki-relative page (items not filed have none)."""
    a = analysis
    src = gap_path(a["ours"], a["ref"], a.get("ours_page") or "", a.get("ref_page") or "")
    named = {side: _named(a[side], a.get(f"{side}_page") or "") for side in ("ours", "ref")}
    ours = _link(src, code(named["ours"]), a.get("ours_page") or "")
    ref = _link(src, code(named["ref"]), a.get("ref_page") or "")
    lines = [f"# Gap: {escape(named['ours'])} vs the reference {escape(named['ref'])}", "",
             f"Ours {ours}, reference {ref}: {escape(a['verdict'])}.", "",
             "## Side by side", "", "| | ours | reference | reference / ours |", "|---|---:|---:|---:|"]
    for r in a["step"]:
        unit = f" ({r['unit']})" if r["unit"] else ""
        lines.append(f"| {escape(r['metric'])}{unit} | {_num(r['ours'])} | {_num(r['ref'])} | "
                     f"{_num(r['ratio'], 2) if r['ratio'] else '—'} |")
    cats = a["categories_us_per_token"]
    if cats:
        lines += ["", "## Time per token by category (µs)", "", "| category | ours | reference | ours − reference |",
                  "|---|---:|---:|---:|"]
        lines += [f"| {escape(c['category'])} | {c['ours']:.4f} | {c['ref']:.4f} | {c['ours'] - c['ref']:+.4f} |"
                  for c in cats]
        lines += [""] + _bars(cats)
    est = a["estimate"]
    lines += ["", "## Gap items, ranked by estimated gain", ""]
    if not a["items"]:
        lines.append("None: " + escape(a["verdict"]) + "." if not a["reference_faster"] else
                     "None: the two programs do not differ in anything this analysis reads.")
        if a.get("differences"):
            lines += ["", "Differences seen (not filed, the reference is not faster):", ""]
            lines += [f"- {escape(d['what'])}" for d in a["differences"]]
    else:
        lines += ["| rank | difference | basis | share of our step | gain if closed | change | hypothesis |",
                  "|---:|---|---|---:|---:|---|---|"]
        for it in a["items"]:
            change = code(", ".join(f"{k}={v}" for k, v in it["knobs"].items())) if it.get("knobs") else "code change"
            hp = hypothesis_pages.get(it["rank"], "")
            lines.append(f"| {it['rank']} | {escape(it['what'])} | {it['basis']} | "
                         f"{_num(it.get('share_pct'), 1)} % | {_pct(it.get('gain_pct'))} | {change} | "
                         f"{_link(src, 'page', hp) if hp else '—'} |")
        lines += ["", "### Evidence", ""]
        for it in a["items"]:
            lines.append(f"{it['rank']}. **{escape(it['what'])}** (category `{it['category']}`; touches "
                         f"{escape(', '.join(it['touches']) or '—')})")
            for e in it["evidence"]:
                where = f" — {code(e['where'])}" if e.get("where") else ""
                lines.append(f"    - {e['side']}: {escape(e['text'])}{where}")
        if a.get("config_items"):
            lines += ["", "Items that rest on the command line or environment (a reference from another codebase "
                          "may not share these names): " + "; ".join(escape(x) for x in a["config_items"]) + "."]
    if a.get("not_filed"):
        lines += ["", "Not filed:", ""] + [f"- {escape(x)}" for x in a["not_filed"]]
    if a.get("retired"):  # abandoned by this run: linked from here, never an orphan
        lines += ["", "Abandoned by this run (listed by an earlier run of this analysis, not by this one):", ""]
        lines += [f"- {_link(src, posixpath.basename(r), r)}" for r in a["retired"]]
    lines += _settings(a.get("codebases") or {})
    if est.get("gap_us_per_token") is not None:
        lines += ["", "## How the shares were estimated", "", escape(est["how"]) + ".", "",
                  f"Ours {_num(est['ours_us_per_token'], 4)} µs per token, the reference "
                  f"{_num(est['ref_us_per_token'], 4)}; the gap {_num(est['gap_us_per_token'], 4)} µs per token, of "
                  f"which {_num(est['unexplained_us_per_token'], 4)} no item explains."]
    lines += ["", f"Stages read: ours {a['stages']['ours']} HLO, reference {a['stages']['ref']} HLO."]
    meta = {"title": f"Gap: {named['ours']} vs {named['ref']}", "type": "analysis",
            "tags": [t for t in ("analysis", "gap", model, lane) if t], "ours": a["ours"], "reference": a["ref"],
            "gap_pct": a["gap_pct"], "reference_faster": a["reference_faster"], "items": len(a["items"]),
            "unexplained_us_per_token": est.get("unexplained_us_per_token"),
            # the site's bar chart (explore/gaps/): µs per token by op category, both runs
            "categories_us_per_token": a.get("categories_us_per_token") or None}
    return pages.Page(src, {k: v for k, v in meta.items() if v is not None},
                      pages.region("gap", "\n".join(lines) + "\n"))
