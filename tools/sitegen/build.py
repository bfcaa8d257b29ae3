"""Run a MkDocs build in-process (what `mkdocs build` does), for the CLI, tests and benchmarks."""

from __future__ import annotations

import logging
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
    warnings: list[str] = []
    handler = _Collect(warnings)
    log = logging.getLogger("mkdocs")
    log.addHandler(handler)
    try:
        cfg = load_config(str(config_file), **kw)
        build(cfg)
    except (Abort, ConfigurationError) as e:
        # --strict aborts on the warnings it counted: say them (MkDocs' own CLI prints them; in-process nothing did)
        shown = "".join(f"\n  WARNING {w}" for w in warnings[:50])
        more = f"\n  ... and {len(warnings) - 50} more" if len(warnings) > 50 else ""
        raise ToolsError(f"site build failed: {e}{shown}{more}") from None
    except (NotADirectoryError, FileExistsError, PermissionError, IsADirectoryError) as e:  # the site folder's path
        raise ToolsError(f"site build failed: {e.filename or kw.get('site_dir', '')}: {e.strerror or e}") from None
    finally:
        log.removeHandler(handler)
    return Path(cfg.site_dir)


class _Collect(logging.Handler):
    """Keeps the text of each warning MkDocs logs."""

    def __init__(self, into: list[str]):
        super().__init__(logging.WARNING)
        self.into = into

    def emit(self, record: logging.LogRecord) -> None:
        self.into.append(" ".join(record.getMessage().split()))
