"""Never a key or token in what the tools write: a command line that carries one (`--hf-token=...`), a variable
whose name does not say it is secret, a crash message that quotes one. Real runs through `tools exp run`, then
every file the knowledge base holds is read for the secrets."""

from __future__ import annotations

import sys

from _exp_helpers import FAKE
from click.testing import CliRunner

from tools.cli import cli

SECRETS = ("sk-ant-test-SECRET123", "hf_SECRET456", "ghp_abcdefghijklmnopqrstuvwx")


def test_no_secret_reaches_a_page_a_ledger_or_the_log(project, tmp_path):
    crash = tmp_path / "crash.py"
    crash.write_text("import sys\nraise RuntimeError('the hub refused key sk-ant-test-SECRET123')\n")
    runs = (["--env", "MY_AUTH=sk-ant-test-SECRET123", "--", sys.executable, str(FAKE), "--step-ms", "5"],
            ["--", sys.executable, str(FAKE), "--step-ms", "5", "--hf-token=hf_SECRET456"],
            ["--env", "GH=ghp_abcdefghijklmnopqrstuvwx", "--", sys.executable, str(crash)])
    for n, args in enumerate(runs):
        r = CliRunner().invoke(cli, ["--root", str(project.root), "exp", "run", "--model", "m", "--lane", "l",
                                     "--variant", "s/cpu", "-q", "-m", f"run {n}", *(["--baseline"] if n == 0 else []),
                                     *args])
        assert r.exception is None or isinstance(r.exception, SystemExit), repr(r.exception)
    written = [p for p in project.wiki.rglob("*") if p.is_file()]
    assert any(p.name == "RESULTS.tsv" for p in written) and any("crashes" in p.parts for p in written)
    leaks = [(p, s) for p in written for s in SECRETS if s in p.read_text(encoding="utf-8", errors="replace")]
    assert leaks == []
    assert "[redacted]" in "".join(p.read_text(errors="replace") for p in written)


def test_a_crash_that_quotes_a_secret_variable_s_value_files_it_redacted(project, tmp_path, monkeypatch):
    """A key of no known shape, in a variable named as a secret (the environment's `WANDB_API_KEY`, a run's own
    `--env MY_AUTH=...`), quoted by a crash on its own ("auth rejected: <key>"), reached the run's page, the crash
    page and the index, and `exp crashes` answered it to an agent."""
    wandb, own = "0123456789abcdef0123456789abcdef01234567", "zz_mytokensecret_9876"
    monkeypatch.setenv("WANDB_API_KEY", wandb)
    key_file = tmp_path / "id_rsa"
    key_file.write_text("x")
    monkeypatch.setenv("SSH_KEY_PATH", str(key_file))  # a path that is there is no secret: pages may show it
    crash = tmp_path / "crash.py"
    crash.write_text("import os\nraise RuntimeError('auth rejected: ' + os.environ['WANDB_API_KEY'] + ' / '\n"
                     "                   + os.environ['MY_AUTH'] + ' key file ' + os.environ['SSH_KEY_PATH'])\n")
    r = CliRunner().invoke(cli, ["--root", str(project.root), "exp", "run", "--model", "m", "--lane", "l",
                                 "--variant", "s/cpu", "-q", "-m", "crashy", "--env", f"MY_AUTH={own}", "--",
                                 sys.executable, str(crash)])
    assert r.exception is None or isinstance(r.exception, SystemExit), repr(r.exception)
    written = {p: p.read_text(errors="replace") for p in project.wiki.rglob("*") if p.is_file()}
    assert any(f"auth rejected: [redacted] / [redacted] key file {key_file}" in t for t in written.values())
    assert [p for p, t in written.items() if wandb in t or own in t] == []
    answer = CliRunner().invoke(cli, ["--root", str(project.root), "exp", "crashes", "--json"]).output
    assert wandb not in answer and own not in answer and "[redacted]" in answer


def test_a_key_after_a_secret_flag_or_in_an_env_change_never_names_a_run_nor_reaches_a_page(project, tmp_path):
    """A user's report: a run with no description was named after its command's last word, so `--wandb-api-key K`
    filed the page, its raw folder and every ledger line under the key; a hypothesis whose change sets
    WANDB_API_KEY wrote the value into its frontmatter (`WANDB_API_KEY: K`) and its body (`WANDB_API_KEY='K'`,
    quoted, which the redaction did not read as a value)."""
    import json

    from _shared import queue_loop

    key, other = "a951b3ca9cfd672ce9eb01cd7f3e", "zq9secretvalue28174"
    r = CliRunner().invoke(cli, ["--root", str(project.root), "exp", "run", "--model", "m", "--lane", "l",
                                 "--variant", "s/cpu", "-q", "--baseline", "--trust-step-times", "--",
                                 "sh", "-c", f"exec {sys.executable} {FAKE} --step-ms 5", "sh", "--wandb-api-key", key])
    assert r.exception is None or isinstance(r.exception, SystemExit), repr(r.exception)
    hyp = {"model": "m", "lane": "l", "loop": "m-l", "statement": "wandb off speeds the step",
           "mechanism": "less logging", "predicted_signal": "tokens/s up", "falsification": "no change",
           "change": {"kind": "env", "env": {"WANDB_API_KEY": other}}, "category": "compiler"}
    queue_loop(project.root)
    r = CliRunner().invoke(cli, ["--root", str(project.root), "hypotheses", "file", "--args", json.dumps(hyp)])
    assert r.exit_code == 0, r.output
    import yaml

    (page,) = (project.wiki / "hypotheses").rglob("*.md")  # the mark, a string YAML reads back (not a list)
    assert yaml.safe_load(page.read_text().split("---")[1])["change"]["env"] == {"WANDB_API_KEY": "[redacted]"}
    r = CliRunner().invoke(cli, ["--root", str(project.root), "search", "wandb", "--json"])  # indexed as written
    assert r.exit_code == 0 and json.loads(r.output)["total"] >= 1, r.output
    everything = [p for p in project.root.rglob("*")]
    assert any("fake-train" in p.name for p in everything), sorted(p.name for p in everything)  # named by its script
    for secret in (key, other):
        assert not [p for p in everything if secret in str(p)]
        assert not [p for p in everything if p.is_file() and secret.encode() in p.read_bytes()], secret


def test_what_only_looks_like_a_secret_is_kept_and_a_mapping_s_mark_reads_back_as_text():
    """A reviewer's: the mapping rule redacted a gap page's `unexplained_us_per_token: 12.34567` (YAML then read the
    bare mark back as a list), `key: jax.Array`, `cache_key:` and special tokens such as `<|endoftext|>`."""
    import yaml

    from tools.redact import redact

    kept = ["unexplained_us_per_token: 12.34567", "    key: jax.Array", "    token: Optional[str] = None",
            "    use_auth_token: Optional[Union[bool, str]]", 'eos_token="<|endoftext|>"',
            "bos_token: <|begin_of_text|>", "cache_key: abcdefghijk", "rng_key: prngkey_0123", "MONKEY: bananas_ok",
            # code quoted on a kernel page (real lines of installed packages): annotations, dict entries, types
            "    token: jax.Array,", "    VF_LOSS_KEY: mean_vf_loss,", "    password: SecretStr",
            "    POD_NAME_KEY: 'HOSTNAME'", "    _progress_token: ProgressToken | None = None",
            "    QF_MEAN_KEY: torch.mean(fwd_out[QF_PREDS]),", "    BIND_INDEX_KEY: actor._ray_dag_bind_index,"]
    assert [redact(x) for x in kept] == kept
    # ... and what the narrowing let through at first (a second review): lowercase tokens, a password with braces,
    # a key of digits and dashes, a quoted flag's value with a pipe
    assert redact('--password="ab|cd1234567"') == '--password="[redacted]"'
    assert redact('MY_SECRET="x[y]z12345678"') == 'MY_SECRET="[redacted]"'
    for line, name in (("WANDB_API_KEY: zq9secretvalue123495", "WANDB_API_KEY"),
                       ("MY_SERVICE_PASSWORD: 12345678", "MY_SERVICE_PASSWORD"), ("  api_key: ak-7f3k2m9q1z", "api_key"),
                       ("hf_token: abcdEFGH12345678xyz", "hf_token"), ("refresh_token: 1//0gAbCdefgh", "refresh_token"),
                       ("DB_PASSWORD: p4ss{w0rd}x99", "DB_PASSWORD"), ("API_KEY: 1234-5678-9012-3456", "API_KEY")):
        out = redact(line)
        assert yaml.safe_load(out) == {name: "[redacted]"} and redact(out) == out, out


def test_a_run_is_named_by_its_script_or_the_file_its_shell_runs(tmp_path):
    """Named by the command's last word, `--api-key K` named the run K; named by the program alone, every launch
    script's run was `bash`."""
    from tools.experiments.runner import RunSpec, _slug

    (tmp_path / "launch.sh").write_text("python train.py\n")
    (tmp_path / "train.py").write_text("print(1)\n")

    def slug(*command):
        return _slug(RunSpec(model="m", lane="l", variant="s/cpu", command=list(command), cwd=tmp_path))
    assert slug("bash", "launch.sh", "--api-key", "a951b3ca9cfd672ce9eb") == "launch"
    assert slug(sys.executable, "train.py", "--hf-token", "hf_abc") == "train"
    assert slug("sh", "-c", "exec python train.py", "sh", "--wandb-api-key", "a951b3ca9cfd672ce9eb") == "train"
    assert slug("bash", "-c", "echo", "x" * 5000) == "bash"  # an argument too long to be a file name
