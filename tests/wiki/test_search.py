"""`tools search`: SQLite FTS5 ranking on a generated 4,000-page wiki, type weighting, incremental index."""

from __future__ import annotations

import json
import os

from click.testing import CliRunner

from tools import search
from tools.cli import cli
from tools.sitegen.synthetic import synthetic_wiki, write_wiki

from .conftest import page, write


def test_ranking_incremental_index_and_no_query_syntax_from_input(kb):
    write_wiki(kb.wiki, synthetic_wiki(4000, seed=3))
    write(kb.wiki, "concepts/splash-blocks.md", page("Splash attention block sizes", "concept",
          "# Splash attention block sizes\n\nChoosing block_q and block_kv for splash attention on TPU.\n"))
    filler = " ".join(["splash attention block sizes and a great deal of other generated text"] * 3 + ["word"] * 3000)
    write(kb.wiki, "codebases/big/modules/huge.md", page("huge", "codebase", f"# huge\n\n{filler}\n",
          tags="[codebase, module]", repo="big", path="raw/code/big"))
    total, hits = search.search(kb, "splash attention block sizes", limit=5)
    assert hits[0].path == "concepts/splash-blocks.md", [h.path for h in hits]
    assert "codebases/big/modules/huge.md" not in [h.path for h in hits[:1]]
    assert "**splash**" in hits[0].snippet.lower()
    # incremental: one edit re-reads one page, a removal drops it
    counts = search.refresh(kb)
    assert counts["added"] == counts["updated"] == counts["removed"] == 0 and counts["unchanged"] > 4000
    p = kb.wiki / "concepts/splash-blocks.md"
    p.write_text(p.read_text().replace("block_q", "block_q and a new quokka"))
    os.utime(p, ns=(p.stat().st_atime_ns, p.stat().st_mtime_ns + 10**9))
    assert search.refresh(kb)["updated"] == 1
    assert [h.path for h in search.search(kb, "quokka")[1]] == ["concepts/splash-blocks.md"]
    p.unlink()
    assert search.refresh(kb)["removed"] == 1 and search.search(kb, "quokka")[0] == 0
    # FTS5 operators in the input are words, never syntax
    for q in ('NEAR(a b', '"unbalanced', "a AND OR NOT", "col:value", "*", "^start"):
        search.search(kb, q)
    r = CliRunner().invoke(cli, ["--root", str(kb.root), "search", "splash", "attention", "--type", "kernel",
                                 "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    assert out["hits"] and all(h["type"] == "kernel" for h in out["hits"])


def test_query_returns_cited_passages(kb):
    write(kb.wiki, "concepts/remat.md", page("Rematerialization", "concept",
          "# Rematerialization\n\nIntro text about memory.\n\n## Choosing a policy\n\n"
          "The remat policy dots_saveable keeps matmul outputs and recomputes the rest, trading FLOPs for HBM.\n"))
    write(kb.wiki, "concepts/other.md", page("Other", "concept", "# Other\n\nNothing about it here.\n"))
    r = CliRunner().invoke(cli, ["--root", str(kb.root), "query", "which", "remat", "policy", "keeps", "matmul",
                                 "outputs?", "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    assert out[0]["cite"] == "wiki/concepts/remat.md § Choosing a policy"
    assert "dots_saveable" in out[0]["text"]
    none = CliRunner().invoke(cli, ["--root", str(kb.root), "query", "the", "of", "a"])
    assert "No passage" in none.output
