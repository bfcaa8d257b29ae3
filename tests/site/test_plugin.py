"""The MkDocs plugin's events, called the way MkDocs calls them, on a real config."""

from __future__ import annotations

from pathlib import Path

from mkdocs.config import load_config
from mkdocs.structure.files import get_files
from mkdocs.structure.pages import Page

from tools.mkdocs_plugin import WikiPlugin


def _setup(tmp_path: Path, kb_factory):
    root = kb_factory(tmp_path, n_pages=30)
    (root / "wiki/concepts/raw-link.md").write_text(
        "---\ntitle: <b>Bold</b> & co\ntype: concept\n---\n[src](../../raw/sources/paper.pdf)\n")
    cfg = load_config(str(root / "mkdocs.yml"))
    plugin = cfg.plugins["autoresearch-wiki"]
    assert isinstance(plugin, WikiPlugin)
    return root, cfg, plugin


def test_on_config_adds_our_assets_once(tmp_path, kb_factory):
    _, cfg, plugin = _setup(tmp_path, kb_factory)
    plugin.on_config(cfg)
    plugin.on_config(cfg)
    assert [str(x) for x in cfg.extra_css].count("assets/autoresearch/site.css") == 1
    assert "assets/autoresearch/tables.js" in [str(x) for x in cfg.extra_javascript]
    assert plugin.wiki == (Path(cfg.config_file_path).parent / "wiki").resolve()


def test_on_files_adds_wiki_generated_pages_and_assets(tmp_path, kb_factory):
    root, cfg, plugin = _setup(tmp_path, kb_factory)
    plugin.on_config(cfg)
    (root / "docs/explore/kernels").mkdir(parents=True)
    (root / "docs/explore/kernels/index.md").write_text("# Mine\n")  # a hand-written page wins
    files = cfg.plugins.on_files(get_files(cfg), config=cfg)  # as MkDocs runs it
    uris = {f.src_uri for f in files}
    wiki_pages = {"wiki/" + p.relative_to(root / "wiki").as_posix() for p in (root / "wiki").rglob("*.md")}
    assert wiki_pages <= uris
    assert {"explore/graph/graph.json", "explore/graph/index.md", "explore/graph/view.html", "wiki/index.md",
            "wiki/.nav.yml", "assets/autoresearch/vendor/sigma.min.js"} <= uris
    mine = files.get_file_from_path("explore/kernels/index.md")
    assert mine.content_string == "# Mine\n"
    assert len(uris) == len(files)  # no duplicates


def test_on_page_markdown_rewrites_raw_links_and_escapes_titles(tmp_path, kb_factory):
    _, cfg, plugin = _setup(tmp_path, kb_factory)
    plugin.on_config(cfg)
    files = cfg.plugins.on_files(get_files(cfg), config=cfg)  # as MkDocs runs it
    f = files.get_file_from_path("wiki/concepts/raw-link.md")
    page = Page(None, f, cfg)
    page.read_source(cfg)
    out = plugin.on_page_markdown(page.markdown, page=page, config=cfg, files=files)
    assert "src (`raw/sources/paper.pdf`)" in out and "](../../raw" not in out
    assert page.title == "&lt;b&gt;Bold&lt;/b&gt; &amp; co"
    docs_page = Page(None, files.get_file_from_path("index.md"), cfg)
    docs_page.read_source(cfg)
    assert plugin.on_page_markdown("[x](../raw/a.py)", page=docs_page, config=cfg, files=files) == "[x](../raw/a.py)"


def test_serve_watches_the_wiki(tmp_path, kb_factory):
    _, cfg, plugin = _setup(tmp_path, kb_factory)
    plugin.on_config(cfg)

    class Server:
        watched: list = []

        def watch(self, path):
            self.watched.append(path)

    server = Server()
    assert plugin.on_serve(server, cfg, None) is server
    assert server.watched == [str(plugin.wiki)]




def test_not_in_nav_listing_is_one_line(caplog):
    import logging

    import tools.mkdocs_plugin  # noqa: F401  (installs the filter)

    with caplog.at_level(logging.INFO, logger="mkdocs.structure.nav"):
        logging.getLogger("mkdocs.structure.nav").info(
            'The following pages exist in the docs directory, but are not included in the "nav" configuration:'
            "\n  - wiki/kernels/a.md\n  - wiki/kernels/b.md")
    assert caplog.messages == ["2 pages are reachable from their folder's landing page, not the sidebar"]
