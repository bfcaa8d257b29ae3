"""A hostile corpus, generated (no committed binaries): a code repository and hand-kept wiki pages carrying
script payloads in every field an ingest reads, and files built to crash, hang or exhaust a reader.

Every script payload calls ``alert(N)``; a page that runs one, opens a dialog, carries an ``on*`` handler or a
``javascript:`` URL with a payload marker is a failure (tests/hostile/test_site.py checks in Chromium).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

MARK = "alert("
PAYLOADS = [
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(2)>",
    '"><svg onload=alert(3)>',
    "javascript:alert(4)",
    '<a href="javascript:alert(5)">x</a>',
    "``<img src=x onerror=alert(6)>``",
    "[click](javascript:alert(7))",
    '<iframe src="javascript:alert(8)"></iframe>',
    "<details open ontoggle=alert(9)>",
    "'><body onload=alert(10)>",
    "![x](x\" onerror=\"alert(11))",
    "<math><mtext><table><mglyph><style><img src=x onerror=alert(12)>",
    "`` ` ``<script>alert(13)</script>",
    "<svg><a xlink:href=\"javascript:alert(14)\"><text>x</text></a></svg>",
]
ALL = " ".join(PAYLOADS)
# A file or folder name cannot hold "/"; these are the payloads that survive as names.
NAME_PAYLOADS = ['<img src=x onerror=alert(21)>', '"><svg onload=alert(22)>', "``<b onmouseover=alert(23)>``"]
SLUG_PAYLOAD = "<img src=x onerror=alert(30)>"


def _docstring(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"""', r'\"\"\"')


def write_repo(root: Path) -> Path:
    """A repository under ``root`` whose every readable field carries the payloads, plus the crashers."""
    root.mkdir(parents=True, exist_ok=True)
    pkg = root / "evilpkg"
    pkg.mkdir()
    (root / "README.md").write_text(f"# evil {PAYLOADS[0]}\n\n{ALL}\n\n```python\nimport jax\n```\n")
    (root / "pyproject.toml").write_text(
        f'[project]\nname = "evilpkg"\nversion = "1.0"\ndescription = {json.dumps(ALL)}\n')
    (pkg / "__init__.py").write_text(f'"""{_docstring(ALL)}"""\nfrom . import model\n')
    (pkg / "model.py").write_text(
        f'"""{_docstring(ALL)}"""\nimport jax\nfrom jax.experimental import pallas as pl\n\n\n'
        "def _kernel(x_ref, o_ref):\n    o_ref[...] = x_ref[...]\n\n\n"
        f'def fused(x):\n    """{_docstring(ALL)}"""\n'
        "    x = jax.checkpoint(lambda y: y)(x)\n"
        "    return pl.pallas_call(_kernel, out_shape=x)(x)\n\n\n"
        f'class Attention:\n    """{_docstring(PAYLOADS[1])}"""\n\n    def __call__(self, x):\n'
        "        return jax.lax.scan(lambda c, y: (c, y), 0, x)\n")
    # Names: files and folders carrying payloads, a name of 250 bytes, control characters, tabs, newlines.
    for i, name in enumerate(NAME_PAYLOADS):
        d = pkg / name
        d.mkdir()
        (d / "__init__.py").write_text(f'"""{_docstring(name)}"""\nimport jax\nx = jax.checkpoint\n')
        (pkg / f"{name}_{i}.py").write_text("import jax\ny = jax.lax.scan\n")
    (pkg / ("k" * 246 + ".py")).write_text('"""Long name."""\nimport jax\nz = jax.checkpoint\n')
    (pkg / "tab\tname.py").write_text("import jax\n")
    (pkg / "new\nline.py").write_text("import jax\n")
    (pkg / "esc\x1b[31mred\x1b[0m.py").write_text("import jax\n")
    # Notebooks: non-string sources, a cell list that is not a list, huge outputs around a real code cell.
    (root / "nb").mkdir()
    (root / "nb/bad_source.ipynb").write_text(json.dumps({"cells": [
        {"cell_type": "code", "source": [1, None, {"a": 2}, "import jax\n"]},
        {"cell_type": "markdown", "source": 7},
        {"cell_type": "code"}, "not a cell"], "nbformat": 4}))
    (root / "nb/not_cells.ipynb").write_text(json.dumps({"cells": {"x": 1}}))
    big = {"output_type": "stream", "text": ["x" * 1000 + "\n"] * 2600}
    (root / "nb/huge_outputs.ipynb").write_text(json.dumps({"cells": [
        {"cell_type": "code", "source": ["import jax\n", "y = jax.checkpoint(f)\n"], "outputs": [big]}],
        "nbformat": 4}))
    # Encodings: UTF-16 text with a BOM, a file with a NUL byte.
    (pkg / "utf16.py").write_bytes('"""UTF-16 module."""\nimport jax\nq = jax.checkpoint\n'.encode("utf-16"))
    # Deep expressions: a kernel body too deep for the parser's recursion.
    deep = "(" * 3000 + "1" + ")" * 3000
    (pkg / "deep_kernel.py").write_text(
        "from jax.experimental import pallas as pl\n\n\ndef _k(x_ref, o_ref):\n"
        f"    o_ref[...] = {deep}\n\n\ndef run(x):\n    return pl.pallas_call(_k, out_shape=x)(x)\n")
    # A file larger than any limit, sparse so it costs no disk.
    with open(pkg / "enormous.py", "wb") as f:
        f.truncate(64 * 1024**3)
    # Special files: a FIFO among the sources (reading it would block forever).
    os.mkfifo(pkg / "pipe.py")
    # Symlinks out of the tree.
    os.symlink("/etc/passwd", pkg / "passwd.py")
    os.symlink("/etc", pkg / "etc_dir")
    # .git: a remote that injects HTML and a javascript: URL, HEAD a FIFO, config a symlink into /dev.
    git = root / ".git"
    git.mkdir()
    os.mkfifo(git / "HEAD")
    (git / "config").write_text(
        '[remote "origin"]\n\turl = https://github.com/acme/x"><script>alert(40)</script>\n'
        '[remote "other"]\n\turl = javascript:alert(41)//github.com/a/b\n')
    return root


def write_fifo_config_repo(root: Path) -> Path:
    """A second repository: ``.git/config`` a FIFO and ``.git/HEAD`` a symlink to /dev/zero."""
    (root / ".git").mkdir(parents=True)
    os.mkfifo(root / ".git/config")
    os.symlink("/dev/zero", root / ".git/HEAD")
    (root / "m.py").write_text('"""Fine."""\nimport jax\nx = jax.checkpoint\n')
    return root


def write_wiki_pages(wiki: Path) -> list[str]:
    """Hand-kept pages from others: non-UTF-8, pathological markdown, a symlink to a system file, payloads."""
    notes = wiki / "notes" / "deep" / "er"
    notes.mkdir(parents=True, exist_ok=True)
    made = []

    def put(rel: str, data: str | bytes) -> None:
        p = wiki / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data.encode() if isinstance(data, str) else data)
        made.append(rel)

    put("notes/latin1.md", "---\ntitle: caf\xe9\n---\n# Caf\xe9 cr\xe8me\n".encode("latin-1"))
    put("notes/deep/er/blockquote.md", "# Deep\n\n" + ">" * 3000 + " deep\n")
    put("notes/deep/er/brackets.md", "# Brackets\n\n" + "[" * 20000 + "\n")
    put("notes/xss.md", f"---\ntitle: {json.dumps(PAYLOADS[1])}\n---\n# Notes {PAYLOADS[2]}\n\n{ALL}\n")
    put("notes/summary-bomb.md", "# Bomb\n\n" + ("a" * 50 + " ") * 800 + "`" * 5000 + "*_" * 5000 + "\n")
    os.symlink("/etc/passwd", wiki / "notes" / "passwd.md")
    made.append("notes/passwd.md")
    return made


def _pdf(objs: list[str]) -> bytes:
    out, offs = b"%PDF-1.4\n", []
    for i, o in enumerate(objs, 1):
        offs.append(len(out))
        out += f"{i} 0 obj\n{o}\nendobj\n".encode()
    x = len(out)
    out += f"xref\n0 {len(objs) + 1}\n0000000000 65535 f \n".encode()
    out += b"".join(f"{o:010d} 00000 n \n".encode() for o in offs)
    return out + f"trailer\n<< /Size {len(objs) + 1} /Root 1 0 R >>\nstartxref\n{x}\n%%EOF\n".encode()


def write_bad_pdfs(folder: Path, depth: int = 3000) -> None:
    """``cyclic.pdf`` (a page tree that holds itself) and ``deep.pdf`` (``depth`` nested page-tree nodes): both
    made pdfium raise out of the whole sources ingest."""
    folder.mkdir(parents=True, exist_ok=True)
    text = "BT /F1 12 Tf 72 720 Td (Full remat cost 27 % of step time) Tj ET"
    font = "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"
    stream = f"<< /Length {len(text)} >>\nstream\n{text}\nendstream"
    (folder / "cyclic.pdf").write_bytes(_pdf([
        "<< /Type /Catalog /Pages 2 0 R >>", "<< /Type /Pages /Kids [2 0 R 3 0 R] /Count 2 >>",
        "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R /Resources << /Font << /F1 5 0 R >> >> >>",
        stream, font]))
    objs = ["<< /Type /Catalog /Pages 2 0 R >>"]
    for i in range(depth):
        parent = f" /Parent {1 + i} 0 R" if i else ""
        objs.append(f"<< /Type /Pages /Kids [{3 + i} 0 R] /Count 1{parent} >>")
    page = 2 + depth
    objs += [f"<< /Type /Page /Parent {page - 1} 0 R /MediaBox [0 0 612 792] /Contents {page + 1} 0 R "
             f"/Resources << /Font << /F1 {page + 2} 0 R >> >> >>", stream, font]
    (folder / "deep.pdf").write_bytes(_pdf(objs))
