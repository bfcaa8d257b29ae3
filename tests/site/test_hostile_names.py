"""Names in frontmatter are other people's text (hand-kept pages, an agent's): the generated explorer pages show
them as text. A lane named `__DATA__` put the data blob, unescaped, into the explorer's HTML (a script ran); a
title or a status holding `](javascript:...)` became a link; a `|` shifted a table's columns; two models whose names
slug alike shared one folder, one of them lost."""

from __future__ import annotations

import json
import re

from tools import pages
from tools.sitegen.generate import generate

XSS = "<img src=x onerror=document.title=1>"


def _write(wiki, rel, meta, body="x\n"):
    path = wiki / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(pages.render(meta, body))


def _run(wiki, model, lane, v, **meta):
    exp_id = f"2026-01-01-v{v:03d}-r"
    _write(wiki, f"experiments/{model}/{lane}/{exp_id}.md", {
        "title": "r", "type": "experiment", "model": model, "lane": lane, "variant": "s/cpu", "exp_id": exp_id,
        "version": v, "slug": "r", "status": "filed", "verdict": "supported", "metrics": {"tokens_per_s": 100.0 + v},
        **meta})


def test_hostile_names_stay_text_in_every_generated_view(tmp_path):
    wiki = tmp_path / "wiki"
    _write(wiki, "models/m.md", {"title": "T](javascript:document.title=1) [y", "type": "model", "model": "m"})
    _run(wiki, "m", "__DATA__", 1, variant=XSS)
    for name in ("llama_7b", "llama-7b"):
        _write(wiki, f"models/{name}.md", {"title": name, "type": "model", "model": name})
        _run(wiki, name, "cpu", 1, description=f"only {name}")
    _write(wiki, "loops/x.md", {"title": "Loop: x", "type": "loop", "model": "a|b|c", "lane": "l",
                                "status": "[click](javascript:document.title=1)"})
    _write(wiki, "notes/a b/p0#x.md", {"title": "odd name", "type": "concept"})
    files = generate(wiki).files

    explorer = files["explore/experiments/m/explorer.html"]
    assert "<img" not in explorer and "\\u003cimg" in explorer
    assert explorer.count("<script") == explorer.count("</script>")
    assert 'value="__DATA__"' in explorer  # the lane is its name, not the data
    generated_md = {k: v for k, v in files.items() if k.startswith("explore/") and k.endswith(".md")}
    for name, text in generated_md.items():
        assert not re.search(r"(?<!\\)\]\(\s*javascript:", text, re.I), name
    loops_row = next(ln for ln in files["explore/loops/index.md"].splitlines() if ln.startswith("| [x]"))
    assert len(re.findall(r"(?<!\\)\|", loops_row)) == 7, loops_row  # six cells, the model's bars escaped
    # two models whose names slug alike: two folders, each with its own runs
    folders = {k.split("/")[2] for k in files if k.startswith("explore/experiments/llama")}
    assert len(folders) == 2, folders
    for name in ("llama_7b", "llama-7b"):
        html = next(v for k, v in files.items() if k.endswith("/runs.html") and f"only {name}" in v)
        assert f"only {'llama-7b' if name == 'llama_7b' else 'llama_7b'}" not in html
    # a page whose file name holds `#` and a space: its graph link is percent-encoded (`p0#x/` went to page p0)
    graph = json.loads(files["explore/graph/graph.json"])
    assert "wiki/notes/a%20b/p0%23x/" in {n["url"] for n in graph["nodes"]}
