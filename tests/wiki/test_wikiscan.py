"""wikiscan and mdscan: the shared reader of wiki pages and what one markdown body holds."""

from __future__ import annotations

import pytest

from tools import mdscan, pages, wikiscan
from tools.mdscan import extract_links

from .conftest import write


@pytest.mark.parametrize("text", [
    "no frontmatter\n",
    "---\ntitle: A\ntype: concept\n---\nbody\n",
    "---\n---\nempty meta\n",
    "---\r\ntitle: crlf\r\n---\r\nbody\r\n",
    "---\ntitle: x\ncreated: 2026-01-02\ntags: [a, 1]\n...\nbody",
])
def test_split_agrees_with_pages_split(text):
    meta, body, _ = wikiscan.split(text)
    assert (meta, body) == pages.split(text)


@pytest.mark.parametrize("text", ["---\ntitle: [unclosed\n---\n", "---\n- a list\n---\n"])
def test_split_errors_like_pages_split(text):
    with pytest.raises(pages.FrontmatterError) as fast:
        wikiscan.split(text)
    with pytest.raises(pages.FrontmatterError) as slow:
        pages.split(text)
    assert str(fast.value) == str(slow.value)


def test_body_line_counts_frontmatter_lines():
    meta, body, line = wikiscan.split("---\na: 1\nb: 2\n---\nfirst body line\n")
    assert line == 5 and body.startswith("first body line")


def test_links_of_every_kind_with_lines():
    text = "\n".join([
        "[a](a.md) and ![img](img/x.png \"title\")",
        "[b](<with space.md>) [c](c.md#part)",
        "[[Wiki Page|label]] [d](d_(1).md)",
        "[ref]: ../ref.md",
        "<file:///tmp/x.md> <https://example.com>",
    ])
    got = [(link.target, link.line, link.kind) for link in extract_links(text, first_line=10)]
    assert got == [
        ("a.md", 10, "md"), ("img/x.png", 10, "md"),
        ("with space.md", 11, "md"), ("c.md#part", 11, "md"),
        ("d_(1).md", 12, "md"), ("Wiki Page|label", 12, "wiki"),
        ("../ref.md", 13, "ref"),
        ("file:///tmp/x.md", 14, "auto"), ("https://example.com", 14, "auto"),
    ]


def test_footnotes_and_task_lists_are_not_links():
    assert extract_links("[^1]: a footnote\n- [x] done: yes\n[^note]: x.md\n") == []


def test_links_in_code_are_ignored():
    text = "\n".join([
        "```python",
        "[no](fence.md)",
        "```",
        "~~~~",
        "[no](tilde.md)",
        "~~~",  # shorter than the opener: still inside
        "~~~~",
        "`[no](span.md)` and ``[[no]]`` but [yes](yes.md)",
        "````",
        "```",
        "[no](nested.md)",
        "````",
        "[last](last.md)",
    ])
    assert [(link.target, link.line) for link in extract_links(text)] == [("yes.md", 8), ("last.md", 13)]


def test_read_page_never_raises(tmp_path):
    bad_utf8 = write(tmp_path, "a.md", b"---\ntitle: caf\xe9\n---\n[x](y.md)\n")
    bad_yaml = write(tmp_path, "b.md", "---\ntitle: [oops\n---\n\n[x](y.md)\n")
    bom = write(tmp_path, "c.md", "\ufeff---\ntitle: C\n---\nbody\n")
    a = wikiscan.read_page(bad_utf8, "a.md")
    assert a.text is None and a.error.startswith("not UTF-8") and a.links[0].target == "y.md"
    b = wikiscan.read_page(bad_yaml, "b.md")
    assert b.meta is None and "invalid YAML" in b.error and b.links[0].line == 5 and b.body_line == 4
    c = wikiscan.read_page(bom, "c.md")
    assert c.meta == {"title": "C"} and c.error is None


def test_title_falls_back_to_heading_then_file_name(tmp_path):
    p = wikiscan.read_page(write(tmp_path, "x.md", "# Heading here\n"), "concepts/flash-attention.md")
    assert p.title == "Heading here"
    q = wikiscan.read_page(write(tmp_path, "y.md", "text\n"), "concepts/flash-attention.md")
    assert q.title == "flash attention" and q.folder_type == "concept"


def test_scan_walks_sorted_and_skips_hidden(tmp_path):
    write(tmp_path, "b.md", "b")
    write(tmp_path, "a/z.md", "z")
    write(tmp_path, "a/data.tsv", "x")
    write(tmp_path, ".hidden/h.md", "h")
    write(tmp_path, ".dot.md", "h")
    wiki = wikiscan.scan(tmp_path)
    assert [p.rel for p in wiki] == ["a/z.md", "b.md"]
    assert wiki.files == {"a/z.md", "a/data.tsv", "b.md"} and wiki.dirs == {"a"}
    assert wiki.by_rel["b.md"].body == "b"


def test_impossible_date_is_a_frontmatter_error_not_a_crash(tmp_path):
    p = wikiscan.read_page(write(tmp_path, "d.md", "---\ntitle: D\ncreated: 2026-13-45\n---\nx\n"), "d.md")
    assert p.meta is None and "month must be in 1..12" in p.error


def test_anchors_match_python_markdown_toc():
    markdown = pytest.importorskip("markdown")
    import re

    heads = ["Where it appears", "Where it appears", "`jax.checkpoint` and [remat](x.md)", "Ünïcode & stuff!",
             "A  --  b_c", "3.2 Results (v2)", "Performance-relevant surfaces", "What's *new*?"]
    text = "\n\n".join(f"## {h}" for h in heads)
    html = markdown.markdown(text, extensions=["toc"])
    assert mdscan.anchors(text) == set(re.findall(r'id="([^"]+)"', html))
    assert mdscan.anchors("## A {#custom}\n<a name=\"n\"></a>\n```\n## not\n```\n") == {"custom", "n"}


def test_scan_survives_symlink_loops_and_dangling_links(tmp_path):
    write(tmp_path, "a/p.md", "[x](../b.md)")
    (tmp_path / "a" / "loop").symlink_to(tmp_path / "a", target_is_directory=True)
    (tmp_path / "dangling.md").symlink_to(tmp_path / "nowhere.md")
    (tmp_path / "alias.md").symlink_to(tmp_path / "a" / "p.md")
    wiki = wikiscan.scan(tmp_path)
    assert [p.rel for p in wiki] == ["a/p.md", "alias.md"]


def test_parse_page_is_read_page_without_the_file(tmp_path):
    text = "\ufeff---\ntitle: T\nmodel: [llama, 7]\nrepo: ''\n---\n# H\n[a](b.md)\n"
    a = wikiscan.parse_page("x/a.md", text)
    b = wikiscan.read_page(write(tmp_path, "a.md", text), "x/a.md")
    assert (a.meta, a.body, a.body_line, a.links, a.error) == (b.meta, b.body, b.body_line, b.links, b.error)
    assert a.refs == [("model", "llama"), ("model", "7")]  # lists give one each, empty values none
    assert a.given_title == "T" and wikiscan.parse_page("a.md", "no title\n").given_title is None


def test_prose_view_keeps_links_after_a_backtick_in_a_comment_and_in_an_admonition():
    """A backtick inside a comment opens no code span past its `-->`, `<!--` inside a code span opens no comment,
    `<!-->` is a whole comment, and an admonition's indented body is prose (its links checked and rewritten)."""
    text = ("<!-- don't use ` here --> see [real](a.md) and `c` ok\n\n[also](b.md)\n\n<!-- later -->\n"
            "x <!--> [c](c.md) `<!--` [d](d.md) --> [e](e.md)\n\n!!! note\n    Intro.\n\n    Code at [f](f.md).\n"
            "\ntext\n\n    [code](x.md)\n")
    view = mdscan.prose_view(text)
    assert len(view) == len(text) and view.count("\n") == text.count("\n")
    assert [ln.target for ln in extract_links(text)] == ["a.md", "b.md", "c.md", "d.md", "e.md", "f.md"]


def test_md_link_spans_give_offsets_for_rewriting():
    text = "x [a `b`](t.md#h) ![i](p.png)\n```\n[no](c.md)\n```\n`[no](d.md)` [e](<f g.md>)\n"
    spans = list(mdscan.md_link_spans(text))
    assert [(t, tgt) for _, _, t, tgt in spans] == [("a `b`", "t.md#h"), ("i", "p.png"), ("e", "f g.md")]
    assert [text[s:e] for s, e, _, _ in spans] == ["[a `b`](t.md#h)", "[i](p.png)", "[e](<f g.md>)"]
    assert text[spans[1][0] - 1] == "!"  # an image


def test_link_target_helpers():
    assert mdscan.split_target("a%20b.md#x?y") == ("a b.md", "#x?y")
    assert mdscan.resolve("concepts/a.md", "../kernels/k.md") == "kernels/k.md"
    assert mdscan.resolve("a.md", "../raw/x.py") == "../raw/x.py"
    assert mdscan.resolve("concepts/a.md", "/models/m.md") == "models/m.md"
    assert mdscan.is_external("https://x.org") and mdscan.is_external("//cdn") and not mdscan.is_external("a.md")
    assert wikiscan.slug("Org/Repo Name") == "org-repo-name"


def test_heading_ids_are_the_ones_the_site_gives():
    """Checked against Python-Markdown's own toc on the same text: setext headings, a heading in a quote, inline HTML
    and entities in a heading, emphasis, a third `Dup` (toc counts `dup_1` up to `dup_2`), and no heading inside
    an HTML comment. Each differed: lint warned on the site's real ids and accepted ones it does not have."""
    import markdown

    from tools import mdscan

    body = "\n".join(["Setext Heading", "--------------", "", "Top", "===", "", "> ## Quoted heading", "",
                      '## With anchor <a id="x"></a>', "", "## _under_ score **bold**", "", "## Foo &amp; Bar", "",
                      "<!--", "## Commented heading", "-->", "", "## Dup", "", "## Dup", "", "## Dup_1", "",
                      "## snake_case_name", "", "## Using `jax.checkpoint` and [remat](r.md)", "", "Para", "text",
                      "---", ""])
    md = markdown.Markdown(extensions=["toc", "attr_list"])
    md.convert(body)

    def ids(tokens):
        for t in tokens:
            yield t["id"]
            yield from ids(t["children"])
    headings, _ = mdscan.headings(body)
    assert sorted(h.id for h in headings) == sorted(ids(md.toc_tokens))
    assert "commented-heading" not in mdscan.anchors(body) and "x" in mdscan.anchors(body)
    # code in a heading is as written (`__init__`, `<div>`, `a&amp;b`), and a `<!--` in code opens no comment
    for body in ("# The `__init__` method", "# `_private` helper", "# The `<div>` tag", "# `a&amp;b` x",
                 "See `<!--` markers\n\n# Later", "```\n<!-- open\n```\n\n## Next"):
        md = markdown.Markdown(extensions=["toc"])
        md.convert(body)
        assert sorted(h.id for h in mdscan.headings(body)[0]) == sorted(ids(md.toc_tokens)), body
