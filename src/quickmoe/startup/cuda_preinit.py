"""Creating the CUDA context and the loader's page-locked host buffers while torch is still importing.

On the H100 machine a fresh process spends about 1 s creating the CUDA context and 0.3 s page-locking
the loader's 512 MiB host ring (cudaHostAlloc runs at about 1.6 GB/s there), after `import torch` (3 s
warm, 6 s cold) has finished. Neither needs torch: `CudaPreinit` does both on a thread started first
thing, through the CUDA driver API (libcuda, via ctypes, which releases the GIL), while the main thread
imports. It retains the device's *primary* context, which is the context torch's CUDA runtime uses, so
torch's own initialisation later finds it ready; the buffers come from `cuMemHostAlloc` with the
PORTABLE flag, so every context treats them as page-locked and host->device copies from them are
asynchronous DMA.

Everything here is best effort: without libcuda, or on any driver error, `wait()` returns False, the
reason is in `error`, and the engine initialises CUDA and allocates its buffers the usual way.
The primary context stays retained for the life of the process (torch holds it too); the buffers are
freed with `free_buffers()` once the loader's copies out of them have completed.

This module imports only the standard library: it must run before `import torch`.
"""

from __future__ import annotations

import ctypes
import logging
import os
import threading
import time

__all__ = ["CudaPreinit"]

logger = logging.getLogger(__name__)

_CU_MEMHOSTALLOC_PORTABLE = 0x01


class CudaDriverError(RuntimeError):
    """A CUDA driver call failed (the message names the call and the driver's error string)."""


class _Driver:
    """The few libcuda entry points used here, each checked."""

    def __init__(self) -> None:
        try:
            self.lib = ctypes.CDLL("libcuda.so.1")
        except OSError as exc:
            raise CudaDriverError(f"libcuda.so.1 cannot be loaded ({exc})") from None

    def call(self, name: str, *args: object) -> None:
        result = getattr(self.lib, name)(*args)
        if result != 0:
            text = ctypes.c_char_p()
            self.lib.cuGetErrorString(result, ctypes.byref(text))
            raise CudaDriverError(f"{name} failed: error {result} ({(text.value or b'?').decode()})")


class CudaPreinit:
    """On a thread: cuInit, retain device `ordinal`'s primary context, then allocate `num_buffers`
    page-locked host buffers of `buffer_bytes` each. Start with `CudaPreinit(...).start()`."""

    def __init__(self, ordinal: int, *, num_buffers: int, buffer_bytes: int) -> None:
        if isinstance(ordinal, bool) or not isinstance(ordinal, int) or ordinal < 0:
            raise ValueError(f"CudaPreinit option 'ordinal' = {ordinal!r}: expected a device index >= 0")
        for option, value in (("num_buffers", num_buffers), ("buffer_bytes", buffer_bytes)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"CudaPreinit option {option!r} = {value!r}: expected an integer >= 0")
        self.ordinal = ordinal
        self.num_buffers = num_buffers
        self.buffer_bytes = buffer_bytes
        self.error: str | None = None
        self.context_seconds = 0.0  # cuInit + primary context
        self.buffer_seconds = 0.0  # page-locking the host buffers
        self._buffers: list[int] = []  # host addresses from cuMemHostAlloc
        self._driver: _Driver | None = None
        self._context = ctypes.c_void_p()
        self._thread = threading.Thread(target=self._run, name="quickmoe-cuda-preinit", daemon=True)

    def start(self) -> CudaPreinit:
        # Set before the driver initialises, as torch would at its own CUDA init: kernels of the CUDA
        # libraries are then loaded into the context when first used, not all at context creation.
        os.environ.setdefault("CUDA_MODULE_LOADING", "LAZY")
        self._thread.start()
        return self

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for the thread; True when the context and the buffers are ready."""
        self._thread.join(timeout)
        return not self._thread.is_alive() and self.error is None

    @property
    def buffers(self) -> list[tuple[int, int]]:
        """(host address, nbytes) of each page-locked buffer, once `wait()` returned True."""
        return [(ptr, self.buffer_bytes) for ptr in self._buffers]

    def host_tensors(self) -> list:  # -> list[torch.Tensor]; torch is imported by the time this is called
        """The buffers as uint8 CPU tensors (views of the page-locked memory; valid until free_buffers())."""
        import torch

        return [torch.frombuffer((ctypes.c_uint8 * n).from_address(ptr), dtype=torch.uint8) for ptr, n in self.buffers]

    def free_buffers(self) -> None:
        """Free the page-locked buffers; every copy out of them must have completed."""
        if self._thread.is_alive():
            self._thread.join()
        driver, buffers, self._buffers = self._driver, self._buffers, []
        for ptr in buffers:
            assert driver is not None
            try:
                driver.call("cuMemFreeHost", ctypes.c_void_p(ptr))
            except CudaDriverError as exc:
                logger.warning("freeing a page-locked loader buffer: %s", exc)

    def _run(self) -> None:
        t0 = time.perf_counter()
        try:
            driver = self._driver = _Driver()
            driver.call("cuInit", ctypes.c_uint(0))
            device = ctypes.c_int()
            driver.call("cuDeviceGet", ctypes.byref(device), ctypes.c_int(self.ordinal))
            driver.call("cuDevicePrimaryCtxRetain", ctypes.byref(self._context), device)
            driver.call("cuCtxSetCurrent", self._context)
            self.context_seconds = time.perf_counter() - t0
            t1 = time.perf_counter()
            for _ in range(self.num_buffers):
                ptr = ctypes.c_void_p()
                driver.call("cuMemHostAlloc", ctypes.byref(ptr), ctypes.c_size_t(self.buffer_bytes),
                            ctypes.c_uint(_CU_MEMHOSTALLOC_PORTABLE))
                self._buffers.append(int(ptr.value))
            self.buffer_seconds = time.perf_counter() - t1
        except (CudaDriverError, AttributeError) as exc:  # AttributeError: a libcuda without the symbol
            self.error = str(exc)
            self._free_after_error()
            logger.debug("CUDA pre-initialisation skipped: %s", exc)

    def _free_after_error(self) -> None:  # on the thread itself, so free_buffers() (which joins it) won't do
        driver, buffers, self._buffers = self._driver, self._buffers, []
        for ptr in buffers:
            if driver is not None:
                driver.lib.cuMemFreeHost(ctypes.c_void_p(ptr))
