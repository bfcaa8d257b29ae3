"""Real documents that ship inside packages on the registry: the test PDFs of pypdf's source distribution and the
HTML pages of trafilatura's. Each sdist is pinned by version and sha256, downloaded once from the package index
into a cache (``AUTORESEARCH_TEST_DATA``, else ~/.cache/autoresearch-wiki/test-data) and read from the tarball;
nothing of it is committed."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import tarfile
import urllib.parse
import urllib.request
from pathlib import Path

from filelock import FileLock

PYPDF = {"package": "pypdf", "version": "5.1.0", "file": "pypdf-5.1.0.tar.gz",
         "sha256": "425a129abb1614183fd1aca6982f650b47f8026867c0ce7c4b9f281c443d2740"}
TRAFILATURA = {"package": "trafilatura", "version": "2.3.1", "file": "trafilatura-2.3.1.tar.gz",
               "sha256": "2e5557aeab32d33b9da7ff0debbb677a676c5b648a927e50d91b8277011e1105"}
DEFAULT_CACHE = Path(os.environ.get("AUTORESEARCH_TEST_DATA") or Path.home() / ".cache/autoresearch-wiki/test-data")


class Unavailable(RuntimeError):
    """The sdist could not be downloaded (no registry reachable)."""


def sdist(spec: dict, cache: Path = DEFAULT_CACHE) -> Path:
    path = cache / spec["file"]
    cache.mkdir(parents=True, exist_ok=True)
    with FileLock(str(path) + ".lock"):  # test workers asking for the same sdist download it once
        if not path.exists():
            try:
                _from_index(spec, path)
            except (OSError, ValueError, KeyError) as e:  # a mirror without the JSON simple API: pip knows its way
                r = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary=:all:", "-q",
                                    "-d", str(cache), f"{spec['package']}=={spec['version']}"],
                                   capture_output=True, text=True)
                if r.returncode != 0 or not path.exists():
                    raise Unavailable(f"{spec['file']}: {e}; pip download {spec['package']}=={spec['version']} "
                                      f"failed: {r.stderr[-400:]}") from None
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if digest != spec["sha256"]:
        raise SystemExit(f"{path}: sha256 {digest} does not match the pinned {spec['sha256']}")
    return path


def _from_index(spec: dict, path: Path) -> None:
    """The file straight from the package index's JSON simple API (PEP 691): `pip download --no-binary` would build
    each sdist's metadata first, ~5 s apiece."""
    index = (os.environ.get("PIP_INDEX_URL") or "https://pypi.org/simple").rstrip("/")
    name = re.sub(r"[-_.]+", "-", spec["package"]).lower()
    req = urllib.request.Request(f"{index}/{name}/", headers={"Accept": "application/vnd.pypi.simple.v1+json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        files = json.load(r)["files"]
    url = next((f["url"] for f in files if f["filename"] == spec["file"]), None)
    if url is None:
        raise KeyError(f"{spec['file']} is not on {index}")
    with urllib.request.urlopen(urllib.parse.urljoin(f"{index}/{name}/", url), timeout=300) as r:
        data = r.read()
    if hashlib.sha256(data).hexdigest() != spec["sha256"]:
        raise ValueError(f"{url}: not the pinned sha256")
    tmp = path.with_suffix(".part")
    tmp.write_bytes(data)
    tmp.replace(path)


def members(spec: dict, suffixes: tuple[str, ...], cache: Path = DEFAULT_CACHE) -> list[tuple[str, bytes]]:
    """(path inside the sdist without its top folder, bytes) of each file whose name ends with one of suffixes."""
    with tarfile.open(sdist(spec, cache)) as t:
        return [(m.name.split("/", 1)[1], t.extractfile(m).read()) for m in t.getmembers()
                if m.isfile() and m.name.lower().endswith(suffixes)]
