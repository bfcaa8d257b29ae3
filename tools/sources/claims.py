"""Key claims of a document: every sentence that states a measured number with a unit that matters for ML
performance (TFLOP/s, MFU %, tokens/s, step time, x speedup, GB/s, HBM GB, latency), with its quote, where it is
(page or section) and the technique it is about (a concept of tools.concepts, when one is named)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..concepts import CONCEPTS
from .extract import Document

_NUM = r"(?<![\w.])\d+(?:[.,]\d+)*(?:\.\d+)?"
UNITS = (
    ("throughput", rf"{_NUM}\s*(?:[kKMGTP]?\s*tokens?/s(?:ec)?|tok/s|tokens per second|samples/s|images/s)"),
    ("flops", rf"{_NUM}\s*(?:[TPGE]FLOP/?s|[TPGE]FLOPS|[TPGE]?FLOPs/s)"),
    ("mfu", rf"(?:MFU[^.\n]{{0,30}}?{_NUM}\s*%|{_NUM}\s*%\s*(?:MFU|model FLOPs? utili[sz]ation|HFU))"),
    ("speedup", rf"{_NUM}\s*(?:[x×]|-fold|times)\s+(?:faster|speed-?ups?|higher throughput|more throughput|"
                rf"lower latency|less memory|fewer FLOPs)|speed-?ups? of (?:up to )?{_NUM}\s*[x×]"
                rf"|{_NUM}\s*[x×]\s+(?:speed-?up|faster)"),
    ("bandwidth", rf"{_NUM}\s*(?:[GT]B/s|GiB/s|TiB/s|Gbps)"),
    ("memory", rf"{_NUM}\s*(?:GB|GiB|TB|MiB|MB)\s+(?:of\s+)?(?:HBM|memory|VMEM|SRAM|RAM)|HBM[^.\n]{{0,20}}?{_NUM}\s*(?:GB|GiB)"),
    ("time", rf"{_NUM}\s*(?:ms|µs|us|μs|seconds?|s)\s*(?:/|per)\s*(?:step|iteration|token|layer)"
             rf"|(?:step time|latency)[^.\n]{{0,30}}?{_NUM}\s*(?:ms|µs|us|μs|s)\b"),
    ("percent", rf"{_NUM}\s*%\s+(?:faster|speed-?up|higher throughput|more throughput|less memory|lower latency|"
                rf"(?:reduction|improvement) in (?:step time|latency|throughput|memory|training time))"),
)
_UNIT_RX = [(name, re.compile(rx, re.I)) for name, rx in UNITS]
_ANY_UNIT = re.compile("|".join(f"(?:{rx})" for _, rx in UNITS), re.I)
# Words of which every unit pattern above needs one (lowercase): plain substring tests rule out most pages and
# sentences before any pattern runs (the patterns cost ~0.4 µs per character; these ~0.01). Keep them in step
# with UNITS: tests/sources/test_claims_filter.py checks that every pattern's matches contain one.
KEYWORDS = ("tok", "samples/s", "images/s", "flop", "mfu", "hfu", "faster", "speed", "throughput", "latency",
            "memory", "b/s", "gbps", "hbm", "vmem", "sram", "ram", "step", "iteration", "layer", "reduction", "improvement")
_DIGIT = re.compile(r"\d")
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z(\[])")
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


def sentences(text: str) -> list[str]:
    text = re.sub(r"-\n(?=[a-z])", "", text)  # words hyphenated across PDF lines
    # A short line without closing punctuation is a heading or a caption: it ends a block of its own.
    lines = [ln + ("\n" if len(ln.split()) <= 8 and not ln.rstrip().endswith((".", ",", ";", ":", "-")) else "")
             for ln in text.split("\n")]
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


def _has_keyword(lower: str) -> bool:
    return any(k in lower for k in KEYWORDS)


def claims(doc: Document, limit: int = 200) -> list[Claim]:
    out: list[Claim] = []
    seen: set[str] = set()
    main = concept_of(doc.title)  # a claim that names no technique is about the document's own
    for sec in doc.sections:
        if not _has_keyword(sec.text.lower().replace("-\n", "")):  # as sentences() joins hyphenated words
            continue
        around = concept_of(sec.title) or main
        for s in sentences(sec.text):
            if len(s) > 600 or s in seen or not _DIGIT.search(s) or not _has_keyword(s.lower()) \
                    or not _ANY_UNIT.search(s):
                continue
            hits = [(name, m.group(0)) for name, rx in _UNIT_RX for m in rx.finditer(s)]
            if not hits:
                continue
            seen.add(s)
            out.append(Claim(s, sec.where, hits[0][0], sorted({h for _, h in hits}), concept_of(s) or around))
            if len(out) >= limit:
                return out
    return out


def opening(doc: Document, limit: int = 900) -> str:
    """The abstract when the document has one, else its first paragraph of prose."""
    text = "\n".join(s.text for s in doc.sections[:3])
    m = re.search(r"\bAbstract\b[\s.:—-]*(.{80,}?)(?:\n\s*\n|\b(?:1\.?\s+)?Introduction\b)", text, re.S | re.I)
    chunk = m.group(1) if m else next((p for p in re.split(r"\n\s*\n", text) if len(p.split()) >= 12), text)
    chunk = " ".join(chunk.split())
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
