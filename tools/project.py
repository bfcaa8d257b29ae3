"""Where things live. Paths are computed here and nowhere else."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from .errors import ProjectError

ROOT_ENV = "AUTORESEARCH_ROOT"


@dataclass(frozen=True)
class Project:
    root: Path

    @property
    def raw(self) -> Path:
        return self.root / "raw"

    @property
    def raw_code(self) -> Path:
        return self.raw / "code"

    @property
    def raw_sources(self) -> Path:
        return self.raw / "sources"

    @property
    def raw_profiles(self) -> Path:
        return self.raw / "profiles"

    @property
    def wiki(self) -> Path:
        return self.root / "wiki"

    @property
    def docs(self) -> Path:
        return self.root / "docs"

    @property
    def experiments(self) -> Path:
        return self.root / "experiments"

    @property
    def cache(self) -> Path:
        """Ingest state (hashes, parsed records). Disposable; never committed."""
        return self.root / ".tools-cache"

    def safe_cache(self) -> Path:
        """``.tools-cache`` where the tools write and delete for an agent (the search index, export work trees):
        refused where a link takes it out of the knowledge base, since what it names would be rewritten."""
        from .errors import InputError

        folder, root = self.cache, os.path.realpath(self.root)
        if folder.is_symlink() or not os.path.realpath(folder).startswith(root.rstrip(os.sep) + os.sep):
            raise InputError(folder, f"links outside the knowledge base (to {os.path.realpath(folder)}): nothing "
                                     "is written there; make .tools-cache a folder of the knowledge base")
        folder.mkdir(parents=True, exist_ok=True)
        return folder

    @property
    def index_page(self) -> Path:
        return self.wiki / "index.md"

    @property
    def log_page(self) -> Path:
        return self.wiki / "log.md"

    def wiki_rel(self, path: Path) -> str:
        return path.resolve().relative_to(self.wiki.resolve()).as_posix()

    def require_wiki(self) -> None:
        if not self.wiki.is_dir():
            raise ProjectError(
                f"{self.root}: no wiki/ folder here; run `tools init` or pass --root"
            )


def find_root(start: Path | None = None, explicit: str | Path | None = None) -> Path:
    """--root wins, then $AUTORESEARCH_ROOT, then the nearest folder upward holding wiki/ or mkdocs.yml."""
    if explicit:
        return Path(explicit).resolve()
    if os.environ.get(ROOT_ENV):
        return Path(os.environ[ROOT_ENV]).resolve()
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / "wiki").is_dir() or (folder / "mkdocs.yml").is_file():
            return folder
    return here


def load_project(explicit: str | Path | None = None) -> Project:
    return Project(find_root(explicit=explicit))
