"""Ingest: raw/code/<slug> -> per-file facts (pure, cached by content hash) -> codebase pages."""
