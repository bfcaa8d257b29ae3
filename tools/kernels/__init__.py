"""The Pallas kernel catalog: find, name and classify every kernel launch in a code tree.

``facts`` reads one file (pure, cacheable by content), ``scan`` joins the facts of a tree into
``KernelSite`` records, ``rules`` decides backend, category, kind and stability, ``pages``
turns sites into wiki pages.
"""
