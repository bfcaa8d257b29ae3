"""One kernel launch site of the catalog: where it is, what it launches, on which backend, with what shapes."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field


@dataclass
class KernelSite:
    path: str
    line: int
    kernel: str
    impl: str | None
    backend: str
    category: str
    kind: str
    entry: str
    grid: str | None = None
    block_shapes: list[str] = field(default_factory=list)
    dimension_semantics: str | None = None
    summary: str | None = None
    stability: str = "stable"
    vendored_from: str | None = None
    provenance: str | None = None  # where the file says it came from ("Adapted from <url>")
    signature: str | None = None
    callers: list[str] = field(default_factory=list)
    body: str | None = None  # the name the launch is given
    body_function: str | None = None  # the def it is, through partial and local names
    body_at: str | None = None  # "path:line" of that def
    # Values that hold under a condition: {"grid" | "block_shapes" | "dimension_semantics": [[value, condition]]}
    branches: dict = field(default_factory=dict)
    # Where the names in the block shapes get their values: [name, source, "path:line" or ""]
    block_sources: list[list[str]] = field(default_factory=list)
    # Collectives in the launching function and the kernel body: [name, "path:line"]
    collectives: list[list[str]] = field(default_factory=list)
    fingerprint: str | None = None
    shingles: list[int] = field(default_factory=list, repr=False)  # normalized-line hashes (not in to_dict)
    reached_by: list[str] = field(default_factory=list, repr=False)  # what calls reach it (not in to_dict)
    # classes whose methods reach it though neither making nor calling one does (a registry names them)
    owners: list[str] = field(default_factory=list, repr=False)
    qualname: str | None = None  # module-qualified name of the kernel's public function or class
    backend_note: str | None = None  # why the launch itself fixes no backend (compiler_params set at run time)

    def to_dict(self) -> dict:
        d = asdict(self)
        d.pop("shingles")
        d.pop("reached_by")
        d.pop("owners")
        return d
