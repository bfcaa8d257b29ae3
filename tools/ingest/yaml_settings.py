"""The top-level settings of a YAML config file, as a config family's defaults need them: each key with its line,
its value as written (a value over several lines, such as a list of sharding rules, read whole by the YAML parser
and shown in flow style), and the values its comment offers ("Supported attention: autoselected, dot_product,
flash" or "Choose 'remat_policy' between 'minimal', ... and 'full'"). Pure; never raises on a bad file."""

from __future__ import annotations

import json
import re

import yaml

MAX_VALUE_CHARS = 4000  # a list of sharding rules is read whole; the overview shows its start
_KEY = re.compile(r"^([A-Za-z_][\w.-]*)\s*:(?:\s+|$)(.*)$")
_OFFER = re.compile(r"\b(?:supported|options?|one of|choose|choices|between|allowed|valid|either)\b", re.I)
_QUOTED = re.compile(r"""['"`]([\w.-]+)['"`]""")
_WORD = re.compile(r"[A-Za-z_][\w.-]*")

try:
    _LOADER = yaml.CSafeLoader
except AttributeError:  # libyaml not built in
    _LOADER = yaml.SafeLoader


def _shown(value) -> str:
    """The value in flow style, stopped at ``MAX_VALUE_CHARS``: YAML aliases can make a 1 KB file a value of 10^9
    elements (a "billion laughs"), so it is never serialised whole."""
    out: list[str] = []
    left = [MAX_VALUE_CHARS + 1]

    def put(text: str) -> bool:
        out.append(text[: left[0]])
        left[0] -= len(text)
        return left[0] > 0

    def walk(v, depth: int) -> bool:
        if depth > 50:
            return put("…")
        if isinstance(v, bool):
            return put("true" if v else "false")
        if v is None:
            return put("null")
        if isinstance(v, dict):
            items = [(f"{json.dumps(str(k), ensure_ascii=False)[1:-1]!r}: ", x) for k, x in v.items()]
            opener, closer = "{", "}"
        elif isinstance(v, (list, tuple)):
            items, opener, closer = [("", x) for x in v], "[", "]"
        else:
            return put(repr(v) if isinstance(v, str) and depth else str(v))
        if not put(opener):
            return False
        for n, (head, x) in enumerate(items):
            if (n and not put(", ")) or not put(head) or not walk(x, depth + 1):
                return False
        return put(closer)
    walk(value, 0)
    text = "".join(out)
    return text if len(text) <= MAX_VALUE_CHARS else text[: MAX_VALUE_CHARS - 1] + "…"


def _inline_value(rest: str) -> str:
    """The value on the key's line without its comment ('full' -> full)."""
    out, quote = [], ""
    for ch in rest:
        if quote:
            if ch == quote:
                quote = ""
            else:
                out.append(ch)
            continue
        if ch in "'\"":
            quote = ch
            continue
        if ch == "#":
            break
        out.append(ch)
    return "".join(out).strip()


def _offered(comment: str, key: str) -> list[str]:
    """Values a comment offers for ``key``: quoted words, else the comma list after "Supported ...:"."""
    if not comment or not _OFFER.search(comment):
        return []
    quoted = [w for w in _QUOTED.findall(comment) if w != key]
    if len(quoted) >= 2:
        return list(dict.fromkeys(quoted))
    tail = comment.split(":", 1)[1] if ":" in comment else _OFFER.split(comment)[-1]
    # one sentence's comma list of single words (`a, b or c`): prose after "between" offered 56 of its words
    tail = re.split(r"[.;](?:\s|$)", tail, maxsplit=1)[0]
    tail = re.sub(r"\s*\([^)]*\)", "", tail)  # `xla (default)`: the value, not its note
    items = [re.sub(r"^(?:or|and)\s+", "", x.strip(), flags=re.I).strip(" '\"`") for x in re.split(r",|\bor\b",
                                                                                               tail)]
    items = [x for x in items if x and x.lower() not in ("etc", key.lower())]
    if "," not in tail or len(items) < 2 or not all(_WORD.fullmatch(x) for x in items):
        return []
    return list(dict.fromkeys(items))


def settings(text: str) -> list[dict]:
    """``[{"key", "line", "value", "offered"}]`` for every top-level key of a YAML mapping (none when the text is
    not one)."""
    try:
        data = yaml.load(text, Loader=_LOADER)  # noqa: S506 - a safe loader
    except (yaml.YAMLError, ValueError, RecursionError):
        data = None
    lines = text.split("\n")
    out = []
    for n, ln in enumerate(lines):
        m = _KEY.match(ln)
        if not m:
            continue
        key, rest = m.groups()
        inline = _inline_value(rest)
        if isinstance(data, dict) and key in data and (not inline or inline[:1] in "[{|>"):
            value = _shown(data[key])  # over several lines: the parser's reading
        else:
            value = inline[:MAX_VALUE_CHARS]
        above = []
        k = n - 1
        while k >= 0 and lines[k].lstrip().startswith("#"):
            above.insert(0, lines[k].lstrip("# ").strip())
            k -= 1
        trailing = rest.split("#", 1)[1] if "#" in rest and not inline.endswith("#") else ""
        offered = _offered(trailing, key) or _offered(" ".join(above), key)
        # `key: ""` written so, or read so by the parser: a value (off), where `key:` with a block below is none
        empty = value == "" and (rest.split("#", 1)[0].strip() in ('""', "''")
                                 or isinstance(data, dict) and data.get(key) == "")
        out.append({"key": key, "line": n + 1, "value": value, "offered": offered,
                    **({"empty": True} if empty else {})})
    return out
