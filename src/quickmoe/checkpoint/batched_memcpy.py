"""Many host->device copies in one driver call: `cuMemcpyBatchAsync` (CUDA 13.0's revision), through ctypes.

The loader lands a checkpoint tensor that is a plain run of its parameter's bytes with one asynchronous copy
(`transfer.CudaTransfer`). A checkpoint of many small tensors pays for each: Qwen3-30B-A3B NVFP4 has 74,163 of
them (each expert's weight, weight_scale, weight_scale_2 and input_scale), and on the H200 its loader's consumer
thread spent 0.62-0.64 s of its 1.13-1.18 s issuing copies (one driver call and one ctypes call each) and weight
loaders (2026-11-29). `cuMemcpyBatchAsync` takes arrays of destinations, sources and sizes, queued in stream order on
one stream, so a chunk's copies take a few calls (`transfer.MAX_BATCH` copies each at most).

The entry point is resolved with `cuGetProcAddress_v2(..., 13000, ...)`: CUDA 12.8 exported a
`cuMemcpyBatchAsync` with a trailing `failIdx` argument that 13.0 dropped, so asking for the 13.0 revision by
version gets the signature below or nothing. A driver older than 13.0 (or no libcuda) gives None, and the loader
keeps one call per copy.

    cuMemcpyBatchAsync(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes, size_t count,
                       CUmemcpyAttributes *attrs, size_t *attrsIdxs, size_t numAttrs, CUstream stream)

One attribute applies to every copy (attrsIdxs = [0]): sources read in stream order (the host buffer stays
untouched until the copy stream's `copied` event, as with single copies); no location hints (they apply to
managed memory only), no flags. The call holds the GIL (`ctypes.PYFUNCTYPE`), like the single copies' calls.
"""

from __future__ import annotations

import ctypes
import logging

import numpy as np

__all__ = ["BatchMemcpy", "batch_memcpy"]

logger = logging.getLogger(__name__)

_CUDA_VERSION = 13000  # the revision of cuMemcpyBatchAsync without failIdx
_SRC_ACCESS_ORDER_STREAM = 1  # CU_MEMCPY_SRC_ACCESS_ORDER_STREAM


class _MemLocation(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("id", ctypes.c_int)]  # CUmemLocation


class _MemcpyAttributes(ctypes.Structure):
    _fields_ = [("srcAccessOrder", ctypes.c_int), ("srcLocHint", _MemLocation), ("dstLocHint", _MemLocation),
                ("flags", ctypes.c_uint)]  # CUmemcpyAttributes


_U64P = ctypes.POINTER(ctypes.c_uint64)
_SIZEP = ctypes.POINTER(ctypes.c_size_t)
_SIGNATURE = ctypes.PYFUNCTYPE(ctypes.c_int, _U64P, _U64P, _SIZEP, ctypes.c_size_t,
                               ctypes.POINTER(_MemcpyAttributes), _SIZEP, ctypes.c_size_t, ctypes.c_void_p)


class BatchMemcpy:
    """`batch(copies, host_base, stream)`: queue the copies (device address, host offset from host_base, bytes) on
    `stream` in one call; raises RuntimeError naming the driver's error code if the call fails. `fn` is the entry
    point (a ctypes function of the signature above)."""

    def __init__(self, fn) -> None:
        self._fn = fn
        self._attrs = _MemcpyAttributes(srcAccessOrder=_SRC_ACCESS_ORDER_STREAM)
        self._attr_index = (ctypes.c_size_t * 1)(0)
        assert ctypes.sizeof(ctypes.c_size_t) == 8, "64-bit platforms only"

    def __call__(self, copies: list[tuple[int, int, int]], host_base: int, stream: int) -> None:
        table = np.array(copies, dtype=np.uint64).reshape(-1, 3)  # [n, 3]
        if not table[:, 2].all():  # the H200's driver refuses a batch holding a 0-byte copy (invalid value)
            table = table[table[:, 2] > 0]
            if not len(table):
                return
        dsts = np.ascontiguousarray(table[:, 0])
        srcs = table[:, 1] + np.uint64(host_base)  # a new contiguous array
        sizes = np.ascontiguousarray(table[:, 2])
        result = self._fn(dsts.ctypes.data_as(_U64P), srcs.ctypes.data_as(_U64P), sizes.ctypes.data_as(_SIZEP),
                          len(table), ctypes.byref(self._attrs), self._attr_index, 1, stream)
        if result != 0:
            raise RuntimeError(f"cuMemcpyBatchAsync of {len(table)} copies failed: CUDA driver error {result}")


def batch_memcpy() -> BatchMemcpy | None:
    """The driver's batched copy, or None where libcuda or its CUDA 13.0 entry point is missing."""
    try:
        get_proc = ctypes.CDLL("libcuda.so.1").cuGetProcAddress_v2
    except (OSError, AttributeError) as exc:
        logger.debug("batched host->device copies unavailable: %s", exc)
        return None
    get_proc.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p), ctypes.c_int, ctypes.c_uint64,
                         ctypes.POINTER(ctypes.c_int)]
    get_proc.restype = ctypes.c_int
    pfn, status = ctypes.c_void_p(), ctypes.c_int(-1)
    result = get_proc(b"cuMemcpyBatchAsync", ctypes.byref(pfn), _CUDA_VERSION, 0, ctypes.byref(status))
    if result != 0 or status.value != 0 or not pfn.value:
        logger.debug("batched host->device copies unavailable: cuGetProcAddress_v2 returned %d (status %d)", result,
                     status.value)
        return None
    return BatchMemcpy(_SIGNATURE(pfn.value))
