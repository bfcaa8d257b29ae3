"""tools lint on what a user's wiki held: links written with spaces, links through symlinks, non-UTF-8 pages,
headings in admonitions and list items, markdown inside raw HTML blocks. Checked through the CLI's JSON."""

from __future__ import annotations

import json

from .conftest import page, write


def lint_json(invoke, kb) -> dict:
    return json.loads(invoke("lint", "--json", root=kb.root).output)


def found(report: dict, code: str) -> list[tuple[str, str]]:
    return sorted((i["path"], i["message"]) for i in report["problems"] if i["code"] == code)


def test_a_link_with_unencoded_spaces_is_checked_as_markdown_reads_it(kb, invoke):
    """Python-Markdown renders `[x](missing page.md)` as `<a href="missing page.md">`: a broken link, not text;
    and a page linked that way is no orphan."""
    write(kb.wiki, "concepts/a.md", page("A", "concept", "# A\n\n[x](missing page.md) [y](My Missing Page.md)\n"
                                         '[b](b page.md "its title") [c](<c page.md>) [d](d.md)\n'))
    for name in ("b page", "c page", "d"):
        write(kb.wiki, f"concepts/{name}.md", page(name, "concept", "# P\n\n[a](a.md)\n"))
    report = lint_json(invoke, kb)
    assert found(report, "broken-link") == [
        ("wiki/concepts/a.md", "My Missing Page.md -> wiki/concepts/My Missing Page.md does not exist"),
        ("wiki/concepts/a.md", "missing page.md -> wiki/concepts/missing page.md does not exist"),
    ]
    assert found(report, "orphan") == []


def test_a_link_through_a_symlink_out_of_the_wiki_is_an_outside_link_not_a_broken_one(kb, invoke, tmp_path):
    """The scan does not follow a symlink out of wiki/, so its files are not in the scan: that they exist is
    never asked (docs/lint.md), and calling them missing was a false error."""
    outside = write(tmp_path, "elsewhere/secrets/passwd", "x\n").parent
    (kb.wiki / "concepts/etc").symlink_to(outside, target_is_directory=True)
    (kb.wiki / "concepts/host.md").symlink_to(write(tmp_path, "elsewhere/hostname", "h\n"))
    write(kb.wiki, "concepts/t.md", page("T", "concept", "# T\n\n[a](etc/passwd) [b](host.md) [c](gone.md)\n"))
    report = lint_json(invoke, kb)
    assert found(report, "outside-link") == [
        ("wiki/concepts/t.md", "etc/passwd -> wiki/concepts/etc/passwd: leaves the project (not checked)"),
        ("wiki/concepts/t.md", "host.md -> wiki/concepts/host.md: leaves the project (not checked)"),
    ]
    assert found(report, "broken-link") == [("wiki/concepts/t.md", "gone.md -> wiki/concepts/gone.md does not exist")]


def test_a_link_on_a_page_that_is_not_utf8_is_not_said_fixable(kb, invoke):
    """--fix writes UTF-8 pages only: a wikilink on a Latin-1 page was "fixable with --fix" on every run."""
    write(kb.wiki, "concepts/t.md", page("T", "concept", "# T\n\n[l](latin.md)\n"))
    write(kb.wiki, "concepts/latin.md", page("L", "concept", "# caf\xe9\n\n[[T]]\n").encode("latin-1"))
    invoke("lint", "--fix", root=kb.root)
    wikilinks = [i for i in lint_json(invoke, kb)["problems"] if i["code"] == "wikilink"]
    assert [(i["path"], i["fixable"]) for i in wikilinks] == [("wiki/concepts/latin.md", False)]
    assert wikilinks[0]["message"].endswith("(not fixable: the page is not UTF-8; save it as UTF-8 first)")


def test_index_lists_a_page_that_is_not_utf8_by_its_frontmatter_title_and_says_so(kb, invoke):
    """A Latin-1 page was listed by its first heading with its frontmatter in its summary, as "invalid frontmatter";
    its frontmatter is read from the replacement-decoded text, and the listing says what is wrong."""
    write(kb.wiki, "concepts/latin.md", page("L", "concept", "# caf\xe9\n\nCaf\xe9 notes.\n").encode("latin-1"))
    invoke("index", root=kb.root)
    line = next(ln for ln in (kb.wiki / "index.md").read_text(encoding="utf-8").splitlines() if "latin.md" in ln)
    assert line == "- [L](concepts/latin.md) (not UTF-8) — Caf\ufffd notes."


def test_headings_in_an_admonition_or_a_list_item_are_anchors_but_indented_code_is_not(kb, invoke):
    """MkDocs' toc gives `## Known issues` inside `!!! warning` and `- ## In list` ids: linking them was a
    broken-anchor warning. A `## line` in an indented code block, or indented under an item's text, is none."""
    body = "\n".join(["# T", "", "!!! warning", "    ## Known issues", "", "- ## In list", "", "- item", "",
                      "    ## Continued", "", "Text:", "", "    ## In code", "", "- item", "    ## lazy line"])
    write(kb.wiki, "concepts/t.md", page("T", "concept", body))
    links = " ".join(f"[{a}](t.md#{a})" for a in ("known-issues", "in-list", "continued", "in-code", "lazy-line"))
    write(kb.wiki, "concepts/u.md", page("U", "concept", f"# U\n\n{links}\n"))
    assert found(lint_json(invoke, kb), "broken-anchor") == [
        ("wiki/concepts/u.md", "t.md#in-code: no such heading or id in wiki/concepts/t.md"),
        ("wiki/concepts/u.md", "t.md#lazy-line: no such heading or id in wiki/concepts/t.md"),
    ]


def test_markdown_inside_a_raw_html_block_is_text_unless_the_block_says_markdown(kb, invoke):
    """Python-Markdown (md_in_html, which tools init turns on) leaves a <div> or <details> at a line's start as
    raw HTML up to its closing tag: `[rawhtml](i.md)` in it is shown as written, no link to check. With a
    `markdown` attribute its content is Markdown; after the closing tag, and in a commented-out <div>, too."""
    body = "\n".join(["# T", "", "<div>", "[rawhtml](i.md)", "", "</div>", "", "<details>", "<summary>S</summary>",
                      "", "[details](d.md)", "</details>", "", '<div markdown="1">', "[md](gone-md.md)", "</div>",
                      "", "<!--", "<div>", "-->", "[after](gone-after.md)"])
    write(kb.wiki, "concepts/t.md", page("T", "concept", body))
    assert [m for _, m in found(lint_json(invoke, kb), "broken-link")] == [
        "gone-after.md -> wiki/concepts/gone-after.md does not exist",
        "gone-md.md -> wiki/concepts/gone-md.md does not exist",
    ]


def test_review_an_html_id_in_a_raw_block_is_an_anchor_and_titles_follow_python_markdown():
    """Once <div>, <p> and <h2> blocks were raw, their ids were no anchors (false broken-anchor warnings for
    `a.md#results`); a title after a line of spaces was lost, and `   # Indented` (no heading to Python-Markdown)
    became one."""
    from tools import mdscan

    assert mdscan.anchors('<div id="results" markdown="0">\ncontent\n</div>\n') == {"results"}
    assert mdscan.anchors('<p align="center"><a id="logo"></a></p>\n') == {"logo"}
    assert mdscan.anchors("```\n<div id=\"code\">\n```\n<!-- <div id=\"gone\"> -->\n") == set()
    assert mdscan.first_block_heading("   \n# Real Title\n") == "Real Title"
    assert mdscan.first_block_heading("   # Indented\n") is None
