"""Key claims of a document: every sentence, bullet item or table row that states a measured performance figure
(tools/sources/measures.py: time, throughput, FLOP/s, utilisation, speed-up, change in percent, memory, bandwidth),
with its quote, where it is (page or section) and the technique it is about (a concept of tools.concepts, when one
is named). A table row's quote names its row and the headers of its measured cells."""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..concepts import CONCEPTS
from ..mdtext import unescape
from . import measures, tables
from .extract import Document, Section

_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z(\[*_`])")
_BULLET = re.compile(r"^\s*(?:[-*+]|\d{1,2}[.)])\s+")
_FENCE = re.compile(r"^\s*(?:```|~~~)")
_QUOTED = re.compile(r"^\s{0,3}(?:>\s?)+")
# Words that name each concept in prose (titles and common spellings).
_PROSE = {slug: re.compile("|".join([re.escape(c.title.split(" (")[0].lower())] + extra), re.I)
          for slug, c in CONCEPTS.items()
          for extra in [{
              "rematerialization": [r"\bremat\b", r"gradient checkpointing", r"activation checkpointing"],
              "sharding": [r"\bfsdp\b", r"tensor parallel", r"data parallel", r"\bsharding\b", r"\bmesh\b"],
              "flash-attention": [r"flash ?attention"], "splash-attention": [r"splash"],
              "paged-attention": [r"paged attention", r"ragged attention"],
              "collective-matmul": [r"collective matmul", r"all-gather.{0,20}matmul", r"overlap"],
              "quantization": [r"\bint8\b", r"\bfp8\b", r"quantiz"], "host-offload": [r"offload"],
              "xla-flags": [r"xla flag", r"libtpu"], "scan-over-layers": [r"scan over layers", r"\bscan\b"],
              "gradient-accumulation": [r"gradient accumulation", r"micro-?batch"],
              "expert-parallelism": [r"mixture of experts", r"\bmoe\b", r"expert parallel"],
              "pipeline-parallelism": [r"pipeline parallel", r"\bgpipe\b", r"pipeline bubble"],
              "pallas-kernels": [r"\bpallas\b", r"custom kernel"],
              "context-parallelism": [r"ring attention", r"\bulysses\b", r"sequence parallel", r"context parallel"],
          }.get(slug, [])]}


@dataclass
class Claim:
    quote: str
    where: str
    kind: str            # which unit family matched first
    numbers: list[str]
    concept: str | None  # concept slug

    def as_dict(self) -> dict:
        return {"quote": self.quote, "where": self.where, "kind": self.kind, "numbers": self.numbers,
                "concept": self.concept}


_NUMBERED = re.compile(r"^\s*\d{1,2}(?:\.\d{1,2})*\.?\s+[A-Z][A-Za-z]")  # "5 Conclusion", "3.2 Results"


def sentences(text: str) -> list[str]:
    text = re.sub(r"-\n(?=[a-z])", "", text)  # words hyphenated across PDF lines
    # A short line without closing punctuation is a heading or a caption, and a bullet item starts a block: each
    # ends the block before it. Not where the next line goes on with the sentence (lowercase, a figure): the narrow
    # lines of a two-column paper ("...the step time dropped from 412 ms to" / "377 ms once remat...") are text.
    lines = []
    given = text.split("\n")
    for i, ln in enumerate(given):
        ln = _QUOTED.sub("", ln)  # a blockquote's `>` is no part of what it says
        after = given[i + 1].strip() if i + 1 < len(given) else ""
        goes_on = bool(after) and (after[0].islower() or after[0].isdigit()) and not _BULLET.match(after) \
            and not _NUMBERED.match(after)
        short = len(ln.split()) <= 8 and not ln.rstrip().endswith((".", ",", ";", ":", "-")) and not goes_on
        if bullet := _BULLET.match(ln):  # its marker goes: `- 94.54% of the FLOPs` is no -94.54 % change
            lines.append("")
            ln = ln[bullet.end():]
        elif short and _NUMBERED.match(ln):  # a numbered heading ends the block before it too
            lines.append("")
        lines.append(ln + ("\n" if short else ""))
    out = []
    for block in re.split(r"\n\s*\n", "\n".join(lines)):
        flat = " ".join(block.split())
        out += [s.strip() for s in _SENTENCE.split(flat) if s.strip()]
    return out


def concept_of(sentence: str) -> str | None:
    best = None
    for slug, rx in _PROSE.items():
        m = rx.search(sentence)
        if m and (best is None or m.start() < best[0]):
            best = (m.start(), slug)
    return best[1] if best else None


def _measured(text: str) -> list[str]:
    """The measured figures of one sentence, bullet item or table cell (none when the text is a spec, a rule, a
    target or a hypothetical)."""
    if not measures.may_hold(text):
        return []
    found = measures.figures(text)
    if not found or measures.unmeasured(text):
        return []
    return sorted({f for _, f in found})


# reStructuredText whose indented body is code: `.. code-block::`, `.. code::`, `.. literalinclude::`, a `::` ending
_RST_LITERAL = re.compile(r"^\s*(?:\.\.\s+(?:code-block|code|sourcecode|literalinclude)::.*|.*::)\s*$")


def _prose(text: str, kind: str = "markdown") -> tuple[list[str], list[str]]:
    """The prose of a section (code blocks out, tables apart) and its lines, for tables.find. Code: fenced blocks,
    in markdown a block indented 4 spaces after a blank line (not a list item's indented paragraph), in
    reStructuredText the indented body of a literal `::` or a code directive."""
    lines, keep = text.split("\n"), []
    fence = indented = in_list = False
    blank, literal = True, None  # literal: the indentation of the line that opened an rst literal block
    for ln in lines:
        indent = len(ln.expandtabs(4)) - len(ln.expandtabs(4).lstrip())
        if _FENCE.match(ln):
            fence = not fence
            keep.append("")
            continue
        if literal is not None and (not ln.strip() or indent > literal):
            keep.append("")
            continue
        literal = None
        if fence:
            keep.append("")
            continue
        if not ln.strip():
            keep.append(ln)
            blank = True
            continue
        if kind in ("markdown", "html"):
            indented = indent >= 4 and (indented or blank) and not in_list
            if _BULLET.match(ln) and indent < 4:
                in_list = True
            elif indent == 0 and blank:  # a paragraph at the margin ends the list
                in_list = False
        blank = False
        if indented:
            keep.append("")
            continue
        if kind == "text" and _RST_LITERAL.match(ln):
            literal = indent
            keep.append("" if ln.lstrip().startswith("..") else ln)
            continue
        keep.append(ln)
    return keep, lines


def _plain(cell: str) -> str:
    """A table cell as a reader sees it: links as their text, images and tags out, emphasis off."""
    cell = re.sub(r"!\[[^\]]*\]\([^)]*\)|<[^>]{1,200}>", "", cell)
    cell = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", cell)
    return " ".join(re.sub(r"\*\*|__|`", "", cell).split())


_MEASURED_HEADER = re.compile(r"\b(?:time|ms|µs|us|sec|seconds?|latency|speed-?ups?|speed|throughput|tokens?/s|"
                              r"TFLOPS?|FLOP/s|MFU|utili[sz]ation|memory|vram|bandwidth|performance|reduction|"
                              r"savings?|faster|improvement|context length)\b|\((?:ms|s|us|µs|GB|MB|x|%)\)", re.I)


_MEASURED_ROW = re.compile(r"\b(?:MFU|HFU|utili[sz]ation|tokens?/s|tok/s|throughput|step time|latency|speed-?ups?|"
                           r"TFLOP/?s|samples?/s)\b", re.I)  # performance a run measured, never a device's spec
_HW_PROPERTY = re.compile(r"^(?:memory\s+)?(?:bandwidth|bw)|^(?:l1|l2)\b|shared memory|^smem|registers|^sms?\b|"
                          r"cores\b|shared mem|/sm\b|per sm\b|compute capability|max threads|warp size|^memory$|^hbm|^vram$|^tdp|clock",
                          re.I)
_BARE = re.compile(r"^[~≈>+-]?\s?\d[\d.,]*\s?(?:[a-zA-Zµ%×/]+)?(?:\s+[a-zA-Z/]+)?"
                   r"(?:\s*/\s*[~≈]?\d[\d.,]*\s?[a-zA-Zµ%×/]+)?$")
_NUMBER = re.compile(r"(?<![A-Za-z_])\d")
_UNIT_FIGURE = re.compile(r"(?<![\w.])[~≈]?\d[\d.,]*\s?(?:%|ms\b|µs\b|us\b|[KMGT]i?B\b|[x×]\b|TFLOPS\b|mins?\b|s\b)")
_UNIT_CELL = re.compile(r"\d\s?(?:ms|µs|μs|us|s|sec|[KMGT]i?B|[TPG]FLOPS|TFLOP/s|tokens?/s|tok/s|it/s|[x×])\b", re.I)


def _row_claims(table: tables.Table) -> list[tuple[str, list[str]]]:
    """(quote, figures) of each row that states a measurement: a cell that reads as one on its own ("~20 % faster"),
    or a short figure under a header that names a measurement ("Time (ms)": "0.065", "Speedup": "3.37x"); the
    figures after the first measured cell are the row's other arms ("Hugging Face + FA2": "932"), unless their header
    names no measurement (a year, a version, a section, a chip count). The naming cells before it say what was
    measured. A row that names a hardware property ("Memory Bandwidth") keeps only a cell that says it was achieved.
    The quote: the naming cells, then each measured cell under its header. The figures: the cells that read as a
    measurement on their own first, then the others in column order (a page shows only the first few)."""
    header = [_plain(h) for h in table.header]
    out = []
    for row in table.rows:
        plain = [_plain(c) for c in row]
        spec_row = bool(plain and _HW_PROPERTY.search(plain[0]))
        # a transposed table: the row's first cell names the measurement (`| **MFU (1 pod)** | 43.1% | 49.8% |`)
        row_measure = bool(plain and not spec_row and _MEASURED_ROW.search(plain[0]))
        measured, naming, own = [], [], []
        for j, cell in enumerate(plain):
            head = header[j] if j < len(header) else ""
            figs = _measured(cell) if j else []
            if spec_row and figs and not re.search(r"achiev|measured|observed|reach", cell, re.I):
                figs = []
            own += figs
            if not figs and j and not spec_row and _bare_figure(cell, head, bool(measured) or row_measure):
                figs = [_with_header_unit(cell, head)]
            elif not figs and measured and not row[j].lstrip().startswith("`") and not _names_no_measure(head):
                figs = _UNIT_FIGURE.findall(cell)  # a note beside the figures
            if figs:
                measured.append((head, cell, figs))
            elif not measured:
                naming.append(cell)
        if measured:
            name = " | ".join(c for c in naming if c)
            parts = "; ".join(f"{h}: {c}" if h else c for h, c, _ in measured)
            figures = list(dict.fromkeys(own + [f for *_, fs in measured for f in fs]))
            out.append((f"{name} — {parts}" if name else parts, figures))
    return out


# Headers of a column whose numbers are no measurement, even beside one: when, which version, where cited, how many.
_NOT_MEASURE_HEADER = re.compile(r"\b(?:years?|dates?|versions?|release[sd]?|ref(?:erence)?s?|sections?|citations?|"
                                 r"cite[sd]?|papers?|chips?|devices?|gpus?|tpus?|nodes?|hosts?|cores|count|commits?|"
                                 r"ids?|batch(?: size)?|layers|params|parameters|steps|epochs)\b|^#$|§", re.I)
_VERSION = re.compile(r"^v?\d+\.\d+\.\d+")  # 0.4.35: a version, never a figure
_HEADER_UNIT = re.compile(r"[(\[]\s*(ms|µs|μs|us|ns|s|sec|min|[KMGT]i?B|[KMGT]B/s|GiB/s|[TPG]FLOP/?s|[TPG]FLOPS|"
                          r"tokens?/s|tok/s|samples?/s|it/s|x|×|%)\s*[)\]]")


def _names_no_measure(head: str) -> bool:
    """A header of a year, a version, a count, unless it names a measurement too ("Tokens/s per chip")."""
    return bool(_NOT_MEASURE_HEADER.search(head)) and not _MEASURED_HEADER.search(head)


def _bare_figure(cell: str, head: str, beside: bool) -> bool:
    """Whether a cell that is a bare number is a figure: under a header that names a measurement or carries a unit,
    with a unit of its own, or beside a measured cell; never under a header of a year, a version, a count."""
    if not (_NUMBER.search(cell) and _BARE.match(cell)) or _VERSION.match(cell) or _names_no_measure(head):
        return False
    return (beside or bool(_MEASURED_HEADER.search(head)) or bool(_UNIT_CELL.search(cell))) and \
        measures.unmeasured(head) != "spec"


def _with_header_unit(cell: str, head: str) -> str:
    """A bare number with its header's unit: `Step time (ms)` over `412` is 412 ms."""
    unit = _HEADER_UNIT.search(head)
    if not unit or not re.fullmatch(r"[~≈]?\s?\d[\d.,]*", cell):
        return cell
    return cell + unit.group(1) if unit.group(1) in ("%", "x", "×") else f"{cell} {unit.group(1)}"


_SENTENCE_END = re.compile(r"[.!?][\"')\]]*(?=\s|$)")
_PAGE_NUMBER = re.compile(r"^\s*(?:page\s+)?\d{1,4}(?:\s*(?:/|of)\s*\d{1,4})?\s*$", re.I)


def _joined_pages(sections: list[Section]) -> list[Section]:
    """PDF pages with a sentence that runs over a page break whole on the page it starts on: the end of the page
    (its page number left aside) stops mid-sentence and the next page goes on in lower case. Split, each half lost
    its figure or its unit and the claim was not found."""
    texts = [s.text for s in sections]
    for i in range(len(texts) - 1):
        lines = texts[i].rstrip().split("\n")
        while lines and _PAGE_NUMBER.match(lines[-1]):
            lines.pop()
        nxt = texts[i + 1].lstrip("\n").split("\n")
        while nxt and _PAGE_NUMBER.match(nxt[0]):
            nxt.pop(0)
        if not lines or not nxt or not nxt[0].strip()[:1].islower() or _SENTENCE_END.search(lines[-1].rstrip()[-3:]):
            continue
        head_text = "\n".join(nxt)
        end = _SENTENCE_END.search(head_text)
        if end is None or "\n\n" in head_text[:end.end()]:
            continue
        texts[i] = "\n".join(lines) + " " + " ".join(head_text[:end.end()].split())
        texts[i + 1] = head_text[end.end():].lstrip()
    return [Section(s.title, s.where, t) for s, t in zip(sections, texts)]


def claims(doc: Document, limit: int = 200) -> list[Claim]:
    out: list[Claim] = []
    seen: set[tuple[str, str]] = set()
    main = concept_of(doc.title)  # a claim that names no technique is about the document's own
    for sec in (_joined_pages(doc.sections) if doc.kind == "pdf" else doc.sections):
        if not measures.may_hold(sec.text) and "|" not in sec.text:  # a table's header may name the unit
            continue
        around = concept_of(sec.title) or main
        prose, lines = _prose(sec.text, doc.kind)
        found = []
        for t in tables.find(prose):
            for i in range(t.first, t.last + 1):
                prose[i] = ""
            found += _row_claims(t)
        for s in sentences("\n".join(prose)):
            if len(s) <= 600 and (figs := _measured(s)):
                found.append((s, figs))
        for quote, figs in found:
            quote = _as_read(quote)
            if (quote, sec.where) in seen:  # the same row under another heading (another chip) is another claim
                continue
            seen.add((quote, sec.where))
            fam = measures.figures(quote)
            out.append(Claim(quote, sec.where, fam[0][0] if fam else "table", figs,
                             concept_of(quote) or around))
            if len(out) >= limit:
                return out
    return out


_IMAGE = re.compile(r"!\[[^\]\n]*\]\([^)\n]*\)")


def _as_read(quote: str) -> str:
    """A claim's text as a reader sees it: the markdown an HTML page's conversion left (``block\\_q``, an image's
    ``![](x)``) undone, since the page escapes the quote once itself."""
    if "\\" not in quote and "![" not in quote:
        return quote
    return " ".join(unescape(_IMAGE.sub(" ", quote)).split())


def opening(doc: Document, limit: int = 900) -> str:
    """The abstract when the document has one, else its first paragraph of prose."""
    text = "\n".join(s.text for s in doc.sections[:3])
    m = re.search(r"\bAbstract\b[\s.:—-]*(.{80,}?)(?:\n\s*\n|\b(?:1\.?\s+)?Introduction\b)", text, re.S | re.I)
    chunk = m.group(1) if m else next((p for p in re.split(r"\n\s*\n", text) if len(p.split()) >= 12), text)
    chunk = _as_read(" ".join(chunk.split()))
    return chunk if len(chunk) <= limit else chunk[:limit].rsplit(" ", 1)[0] + " …"


_CAPTION = re.compile(r"^\s*(?:\*\*|_)?((?:Figure|Fig\.|Table)\s+\d+[a-z]?)(?:\*\*|_)?\s*[.:|—–-]\s*(.{3,})$", re.I)


def figures(doc: Document, limit: int = 100) -> list[tuple[str, str, str]]:
    """Figure and table captions: (label, caption, where) for each line that opens "Figure 3:", "Fig. 2." or
    "Table 1 |"; a caption wrapped over several lines is cut at its first sentence or blank line."""
    out, seen = [], set()
    for s in doc.sections:
        lines = s.text.splitlines()
        for i, line in enumerate(lines):
            m = _CAPTION.match(line)
            if not m:
                continue
            label = re.sub(r"\s+", " ", m.group(1)).replace("Fig.", "Figure")
            text = m.group(2).strip()
            for nxt in lines[i + 1:i + 4]:  # a caption wrapped onto the next lines, until its first full stop
                if re.search(r"[.!?]$", text) or not nxt.strip() or _CAPTION.match(nxt):
                    break
                text += " " + nxt.strip()
            text = re.sub(r"\\([\\`*_{}\[\]()#+\-.!|>])", r"\1", " ".join(text.split())).strip("*_ ")[:300]
            # ^ markdown escapes of an HTML page's converted text undone: the page escapes the caption once
            key = (label.lower(), s.where)
            if key not in seen:
                seen.add(key)
                out.append((label, text, s.where))
            if len(out) == limit:
                return out
    return out
