"""Facts about one Python file, from its AST alone: symbols, imports, entry points, surfaces.

Pure: text in, a JSON-ready dict out. Nothing is imported or executed.
"""

from __future__ import annotations

import ast
import functools
import re

from .. import pysource
from ..concepts import CONCEPTS
from . import dispatch

_MAIN_GUARD = re.compile(r"""__name__\s*==\s*['"]__main__['"]""")
# One pass over all concepts' patterns first: most names match none, and then the loop is skipped.
_ANY_NAME = re.compile("|".join(f"(?:{c.name_re.pattern})" for c in CONCEPTS.values() if c.name_re))
_ANY_STRING = re.compile("|".join(f"(?:{c.string_re.pattern})" for c in CONCEPTS.values() if c.string_re))


def module_name(relpath: str) -> tuple[str, bool]:
    """'pkg/sub/mod.py' -> ('pkg.sub.mod', False); 'pkg/__init__.py' -> ('pkg', True)."""
    parts = relpath[:-3].split("/") if relpath.endswith(".py") else relpath.split("/")
    is_pkg = parts[-1] == "__init__"
    if is_pkg:
        parts = parts[:-1]
    return ".".join(p for p in parts if p), is_pkg


def _first_line(doc: str | None) -> str:
    if not doc:
        return ""
    for line in doc.strip().splitlines():
        if line.strip():
            return line.strip()
    return ""


_SKIP_FIELDS = {"ctx", "op", "ops", "type_comment"}  # leaves that never hold names or strings
_FIELDS: dict[type, tuple[str, ...]] = {}


def _nodes(root: ast.AST) -> list[ast.AST]:
    """Every node under root, breadth first; ~1.4x faster than ast.walk on large files."""
    out, i, AST = [root], 0, ast.AST
    while i < len(out):
        node = out[i]
        i += 1
        fields = _FIELDS.get(node.__class__)
        if fields is None:
            fields = _FIELDS[node.__class__] = tuple(f for f in node._fields if f not in _SKIP_FIELDS)
        for name in fields:
            v = getattr(node, name, None)
            if v.__class__ is list:
                out.extend(x for x in v if isinstance(x, AST))
            elif isinstance(v, AST):
                out.append(v)
    return out


def _absolute(module: str, is_pkg: bool, level: int, mod: str | None) -> str:
    if not level:
        return mod or ""
    base = module.split(".") if module else []
    if not is_pkg:
        base = base[:-1]
    if level > 1:
        base = base[: max(0, len(base) - (level - 1))]
    return ".".join([*base, mod] if mod else base)


_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")


def snake(name: str) -> str:
    """``RingAttention`` -> ``ring_attention``, ``MLAFlashAttn`` -> ``mla_flash_attn``: a class name as the
    concepts' name patterns spell things."""
    return _CAMEL.sub("_", name).lower()


@functools.lru_cache(maxsize=65536)
def _concepts_for_name(full: str, definition: bool) -> tuple[str, ...]:
    target = full.rsplit(".", 1)[-1] if definition else full
    head, _, last = target.rpartition(".")
    targets = [target]
    if last != last.lower():  # a CamelCase class: its snake_case spelling too
        targets.append(f"{head}.{snake(last)}" if head else snake(last))
    if not any(_ANY_NAME.search(t) for t in targets):
        return ()
    return tuple(c.slug for c in CONCEPTS.values() if c.name_re and any(c.name_re.search(t) for t in targets))


_LAYER_STACK = re.compile(r"layer|block|decoder|encoder|transformer|stage|stack", re.I)


def _plain_scans(nodes: list[ast.AST], aliases: dict[str, str]) -> set[int]:
    """Lines of ``lax.scan`` calls that do not run a stack of layers (a loop over time steps, pages, chunks):
    neither the scanned function, the call's other arguments nor the functions it is in name layers, blocks,
    stages or a stack."""
    scans = []
    for node in nodes:
        if isinstance(node, ast.Call):
            dotted = pysource.dotted_name(node.func) or ""
            head, _, rest = dotted.partition(".")
            full = f"{aliases.get(head, head)}.{rest}" if rest else aliases.get(head, head)
            if full in ("jax.lax.scan", "lax.scan"):
                scans.append(node)
    if not scans:
        return set()
    around: dict[int, str] = {}  # id(call) -> the names of the functions it is in
    wanted = {id(n) for n in scans}
    for node in nodes:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for sub in ast.walk(node):
                if id(sub) in wanted:
                    around[id(sub)] = around.get(id(sub), "") + " " + node.name
    out = set()
    for node in scans:
        try:
            text = " ".join(ast.unparse(a) for a in [*node.args[:1], *(k.value for k in node.keywords)])
        except Exception:  # noqa: BLE001 - a repaired tree
            continue
        if not _LAYER_STACK.search(text + around.get(id(node), "")):
            out.add(node.func.lineno)
    return out


def _symbols(tree: ast.Module, parsed: pysource.Parsed) -> list[list]:
    """Module-level classes and functions, and the methods of those classes; definitions under a module-level or
    class-level ``if``/``try``/``with`` count too (``if TYPE_CHECKING:``, a fallback in ``except ImportError:``), the
    first definition of a name only."""
    out, seen = [], set()
    defs = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)

    def kind(node, in_class):
        if isinstance(node, ast.ClassDef):
            return "class"
        base = "method" if in_class else "function"
        return ("async " + base) if isinstance(node, ast.AsyncFunctionDef) else base

    def add(node, qual, in_class):
        if qual not in seen:
            seen.add(qual)
            out.append([qual, kind(node, in_class), parsed.file_line(node.lineno),
                        _first_line(ast.get_docstring(node, clean=False))])

    for node in _defined(tree.body):
        add(node, node.name, False)
        if isinstance(node, ast.ClassDef):
            for sub in _defined(node.body):
                add(sub, f"{node.name}.{sub.name}", True)
    return out


def _defined(body: list[ast.stmt]):
    """The functions and classes a body defines: its own, and those under its ``if``, ``try`` and ``with`` blocks
    (a definition in a loop or a function is not the module's)."""
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            yield node
        elif isinstance(node, (ast.If, ast.Try, ast.With, ast.AsyncWith)) or type(node).__name__ == "TryStar":
            blocks = [node.body, getattr(node, "orelse", []), getattr(node, "finalbody", [])]
            blocks += [h.body for h in getattr(node, "handlers", [])]
            for block in blocks:
                yield from _defined(block)


def _spans(tree: ast.Module, parsed: pysource.Parsed) -> list[list]:
    """[qualified name, first line, last line] of every function and method (nested ones included), so a
    surface can be attributed to the function that holds it."""
    out = []

    def visit(body, prefix):
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                qual = f"{prefix}{node.name}"
                if not isinstance(node, ast.ClassDef):
                    out.append([qual, parsed.file_line(node.lineno), parsed.file_line(node.end_lineno or node.lineno)])
                visit(node.body, qual + ".")
    visit(tree.body, "")
    return out


# A compiler option as a keyword or dict key: three words at least, and not a parameter that holds flags
# (`xla_flags=`, `libtpu_init_args=`).
FLAG_KEY = re.compile(r"^(?:xla|megascale|libtpu)_[a-z0-9]+_[a-z0-9_]+$(?<!_flags)(?<!_args)")


def _flag_label(key: str, value: ast.AST | None) -> str:
    """``--key=value`` for an option given as a keyword or dict key (its value when it is a constant)."""
    if isinstance(value, ast.Constant) and isinstance(value.value, (str, int, float, bool)):
        shown = str(value.value).lower() if isinstance(value.value, bool) else str(value.value)
        return f"--{key}={shown}"[:80]
    return f"--{key}"[:80]


def _line_holding(lines: list[str], node: ast.Constant, text: str) -> int:
    """The line of a string literal that spans lines (implicit concatenation, triple quotes) holding ``text``."""
    end = getattr(node, "end_lineno", None) or node.lineno
    if end > node.lineno:
        for n in range(node.lineno, min(end, len(lines)) + 1):
            if text in lines[n - 1]:
                return n
    return node.lineno


def _scan(tree: ast.Module, parsed: pysource.Parsed, module: str, is_pkg: bool):
    """One walk over the tree: imports, aliases and concept hits."""
    aliases: dict[str, str] = {}
    imports: set[str] = set()
    nodes = _nodes(tree)
    # Imports first (they may come after use in a function body, but names resolve by file).
    for node in nodes:
        if not isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        if isinstance(node, ast.Import):
            for a in node.names:
                imports.add(a.name)
                if a.asname:
                    aliases[a.asname] = a.name
                else:
                    root = a.name.split(".")[0]
                    aliases.setdefault(root, root)
        elif isinstance(node, ast.ImportFrom):
            mod = _absolute(module, is_pkg, node.level or 0, node.module)
            for a in node.names:
                if a.name == "*":
                    imports.add(mod)
                    continue
                full = f"{mod}.{a.name}" if mod else a.name
                aliases[a.asname or a.name] = full
                # `from a import b` imports a.b when b is a module, else a: the repo model decides.
                imports.add(full)

    hits: set[tuple[str, int, str]] = set()
    prose: set[int] = set()
    lines: list[str] = []  # the snippet's lines, split when a string literal spans several
    prefix = f"{module}." if module else ""
    for node in nodes:
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            prose.add(id(node.value))  # docstrings and bare strings are prose
        elif isinstance(node, (ast.Attribute, ast.Name)):
            if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
                continue
            dotted = pysource.dotted_name(node)
            if not dotted:
                continue
            head, _, rest = dotted.partition(".")
            base = aliases.get(head)
            if base is None:
                continue
            full = f"{base}.{rest}" if rest else base
            for slug in _concepts_for_name(full, False):
                hits.add((slug, parsed.file_line(node.lineno), full))
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            for slug in _concepts_for_name(prefix + node.name, True):
                hits.add((slug, parsed.file_line(node.lineno), f"def {node.name}"))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            # a config field: `sequence_parallelism: int = 1` in a dataclass or pydantic model
            for slug in _concepts_for_name(prefix + node.target.id, True):
                hits.add((slug, parsed.file_line(node.lineno), f"field {node.target.id}"))
        elif isinstance(node, ast.Dict):
            for k, v in zip(node.keys, node.values):
                if isinstance(k, ast.Constant) and isinstance(k.value, str) and FLAG_KEY.match(k.value):
                    hits.add(("xla-flags", parsed.file_line(k.lineno), _flag_label(k.value, v)))
        elif isinstance(node, ast.keyword):
            if node.arg and FLAG_KEY.match(node.arg):
                hits.add(("xla-flags", parsed.file_line(node.value.lineno), _flag_label(node.arg, node.value)))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            s = node.value
            if id(node) in prose or not any(_ANY_STRING.search(piece) for piece in pieces(s)):
                continue
            for c in CONCEPTS.values():
                if c.string_re is not None:
                    for m in (m for piece in pieces(s) for m in c.string_re.finditer(piece)):
                        if not lines and node.end_lineno != node.lineno:
                            lines = parsed.snippet.text.split("\n")
                        line = _line_holding(lines, node, m.group(0))
                        hits.add((c.slug, parsed.file_line(line), m.group(0)[:80]))
    plain = _plain_scans(nodes, aliases)
    if plain:
        hits = {h for h in hits if not (h[0] == "scan-over-layers" and h[2].endswith("lax.scan")
                                        and h[1] in {parsed.file_line(n) for n in plain})}
    # An attribute chain also yields its prefixes (aqt, aqt.jax, ...): drop a label that is a
    # dotted prefix of another label on the same line for the same concept.
    by_place: dict[tuple[str, int], set[str]] = {}
    for slug, line, label in hits:
        by_place.setdefault((slug, line), set()).add(label)
    kept = {(slug, line, label) for (slug, line), labels in by_place.items() for label in labels
            if not any(other.startswith(label + ".") for other in labels)}
    return imports, kept, aliases


def python_facts(relpath: str, data: bytes) -> dict:
    """Facts for a .py / .ipynb / markdown file. Raises pysource.Unreadable with the reason."""
    parsed_list = pysource.parse_file(relpath, data)
    is_py = relpath.endswith(".py")
    module, is_pkg = module_name(relpath) if is_py else (relpath, False)
    facts: dict = {"lang": "python" if is_py else ("notebook" if relpath.endswith(".ipynb") else "markdown"),
                   "module": module if is_py else None, "symbols": [], "imports": [], "surfaces": [],
                   "doc": "", "main": False, "lines": 0, "repaired": [], "errors": []}
    hits: set = set()
    imports: set = set()
    for parsed in parsed_list:
        facts["lines"] += parsed.snippet.text.count("\n") + 1
        if parsed.tree is None:
            facts["errors"].append(parsed.error)
            continue
        if parsed.repaired_lines:
            facts["repaired"].extend(parsed.repaired_lines)
            facts.setdefault("partial", parsed.note)
        imp, found, aliases = _scan(parsed.tree, parsed, module if is_py else "", is_pkg)
        hits |= found
        imports |= imp
        if is_py:
            facts["symbols"] = _symbols(parsed.tree, parsed)
            facts["spans"] = _spans(parsed.tree, parsed)
            bundles = _flag_bundles(parsed.tree, parsed, found)
            if bundles:
                facts["flag_bundles"] = bundles
            chooses = dispatch.dispatch_facts(parsed.tree, aliases, module, parsed.file_line)
            if chooses["branches"] or chooses["registries"]:
                facts["dispatch"] = chooses
            facts["doc"] = _first_line(ast.get_docstring(parsed.tree, clean=False))
            facts["main"] = any(isinstance(n, ast.If) and _MAIN_GUARD.search(ast.unparse(n.test))
                                for n in parsed.tree.body)
    facts["imports"] = sorted(imports)
    facts["surfaces"] = sorted(hits, key=lambda h: (h[1], h[0], h[2]))
    return facts


def _flag_bundles(tree: ast.Module, parsed: pysource.Parsed, hits) -> list[list]:
    """``[name, line, flags]`` for each module-level name bound to two or more compiler flags (a flag bundle:
    ``CF_FOR_ALL_GATHER = " --xla_...=true --xla_...=true"``, ``FLAGS = {"xla_tpu_...": "true", ...}``): code sets
    them by that name, so the name is what a reader searches for."""
    lines = sorted(line for slug, line, label in hits if slug == "xla-flags" and label.startswith("--"))
    out = []
    for node in tree.body:
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names = [t.id for t in targets if isinstance(t, ast.Name)]
            first, last = parsed.file_line(node.lineno), parsed.file_line(node.end_lineno or node.lineno)
            n = sum(1 for ln in lines if first <= ln <= last)
            if names and n >= 2:
                out.append([names[0], first, n])
    return out


_SETTING = re.compile(r"^\s*([\w.-]+)\s*[:=]\s*(.*?)\s*(?:#.*)?$")


def _config_label(matched: str, line: str) -> str:
    """A flag as written, or `key: value` for a setting (the value read from the whole line)."""
    matched = matched.strip()
    if matched.startswith("--") or not _SETTING.match(line):
        return matched.rstrip(":=").strip()[:80]
    key, rest = _SETTING.match(line).groups()
    if rest[:1] in "[{":  # a YAML flow list or map: the whole of it, not its opening bracket
        close = {"[": "]", "{": "}"}[rest[0]]
        end = rest.find(close)
        value = rest[: end + 1] if end != -1 else rest
    else:
        value = re.match(r"""['"]?([^\s'"\\]*)""", rest).group(1)  # the first token: shell lines go on
    return f"{key}: {value}"[:80] if value else key[:80]


PIECE = 2000  # characters the patterns read at once: a longer line is read in pieces cut at whitespace


def pieces(line: str, size: int = PIECE) -> list[str]:
    """``line`` cut at whitespace into pieces of about ``size`` characters: a 40-flag ``LIBTPU_INIT_ARGS="..."`` on one
    line is read flag by flag (it was skipped whole), and no pattern ever reads a line of megabytes at once."""
    if len(line) <= size:
        return [line]
    out, start = [], 0
    while start < len(line):
        end = start + size
        if end < len(line):
            cut = line.rfind(" ", start + size // 2, end)
            end = cut if cut != -1 else end
        out.append(line[start:end])
        start = end
    return out


def config_facts(relpath: str, text: str) -> dict:
    """Surfaces in a config or shell file: XLA flags, parallelism axes, remat and attention settings."""
    hits = set()
    for n, whole in enumerate(text.splitlines(), 1):
        for line in pieces(whole):
            for c in CONCEPTS.values():
                if c.config_re is None:
                    continue
                for m in c.config_re.finditer(line):
                    hits.add((c.slug, n, _config_label(m.group(0), line)))
    out = {"lang": "config", "surfaces": sorted(hits, key=lambda h: (h[1], h[0], h[2])),
           "lines": text.count("\n") + 1}
    if relpath.endswith((".yml", ".yaml")):
        from .yaml_settings import settings

        out["settings"] = settings(text)
    return out
