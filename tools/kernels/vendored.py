"""Vendored copies: what a file says it was adapted from (``provenance``, believed first), and launch functions whose normalized source is identical or nearly so (Jaccard of line hashes),
within one repository (``mark_vendored``, the copy names its origin path) and across repositories
(``link_vendored``, ``<repo>:<path>``; earlier repositories in the given order are the origins)."""

from __future__ import annotations

import re
from collections import defaultdict

from .site import KernelSite

VENDOR_SIMILARITY = 0.6  # Jaccard similarity of normalized source lines that marks a fork


_PROVENANCE = re.compile(r"\b(?:adapted|copied|forked|ported|modified|taken|borrowed|derived|vendored|source|"
                         r"implementation)\s+(?:\w+\s+){0,2}?from:?\s+(?:the\s+)?(\S+(?:\s+\S+){0,6})",
                         re.I)  # "# Source from https://..." (MaxText's copies of tpu-inference), "implementation from"


def provenance(text: str) -> str | None:
    """Where a file says it came from ("# Adapted from https://github.com/.../flash_attention.py"), read from its
    opening comments and docstring (the first 60 lines); None when it says nothing."""
    head = "\n".join(text.split("\n", 60)[:60])
    m = _PROVENANCE.search(head)
    if not m:
        return None
    said = m.group(1).strip().rstrip(".,;:)\"'")
    url = re.search(r"https?://\S+", said)
    if url:
        return url.group(0).rstrip(".,;:)\"'")[:200]
    # "copied from HBM to VMEM" is data movement, not provenance: a path, a file or a named codebase only
    named = re.match(r"\S*(?:/|\.py\b)\S*|(?:\S+\s+){0,3}?(?:repo|repository|library|implementation|"
                     r"project|codebase|package)\b", said, re.I)
    return named.group(0)[:200] if named else None


def _origin_rank(item: tuple[int, KernelSite]) -> tuple:
    order, s = item
    vendored_hint = any(w in s.path.lower() for w in ("vendor", "third_party", "thirdparty", "fork", "copy"))
    return (order, vendored_hint, s.kind != "library", len(s.path), s.path, s.line)


def _similar_groups(items: list[tuple[str, KernelSite]]) -> list[list[tuple[str, KernelSite]]]:
    """Groups of launch functions whose normalized source is identical or nearly so (Jaccard of
    line hashes >= VENDOR_SIMILARITY), found through an inverted index of line hashes."""
    funcs: dict[tuple[str, str, str], list[tuple[str, KernelSite]]] = defaultdict(list)
    for repo, s in items:
        if s.fingerprint:
            funcs[(repo, s.path, s.fingerprint)].append((repo, s))
    keys = list(funcs)
    sets = [set(funcs[k][0][1].shingles) for k in keys]
    index: dict[int, list[int]] = defaultdict(list)
    for i, sh in enumerate(sets):
        for h in sh:
            index[h].append(i)
    parent = list(range(len(keys)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i, sh in enumerate(sets):
        shared: dict[int, int] = defaultdict(int)
        for h in sh:
            posting = index[h]
            if len(posting) > 50:  # boilerplate lines say nothing
                continue
            for j in posting:
                if j > i:
                    shared[j] += 1
        for j, n in shared.items():
            same_place = keys[i][:2] == keys[j][:2]
            union = len(sh) + len(sets[j]) - n
            if not same_place and (keys[i][2] == keys[j][2] or union and n / union >= VENDOR_SIMILARITY):
                parent[find(i)] = find(j)
    groups: dict[int, list] = defaultdict(list)
    for i, k in enumerate(keys):
        groups[find(i)].extend(funcs[k])
    return [g for g in groups.values() if len({(r, s.path) for r, s in g}) > 1]


def mark_vendored(sites: list[KernelSite]) -> None:
    for s in sites:  # a file that names its origin is believed first
        if s.provenance:
            s.vendored_from = s.provenance
    for group in _similar_groups([("", s) for s in sites if not s.provenance]):
        _, origin = min(((0, s) for _, s in group), key=_origin_rank)
        for _, s in group:
            if s.path != origin.path:
                s.vendored_from = origin.path


def link_vendored(sites_by_repo: dict[str, list[KernelSite]]) -> None:
    """Across repositories: a kernel whose normalized source matches (or nearly matches) another
    repository's records it as ``vendored_from: "<repo>:<path>"``. Earlier repositories in the
    given order are taken as the origin (list upstreams such as jax first)."""
    order = {r: i for i, r in enumerate(sites_by_repo)}
    items = [(repo, s) for repo, sites in sites_by_repo.items() for s in sites]
    for group in _similar_groups(items):
        if len({r for r, _ in group}) < 2:
            continue
        o_order, origin = min(((order[r], s) for r, s in group), key=_origin_rank)
        o_repo = next(r for r, o in order.items() if o == o_order)
        for repo, s in group:
            if repo != o_repo and not s.provenance:
                s.vendored_from = f"{o_repo}:{origin.path}"
