"""Streaming safetensors writer: the header is planned from names, shapes and dtypes alone, then each
tensor's bytes are appended in order as they are produced (no tensor is held whole in memory).

Format: u64 little-endian header length, a UTF-8 JSON header {name: {dtype, shape, data_offsets}}
(+ "__metadata__"), padded with spaces to a multiple of 8 bytes, then the data section.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class ShardPlan:
    """One shard file: its tensors in data order with their offsets inside the data section."""

    file_name: str
    tensors: list[tuple[str, tuple[int, ...], str, int]] = field(default_factory=list)  # name, shape, dtype, nbytes

    @property
    def tensor_names(self) -> list[str]:
        return [t[0] for t in self.tensors]

    @property
    def nbytes(self) -> int:
        return sum(t[3] for t in self.tensors)

    def header(self) -> bytes:
        entries: dict = {"__metadata__": {"format": "pt"}}
        offset = 0
        for name, shape, dtype, nbytes in self.tensors:
            entries[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + nbytes]}
            offset += nbytes
        raw = json.dumps(entries, separators=(",", ":")).encode()
        raw += b" " * (-len(raw) % 8)
        return struct.pack("<Q", len(raw)) + raw


def plan_shards(items: Iterable[tuple[str, tuple[int, ...], str, int]], shard_bytes: int) -> list[ShardPlan]:
    """Fill shards in order up to `shard_bytes` each (a larger tensor gets a shard of its own); name them
    model-0000i-of-0000n.safetensors."""
    shards: list[ShardPlan] = [ShardPlan("")]
    for item in items:
        if shards[-1].tensors and shards[-1].nbytes + item[3] > shard_bytes:
            shards.append(ShardPlan(""))
        shards[-1].tensors.append(item)
    for k, shard in enumerate(shards, 1):
        shard.file_name = f"model-{k:05d}-of-{len(shards):05d}.safetensors"
    return shards


def write_shard(path: Path, shard: ShardPlan, chunks_for: Callable[[str], Iterator[bytes]],
                on_bytes: Callable[[int], object] | None = None) -> None:
    """Write the header, then each tensor's chunks; checks that every tensor produced exactly its size."""
    with open(path, "wb", buffering=1 << 22) as f:
        f.write(shard.header())
        for name, _, _, nbytes in shard.tensors:
            written = 0
            for chunk in chunks_for(name):
                f.write(chunk)
                written += len(chunk)
                if on_bytes:
                    on_bytes(len(chunk))
            assert written == nbytes, (name, written, nbytes)
