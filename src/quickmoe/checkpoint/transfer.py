"""Moving a chunk read into a host buffer to the device its parameters live on.

Both transfers have the same calls. The loader streams inside `with transfer.streaming():` and, for each
chunk in order, calls:
`send(host, slot, ring, route)` copies the route's direct pieces from the host buffer straight into their
parameters and returns the route's span of bytes staged on the target device (or None); the loader then
hands the delivered pieces to their weight loaders, inside `with transfer.delivering():`, as views of it;
`done(slot, ring)` says those calls were made; `finish()` waits for everything queued; `close()` (always called) orders the streams for freeing.

- `HostTransfer` (parameters on the CPU): copies run synchronously and the host buffer itself is the
  staging buffer. Weight loaders copy before returning, so after them the buffer may be refilled: `done`
  releases it.
- `CudaTransfer`: the chunk's host->device copies (direct ones into the parameters, and the span into a
  small ring of device staging buffers) are queued on a dedicated copy stream, so reading chunk k+1
  overlaps them; the weight loaders run on the current stream, which waits for the copies with a CUDA
  event. The copy stream is made current once for the whole stream of chunks (`streaming()`), and the
  current stream restored only around weight loaders (`delivering()`): switching streams per chunk costs
  the consumer thread more than the copies' own launch. The direct copies themselves go through the
  driver (`cuMemcpyHtoDAsync`, the call torch's copy_ ends in), with precomputed addresses and the GIL
  held for its few microseconds: a torch call releases the GIL and must take it back, and with 16 reader
  threads taking it too, each take waits its turn. A chunk with several direct copies queues them in
  batched calls where the driver has them (`batched_memcpy`: CUDA 13.0's `cuMemcpyBatchAsync`, at most
  MAX_BATCH copies a call). Two events per chunk keep the rings safe:
  `copied` (copy stream, after the chunk's copies) gates the host buffer's reuse (the reader thread that
  gets the slot next synchronizes on it) and the weight loaders (current stream waits on it);
  `consumed` (current stream, after the weight loaders) gates the next copy into the same device staging
  buffer (the copy stream waits on it).
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import time

import numpy as np
import torch

from quickmoe.checkpoint.batched_memcpy import batch_memcpy
from quickmoe.checkpoint.sink import ChunkRoute
from quickmoe.checkpoint.staging import ChunkRing

__all__ = ["CudaTransfer", "HostTransfer", "address_copies_available"]

logger = logging.getLogger(__name__)


class HostTransfer:
    """Parameters on the CPU: direct pieces are copied now; weight loaders read the host buffer itself."""

    device = torch.device("cpu")
    allocated_bytes = 0  # no staging memory besides the ring
    direct_copies = copy_calls = 0  # (CudaTransfer's counts of driver copies)

    def streaming(self) -> contextlib.AbstractContextManager:
        return contextlib.nullcontext()

    def delivering(self) -> contextlib.AbstractContextManager:
        return contextlib.nullcontext()

    def send(self, host: torch.Tensor, slot: int, ring: ChunkRing, route: ChunkRoute) -> torch.Tensor | None:
        if route.direct or not len(route.direct_ptrs):
            for param_bytes, offset, start, nbytes in route.direct:
                param_bytes[offset:offset + nbytes].copy_(host[start:start + nbytes])
        else:  # a cached plan's route: [n, 3] (destination address, host start, bytes)
            base = host.data_ptr()
            for dst_ptr, start, nbytes in _rows(route.direct_ptrs):
                ctypes.memmove(dst_ptr, base + start, nbytes)
        return None if route.span is None else host[route.span[0]:route.span[1]]

    def done(self, slot: int, ring: ChunkRing) -> None:
        # weight_loader copies on the CPU before returning, so no view of the buffer outlives the call:
        # the slot may be refilled now.
        ring.release(slot)

    def finish(self) -> float:
        return 0.0

    def close(self) -> None:
        pass


# Copies per batched call. On the H200's driver (580.159.04, CUDA 13.0) a load of Qwen3-30B-A3B NVFP4's tensors at tiny
# sizes (scripts/probes/many_tensors_probe.py: 2,200-3,500 copies a 16 MB chunk) crashed inside cuMemcpyBatchAsync
# (SIGSEGV) whenever a call took a whole chunk: 5 starts of 5, with or without Triton's and cuBLAS's start threads
# beside it; lone batches of up to 16,384 copies in a fresh process ran. In calls of 64 the same load, the real
# checkpoint and the loader's GPU tests ran every time (2026-11-29; docs/benchmarks.md).
MAX_BATCH = 64


class _DriverMemcpy:
    """`cuMemcpyHtoDAsync_v2(dst, src, nbytes, stream)` through ctypes.PyDLL, which keeps the GIL."""

    def __init__(self) -> None:
        fn = ctypes.PyDLL("libcuda.so.1").cuMemcpyHtoDAsync_v2
        fn.argtypes = [ctypes.c_uint64, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
        fn.restype = ctypes.c_int
        self._fn = fn

    def __call__(self, dst: int, src: int, nbytes: int, stream: int) -> None:
        result = self._fn(dst, src, nbytes, stream)
        if result != 0:
            raise RuntimeError(f"cuMemcpyHtoDAsync({dst:#x}, {src:#x}, {nbytes}) failed: CUDA driver error {result}")


def address_copies_available() -> bool:
    """Whether `CudaTransfer` copies by address (the driver's copy entry point is there): a route given as addresses
    only (a cached `load_plan`) needs it; without libcuda the transfer copies through torch, from views."""
    return _driver_memcpy() is not None


def _driver_memcpy() -> _DriverMemcpy | None:
    try:
        return _DriverMemcpy()
    except (OSError, AttributeError) as exc:  # no libcuda (or no such symbol): torch's copy_ does the same
        logger.debug("direct host->device copies through torch: %s", exc)
        return None


def _rows(copies) -> list:
    """A route's direct copies as Python (int, int, int) rows: a list already, or a cached plan's [n, 3] array."""
    return copies.tolist() if isinstance(copies, np.ndarray) else copies


class CudaTransfer:
    """Host buffer -> parameters and device staging on a copy stream; weight loaders on the current stream."""

    def __init__(self, device: torch.device, staging_bytes: int, num_buffers: int) -> None:
        if num_buffers < 1:
            raise ValueError(f"num_device_buffers = {num_buffers}: expected at least 1")
        self.device = device
        self.staging_bytes = staging_bytes
        self.copy_stream = torch.cuda.Stream(device=device)
        self.compute_stream = torch.cuda.current_stream(device)
        # Allocated lazily on the current stream and used by both streams; every use on the copy stream
        # is followed by a `copied` event the current stream waits on, so by the time the buffers are
        # freed (after finish()) the allocator's ordering on the current stream covers the copies too.
        self._buffers: list[torch.Tensor | None] = [None] * num_buffers
        self._consumed: list[torch.cuda.Event | None] = [None] * num_buffers
        # One `copied` event per host slot, re-recorded at each use: the reader that takes the slot has
        # synchronized on the previous recording before it refills the buffer, so no wait is ever lost.
        self._copied: dict[int, torch.cuda.Event] = {}
        self._count = 0
        self._staged_slot: int | None = None
        self._memcpy = _driver_memcpy()
        # A chunk's direct copies in one driver call where the driver has it (CUDA 13.0); QUICKMOE_BATCHED_COPIES=0
        # keeps one call per copy (a comparison switch)
        batched = self._memcpy is not None and os.environ.get("QUICKMOE_BATCHED_COPIES", "1") != "0"
        self._batch = batch_memcpy() if batched else None
        self._batch_worked = False
        self._host_ptr: dict[int, int] = {}  # slot -> address of its (page-locked) buffer
        self.direct_copies = 0  # pieces landed straight in their parameters
        self.copy_calls = 0  # driver calls that queued them

    def streaming(self) -> contextlib.AbstractContextManager:
        """Make the copy stream current for the consumer thread while it streams chunks."""
        return torch.cuda.stream(self.copy_stream)

    def delivering(self) -> contextlib.AbstractContextManager:
        """Weight loaders (and assembly) run on the compute stream."""
        return torch.cuda.stream(self.compute_stream)

    @property
    def allocated_bytes(self) -> int:
        """Device bytes held by the staging buffers."""
        return sum(b.numel() for b in self._buffers if b is not None)

    def send(self, host: torch.Tensor, slot: int, ring: ChunkRing, route: ChunkRoute) -> torch.Tensor | None:
        """Queue the chunk's copies on the copy stream (current inside `streaming()`)."""
        staged = None
        self._staged_slot = None
        if route.span is not None:
            dslot = self._staged_slot = self._count % len(self._buffers)
            self._count += 1
            buf = self._buffers[dslot]
            if buf is None:
                with torch.cuda.stream(self.compute_stream):  # allocated for (and freed on) the compute stream
                    buf = self._buffers[dslot] = torch.empty(self.staging_bytes, dtype=torch.uint8,
                                                             device=self.device)
            consumed = self._consumed[dslot]
            if consumed is not None:  # the weight loaders of the span last staged here must have read it
                self.copy_stream.wait_event(consumed)
            staged = buf[:route.span[1] - route.span[0]]
        # asynchronous: `host` is a page-locked buffer
        if self._memcpy is not None:
            base = self._host_ptr.get(slot)
            if base is None:
                base = self._host_ptr[slot] = host.data_ptr()
            stream = self.copy_stream.cuda_stream
            copies = route.direct_ptrs
            if not (len(copies) > 1 and self._send_batch(copies, base, stream)):
                for dst_ptr, start, nbytes in _rows(copies):
                    self._memcpy(dst_ptr, base + start, nbytes, stream)
                self.copy_calls += len(copies)
            self.direct_copies += len(copies)
        else:
            for param_bytes, offset, start, nbytes in route.direct:
                param_bytes[offset:offset + nbytes].copy_(host[start:start + nbytes], non_blocking=True)
            self.direct_copies += len(route.direct)
            self.copy_calls += len(route.direct)
        if staged is not None:
            staged.copy_(host[route.span[0]:route.span[1]], non_blocking=True)
        copied = self._copied.get(slot)
        if copied is None:
            copied = self._copied[slot] = torch.cuda.Event()
        copied.record(self.copy_stream)
        # The host slot goes back to the readers now; the reader that takes it synchronizes on `copied`
        # before overwriting it, so the copies above always see the bytes of this chunk.
        ring.release(slot, copied)
        if staged is not None:
            self.compute_stream.wait_event(copied)
        return staged

    def _send_batch(self, copies: list[tuple[int, int, int]], base: int, stream: int) -> bool:
        """Queue `copies` (destination address, host start, bytes) in batched calls of at most MAX_BATCH; False if
        there is no batched call (none in the driver, or the first one failed: then every chunk copies one by one),
        and nothing was queued."""
        if self._batch is None:
            return False
        for first in range(0, len(copies), MAX_BATCH):
            try:
                self._batch(copies[first:first + MAX_BATCH], base, stream)
            except RuntimeError as exc:
                if self._batch_worked:  # not the driver's lack of support: a real failure
                    raise
                logger.warning("%s; the loader copies tensors one by one", exc)
                self._batch = None
                return False
            self._batch_worked = True
            self.copy_calls += 1
        return True

    def done(self, slot: int, ring: ChunkRing) -> None:
        if self._staged_slot is not None:
            consumed = torch.cuda.Event()
            consumed.record(self.compute_stream)
            self._consumed[self._staged_slot] = consumed

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
