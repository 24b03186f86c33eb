"""Random FP8 block-scaled and NVFP4 weights for synthetic checkpoints, and their dequantized twins.

A quantized weight is the quantization (formats.fp8 / formats.nvfp4) of exactly the bf16 weight the
unquantized checkpoint of the same seed holds under the same name (`random_weights.normal_bf16_values`).
Its scale tensors are cut from the same quantization: the generator's threads ask for a weight's parts
at the same time, so each quantization is computed once by the first thread that asks and shared with the
others (`_OnceCache`), for the few weights in flight. The dequantized twin writes the values those tensors
stand for in float32: transformers running the twin is an exact reference for quickmoe running the quantized files.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np
import torch

from quickmoe.checkpoint.random_weights import Fill, linear_weight_std, normal_bf16_values
from quickmoe.formats.fp8 import dequantize_fp8_block, quantize_fp8_block
from quickmoe.formats.nvfp4 import dequantize_nvfp4, quantize_nvfp4

__all__ = ["FP8_SCALE_DTYPE", "NVFP4_INPUT_SCALE", "quantized_fill"]

FP8_SCALE_DTYPE = torch.bfloat16  # Qwen's FP8 releases store weight_scale_inv in bf16
NVFP4_INPUT_SCALE = 2.0 ** -8  # ModelOpt's calibrated activation scale; quickmoe's weight-only path ignores it
PARTS = ("weight", "weight_scale_inv", "weight_scale", "weight_scale_2", "input_scale", "dequantized")


class _OnceCache:
    """The last `size` results by key, each computed once: a thread asking for a key another thread is computing
    waits for that result instead of computing it again (functools.lru_cache would compute it in both).
    `start` computes a key on the cache's own threads, ahead of the threads that will ask for it."""

    def __init__(self, size: int, threads: int = 1) -> None:
        self.size = size
        self.threads = threads
        self._lock = threading.Lock()
        self._results: OrderedDict[Hashable, Future] = OrderedDict()
        self._pool: ThreadPoolExecutor | None = None

    def _claim(self, key: Hashable) -> tuple[Future, bool]:
        """The key's future, and whether the caller must compute it (it was absent)."""
        with self._lock:
            result = self._results.get(key)
            owner = result is None
            if owner:
                result = self._results[key] = Future()
                while len(self._results) > self.size:
                    self._results.popitem(last=False)
            else:
                self._results.move_to_end(key)
            return result, owner

    def _compute(self, key: Hashable, result: Future, compute: Callable[[], dict[str, torch.Tensor]]) -> None:
        try:
            result.set_result(compute())
        except BaseException as exc:  # the waiting threads get it too; the key is computed again next time
            result.set_exception(exc)
            with self._lock:
                if self._results.get(key) is result:
                    del self._results[key]

    def get(self, key: Hashable, compute: Callable[[], dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
        result, owner = self._claim(key)
        if owner:
            self._compute(key, result, compute)
        return result.result()

    def start(self, key: Hashable, compute: Callable[[], dict[str, torch.Tensor]]) -> None:
        """Begin computing `key` on the cache's threads unless it is cached or under way; returns at once."""
        result, owner = self._claim(key)
        if owner:
            with self._lock:
                if self._pool is None:
                    self._pool = ThreadPoolExecutor(self.threads, thread_name_prefix="quickmoe-quantize")
            self._pool.submit(self._compute, key, result, compute)


# a weight's parts are asked for together, within the generator's look-ahead (at most 8 threads x 4 jobs)
_CACHE = _OnceCache(size=48, threads=min(8, os.cpu_count() or 1))


def _quantized(seed: int, name: str, shape: tuple[int, int], scheme: str,
               block: tuple[int, int]) -> dict[str, torch.Tensor]:
    """Weight `name` [out, in] of the unquantized checkpoint, quantized with `scheme`: its tensors by part."""
    return _CACHE.get((seed, name, shape, scheme, block), lambda: _quantize(seed, name, shape, scheme, block))


def _start_quantized(seed: int, name: str, shape: tuple[int, int], scheme: str, block: tuple[int, int]) -> None:
    """Begin `_quantized(...)` in the background (the generator queues the weight's first part)."""
    _CACHE.start((seed, name, shape, scheme, block), lambda: _quantize(seed, name, shape, scheme, block))


def _quantize(seed: int, name: str, shape: tuple[int, int], scheme: str,
              block: tuple[int, int]) -> dict[str, torch.Tensor]:
    w = normal_bf16_values(seed, name, shape, linear_weight_std(shape[1])).float()  # [out, in]
    if scheme == "fp8":
        q, scale = quantize_fp8_block(w, block, scale_dtype=FP8_SCALE_DTYPE)
        return {"weight": q, "weight_scale_inv": scale}
    packed, block_scale, scale_2 = quantize_nvfp4(w)
    return {"weight": packed, "weight_scale": block_scale, "weight_scale_2": scale_2,
            "input_scale": torch.tensor(NVFP4_INPUT_SCALE, dtype=torch.float32)}


def _dequantized(parts: dict[str, torch.Tensor], scheme: str, block: tuple[int, int]) -> torch.Tensor:
    """float32 [out, in]: the values the quantized tensors stand for."""
    if scheme == "fp8":
        return dequantize_fp8_block(parts["weight"], parts["weight_scale_inv"], block)
    return dequantize_nvfp4(parts["weight"], parts["weight_scale"], parts["weight_scale_2"])


def _bytes(t: torch.Tensor) -> np.ndarray:
    return t.contiguous().reshape(-1).view(torch.uint8).numpy()


def quantized_fill(weight_name: str, shape: tuple[int, int], scheme: str, part: str,
                   block: tuple[int, int] = (128, 128)) -> Fill:
    """The fill of `part` (one of PARTS) of the `scheme` ("fp8" or "nvfp4") quantization of linear weight
    `weight_name` [out, in] ("dequantized": the float32 values, for the twin)."""
    if scheme not in ("fp8", "nvfp4") or part not in PARTS:
        raise ValueError(f"quantized_fill: scheme {scheme!r}, part {part!r}: expected fp8 or nvfp4 and one of {PARTS}")

    def make(seed: int) -> np.ndarray:
        parts = _quantized(seed, weight_name, tuple(shape), scheme, tuple(block))
        return _bytes(_dequantized(parts, scheme, block) if part == "dequantized" else parts[part])

    def start(seed: int) -> None:
        _start_quantized(seed, weight_name, tuple(shape), scheme, tuple(block))

    return Fill("custom", make=make, start=start)
