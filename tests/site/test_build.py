"""Real builds: mkdocs with the plugin (strict), robustness on a hostile wiki, Zensical on the staged tree."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from tools.cli import cli
from tools.errors import ToolsError
from tools.sitegen.build import build_site
from tools.sitegen.generate import stage

ROOT = Path(__file__).resolve().parents[2]


def test_strict_build_has_wiki_pages_graph_and_kernel_table(built):
    site = built / "site"
    wiki = built / "wiki"
    n_md = len(list(wiki.rglob("*.md")))
    for md in wiki.rglob("*.md"):  # every wiki page is in the site
        rel = md.relative_to(wiki).with_suffix("").as_posix()
        out = site / "wiki" / (rel[:-5] if rel.endswith("index") else rel) / "index.html"
        assert out.is_file(), out
    data = json.loads((site / "explore/graph/graph.json").read_text())
    assert data["stats"]["nodes"] == n_md and data["stats"]["edges"] > n_md
    assert {c["name"].split(":")[0] for c in data["categories"]} >= {"kernel", "concept", "experiment", "model"}
    page = (site / "explore/graph/index.html").read_text()
    assert 'src="view.html"' in page
    view = (site / "explore/graph/view.html").read_text()
    for asset in ("vendor/sigma.min.js", "vendor/graphology.umd.min.js", "graph.js"):
        assert f"../../assets/autoresearch/{asset}" in view
        assert (site / "assets/autoresearch" / asset).is_file()
    table = (site / "explore/kernels/index.html").read_text()
    n_kernels = len(list((wiki / "kernels").rglob("*.md")))
    assert table.count("<tr data-repo=") == n_kernels
    assert "assets/autoresearch/tables.js" in table
    assert "https://github.com/org" in table  # source line on the forge
    # raw/ links from kernel pages went to the hosted source
    k = next((site / "wiki/kernels").rglob("kernel-*/index.html")).read_text()
    assert "../raw/code" not in k and "https://github.com/org" in k
    # small nav: a page of the big experiments folder does not list its siblings
    exp = next((site / "wiki/experiments").glob("experiment-*/index.html")).read_text()
    assert exp.count('href="../experiment-') < 3
    assert "fonts.googleapis" not in exp


def test_explorers_embedded_with_one_plotly(built):
    site = built / "site"
    pytest.importorskip("tools.experiments.explorer")
    html_files = list((site / "explore/experiments").glob("*/explorer.html"))
    assert html_files, "one explorer per model"
    assert (site / "assets/autoresearch/plotly.min.js").stat().st_size > 1_000_000
    for h in html_files:
        text = h.read_text()
        assert "../../../assets/autoresearch/plotly.min.js" in text and len(text) < 500_000
        assert 'src="explorer.html"' in (h.parent / "index.html").read_text()


@pytest.mark.slow
def test_hostile_wiki_builds_with_warnings_and_fails_strict(tmp_path, caplog, kb_factory):
    root = kb_factory(tmp_path, n_pages=40, hostile=True)
    build_site(root)
    site = root / "site"
    assert (site / "wiki/concepts/no-frontmatter/index.html").is_file()
    assert any("no frontmatter" in r.getMessage() for r in caplog.records)
    assert any("missing-page.md" in r.getMessage() for r in caplog.records)
    table = (site / "explore/kernels/index.html").read_text()
    assert "<img src=x" not in table and "&lt;img src=x onerror=alert(1)&gt;" in table
    assert "<script>r</script>" not in table
    nav_page = (site / "wiki/concepts/hostile/index.html").read_text()
    assert "<script>alert('x')</script>" not in nav_page
    data = json.loads((site / "explore/graph/graph.json").read_text())
    assert "<script>alert('x')</script> evil" in [n["label"] for n in data["nodes"]]  # drawn as text
    r = CliRunner().invoke(cli, ["--root", str(root), "site", "build", "--strict", "--site-dir",
                                 str(tmp_path / "strict-site")])
    assert r.exit_code == 1 and "strict" in r.output
    assert "WARNING" in r.output and "missing-page.md" in r.output  # the warnings that made it fail, said


MINE = ("index.md", "site.md", "publishing.md", "explore/", "wiki/")


def test_project_docs_build_strict(tmp_path, caplog):
    """`mkdocs build --strict` on this repository. Warnings about other features' docs pages (written
    in parallel) skip the test, naming them; warnings about the site's own pages fail it."""
    try:
        build_site(ROOT, strict=True, site_dir=tmp_path / "site")
    except ToolsError:
        warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
        ours = [w for w in warnings if any(f"'{m}" in w for m in MINE)]
        assert not ours, ours
        pytest.skip(f"other pages break --strict: {warnings}")
    assert (tmp_path / "site/site/index.html").is_file()
    assert (tmp_path / "site/explore/graph/view.html").is_file()


def test_stage_and_zensical_build_show_the_same_pages(built, tmp_path, kb_factory):
    if not shutil.which("zensical"):
        pytest.skip("zensical not installed (pip install zensical==0.0.73)")
    project = tmp_path / "kb"
    shutil.copytree(built, project, ignore=shutil.ignore_patterns("site"))
    r = CliRunner().invoke(cli, ["--root", str(project), "site", "stage", "--out", "staged"])
    assert r.exit_code == 0, r.output
    staged = project / "staged"
    cfg = (staged / "mkdocs.yml").read_text()
    assert "autoresearch-wiki" not in cfg and "awesome-nav" in cfg
    p = subprocess.run(["zensical", "build"], cwd=staged, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    z, m = staged / "site", built / "site"
    pages = lambda s: {q.relative_to(s).as_posix() for q in s.rglob("index.html")}  # noqa: E731
    missing = pages(m) - pages(z)
    assert not missing, sorted(missing)[:10]
    assert json.loads((z / "explore/graph/graph.json").read_text()) == \
        json.loads((m / "explore/graph/graph.json").read_text())
    # raw HTML URLs mean the same under both engines (Zensical resolves them from the source file)
    for s in (z, m):
        assert 'src="view.html"' in (s / "explore/graph/index.html").read_text() or \
            "/explore/graph/view.html" in (s / "explore/graph/index.html").read_text()
    ztable = (z / "explore/kernels/index.html").read_text()
    assert ztable.count("<tr data-repo=") == (m / "explore/kernels/index.html").read_text().count("<tr data-repo=")
    assert "assets/autoresearch/tables.js" in ztable
    assert (z / "assets/autoresearch/vendor/sigma.min.js").is_file()
    hostile_root = tmp_path / "hostile"
    kb = kb_factory(hostile_root, n_pages=20, hostile=True)
    stage(kb, kb / "staged")
    p = subprocess.run(["zensical", "build"], cwd=kb / "staged", capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    hostile = kb / "staged/site/wiki/concepts/hostile/index.html"
    assert "<script>alert('x')</script>" not in hostile.read_text()
    assert "&lt;script&gt;alert" in hostile.read_text()
    home = (z / "index.html").read_text()
    assert "Explore" in home and "Wiki" in home  # .nav.yml honoured: sections in the sidebar


def test_cli_graph_figures(built):
    r = CliRunner().invoke(cli, ["--root", str(built), "site", "graph"])
    assert r.exit_code == 0, r.output
    stats = json.loads(r.output)
    assert stats["nodes"] == len(list((built / "wiki").rglob("*.md"))) and stats["components"] >= 1


def test_home_page_is_a_dashboard(built):
    html = (built / "site/index.html").read_text()
    assert "tools:dashboard" not in html
    for heading in ("Codebases", "Kernels (", "Models", "Latest experiments"):
        assert heading in html, heading
    assert "Lint</strong>:" in html
    from tools.sitegen.generate import generate

    gen = generate(built / "wiki")
    kernels = sum(1 for p in gen.pages if p.type == "kernel")
    assert f"Kernels ({kernels})" in gen.dashboard


def test_an_output_folder_under_a_file_is_a_clear_error(tmp_path):
    """`--site-dir afile/sub` and `stage --out afile/sub` ended in a NotADirectoryError traceback."""
    import subprocess
    import sys

    from tools import scaffold

    root = tmp_path / "kb"
    scaffold.init(root, site_name="x")
    (root / "afile").write_text("a file\n")
    for args in (["site", "stage", "--out", "afile/sub"], ["site", "build", "--site-dir", str(root / "afile/sub")]):
        r = subprocess.run([sys.executable, "-m", "tools", "--root", str(root), *args], capture_output=True, text=True,
                           timeout=300)
        assert r.returncode != 0 and "Traceback" not in r.stderr, (args, r.stderr[-2000:])
        assert "afile" in r.stderr and "Not a directory" in r.stderr, r.stderr


def test_builds_never_replace_the_knowledge_base_and_a_failed_build_keeps_the_last_site(tmp_path, kb_factory):
    """`site build --site-dir wiki` emptied wiki/ (MkDocs empties its site folder first); `site stage --out .`
    deleted the user's docs/ and rewrote mkdocs.yml; a killed or failed build left no site at all; `site build`
    printed none of MkDocs' warnings; an experiment page's `version: "²"` and a docs/index.md that is not UTF-8
    stopped the whole build with a traceback."""
    root = kb_factory(tmp_path / "kb", n_pages=12, hostile=True)
    run = lambda *a: CliRunner().invoke(cli, ["--root", str(root), *a])  # noqa: E731
    r = run("site", "build")
    assert r.exit_code == 0 and "WARNING" in r.output and "no frontmatter" in r.output, r.output
    (root / "site" / "MARK").write_text("the last good site")
    (root / "site" / ".nojekyll").write_text("")  # kept, as MkDocs keeps a site's dot-entries (a gh-pages .git)
    (root / "wiki" / "concepts" / "tom.md").write_text("# Tom & Jerry\n\nNo frontmatter.\n")
    assert run("site", "build").exit_code == 0 and (root / "site" / ".nojekyll").is_file()
    tom = (root / "site" / "wiki" / "concepts" / "tom" / "index.html").read_text()
    assert "<title>Tom &amp; Jerry" in tom and "&amp;amp;" not in tom
    (root / "wiki" / "concepts" / "tom.md").unlink()
    assert run("site", "build").exit_code == 0
    (root / "site" / "MARK").write_text("the last good site")
    # what a killed build leaves (its pid gone): its half-built folder goes; the last site moved aside comes back
    (root / ".site.building-999999").mkdir()
    (root / "site").rename(root / ".site.old-999998")
    assert run("site", "build").exit_code == 0 and (root / "site" / ".nojekyll").is_file()
    assert [p.name for p in root.iterdir() if p.name.startswith(".site.")] == [".site.lock"]
    (root / "site" / "MARK").write_text("the last good site")
    r = run("site", "build", "--strict")  # fails on the hostile pages' warnings: the last site stays whole
    assert r.exit_code == 1 and (root / "site" / "MARK").is_file()
    assert [p.name for p in root.iterdir() if p.name.startswith(".site.")] == [".site.lock"]  # no build folder left
    pages = sorted(p.relative_to(root) for p in (root / "wiki").rglob("*.md"))
    (root / "raw").mkdir(exist_ok=True)
    (root / "raw" / "keep.txt").write_text("mine")
    for where in ("wiki", ".", "docs", "raw"):
        r = run("site", "build", "--site-dir", str(root / where))
        assert r.exit_code == 1 and ("refused" in r.output or "should not be within" in r.output), (where, r.output)
    assert sorted(p.relative_to(root) for p in (root / "wiki").rglob("*.md")) == pages
    assert (root / "raw" / "keep.txt").read_text() == "mine"
    (root / "docs" / "mine.md").write_text("precious")
    for out in (".", "..", "docs", "wiki"):
        r = run("site", "stage", "--out", out)
        assert r.exit_code == 1 and "stage into a folder of its own" in r.output, (out, r.output)
    assert (root / "docs" / "mine.md").read_text() == "precious" and "autoresearch-wiki" in (
        root / "mkdocs.yml").read_text()
    (tmp_path / "secret.md").write_text("SECRET outside the project")
    (root / "docs" / "out.md").symlink_to(tmp_path / "secret.md")  # a link out of the project is not staged
    assert run("site", "stage").exit_code == 0 and run("site", "stage").exit_code == 0  # its own folder, again
    assert not (root / "build/site-src/docs/out.md").exists()
    (root / "docs" / "out.md").unlink()
    (root / "wiki" / "concepts.md").write_text("---\ntitle: C\n---\n\nHANDWRITTEN\n")  # beside wiki/concepts/
    r = run("site", "build")
    assert "wiki/concepts.md: its page would be wiki/concepts/, which the folder wiki/concepts/ owns" in r.output
    exp = root / "wiki" / "experiments" / "m" / "l" / "odd.md"
    exp.parent.mkdir(parents=True)
    exp.write_text("---\ntitle: odd\ntype: experiment\nexp_id: x\nstatus: filed\nversion: \"²\"\n---\n\n# odd\n")
    assert run("site", "build").exit_code == 0
    (root / "docs" / "index.md").write_bytes(b"# Home \xff\xfe caf\xe9\n")
    r = run("site", "stage")
    assert r.exit_code == 1 and "index.md: not UTF-8" in r.output and "Traceback" not in r.output
