"""`tools init`: lay out a new knowledge base. Never overwrites; running it twice changes nothing."""

from __future__ import annotations

import os
import re

from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from . import pages, wikiindex
from .errors import InputError
from .wikiscan import scan
from .writer import CREATED, UPDATED, Writer, write_if_changed

KEEP = ".gitkeep"

GITIGNORE = """\
# Written by `tools init`.
# Built site and disposable tool state (a killed site build's folders beside site/ included).
site/
.site.*/
.site.lock
# ... and beside a site_dir of another name (a killed build of `public/` leaves `.public.building-PID/`)
.*.building-*/
.*.old-*/
build/
.tools-cache/
__pycache__/
# Lock files the writer and the experiment runner hold while they write.
wiki/**/.lane.lock
wiki/.log.lock
wiki/.write.lock
# A loop's work trees and its private copy of the model code (the branches keep every change).
loops/*/trunk/
loops/*/worktrees/
loops/*/repo/
loops/*/.driver.lock
# Profiles are large: keep only their notes in git.
raw/profiles/*
!raw/profiles/.gitkeep
!raw/profiles/*.md
# Code checkouts are pinned by commit and remote in wiki/codebases/; uncomment to keep them out of git.
# raw/code/*/
"""

FALLBACK_MKDOCS = """\
# Minimal site configuration written by `tools init` (the full one comes with the site extra).
site_name: {name}
docs_dir: wiki
site_dir: site
"""


def _mkdocs_yml(site_name: str) -> tuple[str, str | None]:
    """(mkdocs.yml, docs/index.md or None): the site package's versions when present, else a minimal config."""
    try:
        from .sitegen.config import docs_index_md, mkdocs_yml
    except ImportError:
        import json

        return FALLBACK_MKDOCS.format(name=json.dumps(site_name)), None
    return mkdocs_yml(site_name), docs_index_md(site_name)


_KIND_WORDS = {str: "text", int: "integer", float: "number", list: "list", dict: "mapping", bool: "true/false"}


def _choices(key: pages.Key) -> str:
    name = f"`{key.name}`"
    if key.choices:
        return f"{name} (one of: {', '.join(key.choices)})"
    if key.kind is not None:
        kinds = key.kind if isinstance(key.kind, tuple) else (key.kind,)
        words = sorted({_KIND_WORDS.get(k, k.__name__) for k in kinds})
        return f"{name} ({'number' if set(kinds) == {int, float} else ' or '.join(words)})"
    return name


def types_table() -> str:
    """The page types and their keys as a markdown table, generated from tools.pages.TYPES."""
    rows = ["| Type | Folder | Required keys | Other keys | Sections | What it is |",
            "|---|---|---|---|---|---|"]
    for t in pages.TYPES.values():
        req = ", ".join(_choices(k) for k in t.keys if k.required) or "-"
        opt = ", ".join(_choices(k) for k in t.keys if not k.required) or "-"
        folder = f"`wiki/{t.folder}/`" if t.folder else "`wiki/`"
        secs = ", ".join(t.sections) or "-"
        rows.append(f"| `{t.name}` | {folder} | {req} | {opt} | {secs} | {t.summary or '-'} |")
    return "\n".join(rows)


def agents_md(site_name: str) -> str:
    text = resources.files("tools").joinpath("templates/AGENTS.md").read_text(encoding="utf-8")
    return (text.replace("{{SITE_NAME}}", site_name)
            .replace("{{COMMON_KEYS}}", ", ".join(f"`{k}`" for k in pages.COMMON_KEYS))
            .replace("{{TYPES_TABLE}}", types_table()))


def tools_command() -> list[str]:
    """The absolute command of the `tools` running now: the script it was started as, else the console script
    beside the interpreter, else ``<python> -m tools``. A harness started outside the venv still finds it."""
    import os
    import sys

    for cand in (Path(sys.argv[0]) if sys.argv and sys.argv[0] else None, Path(sys.executable).parent / "tools"):
        if cand is not None and cand.name == "tools" and cand.is_file() and os.access(cand, os.X_OK):
            return [str(cand.absolute())]
    return [str(Path(sys.executable).absolute()), "-m", "tools"]


def _server(root: Path) -> tuple[str, list[str]]:
    cmd = tools_command()
    return cmd[0], [*cmd[1:], "--root", str(root), "mcp"]


def mcp_json(root: Path, cwd_key: bool = False) -> str:
    """.mcp.json (Claude Code) and .gemini/settings.json (Gemini CLI, which also takes ``cwd``)."""
    import json

    command, args = _server(root)
    server = {"command": command, "args": args, **({"cwd": str(root)} if cwd_key else {})}
    return json.dumps({"mcpServers": {"autoresearch-wiki": server}}, indent=2) + "\n"


def _toml_string(text: str) -> str:
    import json  # a JSON string is a TOML basic string, but for \uD83D-style surrogate escapes: keep non-ASCII as is

    return json.dumps(text, ensure_ascii=False)


def _codex_table(root: Path) -> str:
    command, args = _server(root)
    return (f"[mcp_servers.autoresearch-wiki]\ncommand = {_toml_string(command)}\n"
            f"args = [{', '.join(_toml_string(a) for a in args)}]\n")


def codex_toml(root: Path) -> str:
    return ("# Codex CLI: project MCP servers (copy to ~/.codex/config.toml if your version reads only that)\n"
            + _codex_table(root))


def agent_files(site_name: str, root: Path) -> dict[str, str]:
    """The harness set-up: AGENTS.md (the protocol) and MCP configs for Claude Code, Gemini CLI and Codex, each
    starting this install's `tools` (absolute path) on this knowledge base (``--root``), from any folder."""
    return {"AGENTS.md": agents_md(site_name), ".mcp.json": mcp_json(root), ".gemini/settings.json":
            mcp_json(root, cwd_key=True), ".codex/config.toml": codex_toml(root)}


def mcp_missing() -> str | None:
    """Why `tools mcp` cannot serve here (the SDK is not installed), or None."""
    import importlib.util

    if importlib.util.find_spec("mcp") is None:
        return "the MCP SDK is not installed: pip install 'autoresearch-wiki[agent]'"
    return None


def install_agents(root: Path, force: bool = False) -> InitResult:
    """Write the harness set-up into an existing knowledge base. A missing file is written; an MCP config that
    exists gets this server's entry merged in, every other entry and key kept (a user's other servers, Gemini's
    other settings, Codex's model); an entry of ours that differs is replaced only with ``force``. AGENTS.md is never
    overwritten. A config that cannot be read as its format, or could not take the entry and stay valid, is kept
    and the reason said (``InitResult.why``)."""
    root = Path(root).resolve()
    result = InitResult(root)
    for rel, text in agent_files(root.name, root).items():
        _install_one(root, rel, text, force, result)
    return result


def _install_one(root: Path, rel: str, text: str, force: bool, result: InitResult) -> None:
    path = root / rel
    if not (path.exists() or path.is_symlink()):
        if write_if_changed(path, text) == CREATED:
            result.created.append(rel)
        return
    if rel == "AGENTS.md" or path.is_symlink() or not path.is_file():
        result.kept.append(rel)
        result.why[rel] = "exists" if rel == "AGENTS.md" else "not a plain file: left as it is"
        return
    merged, why = _merged(rel, path.read_text(encoding="utf-8", errors="replace"), root, force)
    if merged is None or write_if_changed(path, merged) != UPDATED:
        result.kept.append(rel)
        result.why[rel] = why or "already configured"
    else:
        result.updated.append(rel)


def _gitignore_merged(path: Path, result: InitResult) -> None:
    """A repository's own ``.gitignore`` gets the knowledge base's rules it lacks, appended as a block (kept whole,
    profiles, lock files and the loops' work trees were committed: 11 MB of ``raw/profiles`` after the demo)."""
    current = path.read_text(encoding="utf-8", errors="replace")
    have = {ln.strip() for ln in current.splitlines()}
    missing = [ln for ln in GITIGNORE.splitlines() if ln.strip() and not ln.startswith("#") and ln.strip() not in have]
    if not missing:
        result.kept.append(".gitignore")
        return
    block = "# Added by `tools init`: the knowledge base's disposable state, lock files and profiles.\n"
    write_if_changed(path, current.rstrip("\n") + ("\n\n" if current.strip() else "") + block + "\n".join(missing)
                     + "\n")
    result.updated.append(".gitignore")


def _merged(rel: str, current: str, root: Path, force: bool) -> tuple[str | None, str]:
    """``current`` with this server's entry in it, or None and why the file is left as it is (unreadable, no
    room for the entry, ours already there, or ours differs and no ``force``)."""
    import json

    if rel.endswith(".toml"):
        return _merged_toml(current, root, force)
    try:
        data = json.loads(current) if current.strip() else {}
    except ValueError as e:
        return None, (f"not read as JSON ({e}); comments are not rewritten (they would be lost): add the "
                      f"autoresearch-wiki entry of `mcpServers` by hand")
    if not isinstance(data, dict) or not isinstance(data.get("mcpServers", {}), dict):
        return None, "its `mcpServers` is not an object: left as it is"
    ours = json.loads(mcp_json(root, cwd_key=rel.startswith(".gemini")))["mcpServers"]["autoresearch-wiki"]
    servers = data.setdefault("mcpServers", {})
    if servers.get("autoresearch-wiki") == ours:
        return None, "already configured"
    if "autoresearch-wiki" in servers and not force:
        return None, ("its autoresearch-wiki entry starts another command or knowledge base (a moved folder, another "
                      "install): `tools agents install --force` replaces it")
    servers["autoresearch-wiki"] = ours
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n", ""


def _merged_toml(current: str, root: Path, force: bool) -> tuple[str | None, str]:
    import tomllib

    try:
        servers = tomllib.loads(current).get("mcp_servers", {})
    except tomllib.TOMLDecodeError as e:
        return None, f"not read as TOML ({e}): left as it is"
    if not isinstance(servers, dict):
        return None, "its `mcp_servers` is not a table: left as it is"
    table = _codex_table(root)
    ours = tomllib.loads(table)["mcp_servers"]["autoresearch-wiki"]
    have = servers.get("autoresearch-wiki")
    if have == ours:
        return None, "already configured"
    if have is not None and not force:
        return None, ("its autoresearch-wiki table starts another command or knowledge base: `tools agents install "
                      "--force` replaces it")
    if have is None:
        merged = current.rstrip("\n") + ("\n\n" if current.strip() else "") + table
    else:
        lines, out, skip = current.split("\n"), [], False
        for ln in lines:  # our table's lines replaced, up to the next table header
            if ln.strip().startswith("["):
                if skip:
                    out.append("")
                skip = ln.strip() in ("[mcp_servers.autoresearch-wiki]", '[mcp_servers."autoresearch-wiki"]')
                if skip:
                    out.append(table.rstrip("\n"))
                    continue
            if not skip:
                out.append(ln)
        merged = "\n".join(out).rstrip("\n") + "\n"
    try:  # an inline `mcp_servers = { ... }` cannot take a table: the file must stay one Codex reads
        if tomllib.loads(merged).get("mcp_servers", {}).get("autoresearch-wiki") != ours:
            raise tomllib.TOMLDecodeError("the entry did not land")
    except tomllib.TOMLDecodeError as e:
        return None, (f"the table cannot be added and keep the file valid TOML ({e}); add it by hand:\n{table}")
    return merged, ""


def layout(site_name: str, root: Path) -> dict[str, str]:
    """Files a new knowledge base gets (relative path -> text), wiki pages excluded."""
    mkdocs, docs_index = _mkdocs_yml(site_name)
    files = {
        "mkdocs.yml": mkdocs,
        **agent_files(site_name, root),
        ".gitignore": GITIGNORE,
        f"raw/code/{KEEP}": "",
        f"raw/sources/{KEEP}": "",
        f"raw/profiles/{KEEP}": "",
        f"experiments/{KEEP}": "",
        # The reference training benchmark, so `tools exp run -- python experiments/llama_train.py` works at once.
        "experiments/llama_train.py": resources.files("tools").joinpath("templates/llama_train.py").read_text(encoding="utf-8"),
        # The loop over it: `tools loop start llama-cpu`.
        "loops/llama-cpu.yml": resources.files("tools").joinpath("templates/loop-llama-cpu.yml").read_text(encoding="utf-8"),
    }
    files["docs/index.md"] = docs_index if docs_index is not None else f"# {site_name}\n"
    for name in pages.CONTENT_TYPES:
        files[f"wiki/{pages.TYPES[name].folder}/{KEEP}"] = ""
    return files


@dataclass
class InitResult:
    root: Path
    created: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    why: dict[str, str] = field(default_factory=dict)  # a kept file's reason, where it is not just "exists"


CI_WORKFLOW = ".github/workflows/perf-gate.yml"


DEFAULT_TOOLS_SPEC = "git+https://github.com/OWNER/autoresearch-wiki@COMMIT#egg=autoresearch-wiki[exp]"


def _git_top(root: Path) -> Path | None:
    """The top of the git repository ``root`` is in, None outside one."""
    import subprocess

    try:
        out = subprocess.run(["git", "-C", str(root), "rev-parse", "--show-toplevel"], capture_output=True,
                             text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return Path(out.stdout.strip()).resolve() if out.returncode == 0 and out.stdout.strip() else None


def ci_workflow(command: str, runner: str = "tpu", max_regression: float = 2.0,
                tools_spec: str = DEFAULT_TOOLS_SPEC, workdir: str = ".") -> str:
    """The GitHub Actions workflow of the performance gate (``tools init --ci github``): on a pull request, a
    self-hosted runner with label ``runner`` gates ``command`` against the baseline ``main``."""
    import shlex

    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.\-]*", runner):
        raise InputError("--ci-runner", f"{runner!r} is not a runner label")
    if not command.strip() or "\n" in command:
        raise InputError("--ci-command", "give the training command on one line")
    shlex.split(command)  # a command the shell can read (raises ValueError on an open quote)
    text = resources.files("tools").joinpath("templates/perf-gate.yml").read_text(encoding="utf-8")
    if "\n" in tools_spec or not tools_spec.strip():
        raise InputError("--ci-tools", "give where the runner installs the tools from on one line")
    import json

    import yaml

    flow = text.replace("{runner}", runner).replace("{max_regression}", f"{max_regression:g}") \
        .replace("{tools_spec}", json.dumps(tools_spec)).replace("{workdir}", json.dumps(workdir)) \
        .replace("{command}", command)  # a JSON string is YAML
    try:
        spec_back = yaml.safe_load(flow)["env"]["TOOLS_SPEC"]
    except yaml.YAMLError as e:
        raise InputError("--ci-command", f"the workflow would not be valid YAML ({str(e).splitlines()[0]})") from None
    if spec_back != tools_spec:
        raise InputError("--ci-tools", f"{tools_spec!r} would be read back as {spec_back!r}")
    return flow


def init(root: Path, site_name: str | None = None, subject: str | None = None,
         today: str | None = None, ci: dict | None = None) -> InitResult:
    """Create the layout under ``root``; files that exist are kept untouched and reported. ``ci``: the arguments
    of ``ci_workflow`` when a CI gate is asked for."""
    root = Path(root).resolve()
    if root.exists() and not root.is_dir():
        raise InputError(root, "exists and is not a folder")
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as e:  # a file where a parent folder goes, no permission
        raise InputError(root, f"cannot be made ({e.strerror})") from None
    name = site_name or root.name
    result = InitResult(root)
    files = layout(name, root)
    if ci is not None:  # GitHub reads workflows at the repository's top only: there, run in the KB's folder
        top = _git_top(root)
        workdir = root.relative_to(top).as_posix() if top is not None and top != root else "."
        files[os.path.relpath(top / CI_WORKFLOW, root) if workdir != "." else CI_WORKFLOW] = ci_workflow(
            **ci, workdir=workdir)
    for rel in sorted(files):  # a folder of the layout that is a file here: refused before anything is written
        for parent in list(Path(rel).parents)[:-1]:
            p = root / parent
            if (p.exists() or p.is_symlink()) and not p.is_dir():
                raise InputError(p, "exists and is not a folder (the knowledge base needs one here); nothing was "
                                    "written")
    agents = agent_files(name, root)
    for rel, text in files.items():
        path = root / rel
        if rel in agents and rel != "AGENTS.md":  # a harness config there already gets this server merged in
            _install_one(root, rel, text, False, result)
        elif rel == ".gitignore" and path.is_file() and not path.is_symlink():
            _gitignore_merged(path, result)
        elif path.exists() or path.is_symlink():
            result.kept.append(rel)
        elif write_if_changed(path, text) == CREATED:
            result.created.append(rel)
    wiki = root / "wiki"
    writer = Writer(wiki, today=today)
    if (wiki / wikiindex.INDEX).exists():
        result.kept.append("wiki/index.md")
    else:
        writer.write_page(wikiindex.index_page(scan(wiki, links=False)))
        result.created.append("wiki/index.md")
    had_log = (wiki / wikiindex.LOG).exists()
    (result.kept if had_log else result.created).append("wiki/log.md")
    if not had_log or any(r != "wiki/log.md" for r in result.created):
        shown = [r for r in result.created if not r.endswith(KEEP)]
        lines = [f"created {len(result.created)}: {', '.join(shown)}"]
        if result.kept:
            lines.append(f"kept {len(result.kept)}: {', '.join(result.kept)}")
        writer.append_log("init", subject or str(root), lines)
    result.created.sort()
    result.kept.sort()
    return result
