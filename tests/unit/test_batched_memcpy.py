"""The batched host->device copy (`checkpoint.batched_memcpy`) and the transfer's use of it, on the CPU with a fake
driver entry point that performs the copies it is given on host memory: the addresses, host offsets and sizes it
receives, the attribute it passes, and the transfer's fall back to one call per copy when the first batch fails.
The real driver call is tested on the GPU (`test_loader.py::test_cuda_load_is_bit_identical_to_naive`)."""

from __future__ import annotations

import ctypes
from types import SimpleNamespace

import numpy as np
import pytest

from quickmoe.checkpoint.batched_memcpy import _SIGNATURE, BatchMemcpy, batch_memcpy
from quickmoe.checkpoint.transfer import CudaTransfer


def _fake_driver(calls: list, result: int = 0):
    """An entry point of cuMemcpyBatchAsync's signature that memmoves each copy (host memory stands in for the
    device) and records what it was called with; like the H200's driver (2026-11-29), it refuses a batch holding a
    0-byte copy (CUDA_ERROR_INVALID_VALUE)."""
    def fn(dsts, srcs, sizes, count, attrs, attr_idx, num_attrs, stream):
        calls.append(dict(count=count, stream=stream, num_attrs=num_attrs, attr_idx=attr_idx[0],
                          order=attrs[0].srcAccessOrder, flags=attrs[0].flags,
                          hints=(attrs[0].srcLocHint.type, attrs[0].dstLocHint.type)))
        if any(sizes[i] == 0 for i in range(count)):
            return 1
        if result == 0:
            for i in range(count):
                ctypes.memmove(dsts[i], srcs[i], sizes[i])
        return result
    return _SIGNATURE(fn)


def test_a_batch_copies_every_piece_to_its_address():
    rng = np.random.default_rng(7)
    host = rng.integers(0, 256, 10_000, dtype=np.uint8)
    device = np.zeros(12_000, dtype=np.uint8)  # stands in for the parameters
    base, dst0 = host.ctypes.data, device.ctypes.data
    # (destination address, host offset, bytes): sizes from 1 byte to a few KB, destinations out of order
    pieces = [(2_000, 0, 4), (0, 4, 1_000), (9_000, 1_004, 2_500), (5_000, 3_504, 1), (6_000, 3_505, 3_000)]
    calls: list = []
    BatchMemcpy(_fake_driver(calls))([(dst0 + d, s, n) for d, s, n in pieces], base, 1234)
    want = np.zeros_like(device)
    for d, s, n in pieces:
        want[d:d + n] = host[s:s + n]
    assert np.array_equal(device, want)
    assert calls == [dict(count=5, stream=1234, num_attrs=1, attr_idx=0, order=1, flags=0, hints=(0, 0))]


def test_empty_copies_are_left_out_of_the_batch():
    """A 0-byte copy has nothing to move; the driver would refuse the whole batch for it."""
    host = np.arange(32, dtype=np.uint8)
    device = np.zeros(32, dtype=np.uint8)
    calls: list = []
    batch = BatchMemcpy(_fake_driver(calls))
    batch([(device.ctypes.data, 0, 8), (device.ctypes.data + 8, 8, 0), (device.ctypes.data + 16, 16, 8)],
          host.ctypes.data, 0)
    assert [c["count"] for c in calls] == [2]
    assert np.array_equal(device[:8], host[:8]) and np.array_equal(device[16:24], host[16:24])
    assert not device[8:16].any() and not device[24:].any()
    batch([(device.ctypes.data, 0, 0)], host.ctypes.data, 0)  # nothing to copy: no driver call
    assert len(calls) == 1


def test_a_failed_batch_names_the_driver_error():
    with pytest.raises(RuntimeError, match="cuMemcpyBatchAsync of 2 copies failed: CUDA driver error 1"):
        BatchMemcpy(_fake_driver([], result=1))([(0, 0, 1), (8, 1, 1)], 0, 0)


def test_the_transfer_falls_back_to_single_copies_only_before_a_batch_worked():
    """A driver that refuses the first batch leaves every later chunk on single copies (the caller copies this
    chunk itself: False); a batch failing after one worked is an error."""
    host = np.arange(64, dtype=np.uint8)
    device = np.zeros(64, dtype=np.uint8)
    copies = [(device.ctypes.data + 8 * i, 8 * i, 8) for i in range(3)]
    refusing = SimpleNamespace(_batch=BatchMemcpy(_fake_driver([], result=801)), _batch_worked=False, copy_calls=0)
    assert CudaTransfer._send_batch(refusing, copies, host.ctypes.data, 0) is False
    assert refusing._batch is None and refusing.copy_calls == 0
    assert CudaTransfer._send_batch(refusing, copies, host.ctypes.data, 0) is False
    working = SimpleNamespace(_batch=BatchMemcpy(_fake_driver([])), _batch_worked=False, copy_calls=0)
    assert CudaTransfer._send_batch(working, copies, host.ctypes.data, 0) is True
    assert working.copy_calls == 1 and np.array_equal(device[:24], host[:24])
    working._batch = BatchMemcpy(_fake_driver([], result=1))
    with pytest.raises(RuntimeError, match="CUDA driver error 1"):
        CudaTransfer._send_batch(working, copies, host.ctypes.data, 0)


def test_no_libcuda_means_no_batched_copies():
    """On a machine without libcuda (the CPU CI) there is no batched call, and nothing fails."""
    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError:
        assert batch_memcpy() is None
    else:  # pragma: no cover - a machine with a driver
        pytest.skip("libcuda present")


def test_a_chunk_of_many_copies_goes_in_batches_of_at_most_max_batch():
    """A chunk of thousands of tiny tensors (2,200-3,500 copies crashed the H200's driver in one call) is queued in
    calls of <= MAX_BATCH copies, every copy once."""
    from quickmoe.checkpoint.transfer import MAX_BATCH

    n = 3 * MAX_BATCH + 5
    host = np.random.default_rng(3).integers(0, 256, 4 * n, dtype=np.uint8)
    device = np.zeros(4 * n, dtype=np.uint8)
    copies = [(device.ctypes.data + 4 * i, 4 * i, 4) for i in range(n)]
    calls: list = []
    transfer = SimpleNamespace(_batch=BatchMemcpy(_fake_driver(calls)), _batch_worked=False, copy_calls=0)
    assert CudaTransfer._send_batch(transfer, copies, host.ctypes.data, 0) is True
    assert [c["count"] for c in calls] == [MAX_BATCH] * 3 + [5] and transfer.copy_calls == 4
    assert np.array_equal(device, host)
