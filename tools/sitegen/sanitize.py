"""The last line against script from ingested content: every wiki page's HTML passes an allow-list sanitizer.

Escaping in ``tools.mdtext`` keeps generated markdown meaning what it says; this guarantees that no page under
``wiki/`` (generated, written by hand, or by an agent that read a hostile docstring) runs script in the published
site: no ``<script>``, no ``on*`` handler, no ``javascript:`` URL, no ``<iframe>``, no ``<style>``, whatever the
markdown holds (raw HTML, attribute lists ``{: onclick=...}``, ``md_in_html``). nh3 (the Rust ammonia library)
parses the HTML as a browser would, so mutation tricks (``<math><mtext><table><mglyph><style>``) do not survive.
The allow-list is what Python-Markdown and this site's extensions produce.
"""

from __future__ import annotations

import functools

TAGS = {
    "a", "abbr", "b", "blockquote", "br", "caption", "cite", "code", "col", "colgroup", "dd", "del", "details",
    "dfn", "div", "dl", "dt", "em", "figcaption", "figure", "h1", "h2", "h3", "h4", "h5", "h6", "hr", "i", "img",
    "ins", "kbd", "li", "mark", "ol", "p", "pre", "q", "s", "samp", "small", "span", "strong", "sub", "summary",
    "sup", "table", "tbody", "td", "tfoot", "th", "thead", "tr", "u", "ul", "var", "wbr",
}
COMMON_ATTRS = {"class", "id", "title", "align", "style", "lang", "dir"}
ATTRS = {
    "a": {"href", "name"}, "img": {"src", "alt", "width", "height", "loading"}, "td": {"colspan", "rowspan"},
    "th": {"colspan", "rowspan", "scope"}, "ol": {"start", "type"}, "details": {"open"}, "col": {"span"},
    "colgroup": {"span"}, "blockquote": {"cite"}, "q": {"cite"}, "del": {"cite", "datetime"},
    "ins": {"cite", "datetime"},
}
SCHEMES = {"http", "https", "mailto"}
STYLES = {"text-align"}  # Python-Markdown's tables align cells with it


@functools.lru_cache(maxsize=1)
def _cleaner():
    import nh3

    attrs = {tag: ATTRS.get(tag, set()) | COMMON_ATTRS for tag in TAGS}
    return nh3.Cleaner(tags=TAGS, attributes=attrs, url_schemes=SCHEMES, generic_attribute_prefixes={"data-"},
                       filter_style_properties=STYLES, link_rel=None, strip_comments=True)


def clean(html: str) -> str:
    """``html`` with everything outside the allow-list removed (script and style bodies dropped whole)."""
    return _cleaner().clean(html)
