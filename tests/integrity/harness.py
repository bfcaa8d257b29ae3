"""Runs the integrity corpus (corpus/corpus.yaml) through `tools exp run`, as a user would: the clean baseline,
then each hack or clean change against it. Shared by tests/integrity/test_integrity.py and bench/integrity.py."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
CORPUS = Path(__file__).resolve().parent / "corpus"
MODEL = REPO / "tools" / "templates" / "llama_train.py"


def corpus() -> dict:
    return yaml.safe_load((CORPUS / "corpus.yaml").read_text(encoding="utf-8"))


@dataclass
class Bench:
    """A knowledge base and a work folder holding the clean model, its baseline filed."""
    root: Path
    kb: Path = field(init=False)
    work: Path = field(init=False)
    baseline: dict = field(default_factory=dict)
    bases: dict = field(default_factory=dict)  # a clean change's own baseline (its ``base`` flags), by name

    def __post_init__(self):
        self.kb, self.work = self.root / "kb", self.root / "work"

    def tools(self, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "tools", "--root", str(self.kb), *args], cwd=cwd or self.work,
                              capture_output=True, text=True, timeout=900)

    def setup(self) -> None:
        c = corpus()
        (self.kb / "wiki").mkdir(parents=True)
        self.work.mkdir(parents=True)
        shutil.copy(MODEL, self.work / "llama_train.py")
        self.baseline = self.run("baseline", ["python", "llama_train.py"], baseline=True)
        assert self.baseline.get("verdict") == "baseline", self.baseline

    def run(self, slug: str, command: list[str], *, extra: tuple[str, ...] = (), baseline: bool = False,
            repeats: int = 1, max_repeats: int = 0, statistic: str = "median", cwd: Path | None = None,
            profile: bool = True, variant: str = "tiny/cpu", options: tuple[str, ...] = ()) -> dict:
        """``command`` with the corpus's baseline flags, then ``extra`` (the last flag wins); ``options`` go to
        ``tools exp run``."""
        c = corpus()
        command = [sys.executable if command[0] == "python" else command[0], *command[1:]]
        flags = ["--model", "llama", "--lane", "integrity", "--variant", variant, "--slug", slug,
                 *(["--profile"] if profile else []), "--compile-cache", "--repeats", str(repeats), "--statistic", statistic,
                 "--json"]
        if max_repeats > repeats:
            flags += ["--max-repeats", str(max_repeats)]
        flags += list(options)
        for e in c["protected"]:
            flags += ["--protect", e]
        p = self.tools("exp", "run", *flags, *(["--baseline"] if baseline else []), "--",
                       *command, *c["baseline"], *extra, cwd=cwd)
        try:
            return json.loads(p.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError):
            raise AssertionError(f"tools exp run printed no JSON: {p.stdout[-2000:]}\n{p.stderr[-2000:]}") from None

    def baseline_log(self) -> Path:
        raw = Path(self.baseline["raw_dir"])
        return sorted(raw.glob("*.log"))[0]

    def hack(self, h: dict, repeats: int = 1) -> dict:
        """Apply one hack and run it; a ``refused`` hack is put to the loop's admission instead."""
        if h.get("refused"):
            from tools.loop.admission import protected_touched

            hit = protected_touched((CORPUS / h["patch"]).read_text(encoding="utf-8"), corpus()["protected"])
            return {"verdict": "refused" if hit else "admitted",
                    "reasons": [f"protected files {', '.join(hit)}"] if hit else []}
        where = self.root / "hacks" / h["name"]
        if where.exists():
            shutil.rmtree(where)
        where.mkdir(parents=True)
        if "script" in h:
            shutil.copy(CORPUS / h["script"], where / h["script"])
            shutil.copy(self.work / "llama_train.py", where / "llama_train.py")
            command = ["python", h["script"], str(self.baseline_log()), *h.get("args", [])]
        else:
            shutil.copy(self.work / "llama_train.py", where / "llama_train.py")
            subprocess.run(["git", "apply", "--unsafe-paths", "--directory", ".", str(CORPUS / h["patch"])],
                           cwd=where, check=True, capture_output=True)
            assert (where / "llama_train.py").read_bytes() != (self.work / "llama_train.py").read_bytes()
            command = ["python", "llama_train.py"]
        return self.run(h["name"], command, extra=tuple(h.get("flags") or ()), repeats=max(repeats, h.get("repeats", 1)),
                        cwd=where, profile=h.get("profile", True))

    def clean(self, c: dict, repeats: int = 1, **kw) -> dict:
        """A real change, against the corpus baseline or, with ``base`` flags, a baseline of its own (its own
        variant): the change from that shape is the real one."""
        base = tuple(c.get("base") or ())
        variant = f"tiny-{c['name']}/cpu" if base else "tiny/cpu"
        if base and c["name"] not in self.bases:
            self.bases[c["name"]] = b = self.run(f"baseline-{c['name']}", ["python", "llama_train.py"], extra=base,
                                                 baseline=True, variant=variant)
            assert b.get("verdict") == "baseline", b
        return self.run(c["name"], ["python", "llama_train.py"], extra=(*base, *c["flags"]), repeats=repeats,
                        variant=variant, options=tuple(c.get("exp") or ()), **kw)


def caught_by(out: dict, h: dict) -> list[str]:
    """The hack's signatures named in the filed reasons."""
    found = []
    for sig in h["catches"]:
        needle = "semantics changed" if sig == "semantics" else sig if h.get("refused") else f"`{sig}`"
        if any(needle in r for r in out.get("reasons") or []):
            found.append(sig)
    return found


def is_caught(out: dict, h: dict) -> bool:
    return out.get("verdict") in ("invalid", "refused") and bool(caught_by(out, h))


def frontmatter(bench: Bench, out: dict) -> dict:
    """The filed page's frontmatter."""
    text = (bench.kb / out["page"]).read_text(encoding="utf-8")
    return yaml.safe_load(text.split("---\n")[1])
