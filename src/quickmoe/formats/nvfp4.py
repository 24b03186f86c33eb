"""NVFP4 (NVIDIA ModelOpt): 4-bit E2M1 values with one FP8 (E4M3) scale per 16 elements and one float32
scale per tensor.

Layout, as stored in ModelOpt checkpoints (a weight [..., N, K], out x in):

- `weight` uint8 [..., N, K/2]: element 2j is the LOW nibble of byte j, element 2j+1 the high nibble
  (the same packing as MXFP4); code -> value by the E2M1 table of formats.mxfp4.
- `weight_scale` float8_e4m3fn [..., N, K/16]: the block scales.
- `weight_scale_2` float32 []: the per-tensor scale.
- value[n, k] = E2M1[code] * float(weight_scale[n, k // 16]) * weight_scale_2 (in float32: the first
  product is exact, the second rounds once).

Quantization (ModelOpt's convention): weight_scale_2 = amax(|w|) / (6 * 448) (1 for an all-zero tensor);
each block's scale amax(|block|) / (6 * weight_scale_2) rounded to E4M3 (nearest, ties to even, at most 448);
each element w / (block scale * weight_scale_2) rounded to the nearest E2M1 value (ties to the even code,
saturating at ±6); a block whose scale rounds to zero is all zero codes.
"""

from __future__ import annotations

import torch

from quickmoe.formats.fp8 import FP8_DTYPE, FP8_E4M3_MAX
from quickmoe.formats.mxfp4 import E2M1_LUT, E2M1_MAX, pack_fp4, round_to_e2m1, unpack_fp4

__all__ = ["NVFP4_BLOCK_SIZE", "dequantize_nvfp4", "quantize_nvfp4"]

NVFP4_BLOCK_SIZE = 16


def _check_k(k: int) -> None:
    if k % NVFP4_BLOCK_SIZE:
        raise ValueError(f"NVFP4 needs the last dimension K={k} to be a multiple of {NVFP4_BLOCK_SIZE}")


def quantize_nvfp4(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """w [..., N, K] -> (weight uint8 [..., N, K/2], weight_scale float8_e4m3fn [..., N, K/16],
    weight_scale_2 float32 []); see the module docstring. NaN is not allowed."""
    if not w.dtype.is_floating_point or w.dim() < 1:
        raise ValueError(f"quantize_nvfp4 needs a floating-point tensor, got {w.dtype} {tuple(w.shape)}")
    _check_k(w.shape[-1])
    x = w.float()
    amax = x.abs().amax()
    scale_2 = torch.where(amax > 0, amax / (E2M1_MAX * FP8_E4M3_MAX), 1.0).to(torch.float32)
    blocks = x.unflatten(-1, (-1, NVFP4_BLOCK_SIZE))  # [..., K/16, 16]
    block_amax = blocks.abs().amax(dim=-1)  # [..., K/16]
    block_scale = (block_amax / (E2M1_MAX * scale_2)).clamp(max=FP8_E4M3_MAX).to(FP8_DTYPE)
    divisor = block_scale.float() * scale_2  # [..., K/16]
    scaled = torch.where(divisor[..., None] > 0, blocks / divisor[..., None], 0.0)  # [..., K/16, 16]
    codes = round_to_e2m1(scaled.flatten(-2))  # [..., K]
    return pack_fp4(codes), block_scale, scale_2


def dequantize_nvfp4(weight: torch.Tensor, weight_scale: torch.Tensor, weight_scale_2: torch.Tensor,
                     dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """(weight uint8 [..., N, K/2], weight_scale float8_e4m3fn [..., N, K/16], weight_scale_2 float32
    broadcastable to [..., N, 1]) -> [..., N, K] in `dtype`."""
    if weight.dtype != torch.uint8 or weight_scale.dtype != FP8_DTYPE:
        raise ValueError(f"NVFP4 needs uint8 weight and float8_e4m3fn weight_scale, got {weight.dtype} and "
                         f"{weight_scale.dtype}")
    k = weight.shape[-1] * 2
    _check_k(k)
    if tuple(weight_scale.shape) != (*weight.shape[:-1], k // NVFP4_BLOCK_SIZE):
        raise ValueError(f"NVFP4 weight {tuple(weight.shape)} needs weight_scale "
                         f"{[*weight.shape[:-1], k // NVFP4_BLOCK_SIZE]}, got {list(weight_scale.shape)}")
    lut = torch.tensor(E2M1_LUT, dtype=torch.float32, device=weight.device)
    values = lut[unpack_fp4(weight).long()].unflatten(-1, (-1, NVFP4_BLOCK_SIZE))  # [..., K/16, 16]
    scaled = values * weight_scale.float()[..., None]  # exact: 2-bit x 4-bit significands
    return (scaled.flatten(-2) * weight_scale_2.float()).to(dtype)
