"""MkDocs plugin `autoresearch-wiki`: a thin layer over tools.sitegen.

It adds every wiki/**/* file to the build (under wiki/ in the site), the generated pages, data and
assets from `tools.sitegen.generate`, rewrites links into raw/, and watches wiki/ under `mkdocs serve`.
The same files come out of `tools site stage` for engines that do not run plugins (Zensical).
"""

from __future__ import annotations

import html
import logging
from pathlib import Path

from mkdocs.config import config_options as c
from mkdocs.config.base import Config
from mkdocs.exceptions import PluginError
from mkdocs.plugins import BasePlugin
from mkdocs.structure.files import File, Files

from .sitegen import generate as sg
from .sitegen import headsafe, sanitize
from .sitegen.dashboard import fill
from .sitegen.headsafe import theme_safe
from .sitegen.links import rewrite_raw_links

log = logging.getLogger("mkdocs.plugins.autoresearch-wiki")


class _ShortNotInNav(logging.Filter):
    """Generated catalogs are reachable from their landing pages, not the sidebar, by design: MkDocs
    would list every one of them (thousands of lines in a large wiki) on each build. Say it in one line."""

    PREFIX = "The following pages exist in the docs directory, but are not included"

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.msg, str) and record.msg.startswith(self.PREFIX):
            n = record.getMessage().count("\n  - ")
            record.msg, record.args = "%d pages are reachable from their folder's landing page, not the sidebar", (n,)
        return True


_nav_log = logging.getLogger("mkdocs.structure.nav")
if not any(isinstance(f, _ShortNotInNav) for f in _nav_log.filters):
    _nav_log.addFilter(_ShortNotInNav())


class WikiConfig(Config):
    wiki_dir = c.Type(str, default="wiki")
    raw_url = c.Optional(c.Type(str))  # base URL where raw/ is browsable, e.g. a repo's blob/main/


class WikiPlugin(BasePlugin[WikiConfig]):
    def on_config(self, config):
        self.wiki = (Path(config.config_file_path).parent / self.config.wiki_dir).resolve()
        site = Path(config.site_dir).resolve()
        if site == self.wiki or site.is_relative_to(self.wiki) or self.wiki.is_relative_to(site):
            # MkDocs empties site_dir first: a site_dir that is (or holds) wiki/ would delete every page
            raise PluginError(f"site_dir {site} and wiki_dir {self.wiki} overlap: the build empties site_dir first "
                              "and would delete the wiki; build into another folder")
        for key, extra in (("extra_css", sg.EXTRA_CSS), ("extra_javascript", sg.EXTRA_JS)):
            present = {str(x) for x in config[key]}
            config[key].extend(e for e in extra if e not in present)
        return config

    def on_files(self, files: Files, config) -> Files:
        self.gen = sg.generate(self.wiki, Path(config.docs_dir), directory_urls=config.use_directory_urls,
                               raw_url=self.config.raw_url)
        for w in self.gen.warnings:
            log.warning(w)
        taken = {f.src_uri for f in files}
        for rel in self.gen.wiki_files:
            self._add(files, taken, f"{sg.WIKI}/{rel}", config, abs_src_path=str(self.wiki / rel))
        for rel, content in self.gen.files.items():
            self._add(files, taken, rel, config, content=content)
        log.info("autoresearch-wiki: %(pages)s wiki pages, %(nodes)s nodes, %(edges)s edges in %(total_s)ss",
                 self.gen.stats)
        return files

    @staticmethod
    def _add(files: Files, taken: set, uri: str, config, **kw) -> None:
        if uri in taken:
            log.info("autoresearch-wiki: docs/%s exists, not generating it", uri)
            return
        taken.add(uri)
        files.append(File.generated(config, uri, **kw))

    def on_page_markdown(self, markdown: str, page, config, files) -> str:
        uri = page.file.src_uri
        # the theme prints frontmatter into <head> and the nav unescaped: one rule for every field (headsafe)
        safe = theme_safe(page.meta, wiki=uri.startswith(sg.WIKI + "/"))
        page.meta.clear()
        page.meta.update(safe)
        if uri == "index.md":
            return fill(markdown, self.gen.dashboard)
        if uri.startswith(sg.WIKI + "/"):
            rel = uri[len(sg.WIKI) + 1:]
            return rewrite_raw_links(markdown, rel, self.gen.sources) + self.gen.appendix.get(rel, "")
        return markdown

    def on_page_content(self, html_text: str, page, config, files) -> str:
        """Every page under wiki/ is content from others: no script survives (tools.sitegen.sanitize)."""
        if page.file.src_uri.startswith(sg.WIKI + "/"):
            if "title" not in page.meta:  # MkDocs took it from the first heading or the file name: the theme
                # (MkDocs' heading text keeps its entities: unescaped first, so "Tom & Jerry" is not "&amp;amp;")
                page.meta["title"] = headsafe.title(html.unescape(page.title or ""))
            return sanitize.clean(html_text)
        return html_text

    def on_serve(self, server, config, builder):
        if self.wiki.is_dir():
            server.watch(str(self.wiki))
        return server
