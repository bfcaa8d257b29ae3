"""`tools ingest` on a messy repository and on real code: pages, links, incrementality."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from tools import pages
from tools.cli import cli

import messy_repo

LINK = re.compile(r"\]\(([^)\s]+)\)")


def ingest(kb: Path, *args: str):
    result = CliRunner().invoke(cli, ["--root", str(kb), "ingest", *args], catch_exceptions=False)
    # 0: clean; 3: completed, and some files were skipped (each named in skipped.tsv)
    assert result.exit_code == (3 if re.search(r"[1-9]\d* skipped|\"files_skipped\": [1-9]", result.output) else 0), \
        result.output
    return result


def snapshot(folder: Path) -> dict[str, tuple[bytes, int]]:
    return {str(p.relative_to(folder)): (p.read_bytes(), p.stat().st_mtime_ns)
            for p in sorted(folder.rglob("*")) if p.is_file()}


def relative_links_resolve(page: Path) -> list[str]:
    broken = []
    for target in LINK.findall(page.read_text()):
        if target.startswith(("http://", "https://", "#")):
            continue
        path = target.split("#")[0]
        if not (page.parent / path).exists():
            broken.append(target)
    return broken


@pytest.fixture
def messy(kb):
    messy_repo.write(kb / "raw/code/tiny")
    return kb


def test_messy_repo_ingests_with_every_skip_explained(messy):
    out = ingest(messy, "raw/code/tiny", "--json").output
    import json
    report = json.loads(out)
    skipped = dict(map(tuple, report["skipped"]))
    assert skipped["broken/binary.py"] == "binary file"
    assert skipped["broken/huge.py"].startswith("too large")
    assert skipped["broken/link.py"] == "symlink (not followed)"
    assert skipped["broken/loop"] == "symlink to directory (not followed)"
    assert skipped["broken/dangling.py"] == "dangling symlink"
    assert skipped["broken/self_loop"] == "symlink loop"
    # Syntax errors and Python 2 are read around the lines no Python parses; PEP 695 is read whole (downlevel).
    partial = dict(map(tuple, report["partial"]))
    assert partial["broken/syntax_error.py"].startswith("syntax error: invalid syntax (line 1)")
    assert "Missing parentheses in call to 'print'" in partial["broken/py2.py"]
    assert "broken/pep695.py" not in partial and "broken/pep695.py" not in skipped
    assert "broken/latin1.py" not in skipped and "broken/latin1.py" not in partial
    assert report["files_skipped"] == len(skipped) == 6
    # what was parsed leaves out the files set aside (binary, too large): it counted them too
    set_aside = sum(1 for why in skipped.values() if not why.startswith(("symlink", "dangling")))
    assert report["files_analyzed"] == report["files_scanned"] - set_aside, report

    wiki = messy / "wiki"
    overview = (wiki / "codebases/tiny/overview.md").read_text()
    meta, body = pages.split(overview)
    assert meta["commit"] == messy_repo.SHA and meta["type"] == "codebase"
    assert pages.validate("overview.md", meta, body) == []
    assert "Tinymodel is a small Llama-style trainer" in body
    assert "> tinymodel 0.3.1 — A tiny trainer" in body
    assert "tiny-train → tinymodel.train:main" in body
    # file:line links point at the pinned commit on the host
    assert f"https://github.com/acme/tinymodel/blob/{messy_repo.SHA}/tinymodel/layers.py#L" in body
    assert "--xla_tpu_enable_async_collective_fusion" in body  # flag from Python
    assert "--xla_enable_async_all_gather" in body  # flag from a shell script
    # a file opened and then skipped (binary, too large) is counted once, as skipped, not also as read
    files = re.search(r"\| Files \| (\d+) in the tree, (\d+) read \(\d+ Python\), (\d+) set aside \(binary, too "
                      r"large, unreadable\); (\d+) links or special files not followed \|", body)
    assert files and int(files[2]) == report["files_scanned"] - 2, files  # broken/binary.py, broken/huge.py
    # the counts add up: read and set aside are the tree; links, never followed, are apart (7 + 7 > 9 before)
    assert int(files[2]) + int(files[3]) == int(files[1]) and int(files[4]) == report["files_skipped"] - 2
    # the default comes from configs/base.yml, a link to its line
    assert re.search(r"\| `remat_policy` \| Rematerialization \(remat\) \| \[`full`\]\([^)]*configs/base.yml#L1\) "
                     r"\| `full` \| 1 \|", body)
    assert re.search(r"\| `ici_fsdp_parallelism` \| Sharding and meshes \| \[`4`\]\([^)]*\) \| `4` \| 1 \|", body)
    for section in ("## Performance-relevant surfaces", "### Configuration knobs", "### Sharding and meshes",
                    "### Rematerialization (remat)", "### Scan over layers", "## Entry points", "## Skipped files"):
        assert section in body, section
    # the notebook's code cell counts, its error output does not
    remat = (wiki / "concepts/rematerialization.md").read_text()
    assert "notebooks/demo.ipynb" in remat and "broken/py2.py" in remat
    symbols = (wiki / "codebases/tiny/symbols.tsv").read_text().splitlines()
    assert symbols[0] == "module\tqualname\tkind\tpath\tline\tdoc"
    assert "tinymodel.layers\tAttention.__call__\tmethod\ttinymodel/layers.py\t10\t" in symbols
    assert any(r.startswith("tinymodel.layers\tblock\tfunction\t") and r.endswith("One block, rematerialized.")
               for r in symbols)
    assert any("\tident\tfunction\tbroken/pep695.py\t4\t" in r for r in symbols)
    # the most imported module gets its own page
    assert (wiki / "codebases/tiny/modules/tinymodel.layers.md").exists()
    log = (wiki / "log.md").read_text()
    assert re.search(r"^## \[\d{4}-\d{2}-\d{2}\] ingest \| tiny$", log, re.M)


def test_reingest_unchanged_writes_nothing(messy):
    ingest(messy, "raw/code/tiny")
    before = snapshot(messy / "wiki")
    out = ingest(messy, "raw/code/tiny").output
    assert "0 created, 0 updated" in out and "0 parsed" in out
    assert snapshot(messy / "wiki") == before


def test_changed_and_deleted_files_update_only_what_they_affect(messy):
    ingest(messy, "raw/code/tiny")
    wiki = messy / "wiki"
    before = snapshot(wiki)
    repo = messy / "raw/code/tiny"
    (repo / "tinymodel/train.py").unlink()
    (repo / "tinymodel/layers.py").write_text((repo / "tinymodel/layers.py").read_text() + "\n\ndef extra():\n    pass\n")
    out = ingest(messy, "raw/code/tiny").output
    assert "1 parsed" in out
    after = snapshot(wiki)
    symbols = (wiki / "codebases/tiny/symbols.tsv").read_text()
    assert "\textra\tfunction\t" in symbols and "tinymodel.train\t" not in symbols
    assert "--xla_tpu_enable_async_collective_fusion" not in (wiki / "codebases/tiny/overview.md").read_text()
    changed = {k for k in after if before.get(k) != after[k]}
    assert "codebases/tiny/symbols.tsv" in changed
    # untouched concept pages keep their bytes and mtimes
    assert "concepts/splash-attention.md" not in changed


def test_a_same_size_edit_whose_mtime_was_put_back_is_read_again(messy):
    """`cp -p`, `rsync -a` and `touch -r` keep an edited file's mtime: the file was still written, and read again."""
    ingest(messy, "raw/code/tiny")
    layers = messy / "raw/code/tiny/tinymodel/layers.py"
    st = layers.stat()
    text = layers.read_text()
    name = re.search(r"^def (\w+)\(", text, re.M).group(1)
    layers.write_text(text.replace(f"def {name}(", f"def {name[::-1][:len(name)]}(", 1))
    os.utime(layers, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert layers.stat().st_size == st.st_size and layers.stat().st_mtime_ns == st.st_mtime_ns
    out = ingest(messy, "raw/code/tiny").output
    assert "1 parsed" in out, out
    assert f"\t{name[::-1]}\tfunction\t" in (messy / "wiki/codebases/tiny/symbols.tsv").read_text()
    out = ingest(messy, "raw/code/tiny").output  # and then it is the cache's again
    assert "0 parsed" in out, out


def test_text_written_outside_generated_regions_survives(messy):
    ingest(messy, "raw/code/tiny")
    page = messy / "wiki/codebases/tiny/overview.md"
    page.write_text(page.read_text() + "\n## Notes\n\nThe remat policy here is the first thing to try.\n")
    (messy / "raw/code/tiny/tinymodel/new.py").write_text("import jax\nx = jax.checkpoint\n")
    ingest(messy, "raw/code/tiny")
    text = page.read_text()
    assert "The remat policy here is the first thing to try." in text
    assert "tinymodel/new.py" in (messy / "wiki/concepts/rematerialization.md").read_text()


def test_second_repo_links_into_the_same_concept_pages(messy):
    messy_repo.write(messy / "raw/code/other", git=False)
    ingest(messy, "--all")
    sharding = (messy / "wiki/concepts/sharding.md").read_text()
    assert "### [tiny](../codebases/tiny/overview.md)" in sharding
    assert "### [other](../codebases/other/overview.md)" in sharding
    # without a known remote, links open the raw/ copy
    assert "(../../raw/code/other/tinymodel/layers.py#L" in sharding
    assert relative_links_resolve(messy / "wiki/concepts/sharding.md") == []
    # a repo that stops showing a concept leaves that concept page; the other repo stays
    for rel in ("tinymodel/layers.py", "docs/guide.md", "configs/base.yml"):
        (messy / "raw/code/other" / rel).unlink()
    ingest(messy, "raw/code/other")
    sharding = (messy / "wiki/concepts/sharding.md").read_text()
    assert "### [tiny]" in sharding and "### [other]" not in sharding


def test_kernel_counts_agree_between_command_overview_and_pages(kb):
    """Two public kernels with one name in two files are two kernels (two pages) everywhere."""
    kernel = messy_repo.pallas_kernel("attention")
    for name in ("a.py", "b.py"):
        (kb / "raw/code/two" / name).parent.mkdir(parents=True, exist_ok=True)
        (kb / "raw/code/two" / name).write_text(kernel)
    out = ingest(kb, "raw/code/two").output
    assert "2 Pallas kernels at 2 launch sites" in out
    assert "| Pallas kernels | 2 kernels, 2 launch sites" in (kb / "wiki/codebases/two/overview.md").read_text()
    assert len(list((kb / "wiki/kernels/two").glob("*.md"))) == 2


def test_bad_targets_fail_with_a_clear_message(kb, tmp_path):
    r = CliRunner().invoke(cli, ["--root", str(kb), "ingest", "raw/code/missing"])
    assert r.exit_code != 0 and "raw/code/missing: no such folder" in r.output
    (tmp_path / "elsewhere").mkdir()
    r = CliRunner().invoke(cli, ["--root", str(kb), "ingest", str(tmp_path / "elsewhere")])
    assert r.exit_code != 0 and "not under" in r.output
    r = CliRunner().invoke(cli, ["--root", str(kb), "ingest"])
    assert r.exit_code == 2
    (kb / "raw/code/x").mkdir()
    (kb / "raw/code/x/README.md").write_text("hi")
    r = CliRunner().invoke(cli, ["--root", str(kb), "ingest", "raw/code/x/README.md"])
    assert r.exit_code == 1 and "is a file" in r.output


@pytest.mark.slow
def test_real_jax_pallas_tree(kb, jax_pallas):
    """End to end on real code the install brings: named kernels, working links, idempotent."""
    shutil.copytree(jax_pallas, kb / "raw/code/jax/jax/experimental/pallas", symlinks=True)
    raw_before = snapshot(kb / "raw")
    ingest(kb, "raw/code/jax")
    wiki = kb / "wiki"
    overview = (wiki / "codebases/jax/overview.md").read_text()
    for name in ("flash_attention", "gmm", "paged_attention", "mha"):
        assert f"`{name}`" in overview, name
    assert "jax/experimental/pallas/ops/tpu/flash_attention.py#L" in overview
    assert "### Sharding and meshes" in overview
    for page in [wiki / "codebases/jax/overview.md", *wiki.glob("concepts/*.md"), *wiki.glob("codebases/jax/modules/*.md")]:
        assert relative_links_resolve(page) == [], page
        meta, body = pages.split(page.read_text())
        assert [p for p in pages.validate(page.name, meta, body) if p.severity == "error"] == []
    assert list(wiki.glob("codebases/jax/modules/jax.experimental.pallas*.md"))
    lint = CliRunner().invoke(cli, ["--root", str(kb), "lint"])
    assert lint.exit_code == 0 and "0 errors, 0 warnings" in lint.output, lint.output
    before = snapshot(wiki)
    ingest(kb, "raw/code/jax")
    assert snapshot(wiki) == before
    assert snapshot(kb / "raw") == raw_before  # raw/ is never modified


@pytest.mark.slow
def test_kernel_pages_directory_and_forks_across_repos(kb, jax_pallas):
    shutil.copytree(jax_pallas, kb / "raw/code/jax/jax/experimental/pallas", symlinks=True)
    fork = kb / "raw/code/fork/fork_kernels"
    fork.mkdir(parents=True)
    shutil.copy(jax_pallas / "ops/tpu/flash_attention.py", fork / "flash_attention.py")
    ingest(kb, "--all")
    wiki = kb / "wiki"
    meta, body = pages.split((wiki / "kernels/jax/flash_attention.md").read_text())
    assert meta["backend"] == "tpu" and meta["category"] == "attention" and not meta.get("vendored_from")
    assert meta["path"] == "jax/experimental/pallas/ops/tpu/flash_attention.py"
    fork_meta, _ = pages.split((wiki / "kernels/fork/flash_attention.md").read_text())
    assert fork_meta["vendored_from"] == "jax:jax/experimental/pallas/ops/tpu/flash_attention.py"
    directory = (wiki / "kernels/index.md").read_text()
    assert "(jax/flash_attention.md)" in directory and "(fork/flash_attention.md)" in directory
    overview = (wiki / "codebases/jax/overview.md").read_text()
    assert "[`flash_attention`](../../kernels/jax/flash_attention.md)" in overview
    for page in [wiki / "kernels/index.md", *wiki.glob("kernels/*/*.md")]:
        assert relative_links_resolve(page) == [], page
    # a kernel whose file disappears loses its page
    (fork / "flash_attention.py").unlink()
    ingest(kb, "raw/code/fork")
    assert not (wiki / "kernels/fork/flash_attention.md").exists()
    assert "(fork/flash_attention.md)" not in (wiki / "kernels/index.md").read_text()


def test_two_files_of_one_import_name_keep_both_symbol_sets(kb):
    """`vendor/pkg/ops.py` (vendor/ not a package) imports as `pkg.ops`, as `pkg/ops.py` does: the second file's
    symbols were lost. A stub beside its module (`ops.pyi`) is the module's, not a second one."""
    repo = kb / "raw/code/twins"
    for folder in ("pkg", "vendor/pkg"):
        (repo / folder).mkdir(parents=True)
        (repo / folder / "__init__.py").write_text("")
    (repo / "pkg/ops.py").write_text("def fused_add(x):\n    return x\n")
    (repo / "pkg/ops.pyi").write_text("def fused_add(x: int) -> int: ...\n")
    (repo / "vendor/pkg/ops.py").write_text("def vendored_mul(x):\n    return x\n")
    ingest(kb, "raw/code/twins")
    rows = [r.split("\t") for r in (kb / "wiki/codebases/twins/symbols.tsv").read_text().splitlines()[1:]]
    where = {(q, path): module for module, q, _kind, path, *_ in rows}
    assert where[("fused_add", "pkg/ops.py")] == "pkg.ops", rows
    assert where[("vendored_mul", "vendor/pkg/ops.py")] == "vendor.pkg.ops", rows
    assert not any(path.endswith(".pyi") for _, path in where), rows


def test_a_kernel_removed_while_the_cache_was_gone_or_old_takes_its_page_with_it(kb):
    """Stale pages were found from the cache's `outputs` only: with the cache deleted (it is disposable), in a fresh
    clone, or from another version of the tools, a removed kernel's page stayed, listed in the kernel directory. A
    damaged cache file (a list, an entry of another shape) stopped every ingest with a traceback."""
    import json

    repo = kb / "raw/code/ks"
    repo.mkdir(parents=True)
    (repo / "a.py").write_text(messy_repo.pallas_kernel("double"))
    (repo / "b.py").write_text(messy_repo.pallas_kernel("triple"))
    note = kb / "wiki/kernels/ks/my-notes.md"  # written by hand beside the generated pages: never removed
    ingest(kb, "raw/code/ks")
    note.write_text("---\ntitle: notes\ntype: analysis\nrepo: ks\n---\n\n# notes\n")
    assert {p.name for p in (kb / "wiki/kernels/ks").glob("*.md")} == {"double.md", "triple.md", "my-notes.md"}
    shutil.rmtree(kb / ".tools-cache")
    (repo / "a.py").unlink()
    ingest(kb, "raw/code/ks")
    assert {p.name for p in (kb / "wiki/kernels/ks").glob("*.md")} == {"triple.md", "my-notes.md"}
    assert "double" not in (kb / "wiki/kernels/index.md").read_text()
    # the tools upgraded: the cache is of another version
    cache = kb / ".tools-cache/ingest/ks.json"
    cache.write_text(json.dumps({**json.loads(cache.read_text()), "version": "older"}))
    (repo / "b.py").write_text(messy_repo.pallas_kernel("triple_renamed"))
    ingest(kb, "raw/code/ks")
    assert {p.name for p in (kb / "wiki/kernels/ks").glob("*.md")} == {"triple_renamed.md", "my-notes.md"}
    # damaged cache files: rebuilt, never a traceback
    for bad in ("[]", '{"version": 1, "files": [1, 2], "outputs": {"a": 1}}'):
        cache.write_text(bad)
        (kb / ".tools-cache/ingest/ks.kernels.json").write_text(bad)
        out = ingest(kb, "raw/code/ks").output
        assert "1 Pallas kernels at 1 launch sites" in out, out
    relinted = CliRunner().invoke(cli, ["--root", str(kb), "lint"])
    assert relinted.exit_code == 0 and "0 errors" in relinted.output, relinted.output


def _upstream_and_user(kb, up_name: str, user_name: str):
    """Two codebases ingested: ``up_name`` holding a Pallas flash-attention kernel, ``user_name`` choosing it by a
    setting; the upstream's package folder."""
    up = kb / f"raw/code/{up_name}/{up_name}"
    up.mkdir(parents=True)
    (up / "__init__.py").write_text("")
    (up / "attn.py").write_text(messy_repo.pallas_kernel("flash_attention"))
    user = kb / f"raw/code/{user_name}/{user_name}"
    user.mkdir(parents=True)
    (user / "__init__.py").write_text("")
    (user / "model.py").write_text(f"from {up_name} import attn\n\n\ndef attend(config, x):\n"
                                   "    if config.attention == 'flash':\n        return attn.flash_attention(x)\n"
                                   "    return x\n")
    ingest(kb, f"raw/code/{up_name}")
    ingest(kb, f"raw/code/{user_name}")
    return up


def test_removing_an_upstream_rewrites_the_codebases_linking_its_kernels(kb):
    """A user's report: `tools remove jax` left maxtext's overview linking jax's splash kernel page (two broken
    links in `tools lint`): only an ingest wrote the codebases linking a removed kernel again."""
    import json

    _upstream_and_user(kb, "up2", "user2")
    assert "kernels/up2/flash_attention.md" in (kb / "wiki/codebases/user2/overview.md").read_text()
    r = CliRunner().invoke(cli, ["--root", str(kb), "remove", "up2", "--json"])
    assert r.exit_code == 0 and json.loads(r.output)["refreshed"] == ["user2"], r.output
    assert "kernels/up2/" not in (kb / "wiki/codebases/user2/overview.md").read_text()
    lint = CliRunner().invoke(cli, ["--root", str(kb), "lint"])
    assert lint.exit_code == 0 and "0 errors" in lint.output, lint.output


def test_an_upstream_that_loses_a_kernel_rewrites_the_codebases_linking_it(kb):
    """A codebase whose kernel selection linked an upstream's kernel page kept the link after the upstream was
    re-ingested without that kernel: `tools lint` found a broken link the ingest never mentioned."""
    import json

    up = _upstream_and_user(kb, "up", "user")
    linked = json.loads((kb / "wiki/codebases/user/selection.json").read_text())["choices"][0]["kernels"]
    assert [k["page"] for k in linked] == ["kernels/up/flash_attention.md"], linked
    (up / "attn.py").write_text("def flash_attention(x):\n    return x\n")  # the kernel is gone upstream
    out = ingest(kb, "raw/code/up").output
    assert "user: written again: its overview linked kernel pages this ingest removed" in out, out
    assert "flash_attention.md" not in (kb / "wiki/codebases/user/overview.md").read_text()
    # a link broken before this ingest (a page deleted by hand) is not this ingest's doing: nothing is written again
    # on every later ingest for it (from a review)
    sel = kb / "wiki/codebases/user/selection.json"
    broken = json.loads(sel.read_text())
    broken["choices"][0]["kernels"] = [{"kernel": "gone", "repo": "up", "page": "kernels/up/gone.md"}]
    sel.write_text(json.dumps(broken))
    assert "written again" not in ingest(kb, "raw/code/up").output
    lint = CliRunner().invoke(cli, ["--root", str(kb), "lint"])
    assert lint.exit_code == 0 and "0 errors" in lint.output, lint.output
