"""Scores the claim extractor against the labelled real documents of bench/claim_labels (README.md there says what a
claim is and how a match is made). Shared by bench/claims_recall.py and tests/sources/test_claims_recall.py."""

from __future__ import annotations

import re
import tarfile
from dataclasses import dataclass, field
from pathlib import Path

import yaml

import registry_docs

REPO = Path(__file__).resolve().parents[2]
LABELS = REPO / "bench" / "claim_labels"


def catalog() -> dict:
    return yaml.safe_load((LABELS / "documents.yaml").read_text(encoding="utf-8"))


SETS = ("documents", "heldout")  # the set the rules were written against; the one scored once, held out


def labels(which: str = "documents") -> dict[str, dict]:
    """Each labelled document's YAML in one set, by document id."""
    out = {}
    for path in sorted((LABELS if which == "documents" else LABELS / which).glob("*.yaml")):
        if path.name != "documents.yaml":
            data = yaml.safe_load(path.read_text(encoding="utf-8"))
            out[data["document"]] = data
    return out


def documents(which: str = "documents", cache: Path = registry_docs.DEFAULT_CACHE) -> dict[str, tuple[str, bytes]]:
    """(path, bytes) of every document of one set, read from its pinned sdist (downloaded once)."""
    cat = catalog()
    out, opened = {}, {}
    for doc_id, d in cat[which].items():
        spec = cat["sdists"][d["sdist"]]
        if d["sdist"] not in opened:
            opened[d["sdist"]] = tarfile.open(registry_docs.sdist(spec, cache))
        t = opened[d["sdist"]]
        top = t.getmembers()[0].name.split("/", 1)[0]
        out[doc_id] = (d["path"], t.extractfile(f"{top}/{d['path']}").read())
    for t in opened.values():
        t.close()
    return out


_EMPHASIS = re.compile(r"\*\*|__|`|<[^>]{1,80}>")
_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}\b)")


def normal(text: str) -> str:
    """Lowercase, without markdown emphasis, tags, thousands separators; one spelling of ×, µ and dashes."""
    text = _THOUSANDS.sub("", _EMPHASIS.sub("", text))
    for a, b in (("×", "x"), ("µ", "u"), ("μ", "u"), ("–", "-"), ("—", "-"), ("−", "-"), ("\\", "")):
        text = text.replace(a, b)
    return text.lower()


def squash(text: str) -> str:
    return re.sub(r"\s+", "", normal(text))


def words(text: str) -> set[str]:
    return set(re.findall(r"[a-z0-9][a-z0-9.%/+-]*", normal(text)))


def matches(label: dict, quote: str) -> bool:
    q = squash(quote)
    if not all(squash(str(n)) in q for n in label["numbers"]):
        return False
    if label.get("kind") == "table" and label.get("row"):
        return squash(label["row"]) in q
    want = words(label["text"])
    return len(want & words(quote)) >= 0.5 * len(want)


@dataclass
class DocScore:
    doc: str
    labelled: int
    extracted: int
    matched: list[tuple[dict, dict]] = field(default_factory=list)   # (label, extracted claim)
    missed: list[dict] = field(default_factory=list)
    spurious: list[dict] = field(default_factory=list)
    non_claims_hit: list[tuple[dict, dict]] = field(default_factory=list)

    @property
    def located(self) -> int:
        return sum(1 for lab, got in self.matched if normal(got["where"]).strip() == "§ " + normal(lab["section"]).strip())


def score_document(doc_id: str, label: dict, found: list[dict]) -> DocScore:
    claims = label.get("claims") or []
    s = DocScore(doc_id, len(claims), len(found))
    free = list(range(len(found)))
    for lab in claims:
        hit = next((i for i in free if matches(lab, found[i]["quote"])), None)
        if hit is None:
            s.missed.append(lab)
        else:
            free.remove(hit)
            s.matched.append((lab, found[hit]))
    for i in free:
        s.spurious.append(found[i])
        for non in label.get("non_claims") or []:
            if matches(dict(non, kind="prose"), found[i]["quote"]):
                s.non_claims_hit.append((non, found[i]))
                break
    return s


def extract(path: str, data: bytes) -> list[dict]:
    """What the ingest finds in one document: its claims as dicts (quote, where, kind, numbers, concept)."""
    from tools.sources import claims, extract as ex

    doc = ex.extract(Path(path), data=data)
    return [c.as_dict() for c in claims.claims(doc, limit=10_000)]


def totals(scores: list[DocScore], which: str = "documents") -> dict:
    labelled = sum(s.labelled for s in scores)
    extracted = sum(s.extracted for s in scores)
    matched = sum(len(s.matched) for s in scores)
    return {"documents": len(scores), "labelled": labelled, "extracted": extracted, "matched": matched,
            "non_claims": sum(len(lab.get("non_claims") or []) for lab in labels(which).values()),
            "non_claims_reported": sum(len(s.non_claims_hit) for s in scores),
            "recall": round(matched / labelled, 3) if labelled else None,
            "precision": round(matched / extracted, 3) if extracted else None,
            "location": round(sum(s.located for s in scores) / matched, 3) if matched else None}


def run(which: str = "documents", cache: Path = registry_docs.DEFAULT_CACHE) -> tuple[list[DocScore], dict]:
    labs, docs = labels(which), documents(which, cache)
    missing = sorted(set(docs) ^ set(labs))
    if missing:
        raise SystemExit(f"bench/claim_labels: documents and labels differ in {which}: {', '.join(missing)}")
    scores = [score_document(doc_id, labs[doc_id], extract(*docs[doc_id])) for doc_id in sorted(labs)]
    return scores, totals(scores, which)
