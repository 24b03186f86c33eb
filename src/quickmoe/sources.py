"""A digest of quickmoe's own Python sources, for caches whose contents the code determines (the AOT-compiled
layers, the loader's plans): any edit to any module gives other keys, so a cache never outlives the code that made
it."""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path

__all__ = ["sources_digest"]


@functools.lru_cache(maxsize=1)
def sources_digest() -> str:
    """sha256 (hex, 16 digits) of the paths and contents of every .py file of the quickmoe package; computed once
    per process (~250 files: a few milliseconds)."""
    root = Path(__file__).parent
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        digest.update(str(path.relative_to(root)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]
