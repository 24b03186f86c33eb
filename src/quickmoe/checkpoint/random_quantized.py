"""Random FP8 block-scaled and NVFP4 weights for synthetic checkpoints, and their dequantized twins.

A quantized weight is the quantization (formats.fp8 / formats.nvfp4) of exactly the bf16 weight the
unquantized checkpoint of the same seed holds under the same name (`random_weights.normal_bf16_values`).
Its scale tensors are cut from the same quantization: the generator's threads ask for a weight's parts
at the same time, so each quantization is computed once by the first thread that asks and shared with the
others (`_OnceCache`), for the few weights in flight. The dequantized twin writes the values those tensors
stand for in float32: transformers running the twin is an exact reference for quickmoe running the quantized files.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from concurrent.futures import Future

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
    waits for that result instead of computing it again (functools.lru_cache would compute it in both)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._lock = threading.Lock()
        self._results: OrderedDict[Hashable, Future] = OrderedDict()

    def get(self, key: Hashable, compute: Callable[[], dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
        with self._lock:
            result = self._results.get(key)
            owner = result is None
            if owner:
                result = self._results[key] = Future()
                while len(self._results) > self.size:
                    self._results.popitem(last=False)
            else:
                self._results.move_to_end(key)
        if owner:
            try:
                result.set_result(compute())
            except BaseException as exc:  # the waiting threads get it too; the key is computed again next time
                result.set_exception(exc)
                with self._lock:
                    if self._results.get(key) is result:
                        del self._results[key]
        return result.result()


_CACHE = _OnceCache(size=32)  # a weight's parts are asked for together, by at most a few generator threads


def _quantized(seed: int, name: str, shape: tuple[int, int], scheme: str,
               block: tuple[int, int]) -> dict[str, torch.Tensor]:
    """Weight `name` [out, in] of the unquantized checkpoint, quantized with `scheme`: its tensors by part."""
    return _CACHE.get((seed, name, shape, scheme, block), lambda: _quantize(seed, name, shape, scheme, block))


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

    return Fill("custom", make=make)
