"""What a unified diff touches, read as ``git apply`` reads it: any one-component prefix (``x/`` as well as
``a/``), C-quoted names (``--- "a/f\\303\\251.py"``), ``diff --git`` headers, renames and copies, binary hunks, and hunk
bodies counted by their ``@@`` lengths (a removed line ``-- note`` is no header). Pure: text in, data out. The
loop's admission refuses a patch by these paths before anything runs; the work tree asks git itself again
(``git apply --numstat``) before it applies one."""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass, field

# what no patch may touch, whatever the loop file says: the runner's own code (it measures and judges the run)
RUNNER_FILES = ("tools/experiments/*", "tools/runners/*", "tools/loop/*", ".tools-cache/*")
_HUNK = re.compile(r"^@@ -\d+(?:,(\d+))? \+\d+(?:,(\d+))? @@")
_ESCAPES = {"a": 7, "b": 8, "t": 9, "n": 10, "v": 11, "f": 12, "r": 13, '"': 34, "\\": 92}


@dataclass
class Section:
    """One file's part of a patch: the paths it names (old and new), its changed lines, whether it is binary."""
    paths: set[str] = field(default_factory=set)
    lines: list[str] = field(default_factory=list)
    binary: bool = False
    old_header: bool = False  # its ``---`` line was read: the next one starts another file


def _unquote(s: str) -> tuple[str, str]:
    """(the C-quoted name at the start of ``s``, what follows it)."""
    out, i = bytearray(), 1
    while i < len(s) and s[i] != '"':
        if s[i] == "\\" and i + 1 < len(s):
            if s[i + 1] in "01234567":
                out.append(int(s[i + 1:i + 4], 8) & 0xFF)
                i += 4
                continue
            out.append(_ESCAPES.get(s[i + 1], ord(s[i + 1])))
            i += 2
            continue
        out.extend(s[i].encode())
        i += 1
    return out.decode("utf-8", "replace"), s[i + 1:]


def _stripped(name: str) -> str:
    """The path git applies (``-p1``): the first component gone when there is one."""
    return name.split("/", 1)[1] if "/" in name else name


def _header(rest: str, strip: bool = True) -> str | None:
    rest = rest.rstrip("\n")
    name = _unquote(rest)[0] if rest.startswith('"') else rest.split("\t", 1)[0].rstrip()
    if not name or name == "/dev/null":
        return None
    return _stripped(name) if strip else name


def _git_pair(rest: str) -> set[str]:
    """The two names of ``diff --git A B``: quoted ones read as such; unquoted ones split where both sides name
    the same path (as git does), else at each space (every candidate counts: a refusal may not miss one)."""
    if rest.startswith('"') or ' "' in rest:
        names = []
        while rest:
            rest = rest.lstrip(" ")
            if rest.startswith('"'):
                name, rest = _unquote(rest)
            else:
                name, _, rest = rest.partition(" ")
            if name:
                names.append(_stripped(name))
        return set(names)
    for i, ch in enumerate(rest):
        if ch == " " and _stripped(rest[:i]) == _stripped(rest[i + 1:]):
            return {_stripped(rest[:i])}
    return {_stripped(w) for w in rest.split(" ") if w}


def sections(patch: str) -> list[Section]:
    out: list[Section] = []
    old_left = new_left = 0
    for ln in patch.splitlines():
        if old_left > 0 or new_left > 0:
            c = ln[:1]
            if c in (" ", ""):
                old_left, new_left = old_left - 1, new_left - 1
                continue
            if c in "-+\\":
                if c != "\\" and out:
                    out[-1].lines.append(ln)
                if c == "-":
                    old_left -= 1
                elif c == "+":
                    new_left -= 1
                continue
            old_left = new_left = 0  # a short hunk: read the line as a header
        if ln.startswith("diff --git "):
            out.append(Section(paths=_git_pair(ln[len("diff --git "):])))
        elif ln.startswith(("--- ", "+++ ")):
            if not out or ln.startswith("--- ") and (out[-1].old_header or out[-1].lines):
                out.append(Section())
            out[-1].old_header = out[-1].old_header or ln.startswith("--- ")
            if (path := _header(ln[4:])) is not None:
                out[-1].paths.add(path)
        elif ln.startswith(("rename from ", "rename to ", "copy from ", "copy to ")):
            if not out:
                out.append(Section())
            if (path := _header(ln.split(" ", 2)[2], strip=False)) is not None:
                out[-1].paths.add(path)
        elif ln.startswith("GIT binary patch") or (ln.startswith("Binary files ") and ln.endswith(" differ")):
            if not out:
                out.append(Section())
            out[-1].binary = True
        elif out and out[-1].binary and ln.strip():
            out[-1].lines.append(ln)  # the binary data: two different ones are two changes
        elif out and ln[:1] in "+-" and ln:  # past its hunk's length (git would call it corrupt): still the change
            out[-1].lines.append(ln)
        elif m := _HUNK.match(ln):
            old_left = int(m[1]) if m[1] is not None else 1
            new_left = int(m[2]) if m[2] is not None else 1
            if not out:
                out.append(Section())
    return out


def files(patch: str) -> list[str]:
    """Every path the patch names (old and new names of a rename; ``/dev/null`` left out)."""
    return sorted({p for s in sections(patch) for p in s.paths})


def is_binary(patch: str) -> bool:
    return any(s.binary for s in sections(patch))


def covered(paths: list[str], protected: list[str]) -> list[str]:
    """The ``paths`` a protected entry covers: the runner's own files, and the loop file's ``protected:`` paths and
    globs (an entry ``path::function`` is hashed at run time instead)."""
    globs = list(RUNNER_FILES) + [e for e in protected if "::" not in e]
    return [f for f in paths if any(fnmatch.fnmatchcase(f, g) or f == g for g in globs)]
