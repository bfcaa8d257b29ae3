"""Unit tests of the pure generators behind the plugin and `tools site stage`."""

from __future__ import annotations

import pytest

import json

import yaml

from tools import wikiscan
from tools.sitegen import config, graph, kernels, landing, links, pages_view
from tools.sitegen.generate import generate, staged_config


def page(rel, text):
    return pages_view.site_page(wikiscan.parse_page(rel, text))


def test_config_is_valid_yaml_with_everything_the_site_needs():
    cfg = yaml.safe_load(config.mkdocs_yml("My <KB>: test"))
    assert cfg["site_name"] == "My <KB>: test"
    assert cfg["docs_dir"] == "docs" and cfg["site_url"]
    assert cfg["theme"]["name"] == "material" and cfg["theme"]["font"] is False
    assert {"content.code.copy", "navigation.instant", "search.highlight"} <= set(cfg["theme"]["features"])
    assert len(cfg["theme"]["palette"]) == 2  # light/dark toggle
    names = [p if isinstance(p, str) else next(iter(p)) for p in cfg["plugins"]]
    assert names == ["search", "autoresearch-wiki", "awesome-nav"]
    assert "# My <KB>: test" in config.docs_index_md("My <KB>: test")


def test_staged_config_drops_our_plugin_keeps_the_rest():
    text = config.mkdocs_yml("KB") + "markdown_extensions_extra: !!python/name:os.getcwd\n"
    staged = staged_config(text)
    cfg = yaml.load(staged, Loader=yaml.UnsafeLoader)
    names = [p if isinstance(p, str) else next(iter(p)) for p in cfg["plugins"]]
    assert "autoresearch-wiki" not in names and "awesome-nav" in names
    assert "assets/autoresearch/tables.js" in cfg["extra_javascript"]
    assert "!!python/name:os.getcwd" in staged


def test_links_and_refs_are_read_outside_code():
    p = page("concepts/a.md", "---\ntitle: A\ntype: concept\nmodel: llama\n---\n"
             "[b](b.md) [k](../kernels/x/k.md#top) [web](https://x.org) `[no](c.md)`\n"
             "```\n[no](d.md)\n```\n[src](../../raw/code/r/a.py#L3)\n")
    assert p.links == ["concepts/b.md", "kernels/x/k.md"]
    assert p.refs == [("model", "llama")]
    assert p.category == "concept"
    known = pages_view.site_pages([p.page, wikiscan.parse_page("concepts/b.md", "# B\n")])
    assert known[0].links == ["concepts/b.md"]  # links to pages that do not exist are dropped


def test_page_without_frontmatter_gets_a_title_and_bad_yaml_is_recorded():
    p = page("concepts/x.md", "# Hand written\n\ntext\n")
    assert (p.title, p.has_frontmatter, p.category) == ("Hand written", False, "concepts")
    assert page("concepts/flash-attention.md", "text\n").title == "Flash attention"
    assert page("concepts/index.md", "text\n").title == "Concepts" and page("index.md", "").title == "Home"
    bad = page("concepts/y.md", "---\ntitle: [oops\n---\nbody\n")
    assert bad.problem.startswith("invalid YAML")


def test_each_bad_page_gets_one_build_warning(tmp_path):
    (tmp_path / "wiki/concepts").mkdir(parents=True)
    (tmp_path / "wiki/concepts/x.md").write_text("# Hand written\n")
    (tmp_path / "wiki/concepts/y.md").write_text("---\ntitle: [oops\n---\nbody\n")
    warnings = generate(tmp_path / "wiki").warnings
    assert warnings.count("wiki/concepts/x.md: no frontmatter") == 1
    assert [w for w in warnings if w.startswith("wiki/concepts/y.md")] == [
        next(w for w in warnings if w.startswith("wiki/concepts/y.md: invalid YAML"))]


def test_a_docs_page_named_like_a_generated_section_is_reported(tmp_path):
    (tmp_path / "wiki").mkdir()
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs/wiki.md").write_text("# The wiki guide\n")
    warnings = generate(tmp_path / "wiki", tmp_path / "docs").warnings
    assert any(w.startswith("docs/wiki.md: its page would be wiki/index.html") for w in warnings), warnings
    assert not generate(tmp_path / "wiki", tmp_path / "docs", directory_urls=False).warnings


def test_graph_edges_from_links_and_frontmatter_refs_experiments_split_by_model():
    pages = [
        page("models/llama.md", "---\ntitle: Llama\ntype: model\nmodel: llama\n---\n"),
        page("codebases/maxtext.md", "---\ntitle: MaxText\ntype: codebase\nrepo: google/maxtext\npath: raw/code/maxtext\n---\n"),
        page("hypotheses/h1.md", "---\ntitle: H1\ntype: hypothesis\n---\n"),
        page("experiments/e1.md", "---\ntitle: E1\ntype: experiment\nmodel: llama\nhypothesis: h1\n---\n"),
        page("kernels/k.md", "---\ntitle: K\ntype: kernel\nrepo: google/maxtext\n---\nsee [h](../hypotheses/h1.md)\n"),
        page("concepts/lonely.md", "---\ntitle: Lonely\ntype: concept\n---\n[all](../index.md)\n"),
        page("index.md", "---\ntitle: Index\ntype: index\n---\n[lonely](concepts/lonely.md)\n"),
    ]
    g = graph.build_graph(pages)
    assert g.has_edge("experiments/e1.md", "models/llama.md")
    assert g.edges["experiments/e1.md", "hypotheses/h1.md"]["kind"] == "hypothesis"
    assert g.edges["kernels/k.md", "codebases/maxtext.md"]["kind"] == "repo"
    assert g.edges["kernels/k.md", "hypotheses/h1.md"]["kind"] == "link"
    pages = [p for p in pages if p.type != "index"]  # as generate() does: listings are left out
    g = graph.build_graph(pages)
    assert "index.md" not in g
    data = graph.graph_data(pages, lambda rel: "wiki/" + rel)
    cats = {c["name"] for c in data["categories"]}
    assert "experiment: llama" in cats
    assert data["stats"]["components"] == 2 and data["stats"]["isolated"] == 1
    assert len({(n["x"], n["y"]) for n in data["nodes"]}) == len(pages)  # no two nodes on one spot
    assert json.dumps(data)  # serialisable


def test_layout_is_fast_enough_to_be_deterministic():
    from tools.sitegen.synthetic import synthetic_wiki
    pages = [page(rel, text) for rel, text in synthetic_wiki(300, seed=3).items()]
    a = graph.layout(graph.build_graph(pages))
    b = graph.layout(graph.build_graph(pages))
    assert a == b and len(a) == 300


def test_urls():
    assert links.page_url("wiki/a/b.md") == "wiki/a/b/"
    assert links.page_url("wiki/a/index.md") == "wiki/a/"
    assert links.page_url("index.md") == ""
    assert links.page_url("wiki/a/b.md", directory_urls=False) == "wiki/a/b.html"
    assert links.rel_url("explore/kernels/", "wiki/kernels/x/") == "../../wiki/kernels/x/"
    assert links.rel_url("explore/experiments/m.html", "assets/autoresearch/plotly.min.js") == \
        "../../assets/autoresearch/plotly.min.js"
    assert links.normalize_remote("git@github.com:org/repo.git") == "https://github.com/org/repo"


def test_raw_links_become_hosted_or_plain_paths():
    pages = [page("codebases/r.md", "---\ntitle: R\ntype: codebase\nrepo: org/r\npath: raw/code/r\n"
                  "remote: https://github.com/org/r\ncommit: abc\n---\n")]
    src = links.Sources(pages)
    body = ("[a](../../raw/code/r/x/a.py#L7) [b](../../raw/sources/p.pdf) [`raw/code/q/z.py`](../../raw/code/q/z.py)"
            " `[c](../../raw/code/r/c.py)` [ok](../concepts/x.md)")
    out = links.rewrite_raw_links(body, "kernels/k.md", src)
    assert "[a](https://github.com/org/r/blob/abc/x/a.py#L7)" in out
    assert "b (`raw/sources/p.pdf`)" in out
    assert "`raw/code/q/z.py`" in out and "](../../raw/code/q" not in out
    assert "`[c](../../raw/code/r/c.py)`" in out  # code spans are left alone
    assert "[ok](../concepts/x.md)" in out
    assert links.rewrite_raw_links("![plot](../../raw/p.png)", "kernels/k.md", src) == "![plot](../../raw/p.png)"
    plain = links.rewrite_raw_links("[ops/k.py:3](../../raw/code/q/ops/k.py#L3)", "kernels/k.md", src)
    assert plain.endswith("\n\n`ops/k.py:3`") and "`raw/code/q` is a local tree" in plain  # says why it is plain
    assert "local tree" not in out.replace("`raw/code/q` is a local tree", "") and out.count("local tree") == 1
    with_base = links.Sources([], raw_url="https://h.org/kb/blob/main")
    assert "(https://h.org/kb/blob/main/raw/sources/p.pdf)" in links.rewrite_raw_links(
        "[b](../../raw/sources/p.pdf)", "kernels/k.md", with_base)


def test_a_link_to_a_wiki_folder_goes_to_its_landing_page():
    """MkDocs rewrites links to pages only: `../kernels/` from a page served at `wiki/concepts/a/` reached
    `wiki/concepts/kernels/`, a 404. A folder of the wiki (each has a landing page) is linked as its index.md."""
    src = links.Sources([page("kernels/x/k.md", "---\ntitle: K\ntype: kernel\n---\n"),
                         page("kernels/x/deep/d.md", "---\ntitle: D\ntype: kernel\n---\n"),
                         page("notes/README.md", "---\ntitle: N\ntype: index\n---\n"),
                         page("concepts/a.md", "---\ntitle: A\ntype: concept\n---\n")])
    # the landing pages the site will hold: generated ones and a hand-written README; the deep folder has none
    src.set_landing({"index.md", "kernels/index.md", "kernels/x/index.md", "concepts/index.md", "notes/README.md",
                     "kernels/x/k.md", "kernels/x/deep/d.md", "concepts/a.md"})
    body = ("[all kernels](../kernels/) [x](../kernels/x#top) [here](./) [home](../) [a page](../kernels/x/k.md) "
            "[not a folder](../nothing/) `[code](../kernels/)` [notes](../notes) [deep](../kernels/x/deep/) "
            "[abs](/kernels/)")
    out = links.rewrite_raw_links(body, "concepts/a.md", src)
    assert out == ("[all kernels](../kernels/index.md) [x](../kernels/x/index.md#top) [here](./index.md) "
                   "[home](../index.md) [a page](../kernels/x/k.md) [not a folder](../nothing/) `[code](../kernels/)` "
                   "[notes](../notes/README.md) [deep](../kernels/x/deep/) [abs](/kernels/)")


def test_landing_pages_escape_titles_and_nav_stays_small():
    pages = [page(f"experiments/e{i}.md", f"---\ntitle: E{i} <script>x</script>|pipe\ntype: experiment\n---\n")
             for i in range(landing.NAV_PAGES + 5)] + [page("concepts/c.md", "---\ntitle: C\ntype: concept\n---\n")]
    files, _ = landing.wiki_files(pages, existing=set())
    assert set(files) >= {"index.md", ".nav.yml", "experiments/index.md", "experiments/.nav.yml",
                          "concepts/index.md", "concepts/.nav.yml"}
    listing = files["experiments/index.md"]
    assert "<script>" not in listing and r"&lt;script&gt;x&lt;/script&gt;\|pipe" in listing
    assert yaml.safe_load(files["experiments/.nav.yml"])["nav"] == ["index.md"]  # too many pages: landing only
    assert yaml.safe_load(files["concepts/.nav.yml"])["nav"] == ["index.md", "c.md"]
    assert "experiments/index.md" not in landing.wiki_files(pages, existing={"experiments/index.md"})[0]


def test_a_hand_kept_readme_is_its_folders_landing_page_in_the_nav_and_the_listing():
    """A folder whose landing page is a hand-kept README.md: the generated .nav.yml named `index.md` and the parent's
    listing linked `guides/index.md`, neither there, so a wiki lint found clean failed `site build --strict`."""
    pages = [page("analyses/guides/README.md", "---\ntitle: Guides\ntype: analysis\n---\n"),
             page("analyses/guides/g1.md", "---\ntitle: G1\ntype: analysis\n---\n")]
    files, _ = landing.wiki_files(pages, existing={"analyses/guides/README.md", "analyses/guides/g1.md"})
    assert yaml.safe_load(files["analyses/guides/.nav.yml"])["nav"][0] == "README.md"
    assert "(guides/README.md)" in files["analyses/index.md"] and "guides/index.md" not in files["analyses/index.md"]


def test_landing_pages_link_files_whose_names_hold_url_characters():
    """`kern%20x.md` (a `%` in a hand-kept name), `a b.md`, `q#1.md` and a folder `x y/`: each row's link, decoded
    as MkDocs decodes it, names the file itself (`kern%20x.md` was read as `kern x.md`, `q#1` as `q` and a
    fragment, `a b.md` ended the link at the space)."""
    import re
    from urllib.parse import unquote

    names = ["concepts/kern%20x.md", "concepts/a b.md", "concepts/q#1.md", "concepts/x y/inner.md",
             "concepts/note:x.md"]
    pages = [page(rel, "---\ntitle: T\ntype: concept\n---\n") for rel in names]
    listing = landing.wiki_files(pages, existing=set())[0]["concepts/index.md"]
    targets = re.findall(r"\]\(([^)\s]+)\)", listing)
    assert sorted(unquote(t) for t in targets) == ["./note:x.md", "a b.md", "kern%20x.md", "q#1.md",
                                                   "x y/index.md"], targets


def test_kernel_directory_escapes_and_links_source_lines():
    pages = [
        page("codebases/r.md", "---\ntitle: R\ntype: codebase\nrepo: org/r\npath: raw/code/r\nremote: https://github.com/org/r\n---\n"),
        page("kernels/r/k.md", "---\ntitle: <img src=x onerror=alert(1)>\ntype: kernel\nrepo: org/r\npath: ops/k.py\n"
             "line: 12\nbackend: tpu\ncategory: attention\nkind: library\ncommit: c0ffee\n---\n"),
        page("kernels/q/k2.md", "---\ntitle: K2\ntype: kernel\nrepo: other/q\npath: k2.py\nline: 3\n"
             "backend: gpu-triton\ncategory: matmul/gemm\nkind: test\nvendored_from: org/r\n---\n"),
    ]
    md = kernels.directory_md(pages, links.Sources(pages))
    assert "<img src=x" not in md and "&lt;img src=x onerror=alert(1)&gt;" in md
    assert 'href="https://github.com/org/r/blob/c0ffee/ops/k.py#L12"' in md
    assert ">k2.py:3</code>" in md and "other/q are plain paths" in md  # no remote: plain path, said why
    assert 'href="../../wiki/kernels/r/k/"' in md
    assert md.count("<tr data-") == 2 and '<option value="gpu-triton">' in md
    assert "2 kernels from 2 repositories." in md
    one = kernels.directory_md(pages[:2], links.Sources(pages[:2]))
    assert "1 kernel from 1 repository." in one
    assert "`tools ingest raw/code/<slug>` writes them" in kernels.directory_md([], links.Sources([]))


def test_generate_produces_every_file(tmp_path):
    from tools.sitegen.synthetic import synthetic_wiki, write_wiki
    write_wiki(tmp_path / "wiki", synthetic_wiki(80, seed=2))
    gen = generate(tmp_path / "wiki")
    f = gen.files
    for rel in ("explore/graph/graph.json", "explore/graph/index.md", "explore/graph/view.html", "explore/kernels/index.md",
                "explore/index.md", "explore/experiments/index.md", "wiki/index.md", "wiki/kernels/index.md",
                "assets/autoresearch/vendor/sigma.min.js", "assets/autoresearch/vendor/graphology.umd.min.js",
                "assets/autoresearch/vendor/sigma.LICENSE.txt", "assets/autoresearch/graph.js", ".nav.yml"):
        assert rel in f, rel
    data = json.loads(f["explore/graph/graph.json"])
    assert data["stats"]["nodes"] == 80 and data["stats"]["edges"] > 80
    assert "http" not in f["explore/graph/view.html"]  # everything from the site itself


def _sidebar_entries(files: dict, wiki_dir) -> tuple[int, set[str]]:
    """Entries the wiki's sidebar lists (following sections into their .nav.yml) and the folders it reaches."""
    def nav_of(folder: str) -> list:
        key = f"wiki/{folder}/.nav.yml" if folder else "wiki/.nav.yml"
        return yaml.safe_load(files[key])["nav"]
    count, seen, stack = 0, set(), [""]
    while stack:
        folder = stack.pop()
        seen.add(folder)
        for item in nav_of(folder):
            count += 1
            if isinstance(item, dict):
                stack.append(f"{folder}/{next(iter(item.values()))}".lstrip("/"))
    return count, seen


@pytest.mark.slow
def test_sidebar_has_one_budget_for_the_whole_wiki_whatever_its_layout(tmp_path):
    import posixpath
    import re

    from tools.sitegen.generate import generate
    from tools.sitegen.synthetic import synthetic_wiki, write_wiki

    for layout in ("shallow", "deep"):
        wiki = synthetic_wiki(4000, layout=layout)
        write_wiki(tmp_path / layout / "wiki", wiki)
        gen = generate(tmp_path / layout / "wiki")
        count, opened = _sidebar_entries(gen.files, tmp_path / layout / "wiki")
        assert count <= landing.NAV_BUDGET + len(opened), (layout, count)
        folders = set()
        for rel in wiki:
            d = posixpath.dirname(rel)
            while d:
                folders.add(d)
                d = posixpath.dirname(d)
        # Every page is one click from a landing page (generated, or a hand-written index with its appendix).
        reached = set()
        listings = {k[len("wiki/"):]: v for k, v in gen.files.items() if k.startswith("wiki/") and k.endswith("index.md")}
        listings.update({k: wiki[k] + v for k, v in gen.appendix.items()})
        for rel, text in listings.items():
            base = posixpath.dirname(rel)
            reached |= {posixpath.normpath(posixpath.join(base, t)) for t in re.findall(r"\]\(([^)#]+\.md)\)", text)}
        missing = [r for r in wiki if not r.endswith("index.md") and r not in reached]
        assert not missing, (layout, missing[:5])
        if layout == "deep":
            assert len(folders) > 700 and count < len(folders)  # the per-folder limit alone would list them all
            generated_landings = [k for k in gen.files if k.endswith("/index.md") and k.startswith("wiki/")]
            assert len(generated_landings) < len(folders) / 2  # deep folders are listed on an ancestor's page
            hand = [rel for rel in wiki if rel.endswith("/index.md")]
            closed = [rel for rel in hand if rel.rsplit("/", 1)[0] not in opened]
            assert closed and all("## In this folder" in gen.appendix.get(rel, "## In this folder")
                                  for rel in closed)


def test_module_pages_are_not_counted_as_codebases():
    from tools.sitegen.pages_view import category_of

    assert category_of("codebases/x/overview.md", {"type": "codebase", "tags": ["codebase"]}) == "codebase"
    assert category_of("codebases/x/modules/m.md", {"type": "codebase", "tags": ["codebase", "module"]}) == \
        "codebase module"
    assert category_of("codebases/x/flags.md", {"type": "codebase", "tags": ["codebase", "xla-flags"]}) == \
        "codebase module"


def test_home_page_counts_codebases_apart_from_their_module_pages_and_lists_loops():
    from tools.sitegen.dashboard import dashboard_md

    pages = [page("codebases/jax/overview.md", "---\ntitle: jax codebase\ntype: codebase\nrepo: jax\npath: raw/code/jax\n---\n"),
             *[page(f"codebases/jax/modules/m{i}.md", f"---\ntitle: m{i}\ntype: codebase\ntags: [codebase, module]\n"
                                                      "repo: jax\npath: raw/code/jax/m.py\n---\n") for i in range(3)],
             page("experiments/llama/cpu/v002.md", "---\ntitle: v002\ntype: experiment\nmodel: llama\nlane: cpu\n"
                                                   "status: filed\nexp_id: e-v002\nverdict: supported\n---\n"),
             page("loops/llama-cpu.md", "---\ntitle: 'Loop: llama-cpu'\ntype: loop\nmodel: llama\nlane: cpu\n"
                                        "status: stopped\nstop_reason: 'budget: runs 3 of 3 used'\nbest: e-v002\n"
                                        "best_tokens_per_s: 20008.5\ngain_pct: 26.94\n---\n")]
    md = dashboard_md(pages)
    assert "1 codebase, " in md and "3 module pages" in md and "4 codebase" not in md
    loops = md.split("## Loops", 1)[1].split("##", 1)[0]
    assert md.index("## Loops") < md.index("## Codebases"), "the loop section comes first"
    assert "[Loop: llama-cpu](wiki/loops/llama-cpu.md)" in loops and "[v002](wiki/experiments/llama/cpu/v002.md)" in loops
    assert "20,008" in loops and "+26.9 %" in loops and "stopped (budget: runs 3 of 3 used)" in loops


def test_forge_links_for_github_gitlab_and_bitbucket_and_a_snapshot_provenance(tmp_path):
    from tools import gitinfo

    assert links.hosted("git@gitlab.com:g/sub/r.git", "abc", "a/b.py", 3) == "https://gitlab.com/g/sub/r/-/blob/abc/a/b.py#L3"
    assert links.hosted("https://bitbucket.org/o/r", "abc", "a.py", 3) == "https://bitbucket.org/o/r/src/abc/a.py#lines-3"
    assert links.hosted("https://github.com/o/r", "abc", "a b.py") == "https://github.com/o/r/blob/abc/a%20b.py"
    assert gitinfo.web_url("ssh://git@gitlab.example.com/g/r.git") == "https://gitlab.example.com/g/r"
    tree = tmp_path / "jax"
    tree.mkdir()
    (tree / gitinfo.PROVENANCE).write_text('{"remote": "https://github.com/jax-ml/jax", "ref": "jax-v0.10.2"}')
    info = gitinfo.read(tree)
    assert info.blob_url("jax/_src/config.py", 12) == "https://github.com/jax-ml/jax/blob/jax-v0.10.2/jax/_src/config.py#L12"
    (tree / gitinfo.PROVENANCE).write_text('{"remote": "https://github.com/jax-ml/jax", "ref": "../../etc"}')
    assert gitinfo.read(tree).commit is None  # a ref that could climb is not trusted


def test_staged_copy_drops_an_unsafe_link_target_whole():
    """`tools site stage`: an unsafe target goes with its parentheses and title, leaving no `)` behind as text;
    a safe target with parentheses of its own is kept as written."""
    from tools.sitegen.inertmd import inert

    assert inert("[x](javascript:alert(1)) tail") == "[x](#) tail"
    assert inert('[x](JaVaScRiPt:alert(document.cookie) "t") tail') == "[x](#) tail"
    assert inert("[a](javascript:a(b)(c)) and [b](data:x) end") == "[a](#) and [b](#) end"
    assert inert("[w](https://en.wikipedia.org/wiki/Roofline_(model)) ok") == \
        "[w](https://en.wikipedia.org/wiki/Roofline_(model)) ok"
    assert inert("[x](javascript:alert(1)") == "[x](#)"  # never closed: the target only


def test_staged_copy_keeps_an_angle_bracket_link_a_link():
    """`[x](<my notes.md>)` (the markdown for a path with spaces) was escaped to `&lt;my notes.md>`: text, not a link,
    in the staged build. It is now percent-encoded, which MkDocs and Zensical resolve to the same file; no `<` is left
    to be read as a tag where the brackets were not a link after all."""
    from tools.sitegen.inertmd import inert

    assert inert("[x](<sub/my notes.md>) t") == "[x](sub/my%20notes.md) t"
    assert inert('[x](<a (b).md> "t")') == '[x](a%20%28b%29.md "t")'
    assert inert("[b](<javascript:alert(1)>) ok") == "[b](#) ok"
    assert inert("[b](<java&#x09;script&colon;x>)") == "[b](java%09script:x)"  # a relative path, no scheme
    escaped = inert("\\[x](<img src=x onerror=alert(1)>)")
    assert "<" not in escaped and "onerror=alert%281%29" in escaped


def test_staged_copy_spares_no_text_markdown_reads_as_html():
    """A code span may cross a line break of its paragraph: `one ` here` / `and` <img ...> `` paired the two
    backticks of the second line, left the `<img onerror>` between them raw as "code", and Python-Markdown ran it
    (its span was `here and`). Lines are paired alone only while no backtick run is left open above them; after
    one, up to the blank line, nothing is spared (admonitions, tabs and list items cut paragraphs where no line
    scan can tell). A line opening a raw HTML block (`<p>`) is not read for code spans at all."""
    import markdown

    from tools.sitegen.inertmd import inert

    img = "<img src=x onerror=alert({})>"
    cases = [f"one tick ` here\nand` {img.format(1)} `tail", f"<p>` {img.format(2)} `</p>",
             f"# h `x\nfoo ` {img.format(3)}", f"- a `x\n- b ` {img.format(4)}", f"text `a\n---\n` {img.format(5)}",
             f"| a `x | b |\n|---|---|\n| ` {img.format(6)} | c |", f"<!-- c --> ` {img.format(7)} `",
             f"> q `a\n> b ` {img.format(8)}", f"Text `x\n!!! note\n    {img.format(9)} `",
             f"- a `x\n  b ` {img.format(10)} `", f'Text `x\n=== "Tab"\n    {img.format(11)} `',
             f"a ` b ``{img.format(12)}``"]
    exts = ["tables", "fenced_code", "attr_list", "md_in_html", "admonition", "pymdownx.details",
            "pymdownx.superfences", "pymdownx.tabbed", "footnotes"]
    for text in cases:
        html = markdown.markdown(inert(text), extensions=exts)
        assert "<img" not in html, (text, html)
    # an escaped backtick that still opens a span, a fence markdown does not read as one, an admonition's indented
    # body, a line break as a lone CR, a target or a reference URL on the next line, a quoted "}" in an attribute list
    more = [f"`a\\` {img.format(13)} `", f"~~~ {img.format(14)}", f"```x` {img.format(15)}\n```",
            f"!!! note\n\n    hi {img.format(16)}", f"` a\r\r{img.format(17)}\r`", "[x](\njavascript:alert(18))",
            "[a]:\n  javascript:alert(19)\n\n[y][a]", "> [a]: javascript:alert(20)\n\n[y][a]",
            'p {: title="}" onclick="alert(21)" }']
    for text in more:
        html = markdown.markdown(inert(text), extensions=exts)
        assert "<img" not in html and 'href="javascript' not in html and "<p onclick" not in html, (text, html)
    kept = markdown.markdown(inert("```python\nx = a<b\n```\n"), extensions=exts)  # a real fence is code: as is
    assert "&lt;" in kept and "&amp;lt;" not in kept, kept


def test_a_staged_page_takes_its_title_from_its_first_block_only():
    """A staged page without a title took the first `# ...` anywhere, a shell comment in a code block included;
    MkDocs takes the first block when it is a level-1 heading, else the file name."""
    from tools.mdscan import first_block_heading as _first_block_heading

    assert _first_block_heading("Setup notes.\n\n```bash\n# install deps\n```\n") is None
    assert _first_block_heading("\n# Fast kernels\n\ntext") == "Fast kernels"
    assert _first_block_heading("Fast kernels\n============\n") == "Fast kernels"
