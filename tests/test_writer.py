"""tools.writer: atomic, idempotent writes that keep human text; the log."""

from __future__ import annotations

import os

import pytest

from tools import pages
from tools.errors import InputError
from tools.pages import Page, region
from tools.writer import Writer, atomic_write, locked, write_if_changed


def gen_page(text: str = "v1", title: str = "Remat") -> Page:
    return Page("concepts/remat.md", {"title": title, "type": "concept"},
                "# Remat\n\n" + region("where", text))


def test_atomic_write_leaves_no_temp_files(tmp_path):
    p = tmp_path / "a" / "b.txt"
    atomic_write(p, "hello")
    atomic_write(p, b"bytes")
    assert p.read_bytes() == b"bytes" and os.listdir(p.parent) == ["b.txt"]
    assert oct(p.stat().st_mode & 0o777) == "0o644"


def test_atomic_write_failure_keeps_the_old_file(tmp_path, monkeypatch):
    p = tmp_path / "x.md"
    p.write_text("old")

    def boom(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError):
        atomic_write(p, "new")
    assert p.read_text() == "old" and os.listdir(tmp_path) == ["x.md"]


def test_write_if_changed_statuses_and_mtime(tmp_path):
    p = tmp_path / "f.txt"
    assert write_if_changed(p, "a") == "created"
    os.utime(p, ns=(1_000_000_000, 1_000_000_000))
    assert write_if_changed(p, "a") == "unchanged"
    assert p.stat().st_mtime_ns == 1_000_000_000
    assert write_if_changed(p, "b") == "updated" and p.read_text() == "b"


def test_new_page_gets_dates(tmp_path):
    w = Writer(tmp_path, today="2026-01-01")
    assert w.write_page(gen_page()) == "created"
    meta, body = pages.split((tmp_path / "concepts/remat.md").read_text())
    assert meta["created"] == meta["updated"] == "2026-01-01"
    assert w.stats["created"] == 1 and w.changed["created"] == ["concepts/remat.md"]


def test_unchanged_regeneration_keeps_bytes_and_mtime(tmp_path):
    Writer(tmp_path, today="2026-01-01").write_page(gen_page())
    p = tmp_path / "concepts/remat.md"
    os.utime(p, ns=(5, 5))
    before = p.read_bytes()
    assert Writer(tmp_path, today="2026-02-02").write_page(gen_page()) == "unchanged"
    assert p.read_bytes() == before and p.stat().st_mtime_ns == 5


def test_human_text_survives_and_dates_move_only_on_change(tmp_path):
    Writer(tmp_path, today="2026-01-01").write_page(gen_page("v1"))
    p = tmp_path / "concepts/remat.md"
    text = p.read_text().replace("# Remat\n", "# Remat\n\nMy note above.\n") + "\nMy note below.\n"
    text = text.replace("updated: '2026-01-01'\n", "updated: '2026-01-01'\nmine: kept\n")  # canonical order
    p.write_text(text)
    assert Writer(tmp_path, today="2026-03-03").write_page(gen_page("v1")) == "unchanged"
    assert Writer(tmp_path, today="2026-04-04").write_page(gen_page("v2")) == "updated"
    meta, body = pages.split(p.read_text())
    assert meta["created"] == "2026-01-01" and meta["updated"] == "2026-04-04" and meta["mine"] == "kept"
    assert "My note above." in body and "My note below." in body
    assert "v2" in body and "v1" not in body


def test_generated_keys_win_and_created_is_kept(tmp_path):
    w = Writer(tmp_path, today="2026-01-01")
    w.write_page(gen_page(title="Old"))
    page = gen_page(title="New")
    page.meta["created"] = "1999-01-01"
    Writer(tmp_path, today="2026-05-05").write_page(page)
    meta, _ = pages.split((tmp_path / "concepts/remat.md").read_text())
    assert meta["title"] == "New" and meta["created"] == "2026-01-01"


def test_existing_page_without_frontmatter_is_adopted(tmp_path):
    p = tmp_path / "concepts/remat.md"
    p.parent.mkdir(parents=True)
    p.write_text("Hand text.\n")
    Writer(tmp_path, today="2026-01-01").write_page(gen_page())
    text = p.read_text()
    assert text.startswith("---\ntitle: Remat\n") and "Hand text." in text and "<!-- tools:begin where -->" in text


def test_refuses_non_utf8_and_escaping_paths(tmp_path):
    p = tmp_path / "concepts/remat.md"
    p.parent.mkdir(parents=True)
    p.write_bytes(b"caf\xe9")
    with pytest.raises(InputError, match="not UTF-8"):
        Writer(tmp_path).write_page(gen_page())
    assert p.read_bytes() == b"caf\xe9"
    with pytest.raises(InputError, match="escapes wiki"):
        Writer(tmp_path).write_file("../outside.txt", "x")


def test_write_file_and_remove(tmp_path):
    w = Writer(tmp_path)
    assert w.write_file("codebases/x/symbols.tsv", "a\tb\n") == "created"
    assert w.write_file("codebases/x/symbols.tsv", "a\tb\n") == "unchanged"
    assert w.remove("codebases/x/symbols.tsv") == "removed"
    assert w.remove("codebases/x/symbols.tsv") is None
    assert w.changed == {"created": ["codebases/x/symbols.tsv"], "updated": [],
                         "removed": ["codebases/x/symbols.tsv"]}


def test_log_format(tmp_path):
    w = Writer(tmp_path, today="2026-11-29")
    w.append_log("ingest", "raw/code/jax", ["created 2: a.md, b.md"])
    w.append_log("index", "wiki/index.md")
    text = (tmp_path / "log.md").read_text()
    meta, body = pages.split(text)
    assert meta == {"title": "Log", "type": "log"}
    assert body.endswith("Append-only record of operations.\n\n"
                         "## [2026-11-29] ingest | raw/code/jax\n\n- created 2: a.md, b.md\n\n"
                         "## [2026-11-29] index | wiki/index.md\n\n- no changes\n")


def test_log_changes_elides_long_lists(tmp_path):
    w = Writer(tmp_path, today="2026-11-29")
    for i in range(5):
        w.write_file(f"f{i}.txt", "x")
    w.log_changes("op", "subj", limit=2)
    assert "- created 5: f0.txt, f1.txt (+3 more)\n" in (tmp_path / "log.md").read_text()


def test_locked_is_reentrant_across_blocks(tmp_path):
    lock = tmp_path / ".lock"
    with locked(lock):
        pass
    with locked(lock):
        assert lock.exists()


def test_an_edit_keeps_a_person_s_prose_and_the_file_s_mode(tmp_path):
    """`lint --fix` rewrote "per-token latency" and "multi-token draft" as "[redacted]" (the flag pattern took the
    hyphen in prose for a flag's), and every write left the file 0644 (a private page became world-readable)."""
    page = tmp_path / "concepts/kv.md"
    page.parent.mkdir(parents=True)
    prose = ("Decode is bound by per-token latency; next-token prediction reads it. A Multi-Token draft helps.\n"
             "Our own note keeps HF_TOKEN=hf_abcdefgh123 as written.\n")
    page.write_text("---\ntitle: KV\ntype: concept\n---\n\n# KV\n\n" + prose + "See [[Other]].\n")
    page.chmod(0o600)
    w = Writer(tmp_path)
    assert w.update_file("concepts/kv.md", lambda t: t.replace("[[Other]]", "[Other](other.md)")) == "updated"
    text = page.read_text()
    assert prose in text and "[Other](other.md)" in text  # the person's lines as they were, secret-shaped or not
    assert page.stat().st_mode & 0o777 == 0o600
    # what the tools add is still redacted
    w.update_file("concepts/kv.md", lambda t: t + "run: train.py --hf-token=abc123 and --api-key xyz\n")
    added = page.read_text().splitlines()[-1]
    assert added == "run: train.py --hf-token=[redacted] and --api-key [redacted]", added
    from tools.redact import redact

    assert redact("run --2fa-token=abc123 --max-tokens 5") == "run --2fa-token=[redacted] --max-tokens 5"


def test_identifiers_that_start_like_a_key_are_kept_and_the_keys_are_not():
    """`hf_config`, `tests/hf_checkpoint_conversion_test.py` (MaxText's, tpu-inference's) became `[redacted]` in a
    codebase's symbol index: the Hugging Face shape matched any `hf_` and six letters."""
    from tools.redact import redact

    code = "def hf_config():\n  tests/hf_checkpoint_conversion_test.py hf_configs hf_abcdefghijklmnopqrstuvwxyz_x"
    assert redact(code) == code
    token = "hf_" + "AbCdEfGhIjKlMnOpQrStUvWxYz01234567"
    assert redact(f"login {token} then") == "login [redacted] then"
    assert redact("HF_TOKEN=hf_abcdefgh123") == "HF_TOKEN=[redacted]"  # a short one named as a secret still goes


def test_a_secret_variable_s_value_is_redacted_whatever_it_starts_with_and_a_path_that_is_there_is_not(tmp_path,
                                                                                                   monkeypatch):
    """A base64 `AWS_SECRET_ACCESS_KEY` starting with `/` and a numeric `DB_PASSWORD` passed unredacted when a crash
    quoted them; a key file's path that exists, and `MAX_TOKENS=100000000`, stay as written."""
    from tools.redact import hold, redact

    aws, pin = "/K7MDENGbPxRfiCYEXAMPLEKEYwJalrXUtnFEMI", "31415926535"
    key_file = tmp_path / "id_rsa"
    key_file.write_text("x")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", aws)
    monkeypatch.setenv("SSH_KEY_PATH", str(key_file))
    monkeypatch.setenv("MAX_TOKENS", "100000000")
    hold({"DB_PASSWORD": pin})
    text = f"denied: {aws} pin {pin} key {key_file} after 100000000 tokens"
    assert redact(text) == f"denied: [redacted] pin [redacted] key {key_file} after 100000000 tokens"


def test_a_generated_key_that_no_longer_holds_leaves_the_page_and_a_hand_added_one_stays(tmp_path):
    """A user's report: a kernel's `vendored_from` stayed on its page (and the directory) after the copy it named
    changed or its repository was removed: the writer kept every old key the new frontmatter left out."""
    from tools.pages import Page

    w = Writer(tmp_path / "wiki")
    owned = ("type", "title", "vendored_from")
    w.write_page(Page("kernels/x/k.md", {"type": "kernel", "title": "k", "vendored_from": "jax:a.py"}, "# k\n",
                      owned_meta=owned))
    page = tmp_path / "wiki/kernels/x/k.md"
    page.write_text(page.read_text().replace("title: k\n", "title: k\nnotes: mine\n"))  # a person's own key
    w.write_page(Page("kernels/x/k.md", {"type": "kernel", "title": "k"}, "# k\n", owned_meta=owned))
    meta = pages.split(page.read_text())[0]
    assert "vendored_from" not in meta and meta["notes"] == "mine", meta
