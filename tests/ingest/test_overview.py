"""What an overview shows: every flag ranked with the full list linked, compact source links, no local paths."""

from __future__ import annotations

import re
from pathlib import Path

import messy_repo
from click.testing import CliRunner

from tools import scaffold
from tools.cli import cli


def run(kb, *args):
    return CliRunner().invoke(cli, ["--root", str(kb), *args], catch_exceptions=False)


def new_kb(tmp_path):
    kb = tmp_path / "kb"
    scaffold.init(kb, site_name="kb")
    return kb


def test_a_local_remote_is_never_printed_and_line_links_stay_compact(tmp_path):
    from tools.sitegen import links

    kb = new_kb(tmp_path)
    repo = messy_repo.write(kb / "raw/code/tiny")
    (repo / ".git/config").write_text('[remote "origin"]\n\turl = /home/someone/mirrors/tinymodel\n')
    assert run(kb, "ingest", "raw/code/tiny", "-q").exit_code in (0, 3)
    overview = (kb / "wiki/codebases/tiny/overview.md").read_text()
    assert "/home/someone" not in overview and "a local path (not shown)" in overview
    body = "- [`ops/k.py`](../../raw/code/tiny/ops/k.py): lines [3](../../raw/code/tiny/ops/k.py#L3), " \
           "[9](../../raw/code/tiny/ops/k.py#L9)\n"
    out = links.rewrite_raw_links(body, "concepts/x.md", links.Sources([]))
    assert out.endswith("\n\n- `ops/k.py`: lines 3, 9\n")  # the path once, on the bullet; not after every line
    assert out.startswith("*Source paths on this page are plain text: `raw/code/tiny` is a local tree")
    hosted = links.rewrite_raw_links(body, "concepts/x.md", links.Sources([], raw_url="https://h.org/kb/blob/main/"))
    assert "[3](https://h.org/kb/blob/main/raw/code/tiny/ops/k.py#L3)" in hosted


def test_overview_ranks_every_flag_and_links_the_full_list(tmp_path):
    kb = new_kb(tmp_path)
    repo = kb / "raw/code/flaggy"
    (repo / "pkg").mkdir(parents=True)
    (repo / "configs").mkdir()
    lines = [f"export LIBTPU_INIT_ARGS='--xla_tpu_flag_{i:02d}=true'" for i in range(70)]
    lines += ["export XLA_FLAGS=\"$XLA_FLAGS\""]  # a mention, not a flag
    (repo / "configs/run.sh").write_text("\n".join(lines) + "\n")
    hot = "".join(f"os.environ['LIBTPU_INIT_ARGS'] += ' --xla_tpu_hot_flag=true'  # {i}\n" for i in range(30))
    (repo / "pkg/train.py").write_text("import os\n" + hot)
    assert run(kb, "ingest", "raw/code/flaggy", "-q").exit_code in (0, 3)
    overview = (kb / "wiki/codebases/flaggy/overview.md").read_text()
    section = overview.split("### XLA and LIBTPU flags")[1].split("\n### ")[0]
    assert "71 distinct flags, most used first" in section
    rows = [ln for ln in section.splitlines() if ln.startswith("| `--")]
    assert len(rows) == 60 and rows[0].startswith("| `--xla_tpu_hot_flag` | `true` | 30 | 1 | `train.py` | [`pkg/train.py:2`]")
    assert "… and 11 more: [all 71 flags](flags.md)" in section
    assert "XLA_FLAGS`" not in "".join(rows)
    full = (kb / "wiki/codebases/flaggy/flags.md").read_text()
    assert sum(1 for ln in full.splitlines() if ln.startswith("| `--")) == 71
    lint = run(kb, "lint")
    assert lint.exit_code == 0, lint.output


def test_moe_and_pipeline_parallelism_are_surfaces(tmp_path):
    kb = new_kb(tmp_path)
    repo = kb / "raw/code/moe"
    (repo / "layers").mkdir(parents=True)
    (repo / "configs").mkdir()
    (repo / "layers/moe.py").write_text(
        "import jax\nfrom jax.experimental.pallas.ops.tpu.megablox import gmm\n\n\n"
        "class RoutedMoE:\n    def __call__(self, x, w):\n"
        "        y = jax.lax.ragged_all_to_all(x, x, x, x, x, x)\n        return gmm(y, w, None)\n")
    (repo / "configs/base.yml").write_text("ici_expert_parallelism: 4\nnum_experts: 64\n"
                                           "ici_pipeline_parallelism: 2\nnum_pipeline_microbatches: 8\n")
    assert run(kb, "ingest", "raw/code/moe", "-q").exit_code in (0, 3)
    overview = (kb / "wiki/codebases/moe/overview.md").read_text()
    assert "Mixture of experts and expert parallelism" in overview and "Pipeline parallelism" in overview
    page = (kb / "wiki/concepts/expert-parallelism.md").read_text()
    assert "layers/moe.py" in page and "configs/base.yml" in page


def test_overview_names_the_functions_where_a_surface_is_decided(tmp_path):
    kb = new_kb(tmp_path)
    repo = kb / "raw/code/dec"
    (repo / "pkg").mkdir(parents=True)
    (repo / "tests").mkdir()
    (repo / "pkg/__init__.py").write_text("")
    (repo / "pkg/remat.py").write_text(
        "import jax\n\n\ndef select_remat_policy(name):\n"
        "    if name == 'full':\n        return jax.checkpoint_policies.nothing_saveable\n"
        "    if name == 'dots':\n        return jax.checkpoint_policies.dots_saveable\n"
        "    return jax.checkpoint_policies.everything_saveable\n\n\n"
        "def block(f):\n    return jax.checkpoint(f)\n")
    (repo / "pkg/mesh.py").write_text(
        "import jax\nfrom jax.sharding import Mesh, PartitionSpec as P\n\n\ndef build_mesh(devices):\n"
        "    return Mesh(devices, ('data', 'model'))\n\n\ndef constrain(x):\n"
        "    x = jax.lax.with_sharding_constraint(x, P('data'))\n    return jax.lax.with_sharding_constraint(x, P())\n")
    (repo / "tests/test_remat.py").write_text(
        "import jax\n\n\ndef test_many():\n" + "".join(f"    jax.checkpoint(lambda x: x + {i})\n" for i in range(9)))
    assert run(kb, "ingest", "raw/code/dec", "-q").exit_code in (0, 3)
    overview = (kb / "wiki/codebases/dec/overview.md").read_text()
    section = overview.split("### Rematerialization")[1].split("\n### ")[0]
    decided = next(ln for ln in section.splitlines() if ln.startswith("Decided in: "))
    assert decided.startswith("Decided in: [`pkg.remat.select_remat_policy`](")
    assert "(3 sites)" in decided and "test_many" not in decided
    sharding = overview.split("### Sharding and meshes")[1].split("\n### ")[0]
    assert "Mesh built in: [`pkg.mesh.build_mesh`](" in sharding
    first_file = next(ln for ln in section.splitlines() if ln.startswith("- "))
    assert "pkg/remat.py" in first_file  # library before tests, though the test has more sites


def test_config_knobs_show_defaults_and_whole_lists(tmp_path):
    kb = new_kb(tmp_path)
    repo = kb / "raw/code/cfg"
    (repo / "configs/models").mkdir(parents=True)
    (repo / "configs/base.yml").write_text("remat_policy: full\nmesh_axes: ['data', 'fsdp', 'tensor']\n")
    (repo / "configs/models/big.yml").write_text("remat_policy: minimal\n")
    assert run(kb, "ingest", "raw/code/cfg", "-q").exit_code in (0, 3)
    overview = (kb / "wiki/codebases/cfg/overview.md").read_text()
    knobs = overview.split("### Configuration knobs")[1].split("\n### ")[0]
    remat = next(ln for ln in knobs.splitlines() if ln.startswith("| `remat_policy`"))
    assert "| [`full`](" in remat and "configs/base.yml#L1" in remat  # the default, from the base config
    mesh = next(ln for ln in knobs.splitlines() if ln.startswith("| `mesh_axes`"))
    assert "['data', 'fsdp', 'tensor']" in mesh  # the whole flow list, not "["


def test_knobs_read_every_value_multiline_lists_offers_and_families(tmp_path):
    """The shapes of MaxText's configs (labelled facts): a default the concept pattern does not match, a list of
    rules over many lines, values offered by a comment, a second family's base file, golden test data."""
    import json

    kb = new_kb(tmp_path)
    repo = kb / "raw/code/cfg"
    for d in ("configs/models", "configs/gpu", "tests/golden_data", "testdata"):
        (repo / d).mkdir(parents=True)
    (repo / "configs/base.yml").write_text(
        "# Choose 'remat_policy' between 'minimal', 'save_dot_except_mlp' and 'full'.\n"
        "remat_policy: 'full'\n"
        "attention: 'autoselected' # Supported attention: autoselected, dot_product, flash, cudnn_flash_te\n"
        "logical_axis_rules: [\n  ['embed', ['fsdp', 'sequence']],\n  # a comment inside\n"
        "  ['vocab', ['tensor']],\n]\n")
    (repo / "configs/models/big.yml").write_text("attention: flash\nremat_policy: minimal\n")
    (repo / "configs/gpu/base.yml").write_text("attention: cudnn_flash_te\n")
    (repo / "testdata/base.yml").write_text("remat_policy: nothing_from_testdata\n")
    (repo / "tests/golden_data/dump.yml").write_text("attention: golden_value\n")
    assert run(kb, "ingest", "raw/code/cfg", "-q").exit_code in (0, 3)
    knobs = {k["key"]: k for k in json.loads((kb / "wiki/codebases/cfg/knobs.json").read_text())}
    att = knobs["attention"]
    assert att["default"] == "autoselected" and att["default_at"] == "configs/base.yml:3"
    assert att["offered"] == ["autoselected", "dot_product", "flash", "cudnn_flash_te"]
    assert set(att["values"]) == {"autoselected", "flash", "cudnn_flash_te"}  # no golden dump
    assert att["defaults"] == [{"file": "configs/gpu/base.yml", "value": "cudnn_flash_te"}]
    remat = knobs["remat_policy"]
    assert remat["offered"] == ["minimal", "save_dot_except_mlp", "full"]
    assert "nothing_from_testdata" not in remat["values"]
    assert knobs["logical_axis_rules"]["default"] == "[['embed', ['fsdp', 'sequence']], ['vocab', ['tensor']]]"
    overview = (kb / "wiki/codebases/cfg/overview.md").read_text()
    assert "(its comment offers `autoselected`, `dot_product`, `flash`, `cudnn_flash_te`)" in overview


def test_flags_in_every_form_with_value_and_setter(tmp_path):
    """A real env append from the installed jax (cloud_tpu_init.py), and the shapes MaxText writes its TPU options
    in (labelled facts): dict keys, keywords, a named bundle of flag strings, a parameter that only holds flags."""
    import ast
    import inspect
    import shutil

    import pytest

    jax = pytest.importorskip("jax")
    kb = new_kb(tmp_path)
    repo = kb / "raw/code/flagged"
    repo.mkdir(parents=True)
    real = Path(inspect.getfile(jax)).parent / "_src/cloud_tpu_init.py"
    shutil.copy(real, repo / "cloud_tpu_init.py")
    (repo / "select_flags.py").write_text(
        'xla_flags_autotuned = {\n    "xla_tpu_enable_windowed_einsum_for_all_gather": "False",\n'
        '    "xla_tpu_prefer_latch_optimized_rhs_layouts": "True",\n}\n\n'
        'CF_FOR_ALL_GATHER = (\n    " --xla_tpu_enable_async_collective_fusion=true"\n'
        '    " --xla_tpu_enable_async_collective_fusion_fuse_all_gather=true"\n)\n\n\n'
        'def options(run):\n    return dict(megascale_grpc_premap_memory_bytes=17179869184, xla_flags=CF_FOR_ALL_GATHER,\n'
        '                run=run)\n')
    assert run(kb, "ingest", "raw/code/flagged", "-q").exit_code in (0, 3)
    overview = (kb / "wiki/codebases/flagged/overview.md").read_text()
    rows = {ln.split(" | ")[0].strip("| `"): ln.split(" | ") for ln in overview.splitlines() if ln.startswith("| `--")}
    tree = ast.parse(real.read_text())
    line = next(n for n, ln in enumerate(real.read_text().splitlines(), 1)
                if "--xla_tpu_use_enhanced_launch_barrier=true" in ln)
    holder = min((f for f in ast.walk(tree) if isinstance(f, ast.FunctionDef) and f.lineno <= line <= f.end_lineno),
                 key=lambda f: f.end_lineno - f.lineno).name
    env = rows["--xla_tpu_use_enhanced_launch_barrier"]
    assert env[1] == "`true`" and env[4] == f"`{holder}`"  # the value, and the function that appends it
    assert rows["--xla_tpu_enable_windowed_einsum_for_all_gather"][1] == "`False`"  # a dict key and its value
    assert rows["--megascale_grpc_premap_memory_bytes"][1] == "`17179869184`" and \
        rows["--megascale_grpc_premap_memory_bytes"][4] == "`options`"  # a keyword
    assert "--xla_flags" not in rows  # a parameter holding flags is not a flag
    assert "[`CF_FOR_ALL_GATHER`](" in overview and "(2 flags)" in overview
    assert "[`xla_flags_autotuned`](" in overview


def test_flags_on_a_line_of_thousands_of_characters_are_all_read(tmp_path):
    """A launch script's one-line `LIBTPU_INIT_ARGS="..."` of 60 flags (3,700 characters): every flag is read, as
    on a short line (a line over 2,000 characters was skipped whole), and in a Python string as long."""
    kb = new_kb(tmp_path)
    repo = kb / "raw/code/longline"
    repo.mkdir(parents=True)
    flags = " ".join(f"--xla_tpu_long_flag_number_{i:02d}_enabled=true" for i in range(60))
    assert len(flags) > 2500
    (repo / "launch.sh").write_text(f'#!/bin/bash\nexport LIBTPU_INIT_ARGS="{flags}"\npython train.py\n')
    (repo / "train.py").write_text(f'TPU_FLAGS = "{flags.replace("long", "py")}"\n')
    assert run(kb, "ingest", "raw/code/longline", "-q").exit_code in (0, 3)
    listed = (kb / "wiki/codebases/longline/flags.md").read_text()  # every flag (the overview ranks the first)
    for kind, where in (("long", "launch.sh"), ("py", "train.py")):
        rows = re.findall(rf"\| `--xla_tpu_{kind}_flag_number_(\d\d)_enabled` \| `true` .*`{where}`", listed)
        assert sorted(rows) == [f"{i:02d}" for i in range(60)], (kind, rows)


def _config_knobs(tmp_path, configs: dict[str, str]):
    """A knowledge base whose codebase `cfg` holds ``configs`` under configs/, ingested: its root, its knobs by key."""
    import json

    kb = new_kb(tmp_path)
    folder = kb / "raw/code/cfg/configs"
    folder.mkdir(parents=True)
    for name, text in configs.items():
        (folder / name).write_text(text)
    assert run(kb, "ingest", "raw/code/cfg", "-q").exit_code in (0, 3)
    return kb, {k["key"]: k for k in json.loads((kb / "wiki/codebases/cfg/knobs.json").read_text())}


def test_a_setting_written_empty_is_its_default(tmp_path):
    """MaxText's base.yml holds `quantization: ""` (off): the knob had no default and `""` was no value seen."""
    kb, knobs = _config_knobs(tmp_path, {"base.yml": 'remat_policy: full\nquantization: ""\n',
                                         "int8.yml": "quantization: 'int8'\n"})
    q = knobs["quantization"]
    assert q["default"] == "" and q["default_at"] == "configs/base.yml:2" and sorted(q["values"]) == ["", "int8"]
    row = next(ln for ln in (kb / "wiki/codebases/cfg/overview.md").read_text().splitlines()
               if ln.startswith("| `quantization`"))
    assert '| [`""`](' in row and "configs/base.yml#L2" in row, row


def test_a_key_with_a_block_below_in_a_file_yaml_cannot_read_whole_has_no_empty_default(tmp_path):
    """A base.yml of two documents (`---`) is read line by line: `quantization:` with `mode: int8` below it was taken
    for `quantization: ""` and shown as its default (off)."""
    _, knobs = _config_knobs(tmp_path, {"base.yml": "quantization:\n  mode: int8\nremat_policy: full\n---\nextra: 1\n",
                                        "fp8.yml": "quantization: 'fp8'\n"})
    assert knobs["quantization"]["default"] is None and "" not in knobs["quantization"]["values"], knobs


def test_a_comment_s_prose_is_no_list_of_offered_values():
    """A user's report on MaxText's base.yml: "between" in a comment's prose made every later word of it an offered
    value (56 words for `num_layers_per_pipeline_stage`)."""
    from tools.ingest.yaml_settings import _offered

    prose = ("Number of layers per stage: the more layers between stages, the less the bubble is, which trades "
             "memory for time")
    assert _offered(prose, "num_layers_per_pipeline_stage") == []
    assert _offered("Choose between a, b, or c.", "k") == ["a", "b", "c"]
    assert _offered("Options: flash-attn, xla (default), cudnn", "k") == ["flash-attn", "xla", "cudnn"]
    assert _offered("Supported attention: autoselected, dot_product, flash", "attention") == [
        "autoselected", "dot_product", "flash"]
