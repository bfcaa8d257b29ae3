"""A source page's LLM summary renders as written: its code spans as code, snake_case names whole, and nothing it
holds becomes markup, a link or a tag (rendered with the site's own markdown engine)."""

from __future__ import annotations

import markdown

from tools import mdtext
from tools.sources.summary import markdown as summary_markdown

EXTENSIONS = ["tables", "attr_list", "md_in_html", "admonition", "pymdownx.superfences"]


def render(text: str) -> str:
    return markdown.markdown(text, extensions=EXTENSIONS)


def test_code_spans_and_snake_case_render_as_written():
    summary = {"sentences": [{"text": "Remat with `jax.checkpoint` and dots_with_no_batch_dims_saveable cut memory "
                                      "by 40 % [p. 2].", "where": ["p. 2"]}], "model": "m", "dropped": 0}
    page = summary_markdown(summary)
    assert "dots_with_no_batch_dims_saveable" in page and "\\_" not in page.split("\n")[0]  # readable as markdown
    html = render(page)
    assert "<code>jax.checkpoint</code>" in html and "dots_with_no_batch_dims_saveable" in html
    assert "`" not in html and "\\" not in html  # nothing shows literally


def test_prose_stays_inert():
    hostile = "_emphasis_ **bold** [link](javascript:alert(1)) <script>x</script> {: onclick=1} `<img src=x>` ``a`b``"
    html = render(mdtext.prose(hostile))
    assert "<em>" not in html and "<strong>" not in html and "<a " not in html and "<script>" not in html
    assert "<img" not in html and 'onclick="' not in html and "{: onclick=1}" in html  # the attribute list is text
    assert "<code>&lt;img src=x&gt;</code>" in html and "<code>a`b</code>" in html
    assert mdtext.prose("`" * 5000) == mdtext.escape("`" * 5000)  # past the limit: plain escaping
