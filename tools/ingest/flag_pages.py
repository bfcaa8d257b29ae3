"""A codebase's compiler flags: every XLA/LIBTPU/megascale flag in every form it is written in, ranked by sites,
with the value most sites give and the function that sets it; the overview's table (the first 60), the full list
on ``codebases/<slug>/flags.md``, and the module-level bundles that hold several flags."""

from __future__ import annotations

import re
from collections import Counter, defaultdict

from .. import mdtext
from ..pages import Page, region
from .analyze import RepoModel
from .paths import is_bench_or_config, is_test, rel_link

FLAGS_SHOWN = 60
BUNDLES_SHOWN = 20
COLUMNS = ["Flag", "Value", "Sites", "Files", "Set in", "Example"]
_FLAG = re.compile(r"""--?((?:xla|libtpu|tpu|megascale)_[a-z0-9_]+)(?:=([^\s'"]+))?""")


def flag_counts(occ, spans: dict | None = None) -> list[tuple]:
    """(flag, sites, files, example site, most used value, where it is set) for every XLA/LIBTPU/megascale flag,
    most used first. A flag counts as written (``--xla_...``, with its ``=value``) or as a keyword or dict key
    (``xla_tpu_...=``, ``{"xla_tpu_...": ...}``); a line that merely mentions ``XLA_FLAGS`` is not a flag. The
    example is a library site when there is one (tests, benchmarks and configs after); ``spans`` (file -> the
    ``[qualname, first, last]`` of its functions) names the function that sets it."""
    sites: dict[str, list[tuple[str, int]]] = defaultdict(list)
    values: dict[str, Counter] = defaultdict(Counter)
    for rel, line, label in occ:
        m = _FLAG.search(label)
        if m:
            flag = "--" + m.group(1)
            sites[flag].append((rel, line))
            if m.group(2) is not None:
                values[flag][m.group(2)] += 1
    out = []
    for flag, where in sites.items():
        example = min(where, key=lambda s: (is_test(s[0]) or is_bench_or_config(s[0]), s))
        value = values[flag].most_common(1)[0][0] if values[flag] else ""
        out.append((flag, len(where), len({r for r, _ in where}), example, value,
                    _setter(example, (spans or {}).get(example[0]) or ())))
    return sorted(out, key=lambda f: (-f[1], f[0]))


def _setter(site: tuple[str, int], spans) -> str:
    """The innermost function holding ``site``, else its file."""
    rel, line = site
    inside = [s for s in spans if s[1] <= line <= s[2]]
    return min(inside, key=lambda s: s[2] - s[1])[0] if inside else rel.rsplit("/", 1)[-1]


def _rows(flags, link) -> list[list[str]]:
    return [[mdtext.code(flag), mdtext.code(value) if value else "—", str(n), str(files), mdtext.code(setter),
             f"[{mdtext.code(f'{rel}:{line}')}]({link(rel, line)})"]
            for flag, n, files, (rel, line), value, setter in flags]


def spans_of(model: RepoModel) -> dict:
    return {rel: r.facts.get("spans") or () for rel, r in model.scan.files.items()}


def flags_path(slug: str) -> str:
    return f"codebases/{slug}/flags.md"


def flags_section(model: RepoModel, occ, link, slug: str, from_page: str) -> str:
    """The overview's flag table (the first 60, the rest linked on ``flags.md``) and its flag bundles."""
    flags = flag_counts(occ, spans_of(model))
    if not flags:
        return "_No `--xla_...` flags: only mentions of `XLA_FLAGS` / `LIBTPU_INIT_ARGS`._\n"
    out = [f"{len(flags)} distinct flags, most used first (written as `--flag` strings or as keyword and dict "
           "keys; the value most sites give).\n", mdtext.table(COLUMNS, _rows(flags[:FLAGS_SHOWN], link))]
    if len(flags) > FLAGS_SHOWN:
        out.append(f"… and {len(flags) - FLAGS_SHOWN} more: [all {len(flags)} flags]"
                   f"({rel_link(from_page, flags_path(slug))}).\n")
    bundles = sorted(((rel, *b) for rel, r in model.scan.files.items() for b in r.facts.get("flag_bundles") or ()),
                     key=lambda b: (-b[3], b[0], b[2]))
    if bundles:
        shown = ", ".join(f"[{mdtext.code(name)}]({link(rel, line)}) ({n} flags)"
                          for rel, name, line, n in bundles[:BUNDLES_SHOWN])
        out.append(f"Flag bundles ({len(bundles)}: module-level names holding several flags): {shown}"
                   + (" …" if len(bundles) > BUNDLES_SHOWN else "") + ".\n")
    return "\n".join(out)


def flags_page(slug: str, model: RepoModel, links, overview: str) -> Page | None:
    """Every flag of the repository with its counts, when there are more than the overview shows."""
    flags = flag_counts(model.surfaces.get("xla-flags", []), spans_of(model))
    if len(flags) <= FLAGS_SHOWN:
        return None
    path = flags_path(slug)
    link = links.for_page(path)
    body = (f"# {slug}: XLA and LIBTPU flags\n\n## Performance-relevant surfaces\n\n"
            + region("flags", f"{len(flags)} distinct flags, most used first; back to the "
                              f"[{slug} overview]({rel_link(path, overview)}).\n\n"
                     + mdtext.table(COLUMNS, _rows(flags, link))))
    return Page(path, {"title": f"{slug}: XLA and LIBTPU flags", "type": "codebase", "tags": ["codebase", "xla-flags"],
                       "repo": slug, "path": f"raw/code/{slug}"}, body)
