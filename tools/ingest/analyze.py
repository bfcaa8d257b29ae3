"""Per-file analysis with a content-hash cache, and the cross-file repository model."""

from __future__ import annotations

import functools
import hashlib
import json
import os
from collections import Counter, defaultdict
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from importlib import resources
from dataclasses import dataclass, field
from pathlib import Path

from .. import concepts, pysource, safeio, treewalk
from ..kernels import facts as kernel_facts
from ..kernels import launch, light, names, rules
from ..kernels.scan import root_package
from ..treewalk import Entry, Skip, language_of, walk
from ..writer import atomic_write, sweep_temps
from . import dispatch, pyfacts, yaml_settings

CACHE_VERSION = 4  # bump when the shape of ingest facts changes


def _worker_start(*parent: int) -> None:
    """A pool worker ends with the ingest and leaves Ctrl-C to it (a SIGINT to the group would otherwise leave
    workers waiting on a queue the ingest no longer feeds, and the ingest joining them forever)."""
    import signal

    safeio.die_with_parent(*parent)
    signal.signal(signal.SIGINT, signal.SIG_IGN)


@functools.lru_cache(maxsize=1)
def _cache_version() -> str:
    """Changes whenever the code that produces per-file facts changes, so stale facts are never reused."""
    modules = [concepts, pysource, pyfacts, dispatch, yaml_settings, treewalk, kernel_facts, launch, light, names,
               rules]
    h = hashlib.sha1(str(CACHE_VERSION).encode())
    for m in modules:
        h.update(Path(m.__file__).read_bytes())
    for data in (concepts.DATA, rules.CATEGORY_DATA):  # the tables the detectors read
        h.update(resources.files("tools").joinpath(data).read_bytes())
    return h.hexdigest()[:16]


def analyze_one(rel: str, role: str, data: bytes, package: str = "") -> dict:
    """Facts for one file: never raises; ``skip`` holds the reason a file gave nothing."""
    out: dict = {"role": role}
    try:
        if role in ("python", "markdown"):
            out.update(pyfacts.python_facts(rel, data))
            if out["errors"] and not out["symbols"] and not out["surfaces"]:
                out["skip"] = out["errors"][0]
            if role == "python" or b"```" in data:
                out["kernels"] = kf = kernel_facts.analyze_file(rel, data, package)
                trouble = kf.get("warnings") or ([kf["error"]] if kf.get("error") and "skip" not in out else [])
                if trouble and ("pallas" in str(kf.get("imports")) or b"pallas_call" in data):
                    out.setdefault("partial", f"kernel scan: {trouble[0]}")
        elif role == "config":
            if len(data) > 512 * 1024:
                out["skip"] = f"huge config file ({len(data) // 1024} KiB)"
            else:
                out.update(pyfacts.config_facts(rel, pysource.decode(data)))
    except pysource.Unreadable as e:
        out["skip"] = str(e)
    except RecursionError:
        out["skip"] = "too deeply nested to parse"
    except Exception as e:  # noqa: BLE001 - one file's reader bug must not stop the ingest; it is reported
        out["skip"] = f"reader error: {type(e).__name__}: {e}"[:300]
    return out


def _analyze_batch(batch: list[tuple]) -> list[tuple]:
    return [_analyze_path(a) for a in batch]


def _analyze_path(args: tuple[str, str, str, str]) -> tuple[str, str, dict]:
    root, rel, role, package = args
    try:
        data = safeio.read_bytes(Path(root, rel), pysource.limit_for(rel))
    except safeio.Refused as e:
        return rel, "", {"role": role, "skip": e.reason}
    except OSError as e:
        return rel, "", {"role": role, "skip": f"unreadable ({e.strerror})"}
    return rel, hashlib.sha1(data).hexdigest(), analyze_one(rel, role, data, package)


@dataclass
class FileRecord:
    rel: str
    size: int
    mtime_ns: int
    sha: str
    facts: dict
    ctime_ns: int = 0


@dataclass
class Scan:
    """Everything ingest knows about a tree after one pass."""

    root: Path
    files: dict[str, FileRecord]
    skips: list[Skip]
    packages: set[str]
    analyzed: int = 0  # files read and parsed this time
    cached: int = 0    # files whose facts came from the cache (unchanged, or touched and not changed)
    seconds: float = 0.0
    languages: Counter = field(default_factory=Counter)
    partial: list[Skip] = field(default_factory=list)  # read, but some lines could not be parsed


def _cache_path(cache_dir: Path, slug: str, part: str = "") -> Path:
    return cache_dir / "ingest" / f"{slug}{part}.json"


CACHED = frozenset(("size", "mtime_ns", "sha", "facts"))  # what a file's cache entry holds


def load_cache(cache_dir: Path, slug: str, part: str = "") -> dict:
    """The cache as the last ingest left it; ``{}`` when it is missing, damaged or of another shape (it is
    disposable: the ingest rebuilds it). Of another version (the tools upgraded), only what that ingest wrote is
    kept (``outputs``): the per-file facts are the detectors', the pages it wrote are still in the wiki."""
    try:
        data = json.loads(_cache_path(cache_dir, slug, part).read_text())
    except (OSError, ValueError, UnicodeDecodeError):
        return {}
    if not isinstance(data, dict):
        return {}
    outputs = data.get("outputs")
    outputs = [o for o in outputs if isinstance(o, str)] if isinstance(outputs, list) else []
    if data.get("version") != _cache_version():
        return {"outputs": outputs} if outputs else {}
    files = data.get("files") if isinstance(data.get("files"), dict) else {}
    files = {rel: f for rel, f in files.items() if isinstance(f, dict) and CACHED <= f.keys()
             and isinstance(f["facts"], dict)}  # an entry of another shape is analysed again
    return {**data, "outputs": outputs, "files": files}


def save_cache(cache_dir: Path, slug: str, data: dict) -> None:
    """The whole per-file cache, plus a small kernels-only part other repos' ingests read."""
    version = _cache_version()
    sweep_temps(cache_dir)  # what a writer killed mid-way left here (a 6 MiB .tmp no run would remove)
    atomic_write(_cache_path(cache_dir, slug), json.dumps({**data, "version": version}, separators=(",", ":")))
    kernels = {rel: f["facts"]["kernels"] for rel, f in data.get("files", {}).items() if "kernels" in f["facts"]}
    atomic_write(_cache_path(cache_dir, slug, ".kernels"),
                 json.dumps({"version": version, "kernels": kernels}, separators=(",", ":")))


def load_kernel_facts(cache_dir: Path, slug: str) -> dict[str, dict]:
    """Per-file kernel facts of an ingested repo, without reading its whole cache."""
    kernels = load_cache(cache_dir, slug, ".kernels").get("kernels")
    return {rel: k for rel, k in kernels.items() if isinstance(k, dict)} if isinstance(kernels, dict) else {}


def scan_tree(root: Path, cached_files: dict, jobs: int = 0,
              progress: Callable[[int, int], None] | None = None) -> Scan:
    """Walk ``root`` and analyse the files whose size/mtime or content changed since ``cached_files``."""
    entries, skips, packages = walk(root)
    files: dict[str, FileRecord] = {}
    todo: list[Entry] = []
    cached = 0
    languages: Counter = Counter()
    for e in entries:
        languages[language_of(e.rel.rsplit("/", 1)[-1])] += 1
        if e.role == "other":
            continue
        old = cached_files.get(e.rel)
        # size, mtime and ctime unchanged: the file was not written since (an edit whose mtime was put back still
        # moved its ctime); otherwise its content hash decides, below
        if old and old["size"] == e.size and old["mtime_ns"] == e.mtime_ns and old.get("ctime_ns") == e.ctime_ns:
            files[e.rel] = FileRecord(e.rel, e.size, e.mtime_ns, old["sha"], old["facts"], e.ctime_ns)
            cached += 1
        else:
            todo.append(e)
    by_rel = {e.rel: e for e in todo}
    package = root_package(root)
    args = [(str(root), e.rel, e.role, package) for e in todo]
    jobs = jobs or (min(os.cpu_count() or 1, 4) if len(args) > 200 else 1)
    pool = ProcessPoolExecutor(jobs, initializer=_worker_start, initargs=safeio.pool_parent()) if jobs > 1 else None
    analyzed = 0
    if progress:
        progress(0, len(args))
    try:
        # chunks submitted one by one, not ``pool.map``: on Ctrl-C map's iterator cancels its futures, and the pool's
        # manager thread, finding the workers terminated, failed to set an error on them with a traceback of its own
        batches = [pool.submit(_analyze_batch, args[i:i + 16]) for i in range(0, len(args), 16)] if pool else []
        results = (r for b in batches for r in b.result()) if pool else map(_analyze_path, args)
        for rel, sha, facts in results:
            e = by_rel[rel]
            old = cached_files.get(rel)
            if old and sha and old["sha"] == sha:  # touched but not changed
                facts = old["facts"]
                cached += 1
            elif "skip" not in facts:  # read and parsed (a file set aside is counted among the skipped)
                analyzed += 1
            files[rel] = FileRecord(rel, e.size, e.mtime_ns, sha, facts, e.ctime_ns)
            if progress:
                progress(1, len(args))
    except BaseException:  # Ctrl-C (twice, or a group's SIGINT): the workers go now, never joined at exit
        if pool is not None:
            for proc in list((getattr(pool, "_processes", None) or {}).values()):
                proc.terminate()
            pool.shutdown(wait=False, cancel_futures=True)
        raise
    if pool is not None:
        pool.shutdown()
    partial = []
    for rec in files.values():
        if "skip" in rec.facts:
            skips.append(Skip(rec.rel, rec.facts["skip"]))
        elif rec.facts.get("partial"):
            n = len(rec.facts.get("repaired", ()))
            partial.append(Skip(rec.rel, rec.facts["partial"] + (f"; read with {n} line(s) set aside" if n else "")))
    skips.sort(key=lambda s: s.rel)
    partial.sort(key=lambda s: s.rel)
    return Scan(root, files, skips, packages, analyzed, cached=cached, languages=languages, partial=partial)


def cache_entries(scan: Scan) -> dict:
    return {r.rel: {"size": r.size, "mtime_ns": r.mtime_ns, "ctime_ns": r.ctime_ns, "sha": r.sha, "facts": r.facts}
            for r in scan.files.values()}


# ------------------------------------------------------------------------ the cross-file model

def import_name(rel: str, packages: set[str], root_name: str = "") -> str:
    """The name other modules import a file by: climb while the folder is a package.

    When the tree's root is itself a package (a copy of an installed package), its folder name
    is the top of every module name.
    """
    if "" in packages and root_name:
        return import_name(f"{root_name}/{rel}", {f"{root_name}/{p}".rstrip("/") for p in packages})
    parts = rel[: -len(".pyi") if rel.endswith(".pyi") else -3].split("/")
    if parts[-1] == "__init__":
        parts = parts[:-1]
        folders = parts
    else:
        folders = parts[:-1]
    # Climb from the file's folder while each folder is a package: the chain is the import path.
    i = len(folders)
    while i > 0 and "/".join(folders[:i]) in packages:
        i -= 1
    if i == len(folders) and parts is not folders:
        return ".".join(parts)  # a script outside any package: keep its path to stay unique
    return ".".join(parts[i:]) or ".".join(parts)


def _observed_name(path_form: str, imported: set[str]) -> str | None:
    """The longest tail of the path-derived name that the repository's own imports use.

    Catches namespace packages (folders without __init__.py) and src/ layouts, where package
    markers alone give the wrong import path.
    """
    parts = path_form.split(".")
    for i in range(len(parts)):
        cand = ".".join(parts[i:])
        if cand in imported and cand.count(".") >= 1:  # a lone tail ("math") is someone else's module
            return cand
    return None


@dataclass
class RepoModel:
    scan: Scan
    modules: dict[str, str]  # module name -> rel path
    fan_in: dict[str, set[str]]  # module -> importing modules
    surfaces: dict[str, list[tuple[str, int, str]]]  # concept -> [(rel, line, label)]


def build_model(scan: Scan) -> RepoModel:
    modules: dict[str, str] = {}
    alt: dict[str, str] = {}
    imported = {imp for rec in scan.files.values() for imp in rec.facts.get("imports", ())}
    # a module before its stub (``ops.pyi`` beside ``ops.py``), a shallower file before a deeper one (a vendored
    # copy ``vendor/pkg/ops.py`` of ``pkg/ops.py``): the first keeps the import name
    for rel, rec in sorted(scan.files.items(), key=lambda kv: (kv[0].endswith(".pyi"), kv[0].count("/"), kv[0])):
        if rec.facts.get("lang") == "python" and rec.facts.get("module") is not None:
            name = import_name(rel, scan.packages, scan.root.name)
            if name not in imported:
                name = _observed_name(rec.facts["module"], imported) or name
            if name in modules:  # two files, one import name: the later one keeps its own, by its path
                if rel.endswith(".pyi") and modules[name] == rel[:-1]:
                    continue  # the stub of a module already here: its symbols are the module's
                name = next(n for n in (rec.facts["module"], rel) if n not in modules)
            modules[name] = rel
            alt.setdefault(rec.facts["module"], name)  # relative imports were resolved against the path form
    fan_in: dict[str, set[str]] = defaultdict(set)
    for name, rel in modules.items():
        for imp in scan.files[rel].facts.get("imports", ()):
            target = alt.get(imp, imp)
            # `from a.b import c` names a.b.c: take the longest prefix that is a module of this repo.
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target and target != name:
                fan_in[target].add(name)
    surfaces: dict[str, list] = defaultdict(list)
    for rel in sorted(scan.files):
        for slug, line, label in scan.files[rel].facts.get("surfaces", ()):
            surfaces[slug].append((rel, line, label))
    return RepoModel(scan, modules, dict(fan_in), dict(surfaces))
