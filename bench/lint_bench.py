"""Lint time on a generated 4,000-page wiki with ~17,000 links (target: <= 5 s).

Usage: python bench/lint_bench.py [--pages 4000] [--repeat 3] [--keep DIR] [--layout regular|deep|real]

``--layout real`` copies the size of a real hand-kept wiki instead: 4,186 pages, ~33 MB, ~160,000 links, a third
of them API catalog pages whose links name ``#Symbol`` anchors no heading defines (``build_real``).

Builds a knowledge base in a temporary folder (tools init + generated pages of every type, links
between them, links into raw/, external links, code blocks, a few planted problems), then times
`tools.lint.run` (scan + every check) and its parts. Prints a card, then one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tools import lint, pages, scaffold, wikiindex, wikiscan  # noqa: E402
from tools import mdscan
from tools.project import Project  # noqa: E402

PAGES = 4000  # total generated pages
LINKS_PER_PAGE = 4.25  # mean links per page, external included (-> ~17,000; the index adds one per page)
TARGET_S = 5.0  # the issue's target for 4,000 pages
SEED = 0

# share of pages per type (folders from tools.pages.TYPES)
MIX = {"concept": 0.05, "kernel": 0.35, "experiment": 0.25, "hypothesis": 0.08, "observation": 0.12,
       "source": 0.05, "codebase": 0.02, "model": 0.01, "analysis": 0.07}


def meta_for(kind: str, i: int) -> dict:
    m: dict = {"title": f"{kind.title()} {i}", "type": kind, "tags": ["bench", kind],
               "created": "2026-11-01", "updated": "2026-11-02"}
    if kind == "kernel":
        m.update(repo="jax", commit="a" * 40, path=f"jax/_src/pallas/k{i}.py", line=10 + i % 300,
                 backend=pages.BACKENDS[i % 4], category=pages.KERNEL_CATEGORIES[i % 14],
                 kind=pages.KERNEL_KINDS[i % 4])
    elif kind == "experiment":
        m.update(model="llama", lane=f"lane{i % 12}", variant=f"v{i}", exp_id=f"v{i:04d}", status="filed",
                 verdict="supported", metrics={"tokens_per_s": 1000 + i, "step_ms": 12.5})
    elif kind == "codebase":
        m.update(repo=f"repo{i}", path=f"raw/code/repo{i}")
    elif kind == "model":
        m.update(model=f"model{i}")
    elif kind == "hypothesis":
        m.update(status="open", priority=i % 5)
    return m


def body_for(kind: str, i: int, links: list[str]) -> str:
    t = pages.TYPES[kind]
    parts = [f"# {kind.title()} {i}", "", f"Generated page {i} about {kind}s and how they relate to "
             f"[a neighbour]({links[0]}) and other pages in this wiki.", ""]
    for s in t.sections:
        parts += [f"## {s}", "", "Some text.", ""]
    parts += ["## Links", ""]
    parts += [f"- [link {k}]({href}) with some words around it" for k, href in enumerate(links[1:])]
    parts += ["", "```python", "x = f(y)  # [not a link](nowhere.md)", "```", "",
              "See `[[not-a-wikilink]]` and [the docs](https://jax.dev/).", ""]
    return "\n".join(parts)


def build(root: Path, n: int) -> int:
    """Write the wiki; return the number of links written."""
    rng = random.Random(SEED)
    scaffold.init(root, site_name="bench", today="2026-11-29")
    (root / "raw/code/jax").mkdir(parents=True, exist_ok=True)
    (root / "raw/code/jax/README.md").write_text("jax\n")
    kinds = list(MIX)
    plan: list[tuple[str, str]] = []
    for kind in kinds:
        for i in range(int(round(MIX[kind] * n))):
            plan.append((kind, f"{pages.TYPES[kind].folder}/{kind}-{i:05d}.md"))
    plan = plan[:n]
    rels = [rel for _, rel in plan]
    nlinks = 0
    for j, (kind, rel) in enumerate(plan):
        k = 1 + int(rng.expovariate(1 / (LINKS_PER_PAGE - 2.05)) + 0.5)  # internal links, >= 1
        targets = [rels[(j + 1) % len(rels)]] + rng.sample(rels, k - 1)  # a ring keeps every page linked
        hrefs = [os.path.relpath(t, os.path.dirname(rel)) for t in targets]
        hrefs[0] += "#links" if j % 3 == 0 else ""  # anchors to check (every page has "## Links")
        if j % 10 == 0:
            hrefs.append("../../raw/code/jax/README.md")
        if j % 500 == 0:
            hrefs.append("../concepts/missing-page.md")  # planted broken links
        nlinks += len(hrefs) + 1  # + the external one
        body = body_for(kind, j, hrefs)
        if j % 300 == 0:
            body += f"\nAlso see [[{kind}-{(j + 7) % 50:05d}]].\n"  # planted wikilinks
        text = body if j % 400 == 0 else pages.render(meta_for(kind, j), body)  # planted: no frontmatter
        path = root / "wiki" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    wikiindex.rebuild(root / "wiki", log=False)
    return nlinks


def build_deep(root: Path, n: int) -> int:
    from tools.sitegen.synthetic import synthetic_wiki, write_wiki

    scaffold.init(root, site_name="lint bench")
    wiki = synthetic_wiki(n, layout="deep")
    write_wiki(root / "wiki", wiki)
    wikiindex.rebuild(root / "wiki", log=False)
    return sum(t.count("](") for t in wiki.values())


REAL_PAGES = 4186  # the hand-kept wiki this layout copies: 33 MB of markdown, ~158,000 links
REPOS = {"tfm": True, "flaxlib": True, "kernels": False, "serving": False}  # repo -> its code tree is checked out


def build_real(root: Path, n: int) -> int:
    """The shape of a real hand-kept wiki: a third of the pages are API catalog pages (one ``### `Symbol` ·
    implements/extends Base`` heading per class, ~90 links each: ``other.md#Symbol`` anchors that no heading defines,
    source links into code trees, two of four trees not checked out), the rest guides of ~6 KB with ~10 links
    each, four folders deep. Returns the number of links written."""
    rng = random.Random(SEED)
    scaffold.init(root, site_name="real-shape bench", today="2026-11-29")
    n_cat = int(n * 0.35)
    cats = [f"concepts/{list(REPOS)[i % len(REPOS)]}/pkg{i % 9}/sub{i % 4}/mod{i:05d}.md" for i in range(n_cat)]
    guides = [f"sources/area{i % 12}/topic{i % 7}/part{i % 3}/guide{i:05d}.md" for i in range(n - n_cat)]
    syms = {rel: [f"{w}{i}{k}" for k, w in enumerate(("Cache", "Layer", "Block", "Config", "Transformer", "Kernel",
                                                        "Sharder", "Runner", "Policy", "Buffer") * 2)][:17]
            for i, rel in enumerate(cats)}
    for repo, present in REPOS.items():
        if present:
            for f in range(240):
                (root / "raw/code" / repo / f"pkg{f % 9}").mkdir(parents=True, exist_ok=True)
                (root / "raw/code" / repo / f"pkg{f % 9}" / f"m{f}.py").write_text("x = 1\n")
    words = ("the layer keeps its cache in HBM and the kernel tiles it by block so the step time falls while memory "
             "stays flat; see the profile for where the time goes and how the sharding moves it").split()

    def prose(k: int) -> str:
        return " ".join(rng.choice(words) for _ in range(k))

    def rel(src: str, dst: str) -> str:
        return os.path.relpath(dst, os.path.dirname(src))

    nlinks = 0
    bases: dict[tuple[str, str], str] = {}
    for page in cats:
        repo = page.split("/")[1]
        lines = [f"# {posixpath_stem(page)}", "", prose(60), ""]
        for sym in syms[page]:
            other = rng.choice(cats)
            base = bases[(page, sym)] = rng.choice(syms[other])
            f = rng.randrange(240)
            code = f"raw/code/{repo}/pkg{f % 9}/m{f}.py"
            lines += [f"### `{sym}` · implements/extends {base}", "",
                      f"{prose(45)} Extends [{base}]({rel(page, other)}#{base}); used by "
                      f"[{rng.choice(syms[other])}]({rel(page, other)}#{rng.choice(syms[other])}).", "",
                      f"- Source: [`{code[9:]}:{rng.randrange(1, 400)}`]({rel('wiki/' + page, code)}#L{rng.randrange(1, 400)})",
                      f"- See [{posixpath_stem(g := rng.choice(guides))}]({rel(page, g)}) and "
                      f"[the overview]({rel(page, rng.choice(guides))})", ""]
            nlinks += 5
        lines += ["## Related", ""] + [f"- [{posixpath_stem(c)}]({rel(page, c)})" for c in rng.sample(cats, 1)]
        nlinks += 1
        _write(root, page, {"title": posixpath_stem(page), "type": "concept"}, "\n".join(lines))
    for j, page in enumerate(guides):
        lines = [f"# Guide {j}", ""]
        for _ in range(6):
            c = rng.choice(cats)
            sym = rng.choice(syms[c])
            slug = mdscan.heading_slug(f"`{sym}` · implements/extends {bases[(c, sym)]}")
            good = f"{rel(page, c)}#{slug}" if rng.random() < 0.5 else rel(page, c)
            lines += [f"{prose(150)} The [{sym}]({rel(page, c)}#{sym}) class and [its page]({good}).", ""]
            nlinks += 2
        if j % 4 == 0:
            lines += [f"See [the paper](https://arxiv.org/abs/2401.{j:05d}) and [[{posixpath_stem(guides[j - 1])}]].", ""]
            nlinks += 2
        _write(root, page, {"title": f"Guide {j}", "type": "source"}, "\n".join(lines))
    wikiindex.rebuild(root / "wiki", log=False)
    return nlinks


def posixpath_stem(rel: str) -> str:
    return rel.rsplit("/", 1)[-1][:-3]


def _write(root: Path, rel: str, meta: dict, body: str) -> None:
    path = root / "wiki" / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(pages.render(meta, body), encoding="utf-8")


def timed(fn, repeat: int) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pages", type=int, default=PAGES)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--keep", help="build the wiki here and keep it")
    ap.add_argument("--layout", choices=("regular", "deep", "real"), default="regular",
                    help="deep: the hand-kept shape (tools.sitegen.synthetic, ~880 folders up to 8 deep, kernel "
                         "pages linking into code trees that are not checked out); real: a real hand-kept wiki's "
                         "size (4,186 pages, ~33 MB, ~158,000 links, catalog pages linking #Symbol anchors)")
    args = ap.parse_args()
    tmp = None if args.keep else tempfile.TemporaryDirectory()
    root = Path(args.keep or tmp.name) / "kb"
    t0 = time.perf_counter()
    builders = {"regular": build, "deep": build_deep, "real": build_real}
    pages_n = REAL_PAGES if args.layout == "real" and args.pages == PAGES else args.pages
    nlinks = builders[args.layout](root, pages_n)
    build_s = time.perf_counter() - t0
    project = Project(root)
    lint.run(project)  # warm the page cache
    scan_s, wiki = timed(lambda: wikiscan.scan(project.wiki), args.repeat)
    check_s, _ = timed(lambda: lint.check(project, wiki), args.repeat)
    lint_s, report = timed(lambda: lint.run(project), args.repeat)
    index_s, _ = timed(lambda: wikiindex.rebuild(project.wiki, log=False), args.repeat)
    counted = sum(len(p.links) for p in wiki.pages if p.rel != 'index.md')
    print(f"wiki:        {len(wiki)} pages, {counted} links in pages ({nlinks} written; "
          f"+ {len(wiki) - 2} in index.md), built in {build_s:.1f}s")
    print(f"scan:        {scan_s:.2f}s  (read + frontmatter + links)")
    print(f"checks:      {check_s:.2f}s")
    print(f"lint total:  {lint_s:.2f}s  (target <= {TARGET_S:.0f}s: {'ok' if lint_s <= TARGET_S else 'MISSED'}; "
          f"{lint_s / TARGET_S:.2f}x of target)")
    print(f"index:       {index_s:.2f}s  (scan + rebuild, unchanged)")
    print(f"lint found:  {report.errors} errors, {report.warnings} warnings, {len(report.issues)} problems"
          + (f"; {sum(1 for i in report.issues if i.code == 'missing-tree')} trees not checked out"))
    print(json.dumps({"bench": "lint", "layout": args.layout, "problems": len(report.issues), "pages": len(wiki), "links": counted, "lint_s": round(lint_s, 3),
                      "scan_s": round(scan_s, 3), "check_s": round(check_s, 3), "index_s": round(index_s, 3),
                      "target_s": TARGET_S, "errors": report.errors, "warnings": report.warnings}))
    if tmp:
        tmp.cleanup()


if __name__ == "__main__":
    main()
