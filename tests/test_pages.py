"""tools.pages: the page model, parse/render, generated regions, validation."""

from __future__ import annotations

import datetime as dt

import pytest
import yaml

from tools import pages
from tools.pages import Problem, merge_body, region, regions, render, split, validate


def test_types_and_folders():
    assert list(pages.TYPES)[:9] == ["source", "codebase", "concept", "kernel", "model", "hypothesis",
                                     "experiment", "observation", "analysis"]
    assert set(pages.CONTENT_TYPES) == set(pages.TYPES) - {"index", "log"}
    folders = [t.folder for t in pages.TYPES.values() if t.folder]
    assert len(folders) == len(set(folders))
    exp = {k.name: k for k in pages.TYPES["experiment"].keys}
    assert exp["status"].choices == ("in_progress", "filed")
    assert exp["verdict"].choices == ("supported", "refuted", "inconclusive", "invalid", "crash", "baseline",
                                      "calibration")
    assert exp["metrics"].kind is dict


def test_split_and_render_round_trip():
    meta = {"updated": "2026-01-02", "zeta": 1, "title": "T: colon", "type": "experiment", "lane": "remat",
            "model": "m", "created": "2026-01-01", "notes": "two\nlines"}
    text = render(meta, "\n\nBody\n")
    assert text.startswith("---\ntitle: 'T: colon'\ntype: experiment\ncreated: '2026-01-01'\n"
                           "updated: '2026-01-02'\nmodel: m\nlane: remat\n")  # common keys, then schema order
    assert text.index("notes: |") < text.index("zeta: 1")  # others sorted
    assert text.endswith("---\n\nBody\n")
    back, body = split(text)
    assert back == meta and body == "\nBody\n"


def test_split_without_frontmatter_and_errors():
    assert split("# Just text\n") == (None, "# Just text\n")
    assert split("---\n---\nx") == (None, "---\n---\nx")  # an empty block needs a line between the fences
    assert split("---\n\n---\nx") == ({}, "x")
    with pytest.raises(pages.FrontmatterError, match=r"invalid YAML frontmatter \(line 2\)"):
        split("---\ntitle: [a\n---\n")
    with pytest.raises(pages.FrontmatterError, match="not a mapping"):
        split("---\n- a\n---\n")


def test_dates_load_as_dates_and_validate():
    meta, _ = split("---\ntitle: x\ntype: concept\ncreated: 2026-01-01\n---\n")
    assert meta["created"] == dt.date(2026, 1, 1)
    assert validate("p.md", meta) == []


def test_regions_and_merge_keep_human_text():
    gen1 = "# T\n\n" + region("a", "one\n") + "\n" + region("b", "two")
    human = gen1.replace("# T\n", "# T\n\nMine above.\n") + "\nMine below.\n"
    assert regions(human) == {"a": "one\n", "b": "two\n"}
    gen2 = "# ignored\n\n" + region("a", "ONE\n") + region("c", "three\n")
    merged = merge_body(human, gen2)
    assert "Mine above." in merged and "Mine below." in merged
    assert "ONE" in merged and "two" not in merged and merged.rstrip().endswith(region("c", "three\n").rstrip())
    assert merge_body("anything", "no regions") == "no regions"


def test_region_markers():
    assert region("x.y-z", "t") == "<!-- tools:begin x.y-z -->\nt\n<!-- tools:end x.y-z -->\n"


def test_validation_messages():
    probs = validate("wiki/e.md", {"title": "E", "type": "experiment", "status": "running", "verdict": "supported",
                                   "model": "m", "lane": 3, "tags": "x", "created": "soon"}, "## Setup\n")
    assert [str(p) for p in probs] == [
        "wiki/e.md: tags: must be a list of strings",
        "wiki/e.md: created: not a date: 'soon'",
        "wiki/e.md: lane: expected str, got int",
        "wiki/e.md: status: invalid value 'running' (expected one of in_progress, filed)",
        "wiki/e.md: metrics: a supported experiment has no metrics",
        "wiki/e.md: sections: missing section '## Hypothesis under test'",
        "wiki/e.md: sections: missing section '## Results'",
        "wiki/e.md: sections: missing section '## Profile'",
        "wiki/e.md: sections: missing section '## HLO'",
        "wiki/e.md: sections: missing section '## Verdict'",
    ]
    assert probs[-1].severity == "warning" and probs[0].severity == "error"
    assert validate("x.md", None) == [Problem("x.md", "frontmatter", "missing")]
    assert [str(p) for p in validate("x.md", {"type": "nope"})][:1] == [
        "x.md: type: unknown type 'nope' (expected one of " + ", ".join(pages.TYPES) + ")"]
    assert str(Problem("x.md", "f", "p", line=3)) == "x.md:3: f: p"


def test_filed_experiment_needs_a_verdict_and_kernel_choices():
    probs = validate("e.md", {"title": "E", "type": "experiment", "status": "filed", "model": "m", "lane": "l"})
    assert [p.field for p in probs] == ["verdict"]
    k = {"title": "K", "type": "kernel", "repo": "r", "path": "p", "line": True, "backend": "cuda",
         "category": "attention", "kind": "library"}
    assert [(p.field, p.problem.split(" ")[0]) for p in validate("k.md", k)] == [
        ("line", "expected"), ("backend", "invalid")]


def test_render_is_valid_yaml_for_odd_strings():
    meta = {"title": "a: b # c", "type": "concept", "tags": ["x y", "- z"], "aliases": ["'q'", '"d"']}
    assert yaml.safe_load(render(meta, "b").split("---\n")[1]) == meta


def test_validate_never_raises_on_a_list_type():
    assert [p.field for p in validate("x.md", {"title": "X", "type": ["concept"]})] == ["type"]


def test_split_reports_an_impossible_date():
    with pytest.raises(pages.FrontmatterError):
        split("---\ncreated: 2026-13-45\n---\n")


def test_quoted_or_unclosed_markers_never_swallow_hand_written_text():
    from tools.pages import merge_body, region

    real = region("index", "old listing")
    quoted = "Marker example:\n\n```\n<!-- tools:begin index -->\n```\n\nMY NOTES: keep me\n\n"
    stray = "<!-- tools:begin index -->\nSTRAY NOTES\n\n"
    both_quoted = "```md\n<!-- tools:begin index -->\nan example\n<!-- tools:end index -->\n```\n\n"
    for before in (quoted, stray, both_quoted):
        once = merge_body(before + real, region("index", "new listing"))
        assert before in once and "new listing" in once and "old listing" not in once, once
        assert merge_body(once, region("index", "new listing")) == once  # idempotent


def test_an_end_marker_quoted_in_a_block_inside_the_region_does_not_end_it():
    """A crash log (fenced on the page) that printed `<!-- tools:end experiment -->` ended the region there: the
    rest of the generated page was lost, and the next write kept only the part before the log's marker. A page
    written before markers in content were neutralised must still read whole; new content gets them neutralised."""
    from tools.pages import merge_body, region, regions

    inner = "## Results\n\n````text\nlog\n<!-- tools:end experiment -->\n```\n````\n\n## Verdict\n\nok\n"
    old_page = "# T\n\n<!-- tools:begin experiment -->\n" + inner + "<!-- tools:end experiment -->\n\nmine\n"
    assert regions(old_page) == {"experiment": inner}
    once = merge_body(old_page, region("experiment", "new\n"))
    assert once == "# T\n\n<!-- tools:begin experiment -->\nnew\n<!-- tools:end experiment -->\n\nmine\n", once
    quoted = region("experiment", "hypothesis `<!-- tools:end experiment -->` said\n## Verdict\n")
    assert "Verdict" in regions(quoted)["experiment"] and quoted.count("<!-- tools:end experiment -->") == 1
