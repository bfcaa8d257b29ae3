"""The one escaping layer: text that came from ingested sources reaches markdown and HTML only through here.

One function per output context, so a new page type cannot forget one:

- ``escape``: inline markdown text (HTML escaped, markdown and attribute-list specials neutralised);
- ``prose``: the same for text written as markdown prose (an LLM's summary): its code spans stay code, and an
  underscore inside a word (``dots_with_no_batch_dims``, never emphasis) is left as it is;
- ``code``: an inline code span that survives any run of backticks and pipes inside table cells;
- ``url``: a link target (percent-encoded; a scheme other than http, https or mailto is refused);
- ``link``: ``[label](url)`` from an already-escaped label and a raw target;
- ``attr``: an HTML attribute value;
- ``tsv``: a field of a TSV file (``skipped.tsv``, ``symbols.tsv``);
- ``slugify``: a file name for a page, bounded in length (a hash keeps long names distinct).

YAML frontmatter is written by ``tools.pages.render`` with ``yaml.safe_dump``, which quotes whatever needs it.
The built site passes every page's HTML through ``tools.sitegen.sanitize`` as well: escaping here keeps the
markdown meaning what it says, the sanitizer guarantees no script whatever a page holds.
"""

from __future__ import annotations

import hashlib
import html
import math
import re
from urllib.parse import quote, urlsplit

_MD_SPECIAL = re.compile(r"([\\`*_\[\]|{}!#])")
_PROSE_SPECIAL = re.compile(r"([\\`*\[\]|{}!#]|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9]))")
_CODE_SPAN = re.compile(r"(`+)(?!`)(.+?)(?<!`)\1(?!`)")
_BACKTICKS = re.compile(r"`+")
_ESCAPED = re.compile(r"\\([!-/:-@\[-`{-~])")  # CommonMark: a backslash before ASCII punctuation is an escape
SAFE_SCHEMES = {"http", "https", "mailto"}
MAX_SLUG = 100
PROSE_LIMIT = 4000  # characters of one prose sentence read for code spans


def escape(text: str) -> str:
    """Inline text from a source: HTML escaped (a `<script>` shows as text), markdown specials neutralised."""
    text = " ".join(str(text).split())
    return _MD_SPECIAL.sub(r"\\\1", html.escape(text, quote=False))


def unescape(text: str) -> str:
    """Markdown backslash escapes undone, as CommonMark reads them (``snake\\_case`` is snake_case)."""
    return _ESCAPED.sub(r"\1", text) if "\\" in text else text


def prose(text: str) -> str:
    """Inline markdown prose from a writer we do not trust to be safe but do trust to mean its code spans."""
    text = " ".join(str(text).split())
    if len(text) > PROSE_LIMIT:  # the span search backtracks on a long line of lone backticks: plain escape then
        return escape(text)
    out, last = [], 0
    for m in _CODE_SPAN.finditer(text):
        out += [_PROSE_SPECIAL.sub(r"\\\1", html.escape(text[last:m.start()], quote=False)), code(m.group(2).strip())]
        last = m.end()
    out.append(_PROSE_SPECIAL.sub(r"\\\1", html.escape(text[last:], quote=False)))
    return "".join(out)


def code(text: str) -> str:
    """Inline code span: the fence is one backtick longer than the longest run inside, so no text closes it."""
    text = " ".join(str(text).split()).replace("|", "\\|")
    longest = max((len(m.group(0)) for m in _BACKTICKS.finditer(text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def block(text: str, info: str = "text") -> list[str]:
    """A fenced code block of ``text`` (lines, with the fences): the fence is one backtick longer than the longest
    run of backticks inside (at least three), so no line of the text (a program's log) can close it and write
    markdown of its own."""
    longest = max((len(m.group(0)) for m in _BACKTICKS.finditer(text)), default=0)
    fence = "`" * max(3, longest + 1)
    return [f"{fence}{info}", text, fence]


def url(target: str) -> str:
    """A markdown link target: characters that could end it or start markup percent-encoded; a ``javascript:``
    (or any scheme but http, https, mailto) target becomes ``#``."""
    target = str(target).strip()
    scheme = urlsplit(target).scheme if re.match(r"^[A-Za-z][A-Za-z0-9+.-]*:", target) else ""
    if scheme and scheme.lower() not in SAFE_SCHEMES:
        return "#"
    return quote(target, safe="/#:?=&%@+,;~-._!$'*")


def path_target(path: str) -> str:
    """A file's path as a link target for ``url``: the characters a path may hold that a URL reads otherwise
    (``%`` starts an escape, ``#`` a fragment, ``?`` a query) encoded first, so ``kern%20x.py`` links to itself."""
    return str(path).replace("%", "%25").replace("#", "%23").replace("?", "%3F")


def file_target(path: str) -> str:
    """A relative file path as a link target that names that file: URL characters encoded (``path_target``), and
    ``./`` in front when the first part holds a ``:`` (``note:x.md`` would read as a URL scheme)."""
    t = path_target(path)
    return url("./" + t if ":" in t.split("/", 1)[0] else t)


def link(label: str, target: str) -> str:
    return f"[{label}]({url(target)})"


def attr(text: str) -> str:
    """An HTML attribute value (quotes included in the escaping)."""
    return html.escape(" ".join(str(text).split()), quote=True)


def number(v, nd: int = 2, unit: str = "") -> str:
    """A figure for a page: ``nd`` decimals with thousands separators; a float too large or too small to read that
    way (``1e+308``, ``1.2e-06``) in three significant digits, so a run that reports a wild value does not print
    three hundred digits or round a real figure to ``0.00``. ``—`` when there is none."""
    if v is None or v == "" or isinstance(v, bool):
        return "—"
    if isinstance(v, float) and math.isfinite(v) and v and not 0.5 * 10 ** -nd <= abs(v) < 1e15:
        return f"{v:.3g}{unit}"
    if isinstance(v, (int, float)):
        return f"{v:,.{nd}f}{unit}"
    return f"{v}{unit}"


def slugify(text: str) -> str:
    """A page file name from any text: ``[A-Za-z0-9._-]`` only, at most ``MAX_SLUG`` characters."""
    s = re.sub(r"[^A-Za-z0-9._-]+", "-", str(text)).strip("-.").lower() or "page"
    if len(s) > MAX_SLUG:  # a name of 250 bytes makes file names the file system refuses
        s = s[: MAX_SLUG - 11].rstrip("-.") + "-" + hashlib.sha1(str(text).encode()).hexdigest()[:10]
    return s


def tsv(text) -> str:
    """A TSV field: backslash, tab, newline and carriage return written as ``\\``, ``\t``, ``\n``, ``\r``, so a
    file named ``a\tb`` cannot forge a column or a row."""
    return (str(text).replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r"))


def drop_spans(text: str, start: str, end: str) -> str:
    """``text`` without its ``start ... end`` spans (an unclosed one is kept): linear, unlike ``start.*?end``
    with re.S, which rescans to the end of the text from every unclosed ``start``."""
    out, i = [], 0
    while (j := text.find(start, i)) != -1:
        k = text.find(end, j + len(start))
        if k == -1:
            break
        out.append(text[i:j])
        i = k + len(end)
    out.append(text[i:])
    return "".join(out)


def table(headers: list[str], rows: list[list[str]]) -> str:
    if not rows:
        return ""
    out = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out) + "\n"
