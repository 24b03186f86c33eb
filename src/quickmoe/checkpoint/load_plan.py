"""The loader's plan for a checkpoint of many tensors, kept in the quickmoe cache.

Before its first read the loader works per tensor: the bindings (which parameter each checkpoint tensor fills),
their check against the headers, the rank's view, the chunk plan and the sink's routes. For Qwen3-30B-A3B NVFP4's
74,163 tensors that was ~0.3 s on the development machine and ~0.5 s on the H200's host (docs/benchmarks.md, 2026-11-29
fourth session). The outcome is a few numbers per piece: for one that lands directly in its parameter (nearly all of
them: a stacked-expert checkpoint whose dtypes the model adopted), its chunk, the parameter (by position in
`named_parameters()`), the byte offset there, its offset in the chunk and its length; for one handed to its weight
loader (Qwen3's float32 norms from bf16 tensors), its tensor's name and offsets. `LoadPlan` holds them as arrays; a
later start with the same key streams from them, building bindings only for the delivered tensors and no object for
the others.

The key (`plan_key`) hashes what decides the plan: quickmoe's sources (`sources.sources_digest`), torch's version,
the model's parameters (name, shape, stride, dtype, in order), the files' names and sizes with the sha256 of each
header's bytes, config.json and hf_quant_config.json, the chunk size and the device type. The plan is written only
after a load that checked everything (`loader._check_complete`), so a hit repeats a checked load. A missing,
unreadable or malformed file is a miss. `<cache>/load-plans/<key>.npz`. On by default (`QUICKMOE_LOAD_PLAN_CACHE=0`
turns it off): on the H200 it took Qwen3-30B-A3B NVFP4's load phase from 1.06-1.40 to 0.68-0.72 s
(`scripts/device/coldstart2.sh load-plan`, docs/benchmarks.md, 2026-11-29 fifth session).
"""

from __future__ import annotations

import hashlib
import io
import logging
import os
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn

from quickmoe.checkpoint.chunk_plan import Chunk, Piece
from quickmoe.checkpoint.reader import CheckpointReader
from quickmoe.checkpoint.sink import ChunkRoute, ParameterSink
from quickmoe.paths import atomic_write_bytes, cache_dir
from quickmoe.sources import sources_digest

__all__ = ["MIN_TENSORS", "LoadPlan", "load_plan_file", "plan_key"]

logger = logging.getLogger(__name__)

MIN_TENSORS = 4096  # smaller checkpoints plan in milliseconds: neither hashed nor looked up
_FORMAT = 1
_SCALARS = ("num_tensors", "staging_bytes", "scratch_bytes")
_FIELDS = ("chunk_file", "chunk_offset", "chunk_nbytes", "chunk_pieces", "chunk_delivered", "chunk_span_start",
           "chunk_span_end", "piece_param", "piece_offset", "piece_src", "piece_nbytes", "deliv_name", "deliv_src",
           "deliv_dst", "deliv_nbytes", *_SCALARS)


def plan_key(model: nn.Module, reader: CheckpointReader, chunk_bytes: int, device: torch.device) -> str | None:
    """The plan's cache key, or None where no plan is kept (switched off, or fewer than MIN_TENSORS tensors)."""
    if os.environ.get("QUICKMOE_LOAD_PLAN_CACHE", "1") == "0" or len(reader.entries) < MIN_TENSORS:
        return None
    digest = hashlib.sha256(f"load-plan-{_FORMAT}-{sources_digest()}-{torch.__version__}-{chunk_bytes}-"
                            f"{device.type}".encode())
    for name, param in model.named_parameters():  # hundreds of parameters (experts are stacked)
        digest.update(f"{name}:{tuple(param.shape)}:{param.stride()}:{param.dtype};".encode())
    for file in reader.files:
        shard = reader.shards[file]
        digest.update(f"{file.name}:{shard.file_size}:{shard.header_sha256};".encode())
    for name in ("config.json", "hf_quant_config.json"):
        path = reader.model_dir / name
        digest.update(hashlib.sha256(path.read_bytes()).digest() if path.is_file() else b"-")
    return digest.hexdigest()[:32]


def load_plan_file(key: str) -> Path:
    return cache_dir() / "load-plans" / f"{key}.npz"


@dataclass(frozen=True)
class LoadPlan:
    """Chunks (`chunk_file`: index in the reader's files, `chunk_offset`, `chunk_nbytes`; `chunk_pieces` and
    `chunk_delivered`: how many direct and delivered pieces; `chunk_span_start` / `_end`: the bytes to stage for the
    delivered ones, -1 if none), the direct pieces in chunk order (`piece_param`: position in `named_parameters()`,
    `piece_offset`: byte offset in the parameter, `piece_src`: byte offset in the chunk, `piece_nbytes`), the
    delivered pieces (`deliv_name`, `deliv_src`, `deliv_dst`, `deliv_nbytes`: handed to their weight loaders), the
    sink's staging and scratch sizes, and the tensors the load fills."""

    chunk_file: np.ndarray
    chunk_offset: np.ndarray
    chunk_nbytes: np.ndarray
    chunk_pieces: np.ndarray
    chunk_delivered: np.ndarray
    chunk_span_start: np.ndarray
    chunk_span_end: np.ndarray
    piece_param: np.ndarray
    piece_offset: np.ndarray
    piece_src: np.ndarray
    piece_nbytes: np.ndarray
    deliv_name: np.ndarray
    deliv_src: np.ndarray
    deliv_dst: np.ndarray
    deliv_nbytes: np.ndarray
    num_tensors: int
    staging_bytes: int
    scratch_bytes: int

    @classmethod
    def from_sink(cls, model: nn.Module, reader: CheckpointReader, chunks: Sequence[Chunk], sink: ParameterSink,
                  num_tensors: int) -> LoadPlan | None:
        """The plan of a checked load through `sink` (None where a parameter cannot be told by its address)."""
        # a direct copy's destination is its parameter's bytes (`bindings.bytes_view`), found by address
        position: dict[int, int] = {}
        for i, (_, param) in enumerate(model.named_parameters()):
            if param.numel() and position.setdefault(param.data_ptr(), i) != i:
                return None  # two parameters at one address: no plan
        file_index = {file: i for i, file in enumerate(reader.files)}
        direct: list[tuple[int, int, int, int]] = []
        delivered: list[tuple[str, int, int, int]] = []
        for route in sink.routes:
            for view, offset, src, nbytes in route.direct:
                index = position.get(view.data_ptr())
                if index is None:
                    return None
                direct.append((index, offset, src, nbytes))
            delivered.extend((p.entry.name, p.src, p.dst, p.nbytes) for p in route.delivered)
        d = np.array(direct, dtype=np.int64).reshape(-1, 4)  # [P, 4]
        return cls(chunk_file=np.array([file_index[c.file] for c in chunks], dtype=np.int32),
                   chunk_offset=np.array([c.offset for c in chunks], dtype=np.int64),
                   chunk_nbytes=np.array([c.nbytes for c in chunks], dtype=np.int64),
                   chunk_pieces=np.array([len(r.direct) for r in sink.routes], dtype=np.int64),
                   chunk_delivered=np.array([len(r.delivered) for r in sink.routes], dtype=np.int64),
                   chunk_span_start=np.array([r.span[0] if r.span else -1 for r in sink.routes], dtype=np.int64),
                   chunk_span_end=np.array([r.span[1] if r.span else -1 for r in sink.routes], dtype=np.int64),
                   piece_param=d[:, 0].astype(np.int32), piece_offset=d[:, 1].copy(), piece_src=d[:, 2].copy(),
                   piece_nbytes=d[:, 3].copy(), deliv_name=np.array([x[0] for x in delivered], dtype=np.str_),
                   deliv_src=np.array([x[1] for x in delivered], dtype=np.int64),
                   deliv_dst=np.array([x[2] for x in delivered], dtype=np.int64),
                   deliv_nbytes=np.array([x[3] for x in delivered], dtype=np.int64),
                   num_tensors=num_tensors, staging_bytes=sink.staging_bytes, scratch_bytes=sink.scratch_bytes)

    def save(self, path: Path) -> None:
        """Write the plan (atomically: a reader sees the old file, the new one or none)."""
        buf = io.BytesIO()
        np.savez(buf, **{name: np.array(getattr(self, name)) for name in _FIELDS})
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_bytes(path, buf.getvalue())
        except OSError as exc:  # a read-only cache: every start plans
            logger.debug("load plan not written (%s)", exc)

    @classmethod
    def load(cls, path: Path) -> LoadPlan | None:
        """The plan at `path`, or None (missing, unreadable or malformed)."""
        try:
            with np.load(path, allow_pickle=False) as data:
                values = {name: data[name] for name in _FIELDS}
        except FileNotFoundError:
            return None
        except (OSError, KeyError, ValueError, zipfile.BadZipFile) as exc:
            logger.debug("%s: unreadable load plan (%s); planning again", path, exc)
            return None
        for name in _SCALARS:
            values[name] = int(values[name])
        chunks, pieces, delivered = (len(values["chunk_file"]), int(values["chunk_pieces"].sum()),
                                     int(values["chunk_delivered"].sum()))
        sizes = {**{name: chunks for name in _FIELDS if name.startswith("chunk_")},
                 **{name: pieces for name in _FIELDS if name.startswith("piece_")},
                 **{name: delivered for name in _FIELDS if name.startswith("deliv_")}}
        if any(values[name].ndim != 1 or len(values[name]) != n for name, n in sizes.items()):
            logger.debug("%s: malformed load plan; planning again", path)
            return None
        return cls(**values)

    def applies_to(self, model: nn.Module, reader: CheckpointReader) -> bool:
        """Whether the plan's indices fit this model and checkpoint, and every piece stays inside its parameter, its
        chunk and its tensor (the key already names them: a guard against a damaged file, not a substitute for it)."""
        params = [p for _, p in model.named_parameters()]
        nbytes = np.array([p.numel() * p.element_size() for p in params], dtype=np.int64)
        if len(self.piece_param) and (self.piece_param.min() < 0 or self.piece_param.max() >= len(params)):
            return False
        if len(self.chunk_file) and (self.chunk_file.min() < 0 or self.chunk_file.max() >= len(reader.files)):
            return False
        if any(name not in reader.entries for name in self.deliv_name.tolist()):
            return False
        chunk_of_piece = np.repeat(np.arange(len(self.chunk_file)), self.chunk_pieces)
        return bool(np.all(self.piece_offset >= 0) and np.all(self.piece_src >= 0)
                    and np.all(self.piece_offset + self.piece_nbytes <= nbytes[self.piece_param])
                    and np.all(self.piece_src + self.piece_nbytes <= self.chunk_nbytes[chunk_of_piece]))

    def chunks_and_routes(self, model: nn.Module, reader: CheckpointReader) -> tuple[list[Chunk], list[ChunkRoute]]:
        """The chunks to read and their routes: the direct copies as a [n, 3] uint64 array (destination address,
        byte offset in the chunk, bytes) in `direct_ptrs`, with no per-piece Python object; the delivered pieces as
        the sink's `Piece`s, with their span."""
        bases = np.array([p.data_ptr() for _, p in model.named_parameters()], dtype=np.uint64)
        table = np.empty((len(self.piece_param), 3), dtype=np.uint64)  # [P, 3]
        table[:, 0] = bases[self.piece_param] + self.piece_offset.astype(np.uint64)
        table[:, 1] = self.piece_src
        table[:, 2] = self.piece_nbytes
        entries = reader.entries
        delivered = [Piece(entries[name], src, dst, nbytes) for name, src, dst, nbytes in zip(
            self.deliv_name.tolist(), self.deliv_src.tolist(), self.deliv_dst.tolist(), self.deliv_nbytes.tolist())]
        ends = np.cumsum(self.chunk_pieces).tolist()
        delivered_ends = np.cumsum(self.chunk_delivered).tolist()
        chunks, routes, start, d_start = [], [], 0, 0
        for i, (file, offset, nbytes, end, d_end, span_start, span_end) in enumerate(zip(
                self.chunk_file.tolist(), self.chunk_offset.tolist(), self.chunk_nbytes.tolist(), ends,
                delivered_ends, self.chunk_span_start.tolist(), self.chunk_span_end.tolist())):
            chunks.append(Chunk(i, reader.files[file], offset, nbytes, ()))
            routes.append(ChunkRoute(direct=[], direct_ptrs=table[start:end], completed=[],
                                     delivered=delivered[d_start:d_end],
                                     span=None if span_start < 0 else (span_start, span_end)))
            start, d_start = end, d_end
        return chunks, routes

    @property
    def delivered_names(self) -> set[str]:
        """The tensors handed to weight loaders (their bindings are all the cached load builds)."""
        return set(self.deliv_name.tolist())

    def payload_bytes(self) -> int:
        """The tensor bytes the plan reads (what the progress bar counts)."""
        return int(self.piece_nbytes.sum() + self.deliv_nbytes.sum())
