"""Agent reads that stay small: `raw.read` (a range of a real source file by line or by symbol, bounded, never
outside raw/, never a binary) and `wiki.read` of one section with a continuation offset."""

from __future__ import annotations

import inspect
import json
import re
import shutil
from pathlib import Path

import pytest
from _shared import queue_loop

from tools import scaffold
from tools.agent.registry import AgentError, call
from tools.project import Project


@pytest.fixture(scope="module")
def kb(tmp_path_factory) -> Project:
    """A knowledge base whose raw/code holds real files of the installed jax (copied, never run)."""
    jax = pytest.importorskip("jax")
    root = tmp_path_factory.mktemp("reads") / "kb"
    scaffold.init(root, site_name="reads")
    src = Path(inspect.getfile(jax)).parent / "_src"
    dest = root / "raw/code/jax/jax/_src"
    dest.mkdir(parents=True)
    for name in ("ad_checkpoint.py", "checkify.py"):
        shutil.copy(src / name, dest / name)
    (dest / "newer.py").write_text("import jax\n\n\ndef ident[T](x: T) -> T:\n    y = x\n    return y\n\n\n"
                                   "class Box[T]:\n    def get(self) -> T:\n        return self.v\n\n\nZ = 1\n")
    (root / "raw/code/jax/blob.bin").write_bytes(b"\x7fELF\0\0\0" * 100)
    queue_loop(root)
    return Project(root)


def _real_def(path: Path, name: str) -> tuple[int, int]:
    import ast

    tree = ast.parse(path.read_text())
    node = next(n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and n.name == name)
    return min([node.lineno] + [d.lineno for d in node.decorator_list]), node.end_lineno


def test_a_symbol_is_its_whole_definition(kb):
    path = kb.raw / "code/jax/jax/_src/ad_checkpoint.py"
    first, last = _real_def(path, "checkpoint")
    out = call(kb, "raw.read", {"path": "code/jax/jax/_src/ad_checkpoint.py", "symbol": "checkpoint",
                                "lines": 1000})
    assert (out["start"], out["end"], out["next_line"]) == (first, last, None)
    assert out["text"] == "\n".join(path.read_text().split("\n")[first - 1:last]) + "\n"
    assert out["matches"][0] == f"checkpoint:{first}"
    short = call(kb, "raw.read", {"path": "raw/code/jax/jax/_src/ad_checkpoint.py", "symbol": "checkpoint",
                                  "lines": 5})
    assert (short["start"], short["end"], short["next_line"]) == (first, first + 4, first + 5)
    more = call(kb, "raw.read", {"path": "code/jax/jax/_src/ad_checkpoint.py", "symbol": "checkpoint",
                                 "start": short["next_line"], "lines": 1000})
    assert more["start"] == first + 5 and more["end"] == last and more["next_line"] is None


def test_a_line_with_context_and_the_ends_of_the_file(kb):
    path = kb.raw / "code/jax/jax/_src/checkify.py"
    lines = path.read_text().split("\n")
    out = call(kb, "raw.read", {"path": "code/jax/jax/_src/checkify.py", "line": 100, "context": 3})
    assert (out["start"], out["end"]) == (97, 103) and out["text"] == "\n".join(lines[96:103]) + "\n"
    assert out["total_lines"] == len(lines) - (lines[-1] == "")
    top = call(kb, "raw.read", {"path": "code/jax/jax/_src/checkify.py", "line": 1, "context": 3})
    assert top["start"] == 1 and top["end"] == 4
    with pytest.raises(AgentError, match="past the end"):
        call(kb, "raw.read", {"path": "code/jax/jax/_src/checkify.py", "line": 10**6})
    whole = call(kb, "raw.read", {"path": "code/jax/jax/_src/checkify.py"})
    assert (whole["start"], whole["end"], whole["next_line"]) == (1, 200, 201)


def test_newer_syntax_is_found_by_its_def_lines(kb):
    out = call(kb, "raw.read", {"path": "code/jax/jax/_src/newer.py", "symbol": "ident"})
    assert (out["start"], out["end"]) == (4, 6) and out["text"].startswith("def ident[T]")
    method = call(kb, "raw.read", {"path": "code/jax/jax/_src/newer.py", "symbol": "Box.get"})
    assert (method["start"], method["end"], method["symbol"]) == (10, 11, "Box.get")


@pytest.mark.parametrize("args, said", [
    ({"path": "code/jax/blob.bin"}, "binary"),
    ({"path": "code/jax"}, "a folder"),
    ({"path": "code/jax/nothere.py"}, "no such file"),
    ({"path": "../wiki/index.md"}, "not a path inside"),
    ({"path": "code/jax/jax/_src/checkify.py", "symbol": "no_such_thing"}, "no function or class"),
])
def test_refusals_name_the_file_and_the_reason(kb, args, said):
    with pytest.raises(AgentError, match=said):
        call(kb, "raw.read", args)


def test_one_section_of_a_long_page_and_its_continuation(kb):
    parts = ["# Overview", "", "intro", ""]
    for n in range(40):
        parts += [f"## Part {n}", "", *(f"- row {n}.{k} " + "x" * 60 for k in range(30)), ""]
    parts += ["### `TransformerCache` · implements/extends BaseCache", "", "the cache", ""]
    body = "\n".join(parts)
    (kb.wiki / "concepts").mkdir(exist_ok=True)
    (kb.wiki / "concepts/long.md").write_text("---\ntitle: Long\ntype: concept\n---\n\n" + body)
    first = call(kb, "wiki.read", {"path": "concepts/long.md", "limit": 5000})
    assert first["total_chars"] > 70_000 and len(first["body"]) <= 5000 and first["body"].endswith("\n")
    assert [s["title"] for s in first["sections"]][:3] == ["Overview", "Part 0", "Part 1"]
    got, offset = first["body"], first["next_offset"]
    while offset is not None:
        nxt = call(kb, "wiki.read", {"path": "concepts/long.md", "limit": 5000, "offset": offset})
        got, offset = got + nxt["body"], nxt["next_offset"]
    assert got == call(kb, "wiki.read", {"path": "concepts/long.md", "limit": 400_000})["body"]
    part = call(kb, "wiki.read", {"path": "concepts/long.md", "section": "part-7"})
    assert part["section"] == "part-7" and part["body"].startswith("## Part 7\n") and "Part 8" not in part["body"]
    assert part["body"].count("- row 7.") == 30 and part["next_offset"] is None
    by_title = call(kb, "wiki.read", {"path": "concepts/long.md", "section": "TransformerCache · implements"})
    assert by_title["section"] == "transformercache-implementsextends-basecache"
    with pytest.raises(AgentError, match="no section"):
        call(kb, "wiki.read", {"path": "concepts/long.md", "section": "nothing like it"})


@pytest.mark.slow
def test_a_read_of_a_page_of_thousands_of_headings_stays_bounded(kb):
    """A 200-character read of a page with 15,000 headings answered 1.1 MB: every heading was listed."""
    (kb.wiki / "concepts").mkdir(exist_ok=True)
    body = "\n".join(f"## Section {i}\n\ntext {i}\n" for i in range(15_000))
    (kb.wiki / "concepts/big.md").write_text("---\ntitle: Big\ntype: concept\n---\n\n" + body)
    out = call(kb, "wiki.read", {"path": "concepts/big.md", "limit": 200})
    assert len(out["sections"]) == 200 and out["sections_total"] == 15_000
    assert len(json.dumps(out)) < 40_000
    assert call(kb, "wiki.read", {"path": "concepts/big.md", "section": "section-14999"})["body"].startswith(
        "## Section 14999")  # every section can still be read by its id
    # the frontmatter too: a 3 MB value, or a list of 100,000 entries, was returned whole
    items = "".join(f"  - t{i}\n" for i in range(100_000))
    (kb.wiki / "concepts/meta.md").write_text(f"---\ntitle: M\ntype: concept\ndescription: {'x' * 3_000_000}\n"
                                              f"tags:\n{items}---\n\n# M\n")
    out = call(kb, "wiki.read", {"path": "concepts/meta.md", "limit": 200})
    assert out["meta_cut"] and len(json.dumps(out)) < 40_000 and out["meta"]["title"] == "M"
    assert out["meta"]["description"].endswith("[... cut: 3,000,000 characters]")
    assert not call(kb, "wiki.read", {"path": "concepts/big.md", "limit": 200})["meta_cut"]
    # ... the whole of it, and its keys: a 3 MB key, or 100 keys of twenty 1,999-character items, answered 3-4 MB
    many = "".join(f"k{k}:\n" + "".join(f"  - {'y' * 1999}\n" for _ in range(20)) for k in range(100))
    (kb.wiki / "concepts/keys.md").write_text(f"---\ntitle: K\n? {'k' * 3_000_000}\n: 1\n{many}type: concept\n"
                                              "---\n\n# K\n")
    out = call(kb, "wiki.read", {"path": "concepts/keys.md", "limit": 200})
    assert out["meta_cut"] and len(json.dumps(out)) < 40_000, len(json.dumps(out))
    assert out["meta"]["title"] == "K" and out["meta"]["type"] == "concept"


def test_a_misspelt_argument_is_refused_not_dropped(kb):
    """`tools kernels list categroy=attention` answered the whole catalog, exit 0: the misspelt filter was dropped."""
    with pytest.raises(AgentError, match="unknown argument categroy"):
        call(kb, "kernels.list", {"categroy": "attention"})
    with pytest.raises(AgentError, match="unknown arguments bogus, other"):
        call(kb, "wiki.read", {"path": "index.md", "bogus": 1, "other": 2})


def test_a_hypothesis_is_a_duplicate_whatever_the_order_of_its_change_and_never_nan(kb):
    """The same statement and change filed twice with the change's keys in another order made two pages; a NaN or
    infinite expected gain was filed, and `hypotheses list --json` then printed NaN (not JSON)."""
    base = {"model": "m", "lane": "l", "loop": "m-l", "statement": "Use  bf16", "mechanism": "m",
            "predicted_signal": "s", "falsification": "f", "category": "precision"}
    first = call(kb, "hypotheses.file", {**base, "change": {"kind": "knobs", "knobs": {"a": 1, "b": 2}}})
    again = call(kb, "hypotheses.file", {**base, "statement": "Use bf16",
                                         "change": {"knobs": {"b": 2, "a": 1}, "kind": "knobs"}})
    assert again["duplicate"] and again["path"] == first["path"]
    for bad in (float("nan"), float("inf")):
        with pytest.raises(AgentError, match="expected_gain_pct"):
            call(kb, "hypotheses.file", {**base, "statement": "other", "expected_gain_pct": bad,
                                         "change": {"kind": "knobs", "knobs": {"a": 3}}})


def test_a_heading_inside_a_hypothesis_field_is_read_back_as_text(kb):
    """A statement holding `## Mechanism` and `## Falsification` lines was read back (by the queue proposer) as the
    mechanism and falsification, over the real ones."""
    from tools.loop.hypotheses import hypothesis_from_page
    from tools.pages import split

    filed = call(kb, "hypotheses.file", {
        "model": "m", "lane": "l", "loop": "m-l",
        "statement": "Fuse attention\n\n## Mechanism\n\nINJECTED\n\n## Falsification\n\nnever",
        "mechanism": "real mechanism", "predicted_signal": "s", "falsification": "real falsification",
        "category": "kernel", "change": {"kind": "env", "env": {"XLA_FLAGS": "--x"}}})
    meta, body = split((kb.wiki / filed["path"]).read_text())
    back = hypothesis_from_page(meta, body)
    assert back["mechanism"] == "real mechanism" and back["falsification"] == "real falsification"
    assert back["statement"].startswith("Fuse attention") and "## Mechanism" in back["statement"]


@pytest.mark.parametrize("over, why", [
    ({"loop": "no-such-loop"}, "no loop file loops/no-such-loop.yml"),
    ({"lane": "other"}, "its queue would never take it"),
    ({"change": {"kind": "knobs", "knobs": {"flash_attn": True}}}, "unknown knob 'flash_attn'"),
    ({"change": {"kind": "knobs", "knobs": {"compute_dtype": "int4"}}}, "not a declared value"),
    ({"change": {"kind": "env", "env": "XLA_FLAGS=--x"}}, "change.env must be an object"),
    ({"change": {"kind": "knobs", "knobs": "compute_dtype"}}, "change.knobs must be an object"),
    ({"statement": "x" * 20_001}, "statement: over 20000 characters"),
])
def test_a_hypothesis_its_loop_would_not_run_is_refused(kb, over, why):
    """A hypothesis for a loop that does not exist, another lane's, or a knob the loop does not declare was filed
    'open' and sat in a queue that never took it (or a loop took it and failed); a string where the change wants an
    object was a traceback."""
    base = {"model": "m", "lane": "l", "loop": "m-l", "statement": "bf16 helps", "mechanism": "m",
            "predicted_signal": "s", "falsification": "f", "category": "precision",
            "change": {"kind": "knobs", "knobs": {"compute_dtype": "bfloat16"}}}
    before = sorted(p.name for p in kb.wiki.rglob("*"))
    with pytest.raises(AgentError, match=re.escape(why)):
        call(kb, "hypotheses.file", {**base, **over})
    assert sorted(p.name for p in kb.wiki.rglob("*")) == before


def test_frontmatter_yaml_gives_any_shape_is_read_and_filtered_as_its_text(kb):
    """`2024: notes` (a number as a key) and `!!binary` made wiki.read fail validation (a traceback on the CLI, a bare
    "Error executing tool" over MCP); `where` compared Python's `True` with the `true` the page says, a missing key
    matched "None", and `under="."` matched nothing."""
    wiki = kb.wiki / "concepts"
    (wiki / "yearly.md").write_text("---\ntitle: Yearly\ntype: concept\n2024: notes\nblob: !!binary /w==\n"
                                    "draft: true\nwhen: 2026-01-02\n---\n\n# Yearly\n")
    try:
        out = call(kb, "wiki.read", {"path": "concepts/yearly.md"})
        assert out["meta"]["2024"] == "notes" and out["meta"]["when"] == "2026-01-02"
        assert isinstance(out["meta"]["blob"], str) and out["meta"]["draft"] is True
        json.dumps(out)  # JSON all through
        drafts = call(kb, "wiki.list", {"where": {"draft": "true"}})["pages"]
        assert [p["path"] for p in drafts] == ["concepts/yearly.md"]
        assert call(kb, "wiki.list", {"where": {"draft": "True"}})["total"] == 0
        assert call(kb, "wiki.list", {"where": {"nokey": "None"}})["total"] == 0
        assert call(kb, "wiki.list", {"under": "."})["total"] == call(kb, "wiki.list", {})["total"] > 0
    finally:
        (wiki / "yearly.md").unlink()


def test_backlinks_count_a_wikilink_as_lint_does(kb):
    """lint counted a [[wikilink]] as an inbound link and backlinks did not: the two disagreed on what is an orphan."""
    wiki = kb.wiki / "concepts"
    (wiki / "target-page.md").write_text("---\ntitle: Target Page\ntype: concept\n---\n\n# Target Page\n")
    (wiki / "by-wiki.md").write_text("---\ntitle: W\ntype: concept\n---\n\n# W\n\nSee [[Target Page]].\n")
    try:
        out = call(kb, "wiki.backlinks", {"path": "concepts/target-page.md"})
        assert [p["path"] for p in out["backlinks"]] == ["concepts/by-wiki.md"]
    finally:
        (wiki / "target-page.md").unlink()
        (wiki / "by-wiki.md").unlink()


def test_a_symlink_loop_is_said_as_one(kb):
    loop = kb.wiki / "concepts" / "loop-a.md"
    loop.symlink_to("loop-b.md")
    (kb.wiki / "concepts" / "loop-b.md").symlink_to("loop-a.md")
    try:
        with pytest.raises(AgentError, match="a symlink loop under wiki/"):
            call(kb, "wiki.read", {"path": "concepts/loop-a.md"})
    finally:
        loop.unlink()
        (kb.wiki / "concepts" / "loop-b.md").unlink()


def test_a_selection_map_of_another_shape_and_a_start_past_a_symbol_are_clear_errors(tmp_path):
    """A `selection.json` of another shape gave a KeyError traceback on the CLI and a bare "Error executing tool"
    over MCP; `raw.read` with a start past the symbol's end answered `start 9, end 3` and no text."""
    root = tmp_path / "kb"
    scaffold.init(root)
    project = Project(root)
    sel = root / "wiki/codebases/x/selection.json"
    sel.parent.mkdir(parents=True)
    for bad in ("[1, 2]", '{"choices": [{"setting": "a", "kernels": [{"page": "p"}]}], "registries": []}',
                '{"choices": "no"}'):
        sel.write_text(bad)
        with pytest.raises(AgentError, match="not the shape ingest writes.*re-ingest"):
            call(project, "kernels.selection", {"codebase": "x", "kernel": "a"})
    (root / "raw/code/t").mkdir(parents=True)
    (root / "raw/code/t/m.py").write_text("def A():\n    return 1\n\n\nx = 1\ny = 2\n")
    assert call(project, "raw.read", {"path": "code/t/m.py", "symbol": "A", "start": 2})["text"] == "    return 1\n"
    with pytest.raises(AgentError, match="past the end of A's definition"):
        call(project, "raw.read", {"path": "code/t/m.py", "symbol": "A", "start": 9})


def test_a_minified_bundle_is_read_in_answers_of_bounded_size(kb, tmp_path):
    """A user's report: `raw_read` of one line of a minified bundle answered 1.8 MB (its limit was lines, not
    characters). The real bundle of the installed mkdocs-material (one line of 95 kB), and the lines after it."""
    from tools.agent.ops_raw import MAX_CHARS

    material = pytest.importorskip("material")
    bundle = next(Path(material.__file__).parent.rglob("bundle*.min.js"))
    text = bundle.read_text(encoding="utf-8")
    longest = max(range(len(text.split("\n"))), key=lambda i: len(text.split("\n")[i])) + 1
    dest = kb.raw / "code/site/bundle.min.js"
    dest.parent.mkdir(parents=True, exist_ok=True)
    short = "".join(f"var x{i} = {i};\n" for i in range(4000))
    dest.write_text(text.rstrip("\n") + "\n" + short)
    one = call(kb, "raw.read", {"path": "code/site/bundle.min.js", "line": longest, "context": 0})
    assert one["cut"] == longest and len(one["text"]) < MAX_CHARS + 200 and one["end"] == longest, one["cut"]
    assert one["text"].startswith(text.split("\n")[longest - 1][:1000]) and "cut at" in one["text"]
    exact = kb.raw / "code/site/exact.txt"  # a line of exactly MAX_CHARS fits: it was said to be cut
    exact.write_text("x" * MAX_CHARS + "\n")
    whole = call(kb, "raw.read", {"path": "code/site/exact.txt"})
    assert whole["cut"] is None and whole["text"] == "x" * MAX_CHARS + "\n"
    start, seen = len(text.rstrip("\n").split("\n")) + 1, []
    while start:  # the short lines after it, page after page, every one once
        out = call(kb, "raw.read", {"path": "code/site/bundle.min.js", "start": start, "lines": 1000})
        assert len(out["text"]) <= MAX_CHARS and out["cut"] is None
        seen.append(out["text"])
        start = out["next_line"]
    assert "".join(seen) == short
