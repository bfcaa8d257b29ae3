"""The static site: pure generators for the concept graph, kernel directory, experiment explorers,
section landing pages and awesome-nav files.

`generate.generate(wiki_dir)` returns every generated file as data; the MkDocs plugin
(`tools.mkdocs_plugin`) adds them to a build, and `generate.stage(root, out)` writes them with docs/
and wiki/ as plain files that `zensical build` or plain `mkdocs build` builds.
"""
