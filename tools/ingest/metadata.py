"""What a repository says about itself: README summary, package metadata, entry points. Pure readers."""

from __future__ import annotations

import ast
import configparser
import re
import tomllib
from pathlib import Path

from .. import mdtext, safeio

README_NAMES = ("README.md", "README.rst", "README.txt", "README", "readme.md")
ENTRY_NAME = re.compile(r"(?:^|/)(?:train|training|bench|benchmark|run|main|serve|server|infer|inference|eval|launch)\w*\.py$")


def _read(path: Path, limit: int = 256 * 1024) -> str | None:
    """A README or metadata file's text: UTF-8, else the Windows/Latin-1 text older READMEs were saved as (read as
    UTF-8 with replacements, ``Café`` became ``Caf\ufffd``)."""
    try:
        data = safeio.read_bytes(path, limit)
    except OSError:
        return None
    try:
        return data.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError:
        if _UTF8_MULTIBYTE.search(data):  # UTF-8 with a stray byte: keep its é and —, replace the one byte
            return data.decode("utf-8", errors="replace").removeprefix("\ufeff")
        try:
            return data.decode("cp1252")
        except UnicodeDecodeError:
            return data.decode("latin-1")


_UTF8_MULTIBYTE = re.compile(rb"[\xc2-\xf4][\x80-\xbf]+")


_MD_LINK = re.compile(r"!?\[([^\[\]\n]*)\]\([^()\n]*\)")  # linear: a label holds no "["


def readme_summary(text: str, limit: int = 700) -> str:
    """The first prose paragraphs of a README: no badges, link bars, notes, headings, HTML or code."""
    text = mdtext.drop_spans(mdtext.drop_spans(text, "<!--", "-->"), "```", "```")
    out = []
    for p in re.split(r"\n\s*\n", text):
        p = p.strip()
        if not p or p.startswith(("#", "<", "|", ">", "=", "-" * 3, ".. ", ":", "[![", "![")) or re.fullmatch(r"[=\-~^*]+", p):
            continue
        p = _MD_LINK.sub(r"\1", _MD_LINK.sub(r"\1", p))  # images inside links too
        p = re.sub(r"<[^<>]*>", "", p)
        p = p.replace("**", "").replace("__", "")
        p = " ".join(p.split())
        words = re.findall(r"[A-Za-z]{2,}", p)
        if len(words) < 8 or p.count(" | ") >= 1:  # badge rows and link bars
            continue
        out.append(p)
        if sum(map(len, out)) > limit:
            break
    s = "\n\n".join(out)
    return s if len(s) <= limit + 200 else s[:limit].rsplit(" ", 1)[0] + " …"


def _setup_py_kwargs(text: str) -> dict:
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", "")) == "setup":
            out = {}
            for kw in node.keywords:
                if kw.arg:
                    try:
                        out[kw.arg] = ast.literal_eval(kw.value)
                    except (ValueError, TypeError, SyntaxError, RecursionError):
                        pass
            return out
    return {}


def _scripts_from_entry_points(ep) -> dict[str, str]:
    out = {}
    items = ep.get("console_scripts", []) if isinstance(ep, dict) else []
    if isinstance(items, str):
        items = items.splitlines()
    for item in items:
        if isinstance(item, str) and "=" in item:
            k, v = item.split("=", 1)
            out[k.strip()] = v.strip()
    return out


def package_metadata(root: Path) -> dict:
    """name, version, description, requires_python, dependencies, scripts — whatever is declared."""
    meta: dict = {}
    text = _read(root / "pyproject.toml")
    if text:
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError:
            data = {}
        proj = data.get("project", {}) if isinstance(data.get("project"), dict) else {}
        poetry = data.get("tool", {}).get("poetry", {}) if isinstance(data.get("tool"), dict) else {}
        for key in ("name", "version", "description"):
            val = proj.get(key) or poetry.get(key)
            if isinstance(val, str):
                meta[key] = val
        if isinstance(proj.get("requires-python"), str):
            meta["requires_python"] = proj["requires-python"]
        deps = proj.get("dependencies")
        if isinstance(deps, list):
            meta["dependencies"] = [d for d in deps if isinstance(d, str)]
        scripts = proj.get("scripts") or poetry.get("scripts")
        if isinstance(scripts, dict):
            meta["scripts"] = {k: str(v) for k, v in scripts.items()}
    text = _read(root / "setup.cfg")
    if text:
        cp = configparser.RawConfigParser(strict=False)
        try:
            cp.read_string(text)
            if cp.has_section("metadata"):
                for key in ("name", "version", "description"):
                    if cp.has_option("metadata", key):
                        meta.setdefault(key, cp.get("metadata", key))
            if cp.has_option("options.entry_points", "console_scripts"):
                meta.setdefault("scripts", _scripts_from_entry_points(
                    {"console_scripts": cp.get("options.entry_points", "console_scripts")}))
        except configparser.Error:
            pass
    text = _read(root / "setup.py")
    if text:
        kw = _setup_py_kwargs(text)
        for key in ("name", "version", "description"):
            if isinstance(kw.get(key), str):
                meta.setdefault(key, kw[key])
        if "entry_points" in kw:
            scripts = _scripts_from_entry_points(kw["entry_points"])
            if scripts:
                meta.setdefault("scripts", scripts)
        if isinstance(kw.get("install_requires"), list):
            meta.setdefault("dependencies", [d for d in kw["install_requires"] if isinstance(d, str)])
    for name in README_NAMES:
        text = _read(root / name, 1024 * 1024)
        if text:
            meta["readme"] = name
            meta["summary"] = readme_summary(text)
            break
    return meta
