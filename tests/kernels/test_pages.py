"""Kernel pages, the directory page and the `tools kernels scan` command."""

from __future__ import annotations

import json

from click.testing import CliRunner

from tests.kernels.helpers import scan, src
from tools import pages
from tools.cli import cli
from tools.kernels.pages import directory_page, kernel_pages, page_paths
from tools.writer import Writer

EVIL = src('''
def _k(x_ref, o_ref):
  o_ref[...] = x_ref[...]

def evil_attention(x):
  """Fast <script>alert(1)</script> attention | with pipes."""
  return pl.pallas_call(_k, out_shape=x, grid=(2,), in_specs=[pl.BlockSpec((8, 128), lambda i: (i, 0))],
                        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel",)))(x)

def _helper(x):
  return pl.pallas_call(_k, out_shape=x)(x)

def gmm(x):
  return _helper(x)
''')
OTHER = src('''
def gmm(x):
  return pl.pallas_call(_k, out_shape=x, interpret=True)(x)
''')


def link(path: str, line: int) -> str:
    return f"https://example.test/blob/abc/{path}#L{line}"


def make_pages():
    sites = scan({"ops/evil.py": EVIL, "ops/v2/gmm.py": OTHER})
    return sites, kernel_pages(sites, "my-repo", "abc123", link)


def test_one_valid_page_per_kernel_with_links_and_escaping():
    _, out = make_pages()
    assert sorted(p.path for p in out) == [
        "kernels/my-repo/evil_attention.md", "kernels/my-repo/gmm--ops-evil.md", "kernels/my-repo/gmm--v2-gmm.md"]
    for p in out:
        assert pages.validate(p.path, p.meta, p.body) == []
        assert p.meta["type"] == "kernel" and p.meta["repo"] == "my-repo" and p.meta["commit"] == "abc123"
    evil = next(p for p in out if p.meta["title"] == "evil_attention")
    assert "<script>" not in evil.body and "&lt;script&gt;" in evil.body
    assert "attention \\| with pipes" in evil.body
    assert f"(https://example.test/blob/abc/ops/evil.py#L{evil.meta['line']})" in evil.body
    assert "`(8, 128)`" in evil.body and "`('parallel',)`" in evil.body
    assert set(pages.regions(evil.body)) == {"summary", "launch-sites", "signature", "body", "parameters", "callers"}
    assert evil.meta["backend"] == "tpu" and evil.meta["category"] == "attention"


def test_directory_groups_by_category_with_relative_links(tmp_path):
    _, out = make_pages()
    records = [{**p.meta, "page": p.path} for p in out]
    records.append({"type": "kernel", "title": "x|y", "repo": "other", "backend": "gpu-triton",
                    "category": "moe/grouped matmul", "kind": "test", "page": "kernels/other/x-y.md"})
    d = directory_page(records)
    assert d.path == "kernels/index.md" and pages.validate(d.path, d.meta, d.body) == []
    assert "[evil\\_attention](my-repo/evil_attention.md)" in d.body
    assert "| moe/grouped matmul | 2 | my-repo 2 | interpret 1, tpu 1 |" in d.body
    assert "x\\|y" in d.body and d.body.index("x\\|y") > d.body.index("## In tests, benchmarks and examples")
    assert "3 library kernels from 2 repositories, and 1 more in tests" in d.body
    assert d.body.index("## attention") < d.body.index("## moe/grouped matmul")  # category order
    one = directory_page([{**out[0].meta, "page": out[0].path}])
    assert "1 library kernel from 1 repository." in one.body


def test_pages_go_through_the_writer_idempotently(tmp_path):
    _, out = make_pages()
    w = Writer(tmp_path / "wiki")
    assert {w.write_page(p) for p in out} == {"created"}
    assert {w.write_page(p) for p in out} == {"unchanged"}
    text = (tmp_path / "wiki" / out[0].path).read_text()
    meta, body = pages.split(text)
    assert pages.validate(out[0].path, meta, body) == []


def test_cli_scan_json_and_table(tmp_path):
    repo = tmp_path / "repo"
    (repo / "ops").mkdir(parents=True)
    (repo / "ops" / "evil.py").write_text(EVIL)
    r = CliRunner().invoke(cli, ["kernels", "scan", str(repo), "--json"])
    assert r.exit_code == 0, r.output
    rows = [json.loads(line) for line in r.output.splitlines()]
    assert [(x["path"], x["kernel"], x["backend"]) for x in rows] == [
        ("ops/evil.py", "evil_attention", "tpu"), ("ops/evil.py", "gmm", "tpu")]
    assert {"path", "line", "kernel", "impl", "backend", "category", "kind", "entry", "grid", "block_shapes",
            "dimension_semantics", "summary", "stability", "vendored_from"} <= set(rows[0])
    r = CliRunner().invoke(cli, ["kernels", "scan", str(repo)])
    assert r.exit_code == 0 and "evil_attention" in r.output and "2 launch sites, 2 kernels" in r.output
    assert CliRunner().invoke(cli, ["kernels", "scan", str(tmp_path / "missing")]).exit_code != 0


def test_page_paths_map_every_site_to_its_page():
    sites, out = make_pages()
    where = page_paths(sites, "my-repo")
    assert set(where.values()) == {p.path for p in out} and len(where) == len(sites)


def test_a_kernel_s_page_name_never_depends_on_the_others_of_its_name():
    """A user's report on tpu-inference: five kernels named `generate_rpa_metadata` were numbered `-2`, `-3`...
    in order, so a kernel added or removed beside them moved the others' pages, and the notes written on one, to
    another kernel. Each is named by the shortest end of its module path no other shares."""
    from tools.kernels.pages import _slugs

    where = "tpu_inference.kernels.stacked_rpa.{}.schedule.generate_rpa_metadata"
    keys = [("generate_rpa_metadata", where.format(d)) for d in ("decode.nsw", "prefill.nsw", "sliding")]
    before = _slugs(keys)
    assert before[keys[0]] == "generate_rpa_metadata--decode-nsw-schedule", before
    assert len(set(before.values())) == 3
    added = _slugs(keys + [("generate_rpa_metadata", where.format("aaa.nsw"))])
    assert all(added[k] == before[k] for k in keys)  # a kernel added beside them renames none
    # one removed: the others may take a shorter name, never one another kernel had (its notes stay its own)
    removed = _slugs(keys[1:])
    assert not [k for k in keys[1:] if removed[k] in before.values() and removed[k] != before[k]], removed
