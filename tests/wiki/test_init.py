"""tools init: the layout, AGENTS.md from the page model, idempotence, never overwriting."""

from __future__ import annotations

from pathlib import Path
import pytest
import yaml

from tools import lint, pages, scaffold
from tools.errors import InputError
from tools.project import Project

from .conftest import TODAY


def snapshot(root):
    return {p.relative_to(root).as_posix(): (p.read_bytes(), p.stat().st_mtime_ns)
            for p in root.rglob("*") if p.is_file()}


def test_layout(tmp_path, invoke):
    r = invoke("init", tmp_path / "kb")
    assert r.exit_code == 0, r.output
    root = tmp_path / "kb"
    for rel in ("mkdocs.yml", "AGENTS.md", ".gitignore", "docs/index.md", "wiki/index.md", "wiki/log.md",
                "raw/code", "raw/sources", "raw/profiles", "experiments", "wiki/concepts", "wiki/experiments"):
        assert (root / rel).exists(), rel
    assert not (root / "tools").exists()  # the kb does not get a copy of our package
    config = yaml.safe_load((root / "mkdocs.yml").read_text())
    assert config["site_name"] == "kb"
    ignore = (root / ".gitignore").read_text().splitlines()
    assert {"site/", ".tools-cache/", "raw/profiles/*"} <= set(ignore)
    # what a killed build leaves beside a site_dir of any name is ignored (real git: a `git add -A` took it)
    import subprocess

    subprocess.run(["git", "init", "-q", str(root)], check=True)
    for left in (".site.building-42/index.html", ".public.building-42/index.html", ".public.old-42/index.html"):
        (root / left).parent.mkdir(parents=True, exist_ok=True)
        (root / left).write_text("x")
        assert subprocess.run(["git", "-C", str(root), "check-ignore", "-q", "--no-index", left]).returncode == 0, left
    assert "created wiki/index.md" in r.output and lint.run(Project(root)).issues == []


def test_log_entry(kb):
    log = (kb.wiki / "log.md").read_text()
    assert log.count("## [") == 1
    assert f"## [{TODAY}] init | {kb.root}\n\n- created 25: mkdocs.yml, AGENTS.md, .mcp.json, .gemini/settings.json, .codex/config.toml, .gitignore, " in log
    _, meta = None, pages.split(log)[0]
    assert meta["type"] == "log"


def test_idempotent_and_keeps_existing_files(tmp_path, invoke):
    root = tmp_path / "kb"
    (root / "wiki").mkdir(parents=True)
    (root / "AGENTS.md").write_text("my own rules\n")
    (root / "wiki" / "index.md").write_text("# my index\n")
    first = scaffold.init(root)
    assert "AGENTS.md" in first.kept and "wiki/index.md" in first.kept and "mkdocs.yml" in first.created
    assert (root / "AGENTS.md").read_text() == "my own rules\n"
    assert (root / "wiki" / "index.md").read_text() == "# my index\n"
    before = snapshot(root)
    again = invoke("init", "--json", root=root)  # DIR defaults to --root
    assert again.exit_code == 0
    assert '"created": []' in again.output
    assert snapshot(root) == before


def test_agents_md_is_generated_from_the_page_model(kb):
    text = (kb.root / "AGENTS.md").read_text()
    assert "{{" not in text and "test kb" in text
    for name, t in pages.TYPES.items():
        row = next(ln for ln in text.splitlines() if ln.startswith(f"| `{name}` |"))
        for key in t.keys:
            assert f"`{key.name}`" in row, (name, key.name)
            for choice in key.choices or ():
                assert choice in row
        for s in t.sections:
            assert s in row
    for cmd in ("tools ingest", "tools kernels scan", "tools exp run", "tools profile summary",
                "tools lint", "tools index", "mkdocs serve", "tools:begin", "never edit"):
        assert cmd.lower() in text.lower(), cmd


def test_types_table_tracks_the_registry(monkeypatch):
    extra = pages.PageType("recipe", "recipes", (pages.Key("oven", True, ("gas", "electric")),), summary="A dish")
    monkeypatch.setitem(pages.TYPES, "recipe", extra)
    row = scaffold.types_table().splitlines()[-1]
    assert row == "| `recipe` | `wiki/recipes/` | `oven` (one of: gas, electric) | - | - | A dish |"


def test_fallback_mkdocs_without_the_site_package(tmp_path, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "tools.sitegen.config", None)  # import fails
    text, docs_index = scaffold._mkdocs_yml("my kb")
    assert yaml.safe_load(text) == {"site_name": "my kb", "docs_dir": "wiki", "site_dir": "site"}
    assert docs_index is None


def test_fresh_kb_builds_with_mkdocs_strict(kb):
    import os
    import subprocess
    import sys

    pytest.importorskip("mkdocs")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    r = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet"], cwd=kb.root,
                       capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    assert (kb.root / "site" / "index.html").is_file()


def test_agents_md_names_only_real_commands():
    import re

    from tools.cli import cli

    text = scaffold.agents_md("x")
    named = sorted(set(re.findall(r"`tools ([a-z]+(?: [a-z]+(?=[ `]))?)", text)))
    assert ("lint" in named and "index" in named and "ingest raw" not in named), named
    for path in named:
        group, *rest = path.split()
        assert group in cli.commands, f"AGENTS.md names `tools {path}`, which does not exist"
        cmd = cli.commands[group]
        if rest and hasattr(cmd, "commands"):
            if "(not yet available)" in (cmd.help or ""):
                continue  # another command group still being built
            assert rest[0] in cmd.commands, f"AGENTS.md names `tools {path}`, which does not exist"


def test_agents_md_says_which_commands_only_print():
    rows = {ln.split("|")[1].strip(): ln for ln in scaffold.agents_md("x").splitlines() if ln.startswith("| `tools ")}
    kernels_row = next(v for k, v in rows.items() if k.startswith("`tools kernels scan"))
    profile_row = next(v for k, v in rows.items() if k.startswith("`tools profile summary"))
    assert "prints" in kernels_row and "`tools ingest` writes the kernel pages" in kernels_row
    assert "prints" in profile_row


def test_init_on_a_file_is_a_clean_error(tmp_path, invoke):
    (tmp_path / "f").write_text("x")
    r = invoke("init", tmp_path / "f")
    assert r.exit_code == 2 and "is a file" in r.output  # click refuses it before we run
    with pytest.raises(InputError, match="exists and is not a folder"):
        scaffold.init(tmp_path / "f")


def test_the_shipped_reference_model_is_the_repository_copy():
    repo = Path(__file__).resolve().parents[2]
    link = repo / "experiments/llama_train.py"  # one copy: the repository's is a link to the one `tools init` ships
    assert link.is_symlink() and link.resolve() == (repo / "tools/templates/llama_train.py").resolve()


def test_a_file_where_the_layout_needs_a_folder_is_refused_before_anything_is_written(tmp_path, invoke):
    """`wiki` a file: init wrote mkdocs.yml, AGENTS.md, the agents' configs and raw/, then died in a traceback."""
    root = tmp_path / "w"
    root.mkdir()
    (root / "wiki").write_text("not a folder\n")
    r = invoke("init", str(root))
    assert r.exit_code == 1 and "wiki: exists and is not a folder" in r.output and "Traceback" not in r.output
    assert sorted(p.name for p in root.iterdir()) == ["wiki"]


def test_agents_install_merges_its_server_into_a_users_configs(tmp_path):
    """`tools agents install --force` replaced a user's `.mcp.json` (their other servers gone), Codex's config (its
    model gone) and Gemini's settings with its own entry alone; without --force it never added the server. A path
    with an emoji made a Codex TOML that tomllib refused (JSON's surrogate escapes)."""
    import json
    import tomllib

    root = tmp_path / "kb 😀"
    scaffold.init(root)
    (root / ".mcp.json").write_text('{"mcpServers": {"github": {"command": "gh-mcp"}}}\n')
    (root / ".codex/config.toml").write_text('model = "o3"\n[mcp_servers.other]\ncommand = "other"\n')
    (root / ".gemini/settings.json").write_text('{"theme": "dark", "mcpServers": {"autoresearch-wiki": '
                                                '{"command": "old", "args": []}}}\n')
    first = scaffold.install_agents(root)
    assert sorted(first.updated) == [".codex/config.toml", ".mcp.json"] and ".gemini/settings.json" in first.kept
    servers = json.loads((root / ".mcp.json").read_text())["mcpServers"]
    assert servers["github"] == {"command": "gh-mcp"} and servers["autoresearch-wiki"]["args"][-1] == "mcp"
    codex = tomllib.loads((root / ".codex/config.toml").read_text())
    assert codex["model"] == "o3" and codex["mcp_servers"]["other"] == {"command": "other"}
    assert codex["mcp_servers"]["autoresearch-wiki"]["args"][-2] == str(root.resolve())
    forced = scaffold.install_agents(root, force=True)  # our stale Gemini entry replaced, its theme kept
    assert forced.updated == [".gemini/settings.json"]
    gemini = json.loads((root / ".gemini/settings.json").read_text())
    assert gemini["theme"] == "dark" and gemini["mcpServers"]["autoresearch-wiki"]["command"] != "old"
    assert scaffold.install_agents(root, force=True).updated == []  # nothing changed: nothing said updated
    empty = tmp_path / "not-a-kb"
    empty.mkdir()
    from click.testing import CliRunner

    from tools.cli import cli

    r = CliRunner().invoke(cli, ["--root", str(empty), "agents", "install"])
    assert r.exit_code == 1 and "no wiki/ folder here" in r.output and list(empty.iterdir()) == []


def test_a_config_that_cannot_take_the_server_is_kept_valid_and_the_reason_said(tmp_path, invoke):
    """A Codex config with an inline `mcp_servers = {...}` got a `[mcp_servers.autoresearch-wiki]` table appended:
    TOML no reader accepts, and Codex refused it. A moved knowledge base and a Gemini file with comments were all
    "kept (exists)" with the server pointing at the old folder or missing; `tools init` on a folder that had a
    `.mcp.json` never added the server."""
    import json
    import tomllib

    root = tmp_path / "kb"
    scaffold.init(root)
    inline = 'model = "gpt-5"\nmcp_servers = { github = { command = "gh-mcp" } }\n'
    (root / ".codex/config.toml").write_text(inline)
    (root / ".gemini/settings.json").write_text('{\n  // mine\n  "theme": "dark"\n}\n')
    r = invoke("--root", str(root), "agents", "install")
    assert r.exit_code == 0 and (root / ".codex/config.toml").read_text() == inline
    tomllib.loads((root / ".codex/config.toml").read_text())
    assert "cannot be added and keep the file valid TOML" in r.output and "[mcp_servers.autoresearch-wiki]" in r.output
    assert "comments are not rewritten" in r.output and "kept .mcp.json: already configured" in r.output
    (root / ".codex/config.toml").write_text('mcp_servers = "oops"\n')
    assert "is not a table" in invoke("--root", str(root), "agents", "install").output
    moved = tmp_path / "moved"
    root.rename(moved)
    r = invoke("--root", str(moved), "agents", "install")
    assert "kept .mcp.json: its autoresearch-wiki entry starts another" in r.output and "--force" in r.output
    assert "updated .mcp.json" in invoke("--root", str(moved), "agents", "install", "--force").output
    assert json.loads((moved / ".mcp.json").read_text())["mcpServers"]["autoresearch-wiki"]["args"][-2] == str(moved)

    fresh = tmp_path / "fresh"
    fresh.mkdir()
    (fresh / ".mcp.json").write_text('{"mcpServers": {"mine": {"command": "a"}}}\n')
    r = invoke("init", str(fresh))
    servers = json.loads((fresh / ".mcp.json").read_text())["mcpServers"]
    assert r.exit_code == 0 and servers["mine"] == {"command": "a"} and "autoresearch-wiki" in servers
    assert "updated .mcp.json" in r.output


def test_a_repository_s_own_gitignore_gets_the_rules_it_lacks_and_git_then_ignores_the_state(tmp_path):
    """`tools init .` in a repository whose .gitignore held `secret.txt` kept it whole: a run's profiles, its code
    copy and the writers' lock files were staged by `git add -A` (11 MB of raw/profiles after the demo)."""
    import subprocess

    root = tmp_path / "repo"
    root.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    (root / ".gitignore").write_text("secret.txt\n")
    first = scaffold.init(root)
    text = (root / ".gitignore").read_text()
    assert ".gitignore" in first.updated and text.startswith("secret.txt\n") and "raw/profiles/*" in text
    (root / "raw/profiles/run1").mkdir(parents=True)
    (root / "raw/profiles/run1/run.log").write_text("x")
    (root / "wiki/.write.lock").write_text("")
    staged = subprocess.run(["git", "add", "-A", "-n"], cwd=root, capture_output=True, text=True, check=True).stdout
    assert "raw/profiles/run1" not in staged and ".write.lock" not in staged and "wiki/index.md" in staged, staged
    again = scaffold.init(root)
    assert ".gitignore" in again.kept and (root / ".gitignore").read_text() == text  # merged once


def test_a_folder_under_a_file_is_a_clear_error(tmp_path, invoke):
    """`tools init /tmp/afile/sub` (and `tools demo` there) ended in a NotADirectoryError traceback."""
    (tmp_path / "afile").write_text("x\n")
    r = invoke("init", str(tmp_path / "afile" / "sub"))
    assert r.exit_code != 0
    assert "afile/sub" in r.output and "cannot be made (Not a directory)" in r.output, r.output
    assert not isinstance(r.exception, NotADirectoryError)
