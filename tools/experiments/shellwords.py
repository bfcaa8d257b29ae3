"""Which Python script a command runs, read through a shell's ``-c`` script too (``bash -c "ulimit -v ...; exec
python train.py"``, as docs/crashes.md suggests for a memory limit), and the same command running another copy of
it. Pure: words in, words out; nothing is run."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

SHELLS = ("sh", "bash", "dash", "zsh", "ksh")
_PYTHON = re.compile(r"^(?:.*/)?(?:python|pypy)[\d.]*$")
_SEPARATORS = re.compile(r"(;|&&|\|\||\|)")


def is_c(flag: str) -> bool:
    """A shell's ``-c`` (``-ec``, ``-lc``): the next word is its script."""
    return flag.startswith("-") and not flag.startswith("--") and flag.endswith("c")


def words_run(cmd: list[str], depth: int = 0) -> list[str]:
    """``cmd``'s words, a shell's ``-c`` script split into its own words in its place (a shell in it too)."""
    if not cmd or depth > 3 or Path(cmd[0]).name not in SHELLS:
        return list(cmd)
    for i, a in enumerate(cmd[1:-1], 1):
        if is_c(a):
            try:
                words = shlex.split(cmd[i + 1], comments=True)
            except ValueError:  # an unbalanced quote: the shell would refuse it too
                return list(cmd)
            inner = []
            for part in _statements(words):
                inner += words_run(part, depth + 1)
            return cmd[:i + 1] + inner + cmd[i + 2:]
    return list(cmd)


def _statements(words: list[str]) -> list[list[str]]:
    """A shell script's words as its simple commands (split at ``;``, ``&&``, ``||``, ``|``), ``exec`` dropped."""
    out, cur = [], []
    for w in words:
        for piece in _SEPARATORS.split(w):
            if piece in (";", "&&", "||", "|"):
                out.append(cur)
                cur = []
            elif piece:
                cur.append(piece)
    out.append(cur)
    return [c[1:] if c[:1] == ["exec"] else c for c in out if c]


def script_words(cmd: list[str]) -> list[str]:
    """The ``.py`` words of ``cmd``, those a Python interpreter runs first (``cp train.py bak.py && python
    train.py``: the second), then any other (``torchrun train.py``)."""
    words = words_run(cmd)
    run = []
    for i, w in enumerate(words):
        if _PYTHON.match(w):
            j = i + 1
            while j < len(words) and words[j].startswith("-") and words[j] not in ("-c", "-m"):
                j += 1
            if j < len(words) and words[j].endswith(".py") and (j == i + 1 or words[j - 1] not in ("-c", "-m")):
                run.append(words[j])
    return list(dict.fromkeys(run + [w for w in words if w.endswith(".py")]))


def with_script(cmd: list[str], word: str, new: str) -> list[str] | None:
    """``cmd`` running ``new`` where it ran the script ``word``: an argument, or the word a Python interpreter runs
    in a shell's ``-c`` script, written as the quotes around it allow. None when it cannot be put there (a name
    the enclosing quotes cannot hold, or no interpreter running it in the script)."""
    if word in cmd:
        i = cmd.index(word)
        return [*cmd[:i], new, *cmd[i + 1:]]
    for i, a in enumerate(cmd):
        if i and is_c(cmd[i - 1]) and Path(cmd[0]).name in SHELLS and (swapped := _swap(a, word, new)) is not None:
            return [*cmd[:i], swapped, *cmd[i + 1:]]
    return None


_RUNS_BEFORE = re.compile(r"(?:^|[\s;&|('\"])(?:\S*/)?(?:python|pypy)[\d.]*(?:\s+-[A-Za-z]+)*\s+['\"]?$")


def _swap(script: str, word: str, new: str) -> str | None:
    """``script`` with every place a Python interpreter runs ``word`` running ``new`` (None: none, or one where
    no quoting of ``new`` would survive)."""
    runs = [m for m in re.finditer(re.escape(word), script) if _RUNS_BEFORE.search(script[:m.start()])
            and re.match(r"$|[\s;&|)'\"]", script[m.end():m.end() + 1])]
    for m in reversed(runs):  # from the last: earlier offsets stay right
        before, after = script[:m.start()], script[m.end():m.end() + 1]
        quote = _quote_at(before)
        if shlex.quote(new) == new or quote is None:
            text = shlex.quote(new)
        elif re.search(r"['\"$`\\]", new):
            return None  # no quoting of it survives both shells
        elif before[-1:] in ("'", '"') and after == before[-1]:
            text = new  # the word quoted on its own (`"train.py"`, at this shell's level or an inner one's)
        else:  # inside a nested script's quotes (`bash -c 'python3 train.py'`): quoted for the inner shell
            text = f'"{new}"' if quote == "'" else f"'{new}'"
        script = script[:m.start()] + text + script[m.end():]
    return script if runs else None


def _quote_at(text: str) -> str | None:
    """The quote ``text`` leaves open (``'``, ``"``) or None, as a POSIX shell reads it."""
    quote, i = None, 0
    while i < len(text):
        ch = text[i]
        if quote == "'":
            quote = None if ch == "'" else quote
        elif ch == "\\":
            i += 1
        elif quote == '"':
            quote = None if ch == '"' else quote
        elif ch in "'\"":
            quote = ch
        i += 1
    return quote
