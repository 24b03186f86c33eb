"""Streaming safetensors writer: every tensor's place is planned from names, shapes and dtypes alone,
the header is written first, then the tensors' bytes are appended in order as they are produced, so
no tensor is ever held whole in memory.

File format: an 8-byte little-endian u64 N, then N bytes of UTF-8 JSON
`{"__metadata__": {"format": "pt"}, name: {"dtype", "shape", "data_offsets": [begin, end]}, ...}`
padded with spaces to a multiple of 8 bytes, then the data section (offsets are relative to it; the
tensors tile it with no gaps).
"""

from __future__ import annotations

import json
import math
import struct
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

DTYPE_SIZES: dict[str, int] = {"BOOL": 1, "U8": 1, "I8": 1, "F8_E4M3": 1, "F8_E5M2": 1, "F8_E8M0": 1,
                               "I16": 2, "U16": 2, "F16": 2, "BF16": 2, "I32": 4, "U32": 4, "F32": 4,
                               "I64": 8, "U64": 8, "F64": 8}


class TensorSpec(NamedTuple):
    """One tensor to write: name, shape and safetensors dtype name (e.g. 'BF16', 'U8')."""

    name: str
    shape: tuple[int, ...]
    dtype: str


def tensor_nbytes(shape: Iterable[int], dtype: str) -> int:
    """Bytes of a tensor of `shape` and safetensors dtype name `dtype` (e.g. 'BF16')."""
    if dtype not in DTYPE_SIZES:
        raise ValueError(f"unknown safetensors dtype {dtype!r}: expected one of {sorted(DTYPE_SIZES)}")
    return math.prod(shape) * DTYPE_SIZES[dtype]


@dataclass(frozen=True)
class PlannedTensor:
    """One tensor's place in its shard: [begin, end) inside the data section."""

    name: str
    shape: tuple[int, ...]
    dtype: str
    begin: int
    end: int

    @property
    def nbytes(self) -> int:
        return self.end - self.begin


@dataclass(frozen=True)
class ShardPlan:
    """One shard file: its name and its tensors in data order."""

    file_name: str
    tensors: tuple[PlannedTensor, ...]

    @property
    def data_bytes(self) -> int:
        """Size of the data section (the sum of the tensors' sizes)."""
        return self.tensors[-1].end if self.tensors else 0

    @property
    def tensor_names(self) -> list[str]:
        return [t.name for t in self.tensors]

    def header(self) -> bytes:
        """The file's first bytes: u64 header length, then the JSON header padded to a multiple of 8."""
        entries: dict[str, Any] = {"__metadata__": {"format": "pt"}}
        for t in self.tensors:
            entries[t.name] = {"dtype": t.dtype, "shape": list(t.shape), "data_offsets": [t.begin, t.end]}
        raw = json.dumps(entries, separators=(",", ":")).encode()
        raw += b" " * (-len(raw) % 8)
        return struct.pack("<Q", len(raw)) + raw

    @property
    def file_bytes(self) -> int:
        """Size of the whole file."""
        return len(self.header()) + self.data_bytes


def plan_shards(specs: Iterable[tuple[str, tuple[int, ...], str]], shard_bytes: int) -> list[ShardPlan]:
    """Place tensors `(name, shape, dtype)` in order into shards of at most `shard_bytes` data bytes each
    (a tensor larger than that gets a shard of its own); shards are named
    `model-00001-of-0000N.safetensors` as Hugging Face does.

    Raises ValueError for a duplicate name, or a tensor that would start at an offset that is not a
    multiple of its element size (readers that map tensors in place need aligned data).
    """
    if shard_bytes < 1:
        raise ValueError(f"shard_bytes = {shard_bytes}: expected a positive number of bytes")
    groups: list[list[tuple[str, tuple[int, ...], str, int]]] = [[]]
    used = 0
    seen: set[str] = set()
    for name, shape, dtype in specs:
        if name in seen:
            raise ValueError(f"tensor {name!r} is planned twice")
        seen.add(name)
        nbytes = tensor_nbytes(shape, dtype)
        if groups[-1] and used + nbytes > shard_bytes:
            groups.append([])
            used = 0
        groups[-1].append((name, tuple(shape), dtype, nbytes))
        used += nbytes
    shards = []
    for k, group in enumerate(groups, 1):
        tensors, offset = [], 0
        for name, shape, dtype, nbytes in group:
            if offset % DTYPE_SIZES[dtype]:
                raise ValueError(f"tensor {name!r} ({dtype}) would start at data offset {offset}, not a multiple "
                                 f"of its element size {DTYPE_SIZES[dtype]}")
            tensors.append(PlannedTensor(name, shape, dtype, offset, offset + nbytes))
            offset += nbytes
        shards.append(ShardPlan(f"model-{k:05d}-of-{len(groups):05d}.safetensors", tuple(tensors)))
    return shards


def write_shard(path: Path, shard: ShardPlan, chunks: Iterator[tuple[str, Any]],
                on_bytes: Callable[[int], object] | None = None) -> None:
    """Write `shard` to `path`: its header, then its tensors' data pulled from `chunks`, an iterator of
    `(tensor name, bytes-like)` pairs in the shard's tensor order. Exactly each tensor's size is pulled
    (the iterator may go on with the next shard's tensors) and checked, so a wrong generator fails
    loudly instead of writing a corrupt file. `on_bytes(n)` follows progress."""
    with open(path, "wb", buffering=0) as f:
        _write_all(f, memoryview(shard.header()))
        for tensor in shard.tensors:
            written = 0
            while written < tensor.nbytes:
                item = next(chunks, None)
                if item is None:
                    raise ValueError(f"{path.name}: the data ended at tensor {tensor.name!r} after {written} of "
                                     f"{tensor.nbytes} bytes")
                name, buf = item
                view = memoryview(buf).cast("B")  # flat bytes, whatever the buffer's item type
                if name != tensor.name or written + view.nbytes > tensor.nbytes:
                    raise ValueError(f"{path.name}: tensor {tensor.name!r} expects {tensor.nbytes} bytes, got "
                                     f"{view.nbytes} bytes of {name!r} after {written}")
                _write_all(f, view)
                written += view.nbytes
                if on_bytes is not None:
                    on_bytes(view.nbytes)


def _write_all(f: Any, view: memoryview) -> None:
    """Unbuffered writes may be partial: loop until every byte is out."""
    while view.nbytes:
        n = f.write(view)
        view = view[n:]
