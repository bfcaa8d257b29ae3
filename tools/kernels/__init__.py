"""The Pallas kernel catalog: find, name and classify every kernel launch in a code tree.

``facts`` reads one file (pure, cacheable by content) with a visitor built from ``names`` (scopes, imports, what a
name refers to) and ``launch`` (a launch's grid, block shapes, backend hints); ``scan`` joins the facts of a tree
into ``site.KernelSite`` records and ``vendored`` marks copies; ``rules`` decides backend, category, kind and
stability; ``pages`` turns sites into wiki pages.
"""
