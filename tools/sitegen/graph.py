"""The concept graph: pages as nodes, links and frontmatter references as edges, with positions.

Layout: networkx's spring_layout takes 8 s (10 iterations) to 30 s (50) at 4,000 nodes / 17,000 edges
on this machine, so positions come from a cheap deterministic layout instead: each category gets a
disc on a ring (sunflower spiral, busiest pages at the centre), then a few rounds of neighbour
averaging (sparse matrix) pull linked pages together. ~0.1 s at that size.
"""

from __future__ import annotations

import math
from typing import Any

from .pages_view import RefIndex, SitePage

PALETTE = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1",
           "#ff9da7", "#9c755f", "#bab0ac", "#1f77b4", "#d62728", "#2ca02c", "#9467bd",
           "#8c564b", "#e377c2", "#17becf", "#bcbd22"]
_ORDER = ["source", "codebase", "concept", "kernel", "model", "hypothesis", "experiment",
          "observation", "analysis", "index", "log"]


def build_graph(pages: list[SitePage]):
    """A networkx Graph: node = page rel path; edge kinds 'link' and frontmatter keys."""
    import networkx as nx

    g = nx.Graph()
    for p in pages:
        g.add_node(p.rel, title=p.title, type=p.type, category=p.category)
    refs = RefIndex(pages)
    for p in pages:
        for t in p.links:
            if t != p.rel and t in g:  # links to pages left out of the graph (listings) are dropped
                g.add_edge(p.rel, t, kind="link")
        for key, value in p.refs:
            t = refs.find(p, key, value)
            if t and t != p.rel and t in g and not g.has_edge(p.rel, t):
                g.add_edge(p.rel, t, kind=key)
    return g


def _category_order(cats: list[str]) -> list[str]:
    def key(c: str):
        base = c.split(":", 1)[0]
        return (_ORDER.index(base) if base in _ORDER else len(_ORDER), c)
    return sorted(set(cats), key=key)


def layout(g, smooth: int = 12, keep: float = 0.6) -> dict[str, tuple[float, float]]:
    """Deterministic positions: category discs on a ring, then neighbour averaging."""
    import numpy as np

    nodes = list(g.nodes)
    if not nodes:
        return {}
    cats = _category_order([g.nodes[n]["category"] for n in nodes])
    groups: dict[str, list[str]] = {c: [] for c in cats}
    for n in nodes:
        groups[g.nodes[n]["category"]].append(n)
    radii = {c: math.sqrt(len(v)) for c, v in groups.items()}
    ring = max(sum(2 * r for r in radii.values()) / (2 * math.pi), max(radii.values())) * 1.3
    pos0: dict[str, tuple[float, float]] = {}
    angle = 0.0
    total = sum(2 * r for r in radii.values()) or 1.0
    golden = math.pi * (3 - math.sqrt(5))
    for c in cats:
        share = 2 * radii[c] / total * 2 * math.pi
        a = angle + share / 2
        angle += share
        cx, cy = (ring * math.cos(a), ring * math.sin(a)) if len(cats) > 1 else (0.0, 0.0)
        members = sorted(groups[c], key=lambda n: (-g.degree[n], n))
        for i, n in enumerate(members):
            r = math.sqrt(i + 0.5)
            pos0[n] = (cx + r * math.cos(i * golden), cy + r * math.sin(i * golden))
    index = {n: i for i, n in enumerate(nodes)}
    x0 = np.array([pos0[n] for n in nodes], dtype=float)
    x = x0.copy()
    if g.number_of_edges() and smooth:
        rows, cols = [], []
        for u, v in g.edges:
            rows += [index[u], index[v]]
            cols += [index[v], index[u]]
        deg = np.bincount(rows, minlength=len(nodes)).astype(float)
        has = deg > 0
        try:
            from scipy.sparse import csr_matrix
            adj = csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(len(nodes),) * 2)
            mean = lambda m: adj @ m  # noqa: E731
        except ImportError:  # plain numpy fallback
            r_, c_ = np.array(rows), np.array(cols)
            def mean(m):
                out = np.zeros_like(m)
                np.add.at(out, r_, m[c_])
                return out
        for _ in range(smooth):
            avg = mean(x)
            avg[has] /= deg[has, None]
            x[has] = keep * x0[has] + (1 - keep) * avg[has]
    return {n: (round(float(x[i, 0]), 3), round(float(x[i, 1]), 3)) for n, i in index.items()}


LANDMARK_TYPES = ("concept", "codebase", "model", "loop")
MAX_LANDMARKS, MAX_HUBS = 120, 40


def always_labelled(g) -> set[str]:
    """Nodes whose title is drawn at every zoom: the concepts, codebases, models and loops (the map's
    landmarks, up to 120, busiest first) and the 40 busiest pages of any type. The renderer's size threshold
    alone labels only nodes with a dozen links or more, which in most wikis is almost none."""
    by_degree = sorted(g.nodes, key=lambda n: (-g.degree[n], n))
    landmarks = [n for n in by_degree if g.nodes[n]["type"] in LANDMARK_TYPES][:MAX_LANDMARKS]
    return set(landmarks) | set(by_degree[:MAX_HUBS])


def graph_data(pages: list[SitePage], url_of) -> dict[str, Any]:
    """JSON-ready data for the renderer. ``url_of(rel)`` gives a page's URL relative to the site root.

    Titles go out as plain strings: the page draws them on a canvas or sets textContent, never innerHTML.
    """
    import networkx as nx

    g = build_graph(pages)
    pos = layout(g)
    comps = sorted(nx.connected_components(g), key=len, reverse=True)
    comp_of = {n: i for i, c in enumerate(comps) for n in c}
    cats = _category_order([g.nodes[n]["category"] for n in g.nodes])
    colours = {c: PALETTE[i % len(PALETTE)] for i, c in enumerate(cats)}
    order = list(g.nodes)
    idx = {n: i for i, n in enumerate(order)}
    labelled = always_labelled(g)
    nodes = []
    for n in order:
        d = g.nodes[n]
        deg = g.degree[n]
        nodes.append({
            "id": n, "label": d["title"], "url": url_of(n), "category": d["category"],
            "type": d["type"], "x": pos[n][0], "y": pos[n][1], "degree": deg,
            "component": comp_of[n], "size": round(min(3 + 1.2 * math.sqrt(deg), 16), 2),
            **({"forceLabel": True} if n in labelled else {}),
        })
    edges = [[idx[u], idx[v], k] for u, v, k in g.edges(data="kind")]
    counts: dict[str, int] = {}
    for n in order:
        counts[g.nodes[n]["category"]] = counts.get(g.nodes[n]["category"], 0) + 1
    return {
        "nodes": nodes,
        "edges": edges,
        "categories": [{"name": c, "color": colours[c], "count": counts[c]} for c in cats],
        "stats": {"nodes": g.number_of_nodes(), "edges": g.number_of_edges(),
                  "components": len(comps), "largest_component": len(comps[0]) if comps else 0,
                  "isolated": sum(1 for n in order if g.degree[n] == 0)},
    }
