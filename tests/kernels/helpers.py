"""Run the catalog on in-memory fixture trees."""

from __future__ import annotations

import json
import textwrap

from tools.kernels.scan import analyze_file, resolve

HEAD = """\
import functools
import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu
"""


def src(text: str, head: bool = True) -> str:
    body = textwrap.dedent(text).lstrip("\n")
    return (HEAD + body) if head else body


def line_of(text: str, needle: str, nth: int = 1) -> int:
    """1-based line of the nth line containing ``needle``."""
    hits = [i + 1 for i, ln in enumerate(text.split("\n")) if needle in ln]
    return hits[nth - 1]


def scan(files: dict[str, str | bytes]) -> list:
    facts = {}
    for path, text in files.items():
        data = text if isinstance(text, bytes) else text.encode()
        facts[path] = analyze_file(path, data)
        json.dumps(facts[path])  # the cache needs plain JSON
    return resolve(facts)


def by_line(sites) -> dict[tuple[str, int], object]:
    return {(s.path, s.line): s for s in sites}
