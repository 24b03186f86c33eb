"""Cutting the checkpoint's shards into the large sequential reads of the streaming loader.

A `Chunk` is one read: a byte window of one shard file, at most `chunk_bytes` long. Windows follow the
tensors in file order and are contiguous wherever the tensors are (a gap between tensors starts a new
window only when it falls past the current one). A tensor's bytes are cut into `Piece`s, one per window
it touches: a tensor inside one window is one whole piece (handed on as a view of the chunk); a tensor
that straddles windows or is larger than a window has several pieces, in order, which the loader
assembles before handing it on. Planning is pure arithmetic on the headers; nothing is read here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from operator import attrgetter
from pathlib import Path
from typing import NamedTuple

from quickmoe.checkpoint.safetensors_header import TensorEntry

__all__ = ["Chunk", "Piece", "plan_chunks"]


class Piece(NamedTuple):
    """Bytes [dst, dst + nbytes) of `entry`, found at byte `src` of its chunk (a NamedTuple: one per tensor)."""

    entry: TensorEntry
    src: int  # byte offset in the chunk
    dst: int  # byte offset in the tensor
    nbytes: int

    @property
    def is_whole(self) -> bool:
        """The piece is the entire tensor (it does not straddle a chunk boundary)."""
        return self.dst == 0 and self.nbytes == self.entry.nbytes

    @property
    def is_last(self) -> bool:
        """The piece ends the tensor: once it is in place, the tensor is complete."""
        return self.dst + self.nbytes == self.entry.nbytes


@dataclass(frozen=True)
class Chunk:
    """One read: `nbytes` bytes of `file` at absolute offset `offset`, holding `pieces` in offset order."""

    index: int  # position in the global read order (files in order, then offsets)
    file: Path
    offset: int
    nbytes: int
    pieces: tuple[Piece, ...]


_OFFSET_NBYTES = attrgetter("offset", "nbytes")  # file order; an empty tensor before one at its offset


def plan_chunks(entries_by_file: Mapping[Path, Iterable[TensorEntry]], chunk_bytes: int,
                names: Iterable[str] | None = None) -> list[Chunk]:
    """The reads covering every non-empty tensor of `entries_by_file` (or only those in `names`), files in
    the mapping's order, each file in offset order; every chunk is at most `chunk_bytes` long.

    Each tensor byte belongs to exactly one piece of exactly one chunk, and a tensor's pieces come in
    order (dst ascending) in consecutive chunks. Empty tensors have no bytes and no piece.
    """
    if chunk_bytes < 1:
        raise ValueError(f"chunk_bytes = {chunk_bytes}: expected a positive number of bytes")
    wanted = None if names is None else set(names)
    chunks: list[Chunk] = []
    for file, entries in entries_by_file.items():
        start = -1  # current window's absolute start; -1: no open window
        pieces: list[Piece] = []

        def close() -> None:
            if pieces:
                end = max(p.src + p.nbytes for p in pieces)
                chunks.append(Chunk(len(chunks), file, start, end, tuple(pieces)))
                pieces.clear()

        for entry in sorted(entries, key=_OFFSET_NBYTES):  # ~74,000 for Qwen3-30B-A3B NVFP4: locals only
            nbytes = entry.nbytes
            if nbytes == 0 or (wanted is not None and entry.name not in wanted):
                continue
            pos = first = entry.offset
            end = first + nbytes
            while pos < end:
                if start < 0 or pos >= start + chunk_bytes:
                    close()
                    start = pos
                window_end = start + chunk_bytes
                take = (end if end < window_end else window_end) - pos
                pieces.append(Piece(entry, pos - start, pos - first, take))  # src, dst, nbytes
                pos += take
        close()
    return chunks
