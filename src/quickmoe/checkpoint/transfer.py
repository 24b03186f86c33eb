"""Moving a chunk read into a host buffer to the device its parameters live on.

Both transfers have the same three calls, made by the loader for each chunk in order:
`stage(chunk, host, slot, ring)` returns the chunk's bytes on the target device (uint8, `chunk.nbytes`);
the loader then hands views of them to the weight loaders; `done(slot, ring)` says those calls were made;
`finish()` waits for everything queued; `close()` (always called) orders the streams for freeing.

- `HostTransfer` (parameters on the CPU): the host buffer itself is the staging buffer. Weight loaders copy
  synchronously on the CPU, so once they have returned the buffer may be refilled: `done` releases it.
- `CudaTransfer`: one asynchronous host->device copy per chunk on a dedicated copy stream, into a small
  ring of device staging buffers; the weight loaders then run (convert dtype, transpose) on the current
  stream, which waits for the copy with a CUDA event, so reading chunk k+1 and copying it overlap the
  conversions of chunk k. Two events per chunk keep the rings safe:
  `copied` (copy stream, after the H2D copy) gates the host buffer's reuse (the reader thread that gets
  the slot next synchronizes on it) and the weight loaders (current stream waits on it);
  `consumed` (current stream, after the weight loaders) gates the next copy into the same device buffer
  (the copy stream waits on it).
"""

from __future__ import annotations

import logging
import time

import torch

from quickmoe.checkpoint.chunk_plan import Chunk
from quickmoe.checkpoint.staging import ChunkRing

__all__ = ["CudaTransfer", "HostTransfer"]

logger = logging.getLogger(__name__)


class HostTransfer:
    """Parameters on the CPU: weight loaders read straight from the ring's host buffer."""

    device = torch.device("cpu")
    allocated_bytes = 0  # no device staging memory

    def stage(self, chunk: Chunk, host: torch.Tensor, slot: int, ring: ChunkRing) -> torch.Tensor:
        return host

    def done(self, slot: int, ring: ChunkRing) -> None:
        # weight_loader copies on the CPU before returning, so no view of the buffer outlives the call:
        # the slot may be refilled now.
        ring.release(slot)

    def finish(self) -> float:
        return 0.0

    def close(self) -> None:
        pass


class CudaTransfer:
    """Host buffer -> device staging buffer on a copy stream; weight loaders on the current stream."""

    def __init__(self, device: torch.device, buffer_bytes: int, num_buffers: int) -> None:
        if num_buffers < 1:
            raise ValueError(f"num_device_buffers = {num_buffers}: expected at least 1")
        self.device = device
        self.buffer_bytes = buffer_bytes
        self.copy_stream = torch.cuda.Stream(device=device)
        self.compute_stream = torch.cuda.current_stream(device)
        # Allocated lazily on the current stream and used by both streams; every use on the copy stream
        # is followed by a `copied` event the current stream waits on, so by the time the buffers are
        # freed (after finish()) the allocator's ordering on the current stream covers the copies too.
        self._buffers: list[torch.Tensor | None] = [None] * num_buffers
        self._consumed: list[torch.cuda.Event | None] = [None] * num_buffers
        self._count = 0
        self._slot = -1

    @property
    def allocated_bytes(self) -> int:
        """Device bytes held by the staging buffers."""
        return sum(b.numel() for b in self._buffers if b is not None)

    def stage(self, chunk: Chunk, host: torch.Tensor, slot: int, ring: ChunkRing) -> torch.Tensor:
        dslot = self._count % len(self._buffers)
        self._count += 1
        buf = self._buffers[dslot]
        if buf is None:
            buf = self._buffers[dslot] = torch.empty(self.buffer_bytes, dtype=torch.uint8, device=self.device)
        dev = buf[:chunk.nbytes]
        consumed = self._consumed[dslot]
        if consumed is not None:  # the weight loaders of the chunk last staged here must have read it
            self.copy_stream.wait_event(consumed)
        with torch.cuda.stream(self.copy_stream):
            dev.copy_(host, non_blocking=True)  # asynchronous: `host` is a slice of a pinned buffer
        copied = torch.cuda.Event()
        copied.record(self.copy_stream)
        # The host slot goes back to the readers now; the reader that takes it synchronizes on `copied`
        # before overwriting it, so the copy above always sees the bytes of this chunk.
        ring.release(slot, copied)
        self.compute_stream.wait_event(copied)
        self._slot = dslot
        return dev

    def done(self, slot: int, ring: ChunkRing) -> None:
        consumed = torch.cuda.Event()
        consumed.record(self.compute_stream)
        self._consumed[self._slot] = consumed

    def finish(self) -> float:
        """Wait until every copy and weight loader queued has run; return the seconds waited."""
        t0 = time.perf_counter()
        self.compute_stream.wait_stream(self.copy_stream)
        self.compute_stream.synchronize()
        return time.perf_counter() - t0

    def close(self) -> None:
        """Order the current stream after every copy queued (also on an error path), so the staging
        buffers, freed on the current stream, are not handed out while a copy into them may still run."""
        self.compute_stream.wait_stream(self.copy_stream)
