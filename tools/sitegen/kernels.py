"""The kernel directory: wiki/kernels/**/*.md frontmatter as one sortable, filterable table.

Plain HTML inside the markdown page (readable without JavaScript, identical under MkDocs and
Zensical); assets/autoresearch/tables.js adds sorting and filtering. All ingested text is escaped.
"""

from __future__ import annotations

import html

from .links import Sources, page_url, rel_url
from .pages_view import SitePage

COLUMNS = ("repo", "backend", "category", "kind", "stability")  # filterable with a drop-down


def kernel_pages(pages: list[SitePage]) -> list[SitePage]:
    return [p for p in pages if p.type == "kernel" and p.rel.startswith("kernels/")]


def _e(v) -> str:
    return html.escape("" if v is None else str(v), quote=True)


def _count(n: int, one: str, many: str = "") -> str:
    return f"{n} {one if n == 1 else many or one + 's'}"


def directory_md(pages: list[SitePage], sources: Sources, src: str = "explore/kernels/index.md",
                 directory_urls: bool = True) -> str:
    """The markdown (with an HTML table) of the kernel directory page at ``src``."""
    kernels = sorted(kernel_pages(pages), key=lambda p: (str(p.meta.get("repo")), p.title.lower()))
    here = page_url(src, directory_urls)
    head = ["---", "title: Kernel directory", "hide: [toc]", "---", "", "# Kernel directory", ""]
    if not kernels:
        return "\n".join(head + ["No kernel pages under `wiki/kernels/` yet: `tools ingest raw/code/<slug>` writes them.",
                                 ""])
    values = {c: sorted({str(p.meta.get(c) or "") for p in kernels} - {""}) for c in COLUMNS}
    local = sorted({str(p.meta.get("repo")) for p in kernels if not sources.kernel_source(p.meta)[1]})
    note = (f" Sources of {', '.join(_e(r) for r in local)} are plain paths: a local tree (no remote recorded), "
            "and raw/ is not published with the site." if local else "")
    out = head + [
        f'{_count(len(kernels), "kernel")} from {_count(len(values["repo"]), "repository", "repositories")}. '
        "Click a column to sort; type or pick to filter." + note, "",
        '<div class="arw-filters" data-arw-table="arw-kernels">',
        '<input type="search" class="arw-filter-text" placeholder="Filter kernels…" aria-label="Filter kernels">',
    ]
    for c in COLUMNS:
        opts = "".join(f'<option value="{_e(v)}">{_e(v)}</option>' for v in values[c])
        out.append(f'<select data-arw-col="{c}" aria-label="{c}"><option value="">all {c}</option>{opts}</select>')
    vendored = any(p.meta.get("vendored_from") for p in kernels)  # the column only when some kernel has one
    out += ['<span class="arw-count"></span>', "</div>", "",
            '<div class="arw-scroll"><table id="arw-kernels" class="arw-table">',
            "<thead><tr><th>Kernel (source)</th><th>Repository</th><th>Backend</th><th>Category</th><th>Kind</th>"
            "<th>Stability</th>" + ("<th>Vendored from</th>" if vendored else "")
            + "</tr></thead>", "<tbody>"]
    for p in kernels:
        m = p.meta
        href = rel_url(here, page_url("wiki/" + p.rel, directory_urls))
        plain, url = sources.kernel_source(m)
        line = m.get("line")  # the repository has its own column: the path inside it
        short = f"{m.get('path') or ''}" + (f":{line}" if isinstance(line, int) else "")
        shown = "/<wbr>".join(_e(part) for part in short.split("/"))  # wraps after a slash, never mid-name
        source = (f'<a href="{_e(url)}" title="{_e(plain)}"><code>{shown}</code></a>' if url
                  else f'<code title="{_e(plain)} (a local tree: raw/ is not published)">{shown}</code>')
        attrs = " ".join(f'data-{c}="{_e(m.get(c) or "")}"' for c in COLUMNS)
        out.append(
            f'<tr {attrs}><td class="arw-name"><a href="{_e(href)}">{_e(p.title)}</a>'
            f'<div class="arw-src">{source}</div></td>'
            f'<td class="arw-short">{_e(m.get("repo"))}</td><td class="arw-short">{_e(m.get("backend"))}</td>'
            f'<td>{_e(m.get("category"))}</td><td class="arw-short">{_e(m.get("kind"))}</td>'
            f'<td class="arw-short">{_e(m.get("stability"))}</td>'
            + (f'<td>{_e(m.get("vendored_from") or "")}</td>' if vendored else "") + "</tr>")
    out += ["</tbody>", "</table></div>", ""]
    return "\n".join(out)
