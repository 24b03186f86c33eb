"""Parsed safetensors headers kept in the quickmoe cache, for checkpoints of many tensors.

A header is JSON: Qwen3-30B-A3B NVFP4's shards list 74,163 tensors, and parsing and checking them
(`safetensors_header.parse_header_bytes`: the JSON, one checked `TensorEntry` per tensor, the overlap and
duplicate-key checks) took 0.27 s a start on the development machine, where loading the same entries from this
cache takes 0.04 s. The cache holds what a header says, keyed by its bytes: `<cache>/safetensors-headers/v1-py3.X/
<sha256 of the header bytes>.marshal`, written the first time a header of at least MIN_HEADER_BYTES is parsed
(some 500 tensors at ~120 bytes of JSON each; smaller headers, gpt-oss's included, parse in milliseconds and are
neither hashed nor looked up). A file whose header changes in any byte has another key; the entries are rebuilt
with the file's current path, so a moved checkpoint hits; the file's size is checked against the tensors' end on
every start, so a truncated shard still fails with `parse_header`'s error. An unreadable or malformed cache file is
a miss (and is rewritten). `QUICKMOE_HEADER_CACHE=0` parses every header.

marshal (plain tuples, strings and integers; versioned with Python, hence the directory name) is the format: ~7x
faster to load than the JSON it replaces.
"""

from __future__ import annotations

import hashlib
import logging
import marshal
import os
import sys
from pathlib import Path
from types import MappingProxyType

from quickmoe.checkpoint.safetensors_header import (DTYPE_NAMES, DTYPES, ShardHeader, TensorEntry, parse_header_bytes,
                                                    read_header_bytes)
from quickmoe.paths import atomic_write_bytes, cache_dir

__all__ = ["MIN_HEADER_BYTES", "parse_header_cached"]

logger = logging.getLogger(__name__)

MIN_HEADER_BYTES = 64 << 10  # smaller headers are parsed every time
_VERSION = 1  # of the cached layout below


def parse_header_cached(path: Path) -> ShardHeader:
    """`safetensors_header.parse_header(path)`, from the cache when this header was parsed before."""
    raw, size = read_header_bytes(path)
    if len(raw) < MIN_HEADER_BYTES or os.environ.get("QUICKMOE_HEADER_CACHE", "1") == "0":
        return parse_header_bytes(path, raw, size)
    digest = hashlib.sha256(raw).hexdigest()
    try:
        file = _cache_file(digest)
    except OSError as exc:  # no cache directory to be had (e.g. a read-only home): parse every time
        logger.debug("header cache unavailable (%s)", exc)
        return parse_header_bytes(path, raw, size, digest)
    header = _load(file, path, size, 8 + len(raw), digest)
    if header is None:
        header = parse_header_bytes(path, raw, size, digest)
        _store(file, header)
    return header


def _cache_file(digest: str) -> Path:
    folder = f"v{_VERSION}-py{sys.version_info[0]}.{sys.version_info[1]}"
    return cache_dir() / "safetensors-headers" / folder / f"{digest}.marshal"


def _load(file: Path, path: Path, size: int, data_start: int, digest: str) -> ShardHeader | None:
    """The cached header of `path`, or None (no cache file, a malformed one, or tensors past the file's end)."""
    try:
        data = file.read_bytes()
    except OSError:
        return None
    try:
        version, metadata, end, rows = marshal.loads(data)
        if version != _VERSION or end > size:  # a truncated shard: the full parse names the tensor cut off
            return None
        entries = tuple(TensorEntry(name, path, DTYPES[dtype], shape, offset, nbytes)
                        for name, dtype, shape, offset, nbytes in rows)
        return ShardHeader(path, size, data_start, MappingProxyType(dict(metadata)), entries, digest)
    except (EOFError, ValueError, TypeError, KeyError) as exc:
        logger.debug("%s: malformed header cache entry (%s); parsing the header", file, exc)
        return None


def _store(file: Path, header: ShardHeader) -> None:
    rows = tuple((e.name, DTYPE_NAMES[e.dtype], e.shape, e.offset, e.nbytes) for e in header.entries)
    end = max((e.offset + e.nbytes for e in header.entries), default=header.data_start)
    try:
        file.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(file, marshal.dumps((_VERSION, dict(header.metadata), end, rows)))
    except OSError as exc:  # a read-only cache: every start parses
        logger.debug("header cache not written (%s)", exc)
