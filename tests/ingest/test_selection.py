"""The kernel selection map: which setting value or registry entry chooses which kernel, on a fixture and on real
code (MaxText's attention setting reaching jax's and tokamax's splash attention; tokamax's registry of
implementations), and the `kernels.selection` operation that serves it."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import messy_repo
from tools.agent.registry import AgentError, call
from tools.project import Project

HERE = Path(__file__).resolve()


def _tools(kb: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tools", *args], cwd=kb, capture_output=True, text=True)


def _kb(tmp_path: Path) -> Path:
    kb = tmp_path / "kb"
    assert _tools(tmp_path, "init", str(kb)).returncode == 0
    return kb


FLASH = """
        from jax.experimental import pallas as pl

        def _body(q_ref, o_ref):
            o_ref[...] = q_ref[...]

        def flash_attention(q):
            return pl.pallas_call(_body, out_shape=q)(q)
"""


def _write(root: Path, rel: str, text: str) -> None:
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(textwrap.dedent(text).lstrip())


def test_a_setting_and_a_registry_choose_kernels(tmp_path):
    kb = _kb(tmp_path)
    code = kb / "raw" / "code" / "lib"
    _write(code, "lib/kernels/flash.py", FLASH + """
        class FlashOp:
            def __call__(self, q):
                return flash_attention(q)
        """)
    _write(code, "lib/layers/attention.py", """
        from lib.kernels import flash

        class Attention:
            def __init__(self, config):
                self.config = config

            def apply(self, q):
                if self.config.attention == "flash":
                    return self.tpu_flash(q)
                elif self.config.attention == "dot_product":
                    return q @ q
                return q

            def tpu_flash(self, q):
                return flash.flash_attention(q)
        """)
    _write(code, "lib/api.py", """
        from lib.kernels import flash

        IMPLEMENTATIONS = {"pallas": flash.FlashOp(), "xla": None}
        """)
    r = _tools(kb, "ingest", "--all", "-q")
    assert r.returncode == 0, r.stderr[-1500:]
    chosen = json.loads((kb / "wiki/codebases/lib/selection.json").read_text())
    (flash_choice,) = [c for c in chosen["choices"] if c["values"] == ["flash"]]
    assert flash_choice["selector"] == "attention" and flash_choice["where"] == "lib/layers/attention.py:8"
    assert [k["page"] for k in flash_choice["kernels"]] == ["kernels/lib/flash_attention.md"]
    (entry,) = [e for e in chosen["registries"] if e["key"] == "pallas"]
    assert entry["registry"] == "IMPLEMENTATIONS" and entry["kernels"][0]["kernel"] == "flash_attention"
    overview = (kb / "wiki/codebases/lib/overview.md").read_text()
    assert "### Kernel selection" in overview
    assert "| `attention` | `flash` | [`flash_attention` (lib)](../../kernels/lib/flash_attention.md) |" in overview
    out = call(Project(kb), "kernels.selection", {"codebase": "lib", "kernel": "flash"})
    assert [c["values"] for c in out["choices"]] == [["flash"]] and out["registries"][0]["key"] == "pallas"
    for bad in ("../../etc", "nope"):
        try:
            call(Project(kb), "kernels.selection", {"codebase": bad})
            raise AssertionError(f"{bad} was read")
        except AgentError as e:
            assert "selection.json" in str(e) or ".." in str(e) or "outside" in str(e)


def _from_wheel(kb: Path, library: str, package_dir: str, members: list[str]) -> None:
    sys.path.insert(0, str(HERE.parents[2] / "bench"))
    import kernels_accuracy

    manifest = json.loads((kernels_accuracy.LABELS / "manifest.json").read_text())
    lib = next(x for x in manifest["libraries"] if x["library"] == library)
    wheel = kernels_accuracy.DEFAULT_CACHE / f"{lib['package']}-{lib['version']}" / "dist" / lib["file"]
    if not wheel.exists():
        kernels_accuracy.fetch(lib, kernels_accuracy.DEFAULT_CACHE)
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        for m in members:
            for name in [n for n in names if n == m or (m.endswith("/") and n.startswith(m) and n.endswith(".py"))]:
                out = kb / "raw" / "code" / library / name.removeprefix(package_dir + "/")
                out.parent.mkdir(parents=True, exist_ok=True)
                out.write_bytes(z.read(name))


def test_maxtext_attention_setting_reaches_jax_and_tokamax_splash(tmp_path):
    """Files from the pinned wheels (sha256 checked), each tree ingested from inside its package as people copy
    them: jax's splash attention, tokamax's attention ops, MaxText's attention layer."""
    kb = _kb(tmp_path)
    _from_wheel(kb, "jax", "jax", ["jax/experimental/pallas/ops/tpu/splash_attention/"])
    _from_wheel(kb, "tokamax", "tokamax", ["tokamax/_src/ops/experimental/tpu/splash_attention/",
                                           "tokamax/_src/ops/attention/"])
    _from_wheel(kb, "maxtext", "maxtext", ["maxtext/layers/attention_op.py"])
    for slug in ("jax", "tokamax", "maxtext"):  # in order: a choice reaches the kernels ingested before it
        r = _tools(kb, "ingest", f"raw/code/{slug}", "-q")
        assert r.returncode in (0, 3), r.stderr[-1500:]
    maxtext = json.loads((kb / "wiki/codebases/maxtext/selection.json").read_text())
    flash = next(c for c in maxtext["choices"] if c["selector"] == "attention_kernel" and "flash" in c["values"])
    assert {k["repo"] for k in flash["kernels"]} == {"jax", "tokamax"}
    assert all(k["kernel"] == "SplashAttentionKernel" for k in flash["kernels"])
    assert flash["where"].startswith("layers/attention_op.py:")
    line = int(flash["where"].rpartition(":")[2])
    source = (kb / "raw/code/maxtext/layers/attention_op.py").read_text().split("\n")[line - 1]
    assert "attention_kernel" in source and '"flash"' in source
    tokamax = json.loads((kb / "wiki/codebases/tokamax/selection.json").read_text())
    tpu = next(e for e in tokamax["registries"] if e["registry"] == "IMPLEMENTATIONS" and e["key"] == "mosaic_tpu")
    assert "SplashAttentionKernel" in {k["kernel"] for k in tpu["kernels"]}


def test_a_dispatcher_method_and_module_functions_credit_only_their_own_choice(tmp_path):
    kb = _kb(tmp_path)
    code = kb / "raw" / "code" / "lib"
    _write(code, "lib/kernels/flash.py", FLASH)
    _write(code, "lib/layers/op.py", """
        from lib.kernels import flash

        def tpu_flash(q):
            return flash.flash_attention(q)

        class Op:
            def __init__(self, config):
                self.config = config

            def apply_attention(self, q):
                if self.config.attention == "flash":
                    return tpu_flash(q)
                return q

            def __call__(self, q):
                if self.config.attention == "dot_product":
                    return self.apply_attention(q)
                return q
        """)
    r = _tools(kb, "ingest", "--all", "-q")
    assert r.returncode == 0, r.stderr[-1500:]
    chosen = json.loads((kb / "wiki/codebases/lib/selection.json").read_text())
    reach = {tuple(c["values"]): [k["kernel"] for k in c["kernels"]] for c in chosen["choices"]}
    assert reach.get(("flash",)) == ["flash_attention"]  # through a module function of the file
    assert not reach.get(("dot_product",))  # a call into a method that chooses is not this branch's kernel


def test_a_setting_that_calls_a_catalogued_kernel_by_a_plain_name_is_found(tmp_path):
    """The branch's calls were kept only when their names said kernel: `ln.layer_norm` and `self._norm` (which
    calls the catalogued `double`) reached catalogued kernels, and the choices were missing from the map."""
    from click.testing import CliRunner

    from tools.cli import cli

    kb = tmp_path / "kb"
    (kb / "wiki").mkdir(parents=True)
    mt = kb / "raw/code/mt/mt"
    mt.mkdir(parents=True)
    (mt / "__init__.py").write_text("")
    (mt / "dbl.py").write_text(messy_repo.pallas_kernel("double", " * 2"))
    (mt / "model.py").write_text(
        "from mt import dbl as ln\n\n\nclass Block:\n    def _norm(self, x):\n        return ln.double(x)\n\n"
        "    def __call__(self, config, x):\n        if config.norm_impl == 'pallas':\n            return self._norm(x)\n"
        "        if config.other == 'plain':\n            return print(x)\n        return x\n")
    r = CliRunner().invoke(cli, ["--root", str(kb), "ingest", "raw/code/mt"])
    assert r.exit_code == 0, r.output
    chosen = json.loads((kb / "wiki/codebases/mt/selection.json").read_text())
    by = {c["selector"]: c for c in chosen["choices"]}
    assert [k["kernel"] for k in by["norm_impl"]["kernels"]] == ["double"], chosen
    assert "other" not in by  # a call that reaches no kernel and says none is no choice


def test_a_class_is_reached_through_what_making_or_calling_it_runs_and_a_kernel_through_its_re_export(tmp_path):
    """Shapes of MaxText (labelled facts): `use_batch_split` made an `AttentionOp(config)(x)`, whose `decode` alone
    launches a kernel nothing calls: the map said the setting chose that kernel (MaxText's `quantization` ->
    `ragged_mqa`). `megablox.gmm(...)` called the kernel through the package's `__init__` re-export of `ops.gmm`:
    no kernel. A class whose `__call__` reaches a kernel through its own methods is reached by whoever calls one."""
    kb = _kb(tmp_path)
    code = kb / "raw" / "code" / "mini"
    _write(code, "mini/__init__.py", "")
    _write(code, "mini/kern/__init__.py", "from mini.kern.ops import gmm\n")
    _write(code, "mini/kern/ops.py", FLASH + """
        def gmm(x):
            return pl.pallas_call(_body, out_shape=x)(x)
        """)
    _write(code, "mini/layers/attn.py", """
        from mini.kern import ops

        class AttentionOp:
            def __init__(self, config):
                self.config = config

            def __call__(self, q):
                return q * 2

            def decode(self, q):
                return ops.flash_attention(q)


        class FlashOp:
            def __call__(self, q):
                return self._flash(q)

            def _flash(self, q):
                return ops.flash_attention(q)
        """)
    _write(code, "mini/layers/moe.py", """
        from mini import kern
        from mini.layers import attn

        def moe(config, x):
            if config.quantization:
                return kern.gmm(x)
            return x

        def layer(config, x):
            if config.use_batch_split:
                return attn.AttentionOp(config)(x)
            if config.attention == "flash":
                return attn.FlashOp()(x)
            return x
        """)
    r = _tools(kb, "ingest", "--all", "-q")
    assert r.returncode == 0, r.stderr[-1500:]
    chosen = json.loads((kb / "wiki/codebases/mini/selection.json").read_text())
    reach = {c["selector"]: [k["kernel"] for k in c["kernels"]] for c in chosen["choices"]}
    assert reach.get("quantization") == ["gmm"], chosen
    assert reach.get("attention") == ["flash_attention"], chosen
    assert not reach.get("use_batch_split"), chosen


def test_a_choice_tested_twice_in_a_file_points_at_the_test_that_reaches_the_kernel(tmp_path):
    """MaxText's deepseek_batchsplit_fp8.py tests `config.quantization` for sharding axes first and for the kernel
    later: the row linked the first test."""
    kb = _kb(tmp_path)
    code = kb / "raw" / "code" / "lib"
    _write(code, "lib/kernels/flash.py", FLASH)
    _write(code, "lib/model.py", """
        from lib.kernels import flash

        def axes(config):
            if config.quantization:
                return flash.init_kernel_axes("fsdp")
            return None

        def step(config, q):
            if config.quantization:
                return flash.flash_attention(q)
            return q
        """)
    assert _tools(kb, "ingest", "--all", "-q").returncode == 0
    chosen = json.loads((kb / "wiki/codebases/lib/selection.json").read_text())
    (c,) = [c for c in chosen["choices"] if c["selector"] == "quantization"]
    assert c["kernels"] and c["where"] == "lib/model.py:9", c


def test_a_script_guard_and_a_membership_test_are_no_settings():
    """A user's report on tpu-inference: the kernel selection table opened with five `__name__` = `__main__` rows,
    eight kernel pages said "Chosen by: `__name__` = `__main__`", and `'dcp' in mesh.shape` read as `shape` = `dcp`."""
    import ast

    from tools.ingest.dispatch import _selector

    def sel(src):
        return _selector(ast.parse(src, mode="eval").body)
    assert sel('__name__ == "__main__"') is None and sel("'dcp' in mesh.shape") is None
    assert sel('"flash" == cfg.attention') == ("attention", ["flash"])
    assert sel('cfg.attention in ("a", "b")') == ("attention", ["a", "b"])
