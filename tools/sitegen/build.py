"""Run a MkDocs build in-process (what `mkdocs build` does), for the CLI, tests and benchmarks."""

from __future__ import annotations

from pathlib import Path

from ..errors import ToolsError


def build_site(root: Path, *, strict: bool = False, site_dir: str | Path | None = None,
               config_file: Path | None = None) -> Path:
    """Build ``root``/mkdocs.yml; returns the site folder. Raises ToolsError when the build aborts."""
    import os

    os.environ.setdefault("NO_MKDOCS_2_WARNING", "1")
    from mkdocs.commands.build import build
    from mkdocs.config import load_config
    from mkdocs.exceptions import Abort, ConfigurationError

    config_file = config_file or root / "mkdocs.yml"
    if not config_file.is_file():
        raise ToolsError(f"{config_file}: no mkdocs.yml; run `tools init` or write one")
    kw = {"strict": strict}
    if site_dir:
        kw["site_dir"] = str(Path(site_dir).resolve())
    try:
        cfg = load_config(str(config_file), **kw)
        build(cfg)
    except (Abort, ConfigurationError) as e:
        raise ToolsError(f"site build failed: {e}") from None
    return Path(cfg.site_dir)
