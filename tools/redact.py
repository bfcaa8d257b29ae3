"""Secrets out of what the tools write. A key or token can reach a page without anyone meaning it to: a command line
(`--hf-token=...`), a variable whose name does not say it is secret (`MY_AUTH=sk-...`), a crash message that
quotes one. The one writer passes every page, file and log entry through ``redact``: values shaped like the keys
of the common providers, and the values of flags and variables named as secrets, become ``[redacted]``. A run
whose command held a secret then cannot be rerun from its page as it was: pass secrets in the environment, which
is never recorded under a secret's name."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

MARK = "[redacted]"
SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSW|CREDENTIAL|AUTH(?!OR)", re.I)  # a variable holding a secret
# provider key shapes: Anthropic, OpenAI, Hugging Face (``hf_`` and 34 letters and digits: not ``hf_config``, whose
# symbol a shorter floor redacted out of a codebase's index), GitHub, AWS, Slack, Google OAuth
_SHAPED = re.compile(
    r"\b(?:sk-ant-[A-Za-z0-9_-]{6,}|sk-(?:proj-)?[A-Za-z0-9_-]{20,}|hf_(?=[A-Za-z0-9]*[A-Z0-9])[A-Za-z0-9]{30,}\b|gh[pousr]_[A-Za-z0-9]{16,}"
    r"|github_pat_[A-Za-z0-9_]{20,}|AKIA[0-9A-Z]{16}|xox[abprs]-[A-Za-z0-9-]{10,}|ya29\.[A-Za-z0-9_-]{20,})")
# a value: a word, or quoted ("..." or '...': a shell's or a repr's quoting), never one already redacted
_VALUE = r"""("(?!\[redacted\])[^"\n]+"|'(?!\[redacted\])[^'\n]+'|(?!\[redacted\])[^\s'"`]+)"""
_SECRET_WORD = r"[A-Za-z0-9_-]*(?:token|api[-_]?key|secret|password|passwd)"
_FLAG = re.compile(  # --hf-token=X, --api-key X, --password=X (not --max-tokens, --tokenizer, nor the prose
    # "per-token latency": a flag's dashes start a word)
    r"(?i)((?<![\w-])--?(?=[A-Za-z0-9])" + _SECRET_WORD + r"(?:=|[ \t]+))" + _VALUE)
_VAR = re.compile(  # HF_TOKEN=X, MY_API_KEY=X in a command or a listing, hf-token=X in a run's config (not
    # MAX_TOKENS=5)
    r"(?i)(?<![\w-])(" + _SECRET_WORD + r"=)" + _VALUE)
_MAPPED = re.compile(  # WANDB_API_KEY: X on a line of its own (a page's frontmatter, a YAML listing): a variable's
    # name in capitals (not `cache_key:`, `rng_key:`, a frontmatter's `unexplained_us_per_token:`), or a key naming
    # an api key, a secret or a password
    r"(?m)^([ \t]*(?:- )?(?:(?:[A-Z0-9_]*_)?(?:TOKEN|KEY|SECRET|PASSWORD|PASSWD|CREDENTIALS?|AUTH)"
    r"|(?i:[a-z0-9_-]*(?:token|api[-_]?key|secret|password|passwd)))[ \t]*:[ \t]+)" + _VALUE
    + r"[ \t]*$")  # the value the whole rest of its line: never code (`token: jax.Array,`, `KEY: f(x),`)
_NUMBER = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
_NOT_A_KEY = re.compile(rf"{_NUMBER}|<[^>]*>|.*[\[\]|{{}}].*")  # a number, a <token>, YAML or type syntax
_NOT_A_KEY_OF_A_VARIABLE = re.compile(rf"{_NUMBER}|<[^>]*>")  # `DB_PASSWORD: p4ss{{w0rd}}`: punctuation is no type
_PLACEHOLDER = re.compile(r"<[^>]*>")  # `eos_token="<|endoftext|>"`: a special token, no secret


def _quoted_or_word(m: re.Match, always: bool) -> str:
    """The match with its value redacted, quotes kept; a quoted value (``pad_token="<pad>"``) or a mapping's
    (``eos_token: </s>``) only where it looks like a secret, as a word after a secret's name always is. A mapping's
    mark is quoted: YAML reads a bare ``[redacted]`` back as a list."""
    head, value = m.group(1), m.group(m.lastindex)
    quote = value[0] if value[0] in "'\"" else ""
    inner = value[1:-1] if quote else value
    # a mapping line's value may be a number, a type or YAML (`key: jax.Array`, `token: Optional[str]`); a quoted
    # value after a flag or variable is a secret whatever its punctuation, a <special token> aside
    variable = head.strip().rstrip(":").strip().lstrip("- ").isupper()  # an environment variable's name
    syntax = (_PLACEHOLDER if always else _NOT_A_KEY_OF_A_VARIABLE if variable else _NOT_A_KEY).fullmatch(inner) \
        and not (inner.isdigit() and _NUMBER_SECRET.search(head))
    if not (always and not quote) and (not _looks_secret(head, inner) or syntax):
        return m.group(0)
    if not always and (not (any(c.isdigit() for c in inner) or len(inner) >= 24) or inner.endswith(",")
                       or "(" in inner):
        return m.group(0)  # a word with no digit (`password: SecretStr`, a type), code (`KEY: f(x),`): no key
    quote = quote or ("" if always else "'")
    return head + quote + MARK + quote


_HELD: set[str] = set()  # secrets this process passed on to a run (``hold``): a crash it files may quote them


_NUMBER_SECRET = re.compile(r"PASSW|SECRET|PIN", re.I)  # a number is a secret there (not in MAX_TOKENS=100000000)


def _looks_secret(name: str, value: str) -> bool:
    """A value worth looking for in what is written: long enough not to be a word, not a path that is there
    (``SSH_KEY_PATH=/home/me/.ssh/id``: pages may rightly show it; a base64 key may start with ``/`` too), a
    number only where the name says password, secret or PIN."""
    return (len(value) >= 8 and not any(c.isspace() for c in value) and value.lower() not in ("true", "false")
            and (not value.isdigit() or bool(_NUMBER_SECRET.search(name)))
            and not (value[:1] in "/~." and os.path.exists(os.path.expanduser(value))))


def is_secret(name: str, value) -> bool:
    """Whether the variable ``name`` holds a secret: named as one (``WANDB_API_KEY``, ``MY_SERVICE_TOKEN``), its
    value like one."""
    return bool(SECRET_NAME.search(name)) and isinstance(value, str) and _looks_secret(name, value)


def secret_values(env: Mapping[str, str]) -> set[str]:
    """The values of ``env``'s variables named as secrets."""
    return {v for k, v in env.items() if is_secret(k, v)}


def hold(env: Mapping[str, str]) -> None:
    """Redact from now on the values of ``env``'s secret-named variables (a run's own ``--env``), wherever they
    show up: a crash message that quotes one has no name beside it."""
    _HELD.update(secret_values(env))


def redact(text: str) -> str:
    if not text:
        return text
    for value in sorted(secret_values(os.environ) | _HELD, key=len, reverse=True):
        if value in text:  # a key the environment holds, quoted on its own (a crash's "auth rejected: <key>")
            text = text.replace(value, MARK)
    text = _SHAPED.sub(MARK, text)
    text = _FLAG.sub(lambda m: _quoted_or_word(m, True), text)
    text = _VAR.sub(lambda m: _quoted_or_word(m, True), text)
    return _MAPPED.sub(lambda m: _quoted_or_word(m, False), text)


def redact_added(text: str, before: str | None) -> str:
    """``redact`` on the lines of ``text`` that ``before`` (the file as it was) does not hold: what the tools add is
    redacted, what a person wrote and the tools keep is never rewritten."""
    if not before:
        return redact(text)
    kept = set(before.split("\n"))
    return "\n".join(ln if ln in kept else redact(ln) for ln in text.split("\n"))
