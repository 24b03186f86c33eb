"""Page-locked host memory kept from step to step for the step's host->device copies.

A step's metadata reaches the device through page-locked memory, so the copies are queued without waiting for the
work before them. Taking that memory from torch's caching host allocator on every copy (`Tensor.pin_memory()`)
cost 1-3 ms a call at batch 256 on the H200 (two calls a decode step: its metadata and its block tables), where
batch 128 took 0.05 ms: at batch 256 the host, not the GPU, set the step rate (gpt-oss-20b, gpt-oss-120b at TP = 2;
docs/benchmarks.md, 2026-11-30 ninth session).

`PinnedStaging` keeps two page-locked buffers and gives steps them in turn. `begin_step` takes the buffer the step
before last used, first waiting for that step's event (normally long passed: the engine collects a step's tokens
before it launches the step after next); each array of the step is packed into it (`to_device`); `end_step` records
the event after the step's copies. A step whose arrays do not fit takes the rest from `pin_memory()`, and its
buffer is enlarged the next time it is taken, when nothing still reads it. Outside a `begin_step` / `end_step`
pair (warm-up, captures) `to_device` uses `pin_memory()` as before.
"""

from __future__ import annotations

import numpy as np
import torch

__all__ = ["PinnedStaging"]

_ALIGN = 256  # bytes: each array starts on its own 256-byte boundary


class PinnedStaging:
    """Two page-locked buffers used by alternate steps (see the module docstring); `device` is a CUDA device."""

    def __init__(self, device: torch.device | str, nbytes: int = 1 << 20) -> None:
        self.device = torch.device(device)
        assert self.device.type == "cuda", "page-locked staging is for copies to a CUDA device"
        self._buffers = [self._allocate(nbytes), self._allocate(nbytes)]
        self._events: list[torch.cuda.Event | None] = [None, None]
        self._wanted = [nbytes, nbytes]  # bytes each buffer should have when next taken
        self._current = 1
        self._offset = 0
        self._in_step = False
        self.fallbacks = 0  # arrays that took pin_memory() inside a step (the buffer was full)

    @staticmethod
    def _allocate(nbytes: int) -> torch.Tensor:
        return torch.empty(nbytes, dtype=torch.uint8, pin_memory=True)

    @property
    def nbytes(self) -> tuple[int, int]:
        return tuple(b.numel() for b in self._buffers)

    def begin_step(self) -> None:
        """Take the other buffer for this step's copies, once the step that last used it is done with it."""
        self._current ^= 1
        event = self._events[self._current]
        if event is not None:
            event.synchronize()
        if self._wanted[self._current] > self._buffers[self._current].numel():
            self._buffers[self._current] = self._allocate(self._wanted[self._current])
        self._offset = 0
        self._in_step = True

    def end_step(self) -> None:
        """After the step's last copy is queued: the buffer is free again once the current stream passes here."""
        if not self._in_step:
            return
        event = torch.cuda.Event()
        event.record(torch.cuda.current_stream(self.device))
        self._events[self._current] = event
        self._in_step = False

    def host_array(self, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray | None:
        """A numpy array of `shape` in this step's page-locked buffer to fill and pass to `to_device`, or None
        outside a step or when it does not fit (the caller builds the array in ordinary memory)."""
        dtype = np.dtype(dtype)
        nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        if not self._in_step:
            return None
        buffer = self._buffers[self._current]
        start = self._offset
        if start + nbytes > buffer.numel():
            self._wanted[self._current] = max(2 * buffer.numel(), 2 * (start + nbytes))
            self.fallbacks += 1
            return None
        self._offset = -(-(start + nbytes) // _ALIGN) * _ALIGN
        return buffer[start:start + nbytes].numpy().view(dtype).reshape(shape)

    def to_device(self, array: np.ndarray) -> torch.Tensor:
        """`array` on the device; the copy is queued on the current stream without waiting. An array from
        `host_array` is copied from where it is; any other is first packed into this step's buffer."""
        array = np.ascontiguousarray(array)
        if not self._owns(array):
            staged = self.host_array(array.shape, array.dtype)
            if staged is None:
                return torch.from_numpy(array).pin_memory().to(self.device, non_blocking=True)
            staged[...] = array
            array = staged
        return torch.from_numpy(array).to(self.device, non_blocking=True)

    def _owns(self, array: np.ndarray) -> bool:
        """Whether `array` lies in this step's buffer (so its copy needs no staging)."""
        if not self._in_step or array.size == 0:
            return False
        buffer = self._buffers[self._current]
        start = buffer.data_ptr()
        address = array.__array_interface__["data"][0]
        return start <= address and address + array.nbytes <= start + buffer.numel()
