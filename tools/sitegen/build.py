"""Run a MkDocs build in-process (what `mkdocs build` does), for the CLI, tests and benchmarks."""

from __future__ import annotations

import logging
from pathlib import Path

from ..errors import ToolsError
from ..writer import locked


def build_site(root: Path, *, strict: bool = False, site_dir: str | Path | None = None,
               config_file: Path | None = None, on_warning=None) -> Path:
    """Build ``root``/mkdocs.yml; returns the site folder. Raises ToolsError when the build aborts. The site is built
    beside its folder and moved into place when whole: a killed build leaves the last site as it was (MkDocs empties
    its folder first). ``on_warning(text)`` gets each warning and error MkDocs logs, as it logs it."""
    import os
    import shutil

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
    handler = _Collect(warnings, on_warning)
    log = logging.getLogger("mkdocs")
    log.addHandler(handler)
    building = None
    try:
        cfg = load_config(str(config_file), **kw)
        final = Path(cfg.site_dir).resolve()
        _check_site_dir(final, config_file.parent.resolve(), cfg)
        with locked(final.parent / f".{final.name}.lock"):  # one build of this site at a time: the swap renames
            _sweep_killed(final)
            building = final.parent / f".{final.name}.building-{os.getpid()}"
            cfg.site_dir = str(building)
            build(cfg)
            _swap(building, final)
            cfg.site_dir = str(final)
    except (Abort, ConfigurationError) as e:
        # --strict aborts on the warnings it counted: say them (MkDocs' own CLI prints them; in-process nothing did)
        shown = "".join(f"\n  WARNING {w}" for w in warnings[:50])
        more = f"\n  ... and {len(warnings) - 50} more" if len(warnings) > 50 else ""
        raise ToolsError(f"site build failed: {e}{shown}{more}") from None
    except OSError as e:  # the site folder's path, a rename that failed
        raise ToolsError(f"site build failed: {e.filename or kw.get('site_dir', '')}: {e.strerror or e}") from None
    except UnicodeDecodeError as e:  # MkDocs logged the file's name (on_warning showed it) and raised this bare
        raise ToolsError(f"site build failed: a page is not UTF-8 ({e.reason} at byte {e.start}; the warning above "
                         "names it)") from None
    finally:
        log.removeHandler(handler)
        if building is not None and building.exists():
            shutil.rmtree(building, ignore_errors=True)
    return Path(cfg.site_dir)


def _check_site_dir(final: Path, root: Path, cfg) -> None:
    """The site replaces its folder whole: never the project, the docs or the wiki (``--site-dir wiki`` deleted
    every page)."""
    plugin = cfg.plugins.get("autoresearch-wiki") if hasattr(cfg.plugins, "get") else None
    wiki = (root / plugin.config.wiki_dir).resolve() if plugin is not None else root / "wiki"
    for mine in (root, Path(cfg.docs_dir).resolve(), wiki):
        if final == mine or mine.is_relative_to(final) or (mine != root and final.is_relative_to(mine)):
            raise ToolsError(f"site build refused: the site folder {final} would replace {mine} (the site's folder is "
                             "emptied each build); build into another folder")
    up = next((a for a in (final, *final.parents) if a.exists()), None)
    if up is not None and up != final and not up.is_dir():
        raise ToolsError(f"site build failed: {up}: Not a directory")
    if final.exists() and not final.is_dir():
        raise ToolsError(f"site build refused: the site folder {final} is a file (site_dir in mkdocs.yml?)")
    held = [p for p in final.iterdir() if not p.name.startswith(".")] if final.is_dir() else []
    if held and not any((final / n).is_file() for n in ("index.html", "404.html", "sitemap.xml")):
        raise ToolsError(f"site build refused: {final} holds files and no site built before ({held[0].name}, ...): "
                         "the build replaces its folder; build into a new or empty one")


def _swap(built: Path, final: Path) -> None:
    """``built`` in ``final``'s place; the old site is removed only once the new one is there, after its dot-entries
    (MkDocs keeps them: a gh-pages checkout's .git, .nojekyll) moved into the new one. A kill between the renames
    leaves the old site as ``.NAME.old-PID``, which the next build puts back or takes its dot-entries from."""
    import shutil

    old = final.parent / f".{final.name}.old-{built.name.rsplit('-', 1)[-1]}"
    if final.exists():
        final.rename(old)
    built.rename(final)
    if old.exists():
        _keep_hidden(old, final)
        shutil.rmtree(old, ignore_errors=True)


def _keep_hidden(old: Path, final: Path) -> None:
    for hidden in old.glob(".*"):
        if not (final / hidden.name).exists():
            hidden.rename(final / hidden.name)


def _sweep_killed(final: Path) -> None:
    """What a killed build left beside the site: its half-built folder (removed), or the last site moved aside
    before the new one took its place (put back when there is no site; else its dot-entries are kept)."""
    import shutil

    from ..writer import _pid_alive

    for left in sorted(final.parent.glob(f".{final.name}.*-*")):
        kind, _, pid = left.name[len(final.name) + 2:].rpartition("-")
        if kind not in ("building", "old") or not pid.isdigit() or _pid_alive(int(pid)) or not left.is_dir():
            continue
        if kind == "old" and not final.exists():
            left.rename(final)
            continue
        if kind == "old":
            _keep_hidden(left, final)
        shutil.rmtree(left, ignore_errors=True)


class _Collect(logging.Handler):
    """Keeps the text of each warning MkDocs logs, and hands it on as it comes (a handler on the logger stops
    Python's own last-resort printing: without ``echo`` nothing was shown)."""

    def __init__(self, into: list[str], echo=None):
        super().__init__(logging.WARNING)
        self.into, self.echo = into, echo

    def emit(self, record: logging.LogRecord) -> None:
        text = " ".join(record.getMessage().split())
        self.into.append(text)
        if self.echo is not None:
            self.echo(f"{record.levelname} {text}")
