"""Random FP8 block-scaled and NVFP4 weights for synthetic checkpoints, and their dequantized twins.

A quantized weight is the quantization (formats.fp8 / formats.nvfp4) of exactly the bf16 weight the
unquantized checkpoint of the same seed holds under the same name (`random_weights.normal_bf16_values`).
Its scale tensors are cut from the same quantization (cached for the few tensors in flight, so a weight
and its scales are quantized once). The dequantized twin writes the values those tensors stand for in
float32: transformers running the twin is an exact reference for quickmoe running the quantized files.
"""

from __future__ import annotations

import functools

import numpy as np
import torch

from quickmoe.checkpoint.random_weights import Fill, linear_weight_std, normal_bf16_values
from quickmoe.formats.fp8 import dequantize_fp8_block, quantize_fp8_block
from quickmoe.formats.nvfp4 import dequantize_nvfp4, quantize_nvfp4

__all__ = ["FP8_SCALE_DTYPE", "NVFP4_INPUT_SCALE", "quantized_fill"]

FP8_SCALE_DTYPE = torch.bfloat16  # Qwen's FP8 releases store weight_scale_inv in bf16
NVFP4_INPUT_SCALE = 2.0 ** -8  # ModelOpt's calibrated activation scale; quickmoe's weight-only path ignores it
PARTS = ("weight", "weight_scale_inv", "weight_scale", "weight_scale_2", "input_scale", "dequantized")


@functools.lru_cache(maxsize=8)  # a weight and its scales are generated close together
def _quantized(seed: int, name: str, shape: tuple[int, int], scheme: str,
               block: tuple[int, int]) -> dict[str, torch.Tensor]:
    """Weight `name` [out, in] of the unquantized checkpoint, quantized with `scheme`: its tensors by part."""
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
