"""tools lint: each check, --fix, robustness on hand-written wikis."""

from __future__ import annotations

import json
import re

import pytest

from tools import lint, pages
from tools.lint import links as lint_links
from tools.mdscan import Link
from tools.wikiscan import scan

from .conftest import TODAY, page, write

EXP = dict(model="llama", lane="remat", status="in_progress")


def codes(project, **kw) -> list[tuple[str, int, str]]:
    return [(i.path, i.line, i.code) for i in lint.run(project, **kw).issues]


def linked(kb, *rels: str) -> None:
    """A hub page linking every page given, so none of them is an orphan."""
    body = "# Hub\n\n" + "".join(f"- [{r}]({r})\n" for r in (*rels, "analyses/hub2.md"))
    write(kb.wiki, "hub.md", page("Hub", "analysis", body))
    write(kb.wiki, "analyses/hub2.md", page("Hub 2", "analysis", "# Hub 2\n\n[hub](../hub.md)\n"))


def test_fresh_kb_is_clean(kb):
    report = lint.run(kb)
    assert report.issues == [] and report.ok and report.pages == 2


def test_broken_links_with_lines_and_what_is_ignored(kb):
    write(kb.root, "raw/code/jax/ops.py", "x = 1\n")
    write(kb.wiki, "concepts/a.md", page("A", "concept", "\n".join([
        "# A",
        "[ok](b.md) [anchor](b.md#sec) [only anchor](#top) [web](https://x.org/y.md) [mail](mailto:a@b.c)",
        "[raw file](../../raw/code/jax/ops.py#L1) [dir](../concepts/) [enc](b%20c.md)",
        "[gone](missing.md) `[code](nope.md)`",
        "```",
        "[fenced](nope.md)",
        "```",
        "![img](img/missing.png)",
        "[raw gone](../../raw/code/jax/gone.py)",
    ])))
    write(kb.wiki, "concepts/b.md", page("B", "concept", "# B\n\n[a](a.md)\n"))
    write(kb.wiki, "concepts/b c.md", page("B C", "concept", "# BC\n\n[a](a.md)\n"))
    issues = [i for i in lint.run(kb).issues if i.code == "broken-link"]
    assert [(i.line, i.message) for i in issues] == [
        (9, "missing.md -> wiki/concepts/missing.md does not exist"),
        (13, "img/missing.png -> wiki/concepts/img/missing.png does not exist"),
        (14, "../../raw/code/jax/gone.py -> raw/code/jax/gone.py does not exist"),
    ]
    assert str(issues[0]) == "wiki/concepts/a.md:9: broken-link: missing.md -> wiki/concepts/missing.md does not exist"


def test_links_in_comments_and_indented_code_are_not_links_but_a_lists_indented_paragraph_is(kb):
    """A hand-kept wiki comments out an old link and shows code by indenting it (`x = a[i](j)`): neither is a
    broken link. A paragraph indented four spaces inside a list (MkDocs' list continuation) is prose."""
    write(kb.wiki, "concepts/c.md", page("C", "concept", "\n".join([
        "# C", "", "<!-- old: [gone](gone.md) --> [ok](c.md)", "<!--", "[also gone](gone2.md)", "-->", "",
        "Example:", "", "    [in code](not-a-page.md)", "    x = a[i](j)", "", "- an item", "",
        "    [in the item](missing-item.md)", "", "Back to prose [missing](missing.md).",
    ])))
    issues = [(i.line, i.message.split(" ->")[0]) for i in lint.run(kb).issues
              if i.code == "broken-link" and i.path.endswith("concepts/c.md")]
    assert issues == [(20, "missing-item.md"), (22, "missing.md")], issues


def test_a_fence_in_a_list_item_or_an_admonition_is_code(kb):
    """A fenced block indented under a list item or an admonition (`!!! note`) is code to MkDocs: its `[x](y)` was
    a broken link (exit 1) and `--fix` rewrote a `[[page]]` inside it."""
    write(kb.wiki, "concepts/snake_case.md", page("Snake", "concept"))
    body = "\n".join(["# T", "", "1. Step:", "", "    ```python", '    x = "[lf](gone-listfence.md)"', "    ```", "",
                      '!!! note "Note"', "", "    ~~~", "    [af](gone-admonfence.md)", "    ~~~", "",
                      "- Example:", "", "    ```markdown", "    See [[snake_case]] here.", "    ```", "",
                      "Real [gone](gone-real.md)."])
    write(kb.wiki, "concepts/t.md", page("T", "concept", body))
    found = [(line, code) for path, line, code in codes(kb) if path.endswith("t.md") and "link" in code]
    assert found == [(body.split("\n").index("Real [gone](gone-real.md).") + 6, "broken-link")], found
    lint.run(kb, fix=True, today=TODAY)
    assert "    See [[snake_case]] here." in (kb.wiki / "concepts/t.md").read_text()


def test_an_escaped_bracket_is_no_link_and_an_escaped_target_is_read_as_markdown_reads_it(kb):
    """`\\[esc](gone.md)` renders as text (lint called it a broken link); `[snake](snake\\_case.md)` links
    `snake_case.md` (lint called it broken)."""
    write(kb.wiki, "concepts/snake_case.md", page("Snake", "concept"))
    write(kb.wiki, "concepts/a.md", page("A", "concept", "# A\n\nEscaped \\[esc](gone-escaped.md).\n"
                                                        "[snake](snake\\_case.md) and \\\\[two](gone-two.md)\n"))
    found = [(line, code) for path, line, code in codes(kb) if path.endswith("a.md") and "link" in code]
    assert found == [(9, "broken-link")], found  # only the link after an escaped backslash


def test_a_link_whose_text_runs_over_a_line_break_is_checked(kb):
    """`[the missing\npage](missing.md)`: markdown links it across the line break of its paragraph; lint read the
    page line by line and never saw the link (nor could a page linked only that way be found by backlinks)."""
    write(kb.wiki, "concepts/a.md", page("A", "concept", "# A\n\nSee [the missing\npage](missing-wrapped.md), "
                                                        "[ok](a.md) and [one](gone-one.md).\n"))
    found = sorted((line, code) for path, line, code in codes(kb) if path.endswith("a.md") and "link" in code)
    assert found == [(9, "broken-link"), (9, "broken-link")], found  # both on the line of their target
    from tools.mdscan import extract_links

    links = extract_links("See [a\nb](x.md) and [c](y.md)\nmore [d\ne](z.md)")
    assert sorted((ln.target, ln.line, ln.text) for ln in links) == [("x.md", 2, "a b"), ("y.md", 2, "c"),
                                                                   ("z.md", 4, "d e")]


def test_orphans_ignore_links_from_index_and_log(kb):
    write(kb.wiki, "concepts/lonely.md", page("Lonely", "concept"))
    write(kb.wiki, "concepts/x.md", page("X", "concept", "# X\n\n[y](y.md)\n"))
    write(kb.wiki, "concepts/y.md", page("Y", "concept", "# Y\n\n[x](x.md) [self](y.md)\n"))
    write(kb.wiki, "concepts/self.md", page("Self", "concept", "# S\n\n[me](self.md)\n"))
    write(kb.wiki, "concepts/index.md", page("Concepts", "index", "# C\n\n"))
    lint_index = kb.wiki / "index.md"
    lint_index.write_text(lint_index.read_text() + "\n[lonely](concepts/lonely.md)\n")
    orphans = sorted(i.path for i in lint.run(kb).issues if i.code == "orphan")
    assert orphans == ["wiki/concepts/lonely.md", "wiki/concepts/self.md"]


def test_frontmatter_problems_per_type(kb):
    write(kb.wiki, "experiments/remat/v001.md", page("E1", "experiment", status="running", verdict="maybe",
                                                      model="llama", lane="remat"))
    write(kb.wiki, "experiments/remat/v002.md", page("E2", "experiment", status="filed", verdict="supported",
                                                      model="llama", lane="remat"))
    write(kb.wiki, "kernels/k.md", page("K", "kernel", repo="jax", path="a.py", line="ten", backend="tpu",
                                        category="attention", kind="library"))
    write(kb.wiki, "concepts/t.md", page("T", "recipe"))
    write(kb.wiki, "concepts/listed.md", "---\ntitle: [a, b]\ntype: concept\n---\n\n# L\n")
    write(kb.wiki, "concepts/nofm.md", "# No frontmatter\n")
    write(kb.wiki, "concepts/bad.md", "---\ntitle: x\ntags: [a\n---\n")
    write(kb.wiki, "concepts/latin1.md", b"# caf\xe9\n")
    linked(kb, "experiments/remat/v001.md", "experiments/remat/v002.md", "kernels/k.md", "concepts/t.md",
           "concepts/listed.md",
           "concepts/nofm.md", "concepts/bad.md", "concepts/latin1.md")
    report = lint.run(kb)
    got = {(i.path.split("/")[-1], i.code, i.message) for i in report.issues}
    assert ("listed.md", "wrong-type", "title: must be text, not a list") in got
    assert ("v001.md", "invalid-value",
            "status: invalid value 'running' (expected one of in_progress, filed)") in got
    assert ("v001.md", "invalid-value",
            "verdict: invalid value 'maybe' (expected one of supported, refuted, inconclusive, invalid, crash, baseline, calibration)") in got
    assert ("v002.md", "no-metrics", "metrics: a supported experiment has no metrics") in got
    assert ("v001.md", "missing-section", "sections: missing section '## Setup'") in got
    assert ("k.md", "wrong-type", "line: expected int, got str") in got
    assert ("t.md", "unknown-type",
            "type: unknown type 'recipe' (expected one of " + ", ".join(lint.checks.pages.TYPES) + ")") in got
    assert ("nofm.md", "frontmatter-missing", "no frontmatter (--fix adds type 'concept')") in got
    assert any(p == "bad.md" and c == "frontmatter-invalid" for p, c, _ in got)
    assert any(p == "latin1.md" and c == "unreadable" for p, c, _ in got)
    lines = {i.message.split(":")[0]: i.line for i in report.issues if i.path.endswith("v001.md")}
    assert (lines["status"], lines["verdict"], lines["sections"]) == (4, 5, 1)  # lines of the keys
    assert not report.ok


def test_duplicate_experiment_ids_within_a_lane(kb):
    write(kb.wiki, "experiments/remat/v003-a.md", page("A", "experiment", **EXP))
    write(kb.wiki, "experiments/remat/v003-b.md", page("B", "experiment", **EXP))
    write(kb.wiki, "experiments/other/v003-c.md", page("C", "experiment", **{**EXP, "lane": "other"}))
    write(kb.wiki, "experiments/remat/x.md", page("X", "experiment", exp_id="v009", **EXP))
    write(kb.wiki, "experiments/remat/y.md", page("Y", "experiment", exp_id="v009", **EXP))
    dups = sorted((i.path, i.message) for i in lint.run(kb).issues if i.code == "duplicate-exp-id")
    assert [p for p, _ in dups] == ["wiki/experiments/remat/v003-a.md", "wiki/experiments/remat/v003-b.md",
                                   "wiki/experiments/remat/x.md", "wiki/experiments/remat/y.md"]
    assert dups[0][1] == "experiment id 'v003' in lane 'llama/remat' is also used by wiki/experiments/remat/v003-b.md"


def test_index_drift_detected_and_fixed(kb):
    write(kb.wiki, "concepts/a.md", page("A", "concept", "# A\n\n[b](b.md)\n"))
    write(kb.wiki, "concepts/b.md", page("B", "concept", "# B\n\n[a](a.md)\n"))
    report = lint.run(kb)
    drift = [i for i in report.issues if i.code == "index-drift"]
    assert [str(i) for i in drift] == ["wiki/index.md:28: index-drift: Concepts: index says 0, the wiki has 2"]
    assert drift[0].fixable
    fixed = lint.run(kb, fix=True)
    assert fixed.issues == [] and fixed.fixed == ["wiki/index.md: updated (2 pages)"]
    write(kb.wiki, "concepts/a.md", page("A renamed", "concept", "# A\n\n[b](b.md)\n"))
    assert codes(kb) == [("wiki/index.md", 13, "index-stale")]
    # a summary the writer redacts in the index: fixed once, then clean (it was stale after every --fix)
    write(kb.wiki, "concepts/a.md", page("A", "concept", "# A\n\nSet HF_TOKEN=hf_abcdefgh12345 first.\n\n[b](b.md)\n"))
    assert lint.run(kb, fix=True).fixed and codes(kb) == []
    assert "HF\\_TOKEN=[redacted]" in (kb.wiki / "index.md").read_text()


def test_missing_and_hand_written_index(kb):
    (kb.wiki / "index.md").unlink()
    assert codes(kb) == [("wiki/index.md", 0, "index-missing")]
    write(kb.wiki, "index.md", "# Home\n\n## Concepts (3)\n\nthings\n")
    assert codes(kb) == [("wiki/index.md", 1, "frontmatter-missing"), ("wiki/index.md", 3, "index-drift")]
    write(kb.wiki, "index.md", "---\ntitle: Home\ntype: index\n---\n# Home\n\n## Concepts (0)\n")
    assert codes(kb) == [("wiki/index.md", 1, "index-unmanaged")]
    assert lint.run(kb, fix=True).ok
    assert "# Home" in (kb.wiki / "index.md").read_text() and codes(kb) == []


def test_wikilinks_and_file_links_fixed(kb):
    target = kb.wiki / "concepts" / "flash-attention.md"
    write(kb.wiki, "concepts/flash-attention.md", page("Flash Attention", "concept",
                                                       "# F\n\n## Tiling\n\n[n](notes.md)\n"))
    write(kb.wiki, "concepts/dup.md", page("Twin", "concept"))
    write(kb.wiki, "models/dup.md", page("Twin", "model", model="m"))
    body = "\n".join([
        "# Notes",
        "See [[flash-attention]] and [[Flash Attention|flash]] and [[concepts/flash-attention#Tiling]].",
        "Ambiguous [[dup]], unknown [[nothing here]], code `[[flash-attention]]`.",
        f"Local [file](file://{target}) and <file://{target}> and [abs]({target}) and [root](/concepts/dup.md).",
        "[outside](file:///etc/passwd)",
    ])
    write(kb.wiki, "concepts/notes.md", page("Notes", "concept", body))
    before = lint.run(kb)
    assert sum(i.code == "wikilink" for i in before.issues) == 5
    assert [i.fixable for i in before.issues if i.code == "wikilink"] == [True, True, True, False, False]
    assert sum(i.code == "file-link" for i in before.issues) == 2  # same line, same message: one issue
    report = lint.run(kb, fix=True, today=TODAY)
    text = (kb.wiki / "concepts/notes.md").read_text()
    assert "See [flash-attention](flash-attention.md) and [flash](flash-attention.md) and " \
           "[concepts/flash-attention](flash-attention.md#tiling)." in text
    assert "Ambiguous [[dup]], unknown [[nothing here]], code `[[flash-attention]]`." in text
    assert ("Local [file](flash-attention.md) and [flash-attention.md](flash-attention.md) and "
            "[abs](flash-attention.md) and [root](dup.md).") in text
    assert text.startswith("---\ntitle: Notes\ntype: concept\n---\n")  # frontmatter bytes untouched
    remaining = {(i.line, i.code) for i in report.issues if i.path.endswith("notes.md")}
    assert remaining == {(8, "wikilink"), (10, "file-link")}
    assert len(report.fixed) == 8  # 7 links and the index
    log = (kb.wiki / "log.md").read_text()
    assert f"## [{TODAY}] lint --fix | wiki" in log and "- fixed 8: index 1, link 7" in log


def test_fixed_links_to_files_named_with_url_characters_link_to_themselves(kb):
    """`lint --fix` writes found paths as link targets: `kern%20x.md` (a `%` in a hand-kept name) was written as is
    and read back as `kern x.md`; `a b.md` ended the link at the space. Both are found after the fix."""
    write(kb.wiki, "concepts/kern%20x.md", page("Kern", "concept"))
    write(kb.wiki, "concepts/a b.md", page("A B", "concept"))
    write(kb.wiki, "concepts/q#1.md", page("Q", "concept"))
    write(kb.wiki, "concepts/notes.md", page("Notes", "concept", "# N\n\nSee [[kern%20x]] and [[a b]].\n"
                                                                 f"[q](file://{kb.wiki}/concepts/q%231.md#sec)\n"))
    lint.run(kb, fix=True, today=TODAY)
    text = (kb.wiki / "concepts/notes.md").read_text()
    assert "[kern%20x](kern%2520x.md)" in text and "[a b](a%20b.md)" in text, text
    assert "[q](q%231.md#sec)" in text, text  # the file's own '#' encoded, the link's anchor kept
    assert not [i for i in lint.run(kb).issues if i.path.endswith("notes.md") and "link" in i.code]


def test_fix_adds_frontmatter_and_keys(kb):
    write(kb.wiki, "concepts/hand.md", "# Written By Hand\n\nNo frontmatter, [link](typed.md).\n")
    write(kb.wiki, "concepts/typed.md", "---\ntags: [x]\nmine: kept\n---\n\n[h](hand.md)\n")
    write(kb.wiki, "loose.md", "# Loose\n\n[h](concepts/hand.md)\n")
    report = lint.run(kb, fix=True, today=TODAY)
    assert "wiki/concepts/hand.md: frontmatter added (type concept, title 'Written By Hand')" in report.fixed
    assert "wiki/concepts/typed.md: frontmatter completed (type concept, title 'typed')" in report.fixed
    hand = (kb.wiki / "concepts/hand.md").read_text()
    assert hand.startswith("---\ntitle: Written By Hand\ntype: concept\ncreated: '2026-11-29'\n")
    assert hand.endswith("# Written By Hand\n\nNo frontmatter, [link](typed.md).\n")
    assert "mine: kept" in (kb.wiki / "concepts/typed.md").read_text()
    left = [(i.path, i.code) for i in report.issues if i.severity == "error"]
    assert left == [("wiki/loose.md", "frontmatter-missing")]  # no folder, no type to infer


def test_completing_a_frontmatter_never_leaves_it_invalid(kb):
    """`--fix` replaced `updated:`'s first line and left its block scalar's lines behind, and appended keys after a
    flow mapping: both pages said "frontmatter completed" and were invalid YAML after."""
    write(kb.wiki, "concepts/blocky.md", "---\ntags: [a]\nupdated: |\n  2026-01-01\n  by hand\n---\n\n# Blocky\n")
    write(kb.wiki, "concepts/flow.md", "---\n{tags: [a, b]}\n---\n\n# Flow\n\n[b](blocky.md)\n")
    report = lint.run(kb, fix=True, today=TODAY)
    assert "wiki/concepts/blocky.md: frontmatter completed (type concept, title 'Blocky')" in report.fixed
    assert not [f for f in report.fixed if "flow.md" in f]  # left as it was: its missing keys still reported
    assert (kb.wiki / "concepts/flow.md").read_text() == "---\n{tags: [a, b]}\n---\n\n# Flow\n\n[b](blocky.md)\n"
    after = lint.run(kb)
    assert not [i for i in after.issues if i.code == "frontmatter-invalid"], after.issues
    meta = pages.split((kb.wiki / "concepts/blocky.md").read_text())[0]
    assert meta["tags"] == ["a"] and meta["updated"] == TODAY and meta["type"] == "concept"


def test_fix_rewrites_the_link_it_found_and_keeps_the_frontmatter_as_written(kb):
    """From a review: `--fix` rewrote the first text that looked like the link (a code example before it, or another
    link whose target starts the same: `remat.md.orig` for `remat.md`), so the found link stayed and every run fixed
    it again; and completing a frontmatter re-dumped it (`version: 1.10` became `1.1`, `id: 0123` became `83`, its
    comment gone)."""
    write(kb.wiki, "concepts/remat.md", page("Remat", "concept"))
    write(kb.wiki, "concepts/pallas.md", page("Pallas", "concept"))
    root = kb.wiki / "concepts"
    write(kb.wiki, "concepts/w.md", page("W", "concept", "\n".join([
        "# W", "",
        "Type `[[remat]]` to link, like this: [[remat]].",
        f"Old [old]({root}/remat.md.orig) and new [new]({root}/remat.md).",
        f"Example `[x]({root}/pallas.md)` then [real]({root}/pallas.md)."])))
    mine = "---\n# a comment\ntype: concept\nversion: 1.10\nenabled: yes\nid: 0123\ntags: [a, b]\n---\n# Yaml keys\n"
    write(kb.wiki, "concepts/yamlkeys.md", mine)
    lint.run(kb, fix=True, today=TODAY)
    text = (kb.wiki / "concepts/w.md").read_text()
    assert "Type `[[remat]]` to link, like this: [remat](remat.md)." in text
    assert f"Old [old]({root}/remat.md.orig) and new [new](remat.md)." in text
    assert f"Example `[x]({root}/pallas.md)` then [real](pallas.md)." in text
    assert lint.run(kb, fix=True, today=TODAY).fixed == []  # one pass: nothing left to fix
    kept = (kb.wiki / "concepts/yamlkeys.md").read_text()
    assert kept.startswith("---\n# a comment\ntype: concept\nversion: 1.10\nenabled: yes\nid: 0123\ntags: [a, b]\n")
    assert "title: Yaml keys\n" in kept and kept.endswith("---\n# Yaml keys\n")


def test_fix_is_idempotent(kb):
    write(kb.wiki, "concepts/a.md", "# A\n\n[[b]]\n")
    write(kb.wiki, "concepts/b.md", page("B", "concept", "# B\n\n[a](a.md)\n"))
    first = lint.run(kb, fix=True)
    assert first.ok and first.fixed
    snapshot = {p: p.read_bytes() for p in kb.wiki.rglob("*.md")}
    again = lint.run(kb, fix=True)
    assert again.fixed == [] and again.issues == []
    assert {p: p.read_bytes() for p in kb.wiki.rglob("*.md")} == snapshot


def _fake_checkout(root, slug, head: str, refs: dict[str, str] | None = None, packed: str = ""):
    git = root / "raw" / "code" / slug / ".git"
    write(git, "HEAD", head + "\n")
    for ref, sha in (refs or {}).items():
        write(git, ref, sha + "\n")
    if packed:
        write(git, "packed-refs", packed)
    return git


def _codebase(kb, slug, commit):
    write(kb.wiki, f"codebases/{slug}/overview.md",
          page(slug, "codebase", "# O\n\n## Performance-relevant surfaces\n\n[i](../../index.md)\n",
               repo=slug, path=f"raw/code/{slug}", commit=commit))


@pytest.mark.parametrize("layout", ["loose-ref", "packed-ref", "detached", "gitdir-file"])
def test_stale_codebase_pages(kb, layout):
    a, b = "a" * 40, "b" * 40
    if layout == "loose-ref":
        _fake_checkout(kb.root, "jax", "ref: refs/heads/main", {"refs/heads/main": b})
    elif layout == "packed-ref":
        _fake_checkout(kb.root, "jax", "ref: refs/heads/main", packed=f"# pack\n{b} refs/heads/main\n^{a}\n")
    elif layout == "detached":
        _fake_checkout(kb.root, "jax", b)
    else:
        real = kb.root / "elsewhere" / "jax.git"
        write(real, "HEAD", "ref: refs/heads/dev\n")
        write(real, "refs/heads/dev", b + "\n")
        write(kb.root, "raw/code/jax/.git", f"gitdir: {real}\n")
    _codebase(kb, "jax", a[:12])
    _codebase(kb, "same", b)
    _fake_checkout(kb.root, "same", b)
    _codebase(kb, "notcloned", a)
    linked(kb, "codebases/jax/overview.md", "codebases/same/overview.md", "codebases/notcloned/overview.md")
    stale = [i for i in lint.run(kb).issues if i.code == "stale-codebase"]
    assert [(i.path, i.line, i.severity) for i in stale] == [("wiki/codebases/jax/overview.md", 6, "warning")]
    assert stale[0].message == f"commit {a[:12]} but raw/code/jax is at {b[:12]}; run `tools ingest raw/code/jax`"


def test_exit_codes_and_output(kb, invoke):
    ok = invoke("lint", root=kb.root)
    assert ok.exit_code == 0 and ok.output.strip().startswith("0 errors, 0 warnings in 2 pages")
    write(kb.wiki, "concepts/a.md", page("A", "concept", "# A\n\n[x](nope.md)\n"))
    bad = invoke("lint", root=kb.root)
    assert bad.exit_code == 1
    lines = bad.output.splitlines()
    assert lines[:3] == [
        "wiki/concepts/a.md: orphan: no page links here",
        "wiki/concepts/a.md:8: broken-link: nope.md -> wiki/concepts/nope.md does not exist",
        "wiki/index.md:28: index-drift: Concepts: index says 0, the wiki has 1",
    ]
    assert lines[-1].startswith("2 errors, 1 warnings in 3 pages (1 fixable with --fix)")
    quiet = invoke("lint", "-q", root=kb.root)
    assert "orphan" not in quiet.output
    data = json.loads(invoke("lint", "--json", root=kb.root).output)
    assert data["errors"] == 2 and data["warnings"] == 1 and data["ok"] is False
    assert data["problems"][1] == {"path": "wiki/concepts/a.md", "line": 8, "code": "broken-link",
                                   "severity": "error", "message": "nope.md -> wiki/concepts/nope.md does not exist",
                                   "fixable": False, "cause": "missing:wiki/concepts/nope.md"}
    fixed = invoke("lint", "--fix", root=kb.root)
    assert "fixed wiki/index.md: updated (1 pages)" in fixed.output and fixed.exit_code == 1
    (kb.wiki / "concepts/a.md").write_text(page("A", "concept", "# A\n"))  # link gone: warnings only
    warn_only = invoke("lint", root=kb.root)
    assert warn_only.exit_code == 0 and "0 errors, 2 warnings" in warn_only.output


def test_lint_without_wiki_is_a_clean_error(tmp_path, invoke):
    r = invoke("lint", root=tmp_path)
    assert r.exit_code == 1 and "no wiki/ folder here" in r.output


def test_messy_wiki_never_crashes(kb):
    mess = {
        "a.md": "---\n---\n",
        "b.md": "---\n- just a list\n---\n",
        "c.md": "---\ntitle: 5\ntype: [concept]\ntags: notalist\ncreated: yesterday\n---\n",
        "d.md": "---\ntitle: D\ntype: experiment\nmetrics: 3\nstatus: filed\nverdict: 7\nlane: [x]\nexp_id: 3\n---\n",
        "e.md": "---\ntitle: E\ncreated: 2026-13-45\n---\n",
        "f.md": b"\xff\xfe\x00binary\x00",
        "g.md": "[[]] [[|]] [](  ) [x](<>) [y](#) <file://> [z](file://) [w](/)\n",
        "h.md": "```\nunclosed fence [x](nope.md)\n",
        "deep/er/i.md": "[up](../../../../../outside.md) [q](?x=1) [t](x.md \"title\")\n",
    }
    for rel, text in mess.items():
        write(kb.wiki, rel, text)
    report = lint.run(kb)
    assert report.pages == 11
    json.dumps(report.as_dict())
    lint.run(kb, fix=True)  # fixing a mess must not crash either


def test_resolver_units(kb):
    write(kb.wiki, "concepts/Flash Attention.md", page("Tiles", "concept"))
    wiki = scan(kb.wiki)
    res = lint_links.Resolver(kb, wiki)
    p = wiki.by_rel["index.md"]
    assert res.wikilink("flash attention") == ("concepts/Flash Attention.md", "")
    assert res.wikilink("Tiles#The Part") == ("concepts/Flash Attention.md", "#the-part")
    assert res.resolve(p, Link("concepts/Flash%20Attention.md", 1, "md")).status == lint_links.OK
    assert res.resolve(p, Link("HTTPS://x", 1, "md")).status == lint_links.EXTERNAL
    assert res.resolve(p, Link("//cdn/x.js", 1, "md")).status == lint_links.EXTERNAL
    assert lint_links.split_target("a%20b.md#x?y") == ("a b.md", "#x?y")


def test_fix_keeps_the_index_in_step(kb):
    write(kb.wiki, "concepts/a.md", "# A\n\n[b](b.md)\n")
    write(kb.wiki, "concepts/b.md", page("B", "concept", "# B\n\n[a](a.md)\n"))
    lint.run(kb, fix=True)
    write(kb.wiki, "concepts/c.md", "# C\n\n[a](a.md)\n")
    write(kb.wiki, "concepts/b.md", page("B", "concept", "# B\n\n[a](a.md) [c](c.md)\n"))
    from tools import wikiindex

    wikiindex.rebuild(kb.wiki)  # the index is current: only c.md lacks frontmatter
    assert codes(kb) == [("wiki/concepts/c.md", 1, "frontmatter-missing")]
    report = lint.run(kb, fix=True)
    assert report.issues == [] and "wiki/index.md: updated (3 pages)" in report.fixed


def test_anchors(kb):
    write(kb.root, "raw/code/x.py", "x\n")
    write(kb.wiki, "concepts/a.md", page("A", "concept", "\n".join([
        "# A", "## Where it appears", "## Where it appears", "### `jax.checkpoint` policies {#pol}",
        '<a id="raw-id"></a>',
        "[1](b.md#b-part) [2](#local) [3](b.md#B-Part) [4](a.md#where-it-appears_1) [5](a.md#pol)",
        "[6](a.md#raw-id) [7](b.md#nope) [8](../../raw/code/x.py#L1) [9](b.md#b%20part)",
    ])))
    write(kb.wiki, "concepts/b.md", page("B", "concept", "# B\n\n## B part\n\n[a](a.md)\n"))
    found = [(i.line, i.code, i.message) for i in lint.run(kb).issues if i.code == "broken-anchor"]
    assert found == [(11, "broken-anchor", "b.md#B-Part: no such heading or id in wiki/concepts/b.md"),
                     (12, "broken-anchor", "b.md#b%20part: no such heading or id in wiki/concepts/b.md"),
                     (12, "broken-anchor", "b.md#nope: no such heading or id in wiki/concepts/b.md")]


def test_links_into_an_absent_code_tree_are_one_problem_with_a_count(kb):
    write(kb.root, "raw/code/here/ops.py", "x = 1\n")
    body = "# A\n\n" + "".join(f"[l{i}](../../raw/code/gone/ops/k{i}.py#L{i})\n" for i in range(50))
    body += "[present tree, missing file](../../raw/code/here/nope.py)\n"
    write(kb.wiki, "concepts/a.md", page("A", "concept", body))
    write(kb.wiki, "concepts/b.md", page("B", "concept", "# B\n\n[x](../../raw/code/gone/x.py) [a](a.md)\n"))
    linked(kb, "concepts/a.md", "concepts/b.md")
    report = lint.run(kb)
    missing = [i for i in report.issues if i.code == "missing-tree"]
    assert len(missing) == 1 and missing[0].path == "raw/code/gone"
    assert "51 links from 2 pages" in missing[0].message and "not checked out" in missing[0].message
    broken = [i for i in report.issues if i.code == "broken-link"]
    assert [(i.path, i.line) for i in broken] == [("wiki/concepts/a.md", 58)]  # a file missing from a tree that is here
    assert set(report.as_dict()) == {"pages", "errors", "warnings", "ok", "seconds", "fixed", "problems"}


CATALOG = "\n".join(["# Cache", "", "### `TransformerCache` · implements/extends BaseCache", "", "Keeps K and V.", "",
                     "### `KVCache` · implements/extends BaseCache", "", "```python",
                     "### `NotAHeading` inside code", "```", "", "### `BaseCache`", ""])


def test_symbol_anchors_are_one_finding_and_fixed_with_heading_ids(kb, invoke):
    """The hand-kept catalog shape: links name `#Symbol`, headings read "`Symbol` · implements/extends Base"."""
    import markdown

    write(kb.wiki, "concepts/cache.md", page("Cache", "concept", CATALOG))
    for n in range(12):  # 24 links naming symbols no heading id carries, from 12 pages (and #BaseCache below)
        write(kb.wiki, f"concepts/user{n}.md", page(f"U{n}", "concept", f"# U{n}\n\n[t](cache.md#TransformerCache) "
                                                                       f"[k](cache.md#KVCache) [c](cache.md)\n"))
    write(kb.wiki, "concepts/old.md", page("Old", "concept", "# Old\n\n"
                                           "[by its id](cache.md#transformercache-implementsextends-basecache) "
                                           "[base](cache.md#BaseCache) [gone](cache.md#Nope)\n"))
    linked(kb, *[f"concepts/user{n}.md" for n in range(12)], "concepts/old.md")
    report = lint.run(kb)
    anchors = [i for i in report.issues if i.code == "broken-anchor"]
    assert len(anchors) == 26 and sum(i.cause == "symbol-anchor" and i.fixable for i in anchors) == 25
    assert {i.cause for i in anchors} == {"symbol-anchor", "anchor-into:concepts/cache.md"}  # #Nope: no heading
    out = invoke("lint", root=kb.root).output.splitlines()
    head = [ln for ln in out if ln.startswith("broken-anchor x25 in 13 pages (warnings): links name `#Symbol`")]
    assert len(head) == 1 and "tools lint --fix" in out[out.index(head[0]) + 1]
    assert sum(ln.startswith("  e.g. wiki/concepts/") for ln in out) == 3
    assert not any("cache.md#KVCache" in ln and not ln.startswith("  e.g.") for ln in out)  # no line per link
    assert sum("cache.md#Nope" in ln for ln in out) == 1  # a cause with one instance stays a line
    data = json.loads(invoke("lint", "--json", root=kb.root).output)
    assert sum(p["code"] == "broken-anchor" for p in data["problems"]) == 26  # every instance kept
    assert [(g["code"], g["cause"], g["count"], g["pages"]) for g in data["groups"]] == [
        ("broken-anchor", "symbol-anchor", 25, 13)]

    fixed = invoke("lint", "--fix", root=kb.root)
    assert "heading id `TransformerCache` (its old id `transformercache-implementsextends-basecache` kept)" \
        in fixed.output and "heading id `KVCache`" in fixed.output
    text = (kb.wiki / "concepts/cache.md").read_text()
    assert '### `KVCache` · implements/extends BaseCache {#KVCache}' in text
    assert "### `NotAHeading` inside code\n" in text and "### `BaseCache` {#BaseCache}\n" in text  # code: untouched
    left = [i for i in lint.run(kb).issues if i.code == "broken-anchor"]
    assert [i.message.split(":")[0] for i in left] == ["cache.md#Nope"]
    html = markdown.markdown(text.split("---\n", 2)[2], extensions=["toc", "attr_list"])
    for ident in ("TransformerCache", "transformercache-implementsextends-basecache", "KVCache", "BaseCache"):
        assert f'id="{ident}"' in html  # what the site will have, both the new id and the one links used


def test_code_in_a_blockquote_is_code_and_an_image_in_a_link_is_checked(kb):
    """A fenced example inside a blockquote was read as prose: lint reported its link broken and --fix rewrote its
    [[wikilink]]; an image inside a link (a README badge) was never checked."""
    quoted = "> ```\n> [[Target]]\n> [x](quoted-missing.md)\n> ```\n"
    write(kb.wiki, "concepts/target.md", page("Target", "concept", "# Target\n\n[u](u.md)\n"))
    write(kb.wiki, "concepts/u.md", page("U", "concept", "# U\n\n" + quoted +
                                         "\n[![badge](missing-image.png)](target.md)\n"))
    found = [(i.code, i.message) for i in lint.run(kb).issues if i.path.endswith("u.md")]
    assert [c for c, m in found if "quoted-missing" in m] == [], found
    assert [c for c, m in found if "missing-image.png" in m] == ["broken-link"], found
    lint.run(kb, fix=True)
    assert quoted in (kb.wiki / "concepts/u.md").read_text()
    # a quoted fence shown inside an ordinary code block is part of that block: it closes nothing (from a review)
    from tools import mdscan

    shown = "```markdown\n> ```python\n> x = 1\n> ```\n```\n\n## Later heading\n\n[gone](missing.md)\n"
    assert [ln.target for ln in mdscan.extract_links(shown)] == ["missing.md"]


def test_a_file_in_a_hidden_folder_is_there_but_not_published(kb):
    write(kb.wiki, ".attachments/diagram.png", "png")
    write(kb.wiki, "concepts/d.md", page("D", "concept", "# D\n\n![d](../.attachments/diagram.png) "
                                         "![e](../.attachments/gone.png)\n"))
    found = {i.message.split(" -> ")[0]: i.code for i in lint.run(kb).issues if i.path.endswith("d.md")
             and "link" in i.code or i.code == "hidden-target"}
    assert found == {"../.attachments/diagram.png": "hidden-target", "../.attachments/gone.png": "broken-link"}


def test_a_symlink_loop_is_reported_not_skipped_in_silence(kb):
    (kb.wiki / "concepts").mkdir(exist_ok=True)
    (kb.wiki / "concepts/loop1.md").symlink_to("loop2.md")
    (kb.wiki / "concepts/loop2.md").symlink_to("loop1.md")
    found = [(i.path, i.code, i.message) for i in lint.run(kb).issues if "loop" in i.path]
    assert [p for p, _, m in found if "symlink loop" in m] == ["wiki/concepts/loop1.md", "wiki/concepts/loop2.md"]


def test_a_code_comment_is_no_title_for_search_or_lint_fix(kb):
    """A page with no `# Title` but a `# comment` in a code block was titled by the comment: search showed it and
    `lint --fix` wrote it into the frontmatter."""
    from tools import search

    write(kb.wiki, "concepts/install-guide.md", "Intro to install.\n\n```bash\n# install the package first\n"
                                                "pip install numpy\n```\n\n## Usage\n\nRun it.\n")
    linked(kb, "concepts/install-guide.md")
    lint.run(kb, fix=True, today=TODAY)
    meta, _ = pages.split((kb.wiki / "concepts/install-guide.md").read_text())
    assert meta["title"] != "install the package first", meta
    _, hits = search.search(kb, "install")
    assert all(h.title != "install the package first" for h in hits), hits
    # a `#` alone on its line is no heading either: the title was the next paragraph's text
    from tools.mdscan import first_block_heading
    assert first_block_heading("#\n\nSome text\n") is None and first_block_heading("# Title #\r\n") == "Title"


def test_a_setext_heading_of_a_crlf_page_is_an_anchor(kb):
    """Python-Markdown renders `id="setext-target"`; lint said `broken-anchor` for a CRLF page (the underline kept its
    `\\r`)."""
    write(kb.wiki, "concepts/target.md", page("Target", "concept", "# Target\n\nSetext target\n-------------\n\nx\n")
          .replace("\n", "\r\n"))
    write(kb.wiki, "concepts/src.md", page("Src", "concept", "# Src\n\n[t](target.md#setext-target)\n"))
    linked(kb, "concepts/target.md", "concepts/src.md")
    assert not [c for c in codes(kb) if c[2] == "broken-anchor"], codes(kb)


def test_what_lint_calls_fixable_is_fixed_and_what_it_cannot_fix_is_not_called_fixable(kb):
    """`--fix` said "(1 fixable with --fix)" on every run for a frontmatter whose last key is a block scalar, a
    setext heading a `#Symbol` link names, and a `type:` given twice (the last empty)."""
    write(kb.wiki, "concepts/scalar.md", "---\ndescription: |\n  a\n  b\n---\n\n# Scalar\n\ntext\n")
    write(kb.wiki, "concepts/setext.md", page("Setext", "concept", "# Setext\n\n`OtherClass` implements\n"
                                                                   "------------------------\n\ntext\n"))
    write(kb.wiki, "concepts/user.md", page("User", "concept", "# User\n\n[o](setext.md#OtherClass)\n"))
    write(kb.wiki, "concepts/twice.md", "---\ntitle: Twice\ntype: concept\ntype:\n---\n\n# Twice\n")
    linked(kb, "concepts/scalar.md", "concepts/setext.md", "concepts/user.md", "concepts/twice.md")
    lint.run(kb, fix=True, today=TODAY)
    left = lint.run(kb)
    assert not [i for i in left.issues if i.fixable], [i for i in left.issues if i.fixable]
    meta, _ = pages.split((kb.wiki / "concepts/scalar.md").read_text())
    assert meta["description"] == "a\nb\n" and meta["title"] == "Scalar" and meta["type"] == "concept"
    assert "{#OtherClass}" in (kb.wiki / "concepts/setext.md").read_text()
    assert not [c for c in codes(kb) if c[2] == "broken-anchor"]
    assert [i.code for i in left.issues if i.path == "wiki/concepts/twice.md"] == ["missing-key"]  # said, by hand


def test_an_index_name_held_by_a_folder_is_not_called_fixable(kb):
    """`wiki/index.md` a folder: lint said "index-missing ... (1 fixable)", and `--fix` failed on it, after writing
    its other fixes, which went unlogged."""
    (kb.wiki / "index.md").unlink()
    (kb.wiki / "index.md").mkdir()
    write(kb.wiki, "concepts/t.md", "# Titled\n\ntext\n")  # no frontmatter: fixable
    linked(kb, "concepts/t.md")
    (i,) = [i for i in lint.run(kb).issues if i.code == "index-missing"]
    assert not i.fixable and "holds its name" in i.message
    report = lint.run(kb, fix=True, today=TODAY)
    assert any("concepts/t.md" in f for f in report.fixed)
    assert "concepts/t.md: frontmatter added" in (kb.wiki / "log.md").read_text()


def test_fix_keeps_a_pages_byte_order_mark_and_line_ends_and_leaves_a_toml_frontmatter(kb):
    """A fixed wikilink dropped the page's UTF-8 BOM; keys added to a CRLF frontmatter were written with LF; a Hugo
    `+++` page got a YAML block in front of its TOML, which then showed as body text."""
    write(kb.wiki, "concepts/target.md", page("Target", "concept", "# Target\n"))
    bom = page("Bom", "concept", "# Bom\n\n[[target]]\n")
    (kb.wiki / "concepts/bom.md").write_bytes(b"\xef\xbb\xbf" + bom.encode())
    (kb.wiki / "concepts/crlf.md").write_bytes(b"---\r\ntype: concept\r\n---\r\n\r\n# Crlf\r\n\r\ntext\r\n")
    toml = "+++\ntitle = 'Hugo'\n+++\n\n# Hugo\n"
    (kb.wiki / "concepts/hugo.md").write_text(toml)
    linked(kb, *(f"concepts/{n}.md" for n in ("target", "bom", "crlf", "hugo")))
    lint.run(kb, fix=True, today=TODAY)
    fixed = (kb.wiki / "concepts/bom.md").read_bytes()
    assert fixed.startswith(b"\xef\xbb\xbf") and b"[[target]]" not in fixed
    crlf = (kb.wiki / "concepts/crlf.md").read_bytes()
    assert b"title: Crlf\r\n" in crlf and crlf.count(b"\n") == crlf.count(b"\r\n"), crlf
    assert (kb.wiki / "concepts/hugo.md").read_text() == toml
    (i,) = [i for i in lint.run(kb).issues if i.path == "wiki/concepts/hugo.md"]
    assert not i.fixable and "TOML" in i.message


def test_a_link_that_leaves_wiki_and_comes_back_is_a_page_link(kb):
    """`[b](../../wiki/concepts/b.md#no-such-anchor)` had no anchor check, and `b.md` was reported an orphan."""
    write(kb.wiki, "concepts/b.md", page("B", "concept", "# B\n\n## There\n"))
    write(kb.wiki, "concepts/a.md", page("A", "concept", "# A\n\n[b](../../wiki/concepts/b.md#no-such-anchor)\n"
                                                         "[b](../../wiki/concepts/b.md#there)\n"))
    linked(kb, "concepts/a.md")
    found = codes(kb)
    assert ("wiki/concepts/a.md", 8, "broken-anchor") in found, found
    assert not [c for c in found if c[0] == "wiki/concepts/b.md" and c[2] == "orphan"], found
    assert len([c for c in found if c[0] == "wiki/concepts/a.md" and c[2] == "broken-anchor"]) == 1


def test_nothing_in_a_raw_script_style_or_pre_block_is_a_link(kb):
    """Python-Markdown passes these blocks through as they are; lint called a MathJax config's `[["\\(", "\\)"]]` in a
    `<script>` (a real zensical docs/index.md) a wikilink, and `<pre>[x](gone.md)</pre>` a broken link: errors."""
    write(kb.wiki, "concepts/raw.md", page("Raw", "concept",
          '# Raw\n\n<script>\nwindow.MathJax = {tex: {inline: [["\\\\(", "\\\\)"]]}};\n</script>\n\n'
          "<pre>[x](not-a-link.md)</pre>\n\n<style>\na[href] { color: red }\n</style>\n\n[gone](gone.md)\n"))
    linked(kb, "concepts/raw.md")
    found = [c for c in codes(kb) if c[0] == "wiki/concepts/raw.md"]
    assert found == [("wiki/concepts/raw.md", 18, "broken-link")], found  # the real one, after the blocks


def test_a_code_block_inside_a_list_item_is_code(kb):
    """A link in an 8-space block under a top-level item (code to Python-Markdown, its content being indented by
    four) was a broken-link error; a nested item's paragraph at eight spaces stays prose."""
    write(kb.wiki, "concepts/lists.md", page("Lists", "concept",
          "# Lists\n\n- item\n\n    para [a](gone-a.md)\n\n        code [b](gone-b.md)\n\n    - nested\n\n"
          "        nested para [c](gone-c.md)\n\n            nested code [d](gone-d.md)\n"))
    linked(kb, "concepts/lists.md")
    broken = sorted(i.message for i in lint.run(kb).issues if i.path == "wiki/concepts/lists.md")
    assert len(broken) == 2 and "gone-a.md" in broken[0] and "gone-c.md" in broken[1], broken


def test_an_indented_admonitions_body_and_an_outer_items_paragraph_are_prose(kb):
    """From a review: an admonition inside a list item (or another admonition) had its 8-space body taken for code,
    hiding a real link; a paragraph of the outer item after a nested one kept the nested item's indent."""
    from tools.mdscan import extract_links

    cases = {"- a\n\n    !!! note\n\n        body [p](p.md)\n": ["p.md"],
             "!!! note\n\n    ??? tip\n\n        body [p](p.md)\n": ["p.md"],
             "- a\n\n    - b\n\n    outer para [a](a.md)\n\n        code [c](c.md)\n": ["a.md"]}
    for text, want in cases.items():
        assert [ln.target for ln in extract_links(text)] == want, text


def test_indented_code_in_a_blockquote_is_code_as_markdown_renders_it(kb):
    """`>     [z](gone.md)` after a blank quoted line is a code block inside the quote: lint called it a broken link.
    The links lint checks are the ones Python-Markdown renders, quoted prose, lazy lines and nested quotes alike."""
    import markdown

    body = "\n".join(["# Q", "", "> quote", ">", ">     [z](gone-quoted-code.md)", "",
                      "> [p](gone-quoted-prose.md)", "> more", ">     [lazy](gone-quoted-lazy.md)", "",
                      "para", ">     [first](gone-quoted-first.md)", "",
                      "> > nested", "> >", "> >     [n](gone-nested-code.md)", "",
                      "> - item", ">", ">         [li](gone-quoted-item-code.md)", "",
                      ">     code", "back [out](gone-after-quote.md)"])
    write(kb.wiki, "concepts/q.md", page("Q", "concept", body))
    rendered = re.findall(r'href="([^"]+)"', markdown.markdown(body))
    found = [i.message.split(" ->")[0] for i in lint.run(kb).issues
             if i.code == "broken-link" and i.path.endswith("concepts/q.md")]
    assert found == rendered == ["gone-quoted-prose.md", "gone-quoted-lazy.md", "gone-after-quote.md"], found
