"""The two sides of a comparison: the command each arm runs, with which environment and from where.

A variant runs its own command with its variables on top of the runner's (flag variables appended); a baseline
reruns a filed record as it ran: its command (its saved script copy when the script changed since), the folder it
ran in and the environment it kept, with every other ``ENV_KEYS`` variable unset. Secrets are never recorded.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from ..redact import SECRET_NAME
from ..runners import Arm
from .shellwords import script_words, with_script, words_run

ENV_KEYS = ("XLA_FLAGS", "LIBTPU_INIT_ARGS", "JAX_PLATFORMS", "CUDA_VISIBLE_DEVICES", "TPU_VISIBLE_CHIPS")
FLAG_KEYS = ("XLA_FLAGS", "LIBTPU_INIT_ARGS")   # a run's own flags are appended to these, never replace them
PROFILE_ENV = "AUTORESEARCH_PROFILE_DIR"
HLO_ENV = "AUTORESEARCH_HLO_DIR"  # names the dump folder so a remote runner brings it back (tools/runners)
SECRET = SECRET_NAME
REDACTED = "<redacted>"


# ----------------------------------------------------------------------------- environments

def merged_env(extra: dict[str, str], base: dict[str, str] | None = None) -> dict[str, str]:
    """``extra`` over the runner's environment: flag variables are appended to its value (the later flag wins)."""
    base = os.environ if base is None else base
    return {k: (f"{base[k]} {v}".strip() if k in FLAG_KEYS and base.get(k) else str(v)) for k, v in extra.items()}


def recorded_env(own: dict[str, str], unset: list[str] | tuple = ()) -> dict[str, str]:
    """What a run's record keeps: this environment's ``ENV_KEYS`` (less ``unset``) plus the run's own variables
    (secrets redacted)."""
    env = {k: os.environ[k] for k in ENV_KEYS if os.environ.get(k) and k not in unset}
    env.update(own)
    return {k: (REDACTED if SECRET.search(k) else str(v)) for k, v in sorted(env.items())}


def restored_env(rec: dict) -> tuple[dict[str, str], list[str], str]:
    """How to rerun a record as it ran: (variables on top of the runner's, ``ENV_KEYS`` to unset, a note).
    The baseline environment is the runner's minus ``ENV_KEYS``, plus what the record kept."""
    env = rec.get("env")
    if not isinstance(env, dict):
        return {}, [], (f"`{rec.get('exp_id')}` kept no environment (filed before runs recorded one): "
                        "its reruns inherit this runner's")
    keep = {str(k): str(v) for k, v in env.items() if v != REDACTED}
    return keep, [k for k in ENV_KEYS if k in os.environ and k not in keep], ""


def with_unset(cmd: list[str], unset: list[str]) -> list[str]:
    """``cmd`` run through ``env -u`` so the listed variables are absent (not empty) on whichever worker runs it."""
    return ["env", *[a for k in unset for a in ("-u", k)], "--", *cmd] if unset else list(cmd)


def profile_env(raw_dir: Path, module_re: str, env: dict[str, str]) -> dict[str, str]:
    """``env`` with the XLA flags that dump optimized HLO as text appended to its (merged) XLA_FLAGS, and JAX's
    persistent compile cache off: a cache hit compiles nothing, so it would dump no optimized HLO (the no-op check's
    and the profile's evidence), whatever cache the runner's environment names."""
    flags = f"--xla_dump_to={raw_dir / 'hlo'} --xla_dump_hlo_as_text --xla_dump_hlo_module_re={module_re}"
    xla = env.get("XLA_FLAGS", os.environ.get("XLA_FLAGS", ""))
    return dict(env, XLA_FLAGS=f"{xla} {flags}".strip(), JAX_ENABLE_COMPILATION_CACHE="false")


def compile_cache_env(folder: Path, env: dict[str, str]) -> dict[str, str]:
    """``env`` with JAX's persistent compile cache in ``folder`` for a timed arm: every round reruns the same two
    programs, so each compiles once. The cache key holds the program, XLA_FLAGS, LIBTPU_INIT_ARGS and the jax
    version, so a changed program or flag compiles anew; step times are of the same executable either way. A cache
    the runner's environment already names is kept."""
    if os.environ.get("JAX_COMPILATION_CACHE_DIR") or env.get("JAX_COMPILATION_CACHE_DIR"):
        return dict(env)
    return dict(env, JAX_COMPILATION_CACHE_DIR=str(folder), JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0",
                JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES="0")


# ----------------------------------------------------------------------------- the two sides

@dataclass
class Side:
    command: list[str]
    env: dict[str, str] = field(default_factory=dict)   # on top of the runner's environment
    cwd: Path | None = None
    unset: list[str] = field(default_factory=list)

    def arm(self, name: str, raw_dir: Path, timeout: float, env: dict[str, str] | None = None,
            artefacts: dict[str, Path] | None = None):
        return Arm(name, with_unset(self.command, self.unset), raw_dir / f"{name}.log",
                   dict(self.env if env is None else env), self.cwd, timeout, dict(artefacts or {}))


def record_side(project, rec: dict, cwd: Path | None, fallback_cwd: Path | None,
                checkout: bool = False) -> tuple[Side, list[str]]:
    """How to rerun a filed record: its command, from ``cwd`` or the folder it ran in, with the environment it kept;
    its saved script copy when the script changed since (importing its sibling modules from the script's folder),
    unless ``checkout`` says ``cwd`` is a checkout of the record's own code (trusted as it is). Returns the side and
    notes for the page."""
    if cwd is None:
        c = Path(str(rec.get("cwd") or ""))
        c = c if c.is_absolute() else project.root / c
        cwd = c if rec.get("cwd") and c.is_dir() else fallback_cwd
    cmd = shlex.split(rec["command"])
    notes = []
    copy, script = rec.get("script_copy"), script_of(cmd, cwd)
    env, unset, note = restored_env(rec)
    word = next(iter(script_words(cmd)), None)
    gone = script is None and word is not None  # moved or deleted since it ran
    if not checkout and copy and rec.get("script_sha256") and (gone or script and script_changed(script, rec)):
        saved = project.root / copy
        what = "is gone from where it ran" if gone else "changed since"
        swapped = with_script(cmd, word, str(saved)) if saved.is_file() else None
        if swapped is not None:
            home = (script.parent if script else (cwd or Path.cwd()) / Path(word).parent).resolve()
            cmd = swapped
            # the copy runs from its own folder: the script's sibling modules are found where the script was
            paths = [str(home), *filter(None, [env.get("PYTHONPATH", os.environ.get("PYTHONPATH"))])]
            env = {**env, "PYTHONPATH": os.pathsep.join(paths)}
            notes.append(f"the script of `{rec['exp_id']}` {what}: its saved copy `{copy}` was rerun (the modules "
                         f"it imports from its own folder as they are now)")
        else:
            why = "its saved copy is missing" if not saved.is_file() else (
                "its saved copy's path cannot be written into the command's shell script")
            notes.append(f"the script of `{rec['exp_id']}` {what} and {why}: "
                         + ("the command was rerun as filed" if gone else "the current script was rerun"))
    if note:
        notes.append(note)
    elif unset:
        notes.append(f"reruns of `{rec['exp_id']}` ran with its recorded environment (unset: {', '.join(unset)})")
    return Side(cmd, env, cwd, unset), notes


def script_changed(script: Path, rec: dict) -> bool:
    """Whether ``script`` differs from what ``rec`` ran (its recorded sha256; False when none was recorded)."""
    return bool(rec.get("script_sha256")) and code_commit(script)[1] != rec["script_sha256"]


def script_of(cmd: list[str], cwd: Path | None) -> Path | None:
    """The Python script ``cmd`` runs (``shellwords.script_words``, a shell's ``-c`` script read too) that is a
    file, or None."""
    for a in script_words(cmd):
        p = Path(a) if Path(a).is_absolute() else (cwd or Path.cwd()) / a
        if p.is_file():
            return p
    return None


UNCOMMITTED_MAX = 50  # files named in a record; more are counted


def uncommitted(script: Path | None, kb_root: Path) -> list[str]:
    """Files beside the model script (its folder and below) that differ from the commit or are not tracked, the
    script itself and the knowledge base's own files left out: code the run may have used that no commit holds."""
    if script is None:
        return []
    try:
        p = subprocess.run(["git", "-C", str(script.parent), "status", "--porcelain", "--untracked-files=all",
                            "--no-renames", "-z", "--", "."], capture_output=True, text=True, timeout=10, check=False)
        top = subprocess.run(["git", "-C", str(script.parent), "rev-parse", "--show-toplevel"], capture_output=True,
                             text=True, timeout=10, check=False).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return []
    if p.returncode != 0 or not top:
        return []
    kb = [kb_root.resolve() / d for d in ("wiki", "raw", "exports", "loops", ".tools-cache")]
    out = []
    for entry in filter(None, p.stdout.split("\0")):
        path = (Path(top) / entry[3:]).resolve()
        if path == script.resolve() or any(path.is_relative_to(d) for d in kb):
            continue
        out.append(entry[3:])
    return out[:UNCOMMITTED_MAX] + ([f"... {len(out) - UNCOMMITTED_MAX} more"] if len(out) > UNCOMMITTED_MAX else [])


def code_commit(script: Path | None) -> tuple[str, str]:
    """(commit of the repo holding the model script, plus '-dirty' if it differs; sha256 of the script)."""
    if script is None:
        return "", ""
    sha = hashlib.sha256(script.read_bytes()).hexdigest()[:16]
    try:
        head = subprocess.run(["git", "-C", str(script.parent), "rev-parse", "--short=12", "HEAD"],
                              capture_output=True, text=True, timeout=10, check=False)
        if head.returncode != 0:
            return "", sha
        dirty = subprocess.run(["git", "-C", str(script.parent), "status", "--porcelain", "--", script.name],
                               capture_output=True, text=True, timeout=10, check=False)
        return head.stdout.strip() + ("-dirty" if dirty.stdout.strip() else ""), sha
    except (OSError, subprocess.TimeoutExpired):
        return "", sha


IMPORTABLE = (".py", ".pyc", ".so", ".pyd", ".pth")  # what `import x` finds in a folder on sys.path
IMPORTS_CAP = 2_000  # module files hashed per run: beyond it, a file is known by its name and size only


def import_folders(script: Path, env: dict[str, str]) -> list[Path]:
    """The folders a run of ``script`` imports from before the standard library: the script's own (Python puts it
    first on ``sys.path``), then each ``PYTHONPATH`` entry (a rerun of a saved copy imports its siblings from the
    checkout that way)."""
    out = [script.parent]
    for entry in (env.get("PYTHONPATH") or os.environ.get("PYTHONPATH") or "").split(os.pathsep):
        if entry and Path(entry).is_dir() and Path(entry) not in out:
            out.append(Path(entry))
    return out


def importable_beside(script: Path, env: dict[str, str] | None = None) -> dict[str, str]:
    """What a run of ``script`` can import from the folders it looks in first (``import_folders``): each module
    file there, and each file of a package there, by path -> a short sha256 (the first ``IMPORTS_CAP``; the rest by
    size). A ``statistics.py`` planted there shadows the standard library's for every later run."""
    files: list[Path] = []
    for folder in import_folders(script, env or {}):
        try:
            entries = sorted(folder.iterdir())
        except OSError:
            continue
        for p in entries:
            if p.is_dir() and (p / "__init__.py").is_file():  # a package: its modules, a level or two down
                files += [f for f in sorted(p.rglob("*")) if f.suffix in IMPORTABLE
                          and "__pycache__" not in f.parts][:IMPORTS_CAP]  # what Python compiles as it imports
            elif p.suffix in IMPORTABLE:
                files.append(p)
    out: dict[str, str] = {}
    for n, f in enumerate(files):
        try:
            out[str(f)] = hashlib.sha256(f.read_bytes()).hexdigest()[:16] if n < IMPORTS_CAP else \
                f"size {f.stat().st_size}"
        except OSError:
            continue
    return out


def stdlib_shadows(script: Path, env: dict[str, str] | None = None) -> list[str]:
    """The standard library's module names that a module in ``script``'s first import folders takes over (a
    ``statistics.py`` beside it is imported instead of Python's): kept on each run's record, so a rerun of it as a
    baseline finds one that was not there when it ran."""
    import sys

    names = set()
    for folder in import_folders(script, env or {}):  # names only: nothing read, at every run's start
        try:
            entries = list(folder.iterdir())
        except OSError:
            continue
        for p in entries:
            top = p.name.split(".")[0]
            if top in sys.stdlib_module_names and (p.suffix in IMPORTABLE or (p / "__init__.py").is_file()):
                names.add(top)
    return sorted(names)


def importable_changed(before: dict[str, str], now: dict[str, str]) -> str:
    """The first module that appeared, changed or went beside the script ("" when none)."""
    for name in sorted(set(before) | set(now)):
        if before.get(name) != now.get(name):
            what = "appeared" if name not in before else "went" if name not in now else "changed"
            return f"`{Path(name).name}` ({name}) {what}"
    return ""


COMMAND_FILES_CAP = 32      # files a command names, hashed per run
COMMAND_FILE_MAX = 4 << 20  # a larger one (a dataset) is left out: hashed before every baseline arm


def command_files(command: list[str], cwd: Path | None) -> dict[str, str]:
    """The files other than Python scripts that a command's words name under its folder (a launch script, an
    `env.sh` its shell sources, a config), a shell's ``-c`` script read too: the word -> a short sha256. A baseline
    rerun that finds one changed since it was filed runs another setup than it was filed with."""
    base, out = Path(cwd or Path.cwd()), {}
    for w in words_run(list(command)):
        path = w.split("=", 1)[1] if w.startswith("--") and "=" in w else w
        if path.startswith("-") or path.endswith(".py") or path in out or len(out) >= COMMAND_FILES_CAP:
            continue
        p = Path(path) if os.path.isabs(path) else base / path
        try:
            if p.resolve().is_relative_to(base.resolve()) and p.is_file() and p.stat().st_size <= COMMAND_FILE_MAX:
                out[path] = hashlib.sha256(p.read_bytes()).hexdigest()[:16]
        except (OSError, ValueError):
            continue
    return out


def command_files_changed(filed: dict | None, side) -> str:
    """Why a baseline's rerun does not read what it was filed with ("" when it does): a file its command names
    (``command_files``) changed since (a red team's: the variant's change rewrote the `env.sh` the baseline's
    shell sources, to slow the baseline's shell alone)."""
    if not isinstance(filed, dict) or side is None:
        return ""
    now = command_files(side.command, side.cwd)
    for name, sha in sorted(filed.items()):
        if now.get(name) != sha:
            return (f"`{name}`, which the baseline's command names, is not as it was when the baseline was filed "
                    f"(sha256 {str(sha)[:12]}, now {now.get(name, 'gone')[:12]}): its reruns are not that baseline, "
                    "so a gain over it is not believed; restore the file, or file the baseline again")
    return ""

