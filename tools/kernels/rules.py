"""The catalog's decisions, each a small ordered rule list: kind, backend, category, stability."""

from __future__ import annotations

import re
from importlib import resources
from pathlib import PurePosixPath

import yaml

# ---------------------------------------------------------------- kind


def kind_of(relpath: str) -> str:
    p = PurePosixPath(relpath.lower())
    parts = p.parts[:-1]
    name = p.name
    stem = p.stem
    if name.endswith((".ipynb", ".md", ".markdown")):
        return "example"
    if (any(x in ("test", "tests", "testing", "test_utils") for x in parts) or stem.startswith("test_")
            or stem.endswith(("_test", "_tests")) or stem in ("conftest", "test_util", "test_utils", "test_base")):
        return "test"
    if any(x.startswith(("bench", "benchmarks")) for x in parts) or "bench" in stem.split("_") \
            or stem.startswith("bench") or stem.endswith(("_benchmark", "_benchmarking")):
        return "benchmark"
    if any(x in ("example", "examples", "tutorial", "tutorials", "docs", "notebooks") for x in parts) \
            or stem.startswith("example") or stem.endswith("_example"):
        return "example"
    return "library"


# ---------------------------------------------------------------- backend

def _backend_of_module(qualified: str) -> str | None:
    q = qualified.lower()
    if "mosaic_gpu" in q or ".mgpu" in q:
        return "gpu-mosaic"
    if "triton" in q:
        return "gpu-triton"
    if "pallas.tpu" in q or "pallas.mosaic" in q or "pallas_tpu" in q or ".pltpu" in q or q == "pltpu":
        return "tpu"
    return None


_LITERAL = (
    (re.compile(r"\bmosaic\s*=\s*(?:dict|\{)|['\"]mosaic['\"]\s*:|TPUCompilerParams|PrefetchScalarGridSpec"
                r"|TPUMemorySpace|create_tensorcore_mesh|SparseCore\w*Mesh|VectorSubcoreMesh"), "tpu"),
    (re.compile(r"\bmosaic_gpu\s*=\s*(?:dict|\{)|['\"]mosaic_gpu['\"]\s*:|GPUCompilerParams|GPUMesh|WarpMesh"), "gpu-mosaic"),
    (re.compile(r"\btriton\s*=\s*(?:dict|\{)|['\"]triton['\"]\s*:|TritonCompilerParams"), "gpu-triton"),
)


class BackendMatcher:
    """Finds the backend named in a piece of code, given the file's imports (alias -> module)."""

    def __init__(self, imports: dict[str, str]):
        self.size = len(imports)
        self.alias = {a: b for a, t in imports.items() if a.isidentifier() and (b := _backend_of_module(t))}
        # also `pl.tpu.X` style and imported names (`from ...pallas.tpu import CompilerParams`)
        self.rx = re.compile(r"\b(" + "|".join(map(re.escape, sorted(self.alias, key=len, reverse=True))) + r")\b(?!\s*=)"
                             ) if self.alias else None

    def hints(self, text: str) -> str | None:
        if not text:
            return None
        votes: dict[str, int] = {}
        for rx, backend in _LITERAL:
            n = len(rx.findall(text))
            if n:
                votes[backend] = votes.get(backend, 0) + 2 * n
        if self.rx is not None:
            for a in self.rx.findall(text):
                b = self.alias[a]
                votes[b] = votes.get(b, 0) + 1
        if not votes:
            return None
        return max(sorted(votes), key=lambda b: votes[b])


def import_backends(imports: dict[str, str]) -> list[str]:
    return sorted({b for t in imports.values() if (b := _backend_of_module(t))})


def path_backend(relpath: str) -> str | None:
    parts = re.split(r"[/_.\-]", relpath.lower())
    if "triton" in parts:
        return "gpu-triton"
    if "mgpu" in parts or "sm90" in parts or "sm100" in parts or "mosaic_gpu" in relpath.lower():
        return "gpu-mosaic"
    if "tpu" in parts or "sparse_core" in relpath.lower():
        return "tpu"
    if "gpu" in parts:
        return "gpu-triton"
    return None


# ---------------------------------------------------------------- category

# Ordered: the first category whose words occur wins (most specific first): tools/data/kernel_categories.yaml.
# Words are matched in names normalized to snake_case with "_" at both ends; (?<![a-z]) / (?![a-z]) mark word edges
# ("<" and ">" in the file).
_W = r"(?<![a-z])"  # start of a word
_E = r"(?![a-z])"  # end of a word
CATEGORY_DATA = "data/kernel_categories.yaml"


def load_categories(data: dict) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """(category, word patterns) in order, from the file's data: fragments substituted, word edges spelled out."""
    frags = {k: str(v) for k, v in (data.get("fragments") or {}).items()}

    def word(w: str) -> str:
        w = str(w)
        start, end = w.startswith("<"), w.endswith(">")
        core = w[1 if start else 0:len(w) - 1 if end else len(w)]
        for k, v in frags.items():
            core = core.replace("{" + k + "}", v)
        return (_W if start else "") + core + (_E if end else "")

    return tuple((str(c["category"]), tuple(word(w) for w in c["words"])) for c in data["categories"])


_CATEGORY_FILE = yaml.safe_load(resources.files("tools").joinpath(CATEGORY_DATA).read_text(encoding="utf-8"))
_CATEGORY_WORDS = load_categories(_CATEGORY_FILE)
_DATA_MOVES = str(_CATEGORY_FILE["fragments"]["data_moves"])  # copy, fill, cast...: helpers named for what they do
_MOVES_DATA = re.compile(_W + _DATA_MOVES + _E)
CATEGORY_RULES: tuple[tuple[str, re.Pattern], ...] = tuple(
    (c, re.compile("|".join(words))) for c, words in _CATEGORY_WORDS)


def _norm(text: str | None) -> str:
    text = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", text or "")
    return "_" + re.sub(r"[^a-z0-9]+", "_", text.lower()) + "_"


def _matches(text: str) -> list[str]:
    return [cat for cat, rx in CATEGORY_RULES if rx.search(text)]


_PARENT = {"paged/ragged attention": "attention", "quantized matmul": "matmul/gemm",
           "moe/grouped matmul": "matmul/gemm", "ssm/scan/linear-recurrence": "attention"}


def category_of(names: str | None, path: str | None = None, docs: str | None = None) -> str:
    """First rule matching the names (kernel, helper, body); among several, the one the file path
    agrees with (unless that is only the parent of a more specific match); else the file name,
    then its folders, then the docstrings."""
    p = (path or "").replace("\\", "/")
    stem, _, dirs = p.rpartition("/")[2], None, p.rpartition("/")[0]
    path_hits = _matches(_norm(p))
    hits = _matches(_norm(names))
    if hits:
        # The names say "attention", the folder says which kind (ragged_decode_attention/): take the specific one.
        # (Only for attention: a plain matmul helper in a quantized_matmul/ folder stays a plain matmul.)
        child = "paged/ragged attention" if hits[0] == "attention" and "paged/ragged attention" in path_hits else None
        if child is not None:
            return child
        if hits == ["crypto/fhe/other"] and "collective/communication" in path_hits and _MOVES_DATA.search(_norm(names)):
            return "collective/communication"  # a copy in distributed/kv_transfer.py is the transfer itself
        agreed = [c for c in hits if c in path_hits and c != "crypto/fhe/other"]
        if agreed and _PARENT.get(hits[0]) != agreed[0]:
            return agreed[0]
        return hits[0]
    for text in (stem, dirs, docs):
        hits = _matches(_norm(text))
        if hits:
            return hits[0]
    return "crypto/fhe/other"


# ---------------------------------------------------------------- stability

def stability_of(relpath: str, deprecated: bool, doc: str | None = None) -> str:
    p = relpath.lower()
    if deprecated:
        return "deprecated"
    if re.search(r"(?:^|/)(?:research|contrib|prototype|prototypes|sandbox|scratch)(?:/|$)", p):
        return "research"
    if re.search(r"experimental|(?:^|/)(?:exp|preview|nightly|wip)(?:/|$)|_v\d+_?(?:exp|wip)", p):
        return "experimental"
    if doc and re.search(r"\b(experimental|prototype|work in progress|unstable)\b", doc, re.IGNORECASE):
        return "experimental"
    return "stable"
