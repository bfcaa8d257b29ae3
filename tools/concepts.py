"""The performance concepts that ingest looks for, how each is recognised, and their pages.

One registry, read from ``tools/data/concepts.yaml``: detectors (``ingest/pyfacts.py``, ``sources/claims.py``) match
its patterns, and every concept page starts from it (``concept_page``): its own text, then one region per ingested
repository (``appears-<slug>``) and one for the sources, each written by the ingest that owns it.
``names`` match dotted names in Python code (``jax.checkpoint``; ``P``-style aliases are resolved through imports
first); ``strings`` match string literals; ``config`` matches lines in YAML, TOML, shell and other config files.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from importlib import resources

import yaml

from . import mdtext
from .pages import Page, region

DATA = "data/concepts.yaml"


@dataclass(frozen=True)
class Concept:
    slug: str
    title: str
    about: str
    names: tuple[str, ...] = ()
    strings: tuple[str, ...] = ()
    config: tuple[str, ...] = ()
    related: tuple[str, ...] = ()
    name_re: re.Pattern | None = field(default=None, compare=False)
    string_re: re.Pattern | None = field(default=None, compare=False)
    config_re: re.Pattern | None = field(default=None, compare=False)


def _alt(patterns: tuple[str, ...]) -> re.Pattern | None:
    return re.compile("|".join(f"(?:{p})" for p in patterns)) if patterns else None


def load(text: str) -> dict[str, Concept]:
    """The registry from its YAML text; a concept naming an unknown related slug is an error."""
    out: dict[str, Concept] = {}
    for slug, d in (yaml.safe_load(text) or {}).items():
        pats = {k: tuple(d.get(k) or ()) for k in ("names", "strings", "config")}
        out[slug] = Concept(slug, d["title"], " ".join(d["about"].split()), pats["names"], pats["strings"],
                            pats["config"], tuple(d.get("related") or ()),
                            _alt(pats["names"]), _alt(pats["strings"]), _alt(pats["config"]))
    unknown = sorted({r for c in out.values() for r in c.related} - out.keys())
    if unknown:
        raise ValueError(f"{DATA}: related concepts that do not exist: {', '.join(unknown)}")
    return out


CONCEPTS: dict[str, Concept] = load(resources.files("tools").joinpath(DATA).read_text(encoding="utf-8"))


def concept_page(slug: str, owner: str, text: str) -> Page:
    """A concept page: its own text, then ``owner``'s region (``appears-<repo>``, ``sources``) holding ``text``;
    the other owners' regions stay as they are (an empty region is dropped)."""
    c = CONCEPTS[slug]
    about = [c.about + "\n"]
    if c.related:
        about.append("Related: " + ", ".join(f"[{CONCEPTS[r].title}]({r}.md)" for r in c.related) + "\n")
    about.append("## Where it appears\n")
    body = f"# {c.title}\n\n" + region("about", "\n".join(about)) + "\n" + region(owner, text)
    return Page(f"concepts/{slug}.md", {"title": c.title, "type": "concept", "tags": ["concept"],
                                        "summary": c.about.split(". ")[0] + "."}, body, keep_regions=True)


def concepts_index_page() -> Page:
    """concepts/index.md: every concept with its one-line summary."""
    rows = [[f"[{c.title}]({slug}.md)", mdtext.escape(c.about.split(". ")[0] + ".")] for slug, c in CONCEPTS.items()]
    body = "# Concepts\n\n" + region("concepts", "Performance concepts that ingest recognises in code; each page "
                                       "lists where every ingested repository uses it.\n\n"
                                       + mdtext.table(["Concept", "What it is"], rows))
    return Page("concepts/index.md", {"title": "Concepts", "type": "index"}, body)
