"""What a repository path is, for ranking examples (library code before tests, benchmarks and configs), and links
between wiki pages."""

from __future__ import annotations

import posixpath
import re

from .. import mdtext

_TEST_PATH = re.compile(r"(?:^|/)(?:tests?|testing)/|(?:^|/)test_[^/]*$|_test\.py$|(?:^|/)conftest\.py$")
_BENCH_OR_CONFIG = re.compile(r"(?:^|/)(?:bench\w*|benchmarks?|configs?|examples?|scripts?)/|\.(?:ya?ml|json|toml|sh)$")


def is_test(rel: str) -> bool:
    """A test file or a file under a tests folder: never an example when another file has the same thing."""
    return bool(_TEST_PATH.search(rel))


def is_bench_or_config(rel: str) -> bool:
    return bool(_BENCH_OR_CONFIG.search(rel))


def rel_link(from_page: str, to_page: str) -> str:
    return mdtext.url(posixpath.relpath(to_page, posixpath.dirname(from_page) or "."))
