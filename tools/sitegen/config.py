"""The mkdocs.yml a knowledge base gets, and its starter home page."""

from __future__ import annotations

import json

# Shared by the project root mkdocs.yml, `tools init` and `tools site stage`.
_TEMPLATE = """\
# Built by `mkdocs build` (our plugin adds wiki/ and generated pages) or, engine-neutral,
# by `tools site stage` then `zensical build` / `mkdocs build` on the staged folder.
site_name: {name}
site_url: {url}
docs_dir: docs
site_dir: site
use_directory_urls: true
strict: false

theme:
  name: material
  font: false            # no Google Fonts: pages render offline
  features:
    - navigation.instant
    - navigation.instant.progress
    - navigation.tabs
    - navigation.sections
    - navigation.indexes
    - navigation.prune     # each page carries only the sidebar entries on its own path
    - navigation.top
    - navigation.tracking
    - search.suggest
    - search.highlight
    - content.code.copy
    - toc.follow
  palette:
    - media: "(prefers-color-scheme: light)"
      scheme: default
      primary: indigo
      toggle:
        icon: material/weather-night
        name: Switch to dark mode
    - media: "(prefers-color-scheme: dark)"
      scheme: slate
      primary: indigo
      toggle:
        icon: material/weather-sunny
        name: Switch to light mode

plugins:
  - search
  - autoresearch-wiki:
      wiki_dir: wiki
  - awesome-nav

markdown_extensions:
  - tables
  - attr_list
  - md_in_html
  - admonition
  - toc:
      permalink: true
  - pymdownx.highlight
  - pymdownx.superfences
  - pymdownx.details

validation:
  omitted_files: info
  not_found: warn
  absolute_links: info
  unrecognized_links: info
  anchors: info

watch:
  - wiki
"""


def mkdocs_yml(site_name: str, site_url: str = "http://127.0.0.1:8000/") -> str:
    """The full mkdocs.yml for a knowledge base called ``site_name``."""
    return _TEMPLATE.format(name=json.dumps(site_name), url=json.dumps(site_url))


def docs_index_md(site_name: str) -> str:
    """A starter docs/index.md: what the site holds and where to go."""
    return f"""---
title: {json.dumps(site_name)}
---

# {site_name}

This site shows the knowledge base: the hand-written pages in `docs/` and every page under `wiki/`.

- [Wiki](wiki/index.md): sources, codebases, concepts, kernels, models, hypotheses, experiments.
- [Concept graph](explore/graph/index.md): every page as a node, every link as an edge.
- [Kernel directory](explore/kernels/index.md): the kernel catalog as a sortable, filterable table.
- [Experiments](explore/experiments/index.md): one interactive explorer per model.

<!-- tools:dashboard -->

Build it with `mkdocs serve`, or engine-neutral with `tools site stage` then `zensical build`.
"""
