"""`tools search`: SQLite FTS5 ranking on a generated 4,000-page wiki, type weighting, incremental index."""

from __future__ import annotations

import pytest

import json
import os

from click.testing import CliRunner

from tools import search
from tools.cli import cli
from tools.sitegen.synthetic import synthetic_wiki, write_wiki

from .conftest import page, write


@pytest.mark.slow
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


def test_paths_and_generated_lists_do_not_rank_a_page(kb):
    # a page whose only "pipeline" words are folder names and a generated "where it appears" list
    listing = "\n".join(f"- [`pipelines/stage_{i}/parallelism_{i}.py`](../../raw/code/x/pipelines/stage_{i}/p.py)"
                        for i in range(30))
    write(kb.wiki, "codebases/x/overview.md", page("x codebase", "codebase", f"# x\n\n## Files\n\n{listing}\n"))
    write(kb.wiki, "concepts/other.md", page("Other", "concept",
          "# Other\n\n<!-- tools:begin appears-x -->\n- `x.pipeline_parallelism.schedule` ×40\n"
          "<!-- tools:end appears-x -->\n"))
    write(kb.wiki, "sources/gpipe.md", page("GPipe", "source",
          "# GPipe\n\nPipeline parallelism splits the layers into stages; the bubble shrinks with micro-batches.\n"))
    _, hits = search.search(kb, "pipeline parallelism")
    assert hits[0].path == "sources/gpipe.md", [h.path for h in hits]
    assert "](" not in "".join(h.snippet for h in hits) and "<!--" not in "".join(h.snippet for h in hits)


def test_words_are_not_over_stemmed_but_find_their_forms_synonyms_and_camel_case_parts(kb):
    write(kb.wiki, "concepts/typing.md", page("Typing", "concept", "# Typing\n\nUse Optional for a missing value.\n"))
    write(kb.wiki, "concepts/flags.md", page("Flags", "concept", "# Flags\n\nThe compiler options that matter.\n"))
    write(kb.wiki, "kernels/k/bwd.md", page("mha_bwd", "kernel", "# mha_bwd\n\nThe dkv pass of the kernel.\n"))
    write(kb.wiki, "kernels/k/rms.md", page("rms_norm", "kernel", "# rms_norm\n\nA normalization kernel.\n"))
    write(kb.wiki, "concepts/shard.md", page("Meshes", "concept", "# Meshes\n\nHow arrays are sharded.\n"))
    assert [h.path for h in search.search(kb, "options")[1]] == ["concepts/flags.md"]  # not "Optional"
    assert search.search(kb, "attention backward")[1][0].path == "kernels/k/bwd.md"
    assert search.search(kb, "RMSNorm")[1][0].path == "kernels/k/rms.md"
    assert search.search(kb, "sharding")[1][0].path == "concepts/shard.md"
    # a one-letter word is itself: it was dropped, and "b" asked for "bs", "bed" and "bing" instead
    write(kb.wiki, "concepts/lang.md", page("Lang", "concept", "# Lang\n\nThe kernel is written in C with a K of 128.\n"))
    write(kb.wiki, "concepts/bed.md", page("Bed", "concept", "# Bed\n\nA bed of roses.\n"))
    assert [h.path for h in search.search(kb, "C")[1]] == ["concepts/lang.md"]
    assert [h.path for h in search.search(kb, "b")[1]] == []
    # a link target holding one pair of parentheses is still a target, not prose (from a review)
    assert search.readable("[Amdahl](https://en.wikipedia.org/wiki/Amdahl%27s_law_(computing)) more") == \
        "[Amdahl] more"


def test_a_page_holding_every_word_beats_one_repeating_a_word(kb):
    write(kb.wiki, "concepts/attention.md", page("Attention", "concept",
          "# Attention\n\n" + "Attention attention kernel. " * 40 + "\n"))
    write(kb.wiki, "kernels/k/ragged.md", page("decode", "kernel",
          "# decode\n\nA ragged paged attention kernel for decoding.\n" + "Other words. " * 40))
    assert search.search(kb, "ragged paged attention kernel")[1][0].path == "kernels/k/ragged.md"


def test_a_code_name_ranks_the_pages_holding_it_whole_first(kb):
    """`pallas_call` is two words to the tokenizer: a module page repeating `pallas` and holding
    `interpret_pallas_call` and `pallas_call_registration` outscored, on BM25, each kernel page calling
    `pallas_call` (measured on the demo knowledge base's jax pages). Whole names come first; a version such as
    `Wan2.2` is no code name."""
    write_wiki(kb.wiki, synthetic_wiki(300, seed=5))  # words as rare as in a real knowledge base
    write(kb.wiki, "codebases/jax/modules/mlir.md", page("jax._src.interpreters.mlir", "codebase",
          "# jax._src.interpreters.mlir\n\n" + "Lowering rules for pallas and Pallas TPU call sites. " * 30
          + "\nSee `interpret_pallas_call` and `pallas_call_registration`.\n",
          tags="[codebase, module]", repo="jax", path="raw/code/jax"))
    write(kb.wiki, "kernels/jax/softmax.md", page("softmax", "kernel",
          "# softmax\n\nThe site: entry `pallas_call`, backend gpu-triton.\n" + "Block sizes and grid. " * 30))
    write(kb.wiki, "kernels/jax/rms.md", page("rms", "kernel",
          "# rms\n\nLaunched as `pl.pallas_call(kernel, grid=g)`.\n" + "Block sizes and grid. " * 30))
    hits = [h.path for h in search.search(kb, "pallas_call")[1]]
    assert hits.index("kernels/jax/softmax.md") < hits.index("codebases/jax/modules/mlir.md"), hits
    assert hits.index("kernels/jax/rms.md") < hits.index("codebases/jax/modules/mlir.md"), hits  # a module prefix
    assert search.identifiers("save_dot_except_mlp with jax.lax.scan on Wan2.2, v5e, e.g. i.e. this.") == [
        "save_dot_except_mlp", "jax.lax.scan"]
    assert search.identifiers("a" * 100_000) == []  # linear: no pattern backtracking over a long run of letters


def test_a_code_name_is_not_outranked_by_a_form_of_its_parts_and_its_own_page_comes_first(kb):
    """On an ingest of jax's Pallas sources, `pallas_call` put a module page first because its docstrings said
    "Calls the function" ("pallas" and "call" being on most pages, only the rare form "calls" weighed), and
    `layer_norm` put `layer_norm_forward`'s kernel page before `layer_norm`'s."""
    write_wiki(kb.wiki, synthetic_wiki(300, seed=5))
    for i in range(40):  # "pallas" and "call" on most pages, as in a Pallas codebase's knowledge base
        write(kb.wiki, f"concepts/filler{i}.md", page(f"Filler {i}", "concept",
              f"# Filler {i}\n\nA pallas kernel and its call site number {i}.\n"))
    write(kb.wiki, "codebases/jax/modules/primitives.md", page("jax._src.pallas.primitives", "codebase",
          "# jax._src.pallas.primitives\n\nPallas-specific primitives. Calls the function; calling a kernel.\n"
          "See `pallas_call`.\n", tags="[codebase, module]", repo="jax", path="raw/code/jax"))
    for name in ("layer_norm", "layer_norm_forward", "layer_norm_backward"):
        write(kb.wiki, f"kernels/jax/{name}.md", page(name, "kernel",
              f"# {name}\n\nFused layer norm. The site: entry `pallas_call`, backend gpu-triton.\n"))
    hits = [h.path for h in search.search(kb, "pallas_call", limit=20)[1]]
    assert hits.index("kernels/jax/layer_norm.md") < hits.index("codebases/jax/modules/primitives.md"), hits
    assert [h.path for h in search.search(kb, "layer_norm")[1]][0] == "kernels/jax/layer_norm.md"
    assert [h.path for h in search.search(kb, "fused layer_norm_backward")[1]][0] == \
        "kernels/jax/layer_norm_backward.md"


def test_query_finds_a_generated_section_by_its_heading_and_a_code_name_whole(kb):
    """`tools query kernel body of rms_norm_forward`: the section between region markers was skipped whole (a block
    that starts with `<!--` and ends with `-->`), the heading did not count, and `rms_norm_forward` was cut to
    `rms_no`, which `rms_norm` starts with too."""
    def kernel(name, impl):
        write(kb.wiki, f"kernels/k/{name}.md", page(name, "kernel",
              f"# {name}\n\n## What it does\n\nModule containing rms forward and backward pass.\n\n"
              f"## Kernel body\n\n<!-- tools:begin body -->\n- `{impl}` at [rms.py:27](rms.py#L27)\n"
              "<!-- tools:end body -->\n\n## Callers\n\n<!-- tools:begin callers -->\n- `ops._bwd`\n"
              "<!-- tools:end callers -->\n"))
    kernel("rms_norm", "rms_norm_kernel")
    kernel("rms_norm_forward", "rms_norm_forward_kernel")
    out = json.loads(CliRunner().invoke(cli, ["--root", str(kb.root), "query", "kernel", "body", "of",
                                              "rms_norm_forward", "--json"]).output)
    assert out[0]["cite"] == "wiki/kernels/k/rms_norm_forward.md § Kernel body", out[:2]
    out = json.loads(CliRunner().invoke(cli, ["--root", str(kb.root), "query", "callers", "of", "rms_norm",
                                              "--json"]).output)
    assert out[0]["cite"] == "wiki/kernels/k/rms_norm.md § Callers", out[:2]


def test_query_answers_with_the_matching_table_row(kb):
    rows = "\n".join(f"| k{i}.py:{i} | `({i}, 128)` |" for i in range(60))
    write(kb.wiki, "kernels/k/table.md", page("tiles", "kernel",
          f"# tiles\n\n## Block shapes\n\n| Site | Block shapes |\n|---|---|\n{rows}\n| gmm.py:526 | `(tm, tk)` quokka |\n"))
    r = CliRunner().invoke(cli, ["--root", str(kb.root), "query", "quokka", "block", "shapes", "--json"])
    out = json.loads(r.output)
    assert out[0]["text"].startswith("| Site | Block shapes |") and "gmm.py:526" in out[0]["text"]
    assert "k0.py" not in out[0]["text"]


def test_query_cites_the_headings_markdown_renders_never_a_code_comment(kb):
    """A `# comment` in a code block was taken for a heading: the passage after it was cited under a section that
    does not exist (`tools wiki read section=` then failed), and paragraphs matched only by the page's title were
    answers (a rule of dashes among them)."""
    from tools.agent.registry import call

    write(kb.wiki, "concepts/sharding.md", page("Sharding zebra", "concept",
          "# Sharding zebra\n\n## Partition rules\n\n```python\nx = 1\n\n# Replicate the batch axis across hosts\n"
          "y = 2\n```\n\nThe zebra partition rule shards the batch axis.\n\n-----\n\n"
          "Setext section\n--------------\n\nAnother zebra rule here.\n\n## Elsewhere\n\nUnrelated prose.\n"))
    out = json.loads(CliRunner().invoke(cli, ["--root", str(kb.root), "query", "zebra", "partition", "rule",
                                              "--json"]).output)
    cites = [p["cite"] for p in out]
    assert cites[0] == "wiki/concepts/sharding.md § Partition rules", cites
    assert "wiki/concepts/sharding.md § Setext section" in cites
    assert not any("Replicate" in c for c in cites) and not any(p["text"] in ("Unrelated prose.", "-----")
                                                                for p in out), out
    for p in out:
        section = p["cite"].split(" § ", 1)[1]
        assert call(kb, "wiki.read", {"path": p["path"], "section": section})["body"], section


def test_a_pages_kebab_case_title_names_it(kb):
    """On 5,838 awscli example pages `tools search ec2 describe-instances` put `ec2/describe-instances.md` fifth
    and `describe-instances` thirteenth: pages that repeated "describe" and "instances" outscored the one it names."""
    from tools import search

    for other in ("instance-status", "instance-attribute", "instance-types", "instances-for", "spot-instances",
                  "reserved-instances", "scheduled-instances", "instance-event-windows"):
        write(kb.wiki, f"sources/ec2/describe-{other}.md", page(f"ec2 describe-{other}", "source",
              f"# ec2 describe-{other}\n\n" + "Describes the instances: ec2 describe the instances. " * 8))
    write(kb.wiki, "sources/ec2/describe-instances.md", page("ec2 describe-instances", "source",
          "# ec2 describe-instances\n\nDescribes the specified instances or all instances.\n"))
    for q in ("ec2 describe-instances", "describe-instances"):
        _, hits = search.search(kb, q)
        assert hits[0].path == "sources/ec2/describe-instances.md", (q, [h.path for h in hits[:5]])


def test_searches_in_parallel_processes_build_one_index_each_page_once(kb):
    """An agent's parallel tool calls: four `tools search` processes on a fresh index raced to make its tables
    (one failed: "table pages already exists") and each added the pages it had not seen indexed, so the index held
    every page several times, for good ("total": 56 where 14 pages match). Then one new page, four searches again."""
    import sqlite3
    import subprocess
    import sys

    write_wiki(kb.wiki, synthetic_wiki(600, seed=5))

    def parallel(n=4):
        procs = [subprocess.Popen([sys.executable, "-m", "tools", "--root", str(kb.root), "search", "attention",
                                   "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for _ in range(n)]
        outs = [p.communicate(timeout=300) for p in procs]
        assert all(p.returncode == 0 for p in procs), [e for _, e in outs]
        return [json.loads(o) for o, _ in outs]

    def rows():
        db = sqlite3.connect(kb.root / ".tools-cache" / "search.sqlite")
        try:
            return (db.execute("SELECT count(*) FROM docs").fetchone()[0],
                    db.execute("SELECT count(*) FROM pages").fetchone()[0])
        finally:
            db.close()

    answers = parallel()
    docs, pages = rows()
    assert docs == pages > 500, (docs, pages)
    assert len({json.dumps(a, sort_keys=True) for a in answers}) == 1, answers
    write(kb.wiki, "concepts/new-attention.md", page("New attention", "concept", "# New attention\n\nattention\n"))
    again = parallel()
    assert rows()[0] == rows()[1] == pages + 1
    assert all(a["total"] == answers[0]["total"] + 1 for a in again), (answers[0]["total"], again)
