"""Where the bytes of each chunk go: straight into a parameter, or through its weight loader.

A checkpoint tensor that is byte-for-byte a contiguous run of its parameter (the parameter itself, with the
plain `copy_weight_loader`, the checkpoint's dtype and shape; or a same-dtype slice of it, e.g. one expert's
rows: `bindings.py`) has its pieces *land directly*, each copied from the chunk's host buffer into the
matching byte range of the parameter (on CUDA an asynchronous host->device
copy straight into the parameter: no staging buffer, no assembly of tensors that straddle chunks, no
weight-loader call). With bf16 weights on CUDA that is every gpt-oss tensor but the float32 norms and
sinks. Every other piece is *delivered*: the chunk's bytes [span) that hold such pieces are staged next
to the parameters, and each tensor is handed to `param.weight_loader(param, tensor)` as a view of the
staged bytes, or, if it straddles chunks or its offset is misaligned for its dtype, after assembly in a
scratch buffer.

`ParameterSink.routes[i]` says, for chunk i, which pieces land (destination views, host byte ranges) and
which are delivered (with the span to stage); it is computed once from the chunk plan, before reading.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from quickmoe.checkpoint.bindings import Binding, bytes_view
from quickmoe.checkpoint.chunk_plan import Chunk, Piece

__all__ = ["ChunkRoute", "ParameterSink"]

_SPAN_ALIGN = 16  # spans start at a multiple of this, so a piece's alignment within the span is its own


@dataclass(frozen=True)
class ChunkRoute:
    """For one chunk: `direct` (destination byte view, host start, host end) copies, the parameters they
    `completed` (checkpoint tensors whose last piece is in this chunk), the `delivered` pieces, and the
    chunk-relative byte
    `span` [start, end) that must be staged for those (None if none)."""

    direct: list[tuple[torch.Tensor, int, int, int]]  # (parameter's bytes, byte offset in it, host start, nbytes)
    # the same copies as (destination address, host start, nbytes); from a cached plan (`load_plan`, where `direct`
    # is empty) an [n, 3] uint64 array of them
    direct_ptrs: list[tuple[int, int, int]] | np.ndarray
    completed: list[str]
    delivered: list[Piece]
    span: tuple[int, int] | None


class ParameterSink:
    """Routes each chunk's pieces to the parameters; records which checkpoint tensors were loaded."""

    def __init__(self, bindings: dict[str, Binding], device: torch.device, chunks: Sequence[Chunk]) -> None:
        self.bindings = bindings
        self.device = device
        self.filled: set[str] = set()
        # Per checkpoint tensor that lands directly: its parameter's bytes (one view per parameter, shared by the
        # experts stacked in it: a Qwen3-30B-A3B FP8 checkpoint has ~37,000 such tensors in 192 parameters), its
        # byte offset there and the parameter's address: plain integers from here on.
        landing: dict[str, tuple[torch.Tensor, int, int]] = {}  # tensors in several pieces, once their first is seen
        # id(parameter) -> (its bytes, their address, its element size, its dtype)
        param_bytes: dict[int, tuple[torch.Tensor, int, int, torch.dtype]] = {}
        self.routes: list[ChunkRoute] = []
        for chunk in chunks:  # ~74,000 pieces for Qwen3-30B-A3B NVFP4: plain tuples and locals in this loop
            direct, direct_ptrs, completed, delivered = [], [], [], []
            for piece in chunk.pieces:
                entry, src, dst, nbytes = piece
                name = entry.name
                where = landing.get(name) if dst else None  # a tensor's first piece starts at 0
                if where is None:
                    binding = bindings[name]
                    if binding.direct_offset is not None:
                        param = binding.param
                        flat = param_bytes.get(id(param))
                        if flat is None:
                            view = bytes_view(param)
                            flat = param_bytes[id(param)] = (view, view.data_ptr(), param.element_size(),
                                                             param.dtype)
                        if entry.dtype == flat[3]:
                            where = (flat[0], binding.direct_offset * flat[2], flat[1])
                            if nbytes != entry.nbytes:  # more pieces to come
                                landing[name] = where
                if where is not None:
                    view, start, address = where
                    offset = start + dst
                    direct.append((view, offset, src, nbytes))
                    direct_ptrs.append((address + offset, src, nbytes))
                    if dst + nbytes == entry.nbytes:  # the tensor's last piece
                        completed.append(name)
                else:
                    delivered.append(piece)
            span = None
            if delivered:
                start = min(p.src for p in delivered) // _SPAN_ALIGN * _SPAN_ALIGN
                span = (start, max(p.src + p.nbytes for p in delivered))
            self.routes.append(ChunkRoute(direct=direct, direct_ptrs=direct_ptrs, completed=completed,
                                          delivered=delivered, span=span))
        self.staging_bytes = max((r.span[1] - r.span[0] for r in self.routes if r.span is not None), default=0)
        # the largest delivered tensor that needs assembly (straddling, or a misaligned view)
        self.scratch_bytes = max((p.entry.nbytes for r in self.routes for p in r.delivered if not _is_view(p)),
                                 default=0)
        self.peak_assembly_bytes = 0
        # At most one tensor is ever partly assembled: a tensor's pieces are in consecutive chunks, and
        # in its last chunk its piece comes first (pieces are in offset order), before any other starts.
        self._partial: torch.Tensor | None = None
        self._partial_name = ""
        # Assembly buffers are slices of one scratch buffer of `scratch_bytes`, allocated once and
        # reused: weight loaders copy out of their input (CPU: before returning; CUDA: in kernels queued on
        # the current stream, ahead of the next copy into the scratch), so the next tensor may overwrite
        # it. Reuse also spares the CPU path a fresh allocation, and its page faults, per large tensor.
        self._scratch: torch.Tensor | None = None

    def deliver(self, piece: Piece, staged: torch.Tensor, span_start: int) -> None:
        """Hand `piece` (found at chunk byte piece.src, i.e. at staged[piece.src - span_start]) on."""
        entry = piece.entry
        at = piece.src - span_start
        src = staged[at:at + piece.nbytes]
        # A whole piece is handed on as a view of the staged bytes, if its offset suits the dtype's
        # alignment (safetensors does not promise that); otherwise it goes through an assembly buffer.
        if _is_view(piece):
            self.load(entry.name, src.view(entry.dtype).reshape(entry.shape), staged)
            return
        if piece.dst == 0:
            assert self._partial is None, (self._partial_name, entry.name)
            if self._scratch is None:
                self._scratch = torch.empty(self.scratch_bytes, dtype=torch.uint8, device=self.device)
                self.peak_assembly_bytes = self.scratch_bytes
            self._partial = self._scratch[:entry.nbytes]
            self._partial_name = entry.name
        assert self._partial is not None and self._partial_name == entry.name, (self._partial_name, entry.name)
        self._partial[piece.dst:piece.dst + piece.nbytes].copy_(src)
        if piece.is_last:
            tensor = self._partial.view(entry.dtype).reshape(entry.shape)
            self._partial = None
            self.load(entry.name, tensor, self._scratch)

    def load(self, name: str, tensor: torch.Tensor, staging: torch.Tensor | None) -> None:
        binding = self.bindings[name]
        param = binding.param
        binding.weight_loader(param, tensor)
        if staging is not None and param.untyped_storage().data_ptr() == staging.untyped_storage().data_ptr():
            raise AssertionError(f"the weight_loader of {name} kept a view of the loader's staging buffer "
                                 "(it must copy: the buffer is reused for later chunks)")
        self.filled.add(name)


def _is_view(piece: Piece) -> bool:
    """Whether a piece is handed on as a view of its chunk: whole, at an offset aligned for its dtype."""
    return piece.is_whole and piece.src % piece.entry.dtype.itemsize == 0
