"""A realistic synthetic wiki (types, folders, links, frontmatter refs) for benchmarks and tests."""

from __future__ import annotations

import random

from ..pages import BACKENDS, KERNEL_CATEGORIES, KERNEL_KINDS, STABILITY, VERDICTS, render

# Shares of a wiki like the ones in this field: mostly generated kernel and experiment pages.
SHARES = {"sources": 0.10, "codebases": 0.01, "concepts": 0.08, "kernels": 0.30, "models": 0.002,
          "hypotheses": 0.07, "experiments": 0.36, "observations": 0.05, "analyses": 0.028}
TYPE_OF = {"sources": "source", "codebases": "codebase", "concepts": "concept", "kernels": "kernel",
           "models": "model", "hypotheses": "hypothesis", "experiments": "experiment",
           "observations": "observation", "analyses": "analysis"}
WORDS = ("flash attention remat sharding pallas tiling fusion vmem hbm prefetch pipeline megacore "
         "collective allgather reduce-scatter quantization int8 fp8 bf16 layout transpose scan "
         "matmul softmax rope rmsnorm gelu swiglu moe routing dispatch paged ragged decode prefill").split()


def _deep(paths: dict[str, list[str]], rnd: random.Random) -> dict[str, list[str]]:
    """The layout agents write by hand: a codebase catalog spread over hundreds of small folders up to 8 deep
    (codebases/<repo>/catalog/<area>/<part>/<sub>/<leaf>/page.md), experiments by model/lane/month/week, the rest
    in topic sub-folders: ~700 folders for 4,000 pages."""
    out = {k: list(v) for k, v in paths.items()}
    areas = ("ops", "layers", "models", "kernels", "parallel", "utils", "serving", "train")
    out["kernels"] = []
    seen: dict[str, int] = {}
    for i, rel in enumerate(paths["kernels"]):
        repo = f"repo{i % 5}"  # the big catalogs: a few repos with hundreds of kernel pages each
        j = seen[repo] = seen.get(repo, -1) + 1
        leaf = j // 3  # ~3 pages per leaf folder, ~10 leaves per repo
        out["kernels"].append(f"codebases/{repo}/catalog/{areas[leaf % 4]}/p{leaf % 2}/s{leaf // 8}/"
                              f"l{leaf}/{rel.rsplit('/', 1)[1]}")
    out["experiments"] = [f"experiments/model-{i % 3}/lane-{i // 3 % 2}/2026-{1 + i // 6 % 12:02d}/"
                          f"{rel.rsplit('/', 1)[1]}" for i, rel in enumerate(paths["experiments"])]
    for folder in ("sources", "concepts", "hypotheses", "observations", "analyses"):
        out[folder] = [f"{folder}/t{i % 7}/g{i % 3}/{rel.rsplit('/', 1)[1]}" for i, rel in enumerate(paths[folder])]
    return out


def hand_indexes(pages: dict[str, str], n: int = 30, seed: int = 0) -> dict[str, str]:
    """``n`` hand-written ``index.md`` in folders of ``pages``: a title, a sentence and links to two pages only."""
    import posixpath

    rnd = random.Random(seed)
    folders = sorted({posixpath.dirname(p) for p in pages if "/" in p})
    out = {}
    for d in rnd.sample(folders, min(n, len(folders))):
        rel = f"{d}/index.md"
        if rel in pages:
            continue
        mine = sorted(p for p in pages if posixpath.dirname(p) == d)[:2]
        body = f"# Notes on {posixpath.basename(d)}\n\nKept by hand. Start here:\n\n" + "".join(
            f"- [{posixpath.basename(p)[:-3]}]({posixpath.basename(p)})\n" for p in mine)
        out[rel] = render({"title": f"Notes on {posixpath.basename(d)}", "type": "index"}, body)
    return out


def synthetic_wiki(n_pages: int = 4000, links_per_page: float = 3.7, seed: int = 0,
                   hostile: bool = False, layout: str = "shallow") -> dict[str, str]:
    """{wiki-relative path: page text}. ``hostile`` adds a page without frontmatter, a broken link
    and a `<script>` title (for robustness tests; a clean wiki builds with --strict). ``layout="deep"``: the
    hand-kept shape (hundreds of small folders up to 8 deep, 30 hand-written index.md)."""
    rnd = random.Random(seed)
    counts = {f: max(2, round(n_pages * s)) for f, s in SHARES.items()}
    counts["experiments"] += n_pages - sum(counts.values())
    repos = [f"org{i}/repo{i}" for i in range(counts["codebases"])]
    models = [f"model-{i}" for i in range(counts["models"])]
    paths: dict[str, list[str]] = {}
    for folder, n in counts.items():
        if folder == "kernels":
            paths[folder] = [f"kernels/{repos[i % len(repos)].split('/')[1]}/kernel-{i:05d}.md" for i in range(n)]
        elif folder == "codebases":
            paths[folder] = [f"codebases/{r.split('/')[1]}.md" for r in repos]
        elif folder == "models":
            paths[folder] = [f"models/{m}.md" for m in models]
        else:
            paths[folder] = [f"{folder}/{folder[:-1]}-{i:05d}.md" for i in range(n)]
    if layout == "deep":
        paths = _deep(paths, rnd)
    everything = [p for ps in paths.values() for p in ps]
    hubs = paths["concepts"] + paths["models"] + paths["codebases"]
    out: dict[str, str] = {}
    for folder, ps in paths.items():
        for i, rel in enumerate(ps):
            t = TYPE_OF[folder]
            title = " ".join(rnd.sample(WORDS, 3)).capitalize() + f" {i}"
            meta: dict = {"title": title, "type": t, "tags": rnd.sample(WORDS, 2), "created": "2026-11-01"}
            if t == "kernel":
                repo = repos[i % len(repos)]
                meta.update(repo=repo, path=f"src/ops/k{i}.py", line=rnd.randint(1, 900),
                            backend=rnd.choice(BACKENDS), category=rnd.choice(KERNEL_CATEGORIES),
                            kind=rnd.choice(KERNEL_KINDS), stability=rnd.choice(STABILITY), commit="0" * 40)
            elif t == "codebase":
                meta.update(repo=repos[i], path=f"raw/code/{repos[i].split('/')[1]}",
                            remote=f"https://github.com/{repos[i]}", commit="0" * 40)
            elif t == "model":
                meta.update(model=models[i], lane="train", references=[])
            elif t == "hypothesis":
                meta.update(model=rnd.choice(models), status="open", priority=rnd.randint(1, 5))
            elif t == "experiment":
                meta.update(model=rnd.choice(models), lane="train", status="filed", version=i,
                            verdict=rnd.choice(VERDICTS), metrics={"tokens_per_s": rnd.randint(1000, 9000)},
                            hypothesis=rnd.choice(paths["hypotheses"]).split("/")[1][:-3])
            elif t == "source":
                meta.update(url=f"https://example.org/paper/{i}", year=2020 + i % 6)
            n_links = max(0, int(rnd.expovariate(1 / links_per_page)))
            targets = [rnd.choice(hubs) if rnd.random() < 0.45 else rnd.choice(everything) for _ in range(n_links)]
            depth = rel.count("/")
            up = "../" * depth
            lines = [f"# {title}", "", " ".join(rnd.choices(WORDS, k=40)) + ".", "", "## Links", ""]
            lines += [f"- [{t_.rsplit('/', 1)[1][:-3]}]({up}{t_})" for t_ in dict.fromkeys(targets) if t_ != rel]
            if t == "experiment":
                lines += ["", "## Hypothesis under test", "", "x", "", "## Setup", "", "x", "",
                          "## Results", "", "| metric | value |", "|---|---|", "| tokens/s | 1 |", "",
                          "## Verdict", "", meta["verdict"]]
            if t == "kernel":
                lines += ["", f"Source: [{meta['path']}]({up}../raw/code/{meta['repo'].split('/')[1]}/{meta['path']}#L{meta['line']})"]
            out[rel] = render(meta, "\n".join(lines) + "\n")
    if layout == "deep":
        out.update(hand_indexes(out, seed=seed))
    if hostile:
        out["concepts/no-frontmatter.md"] = "# A page someone wrote by hand\n\nSee [missing](missing-page.md).\n"
        out["concepts/hostile.md"] = render({"title": "<script>alert('x')</script> evil", "type": "concept"},
                                            "Body <b>bold</b>.\n")
        out["kernels/hostile-kernel.md"] = render(
            {"title": "<img src=x onerror=alert(1)>", "type": "kernel", "repo": "<script>r</script>",
             "path": "a.py", "line": 1, "backend": "tpu", "category": "attention", "kind": "library"}, "x\n")
    return out


def write_wiki(wiki_dir, pages: dict[str, str]) -> None:
    from pathlib import Path
    for rel, text in pages.items():
        p = Path(wiki_dir) / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")
