"""FP8 (E4M3, `torch.float8_e4m3fn`) with block scales, as in the Qwen and DeepSeek FP8 checkpoints, and
per-token-group scales for activations.

Weights [..., N, K] are cut into blocks of `block = (bn, bk)` rows x columns (the last ones partial when N or
K is not a multiple); each block has one scale `scale_inv` (the checkpoint name: it is the multiplier that
*dequantizes*), stored [..., ceil(N/bn), ceil(K/bk)]:

    value[n, k] = float(q[n, k]) * scale_inv[n // bn, k // bk]

Quantization (the convention of those checkpoints): scale_inv = amax(|block|) / 448, rounded to the scale's
storage dtype first (bf16 for Qwen, float32 for DeepSeek; 1 for an all-zero block), then q = x / scale_inv
rounded to the nearest E4M3 value (ties to even), saturating at ±448.

Activations are quantized per token and per group of `group` consecutive channels, scale = max(amax, eps) /
448 in float32, for FP8 x FP8 GEMMs. Pure functions on torch tensors (CPU or CUDA), no model knowledge.
"""

from __future__ import annotations

import torch

__all__ = ["FP8_DTYPE", "FP8_E4M3_MAX", "block_scale_shape", "dequantize_fp8_block", "expand_block_scales",
           "quantize_fp8_block", "quantize_fp8_per_token_group"]

FP8_DTYPE = torch.float8_e4m3fn
FP8_E4M3_MAX = 448.0
ACTIVATION_EPS = 1e-10


def block_scale_shape(shape: tuple[int, ...], block: tuple[int, int]) -> tuple[int, ...]:
    """[..., N, K] -> [..., ceil(N/bn), ceil(K/bk)]: the shape of the block scales."""
    *lead, n, k = shape
    return (*lead, -(-n // block[0]), -(-k // block[1]))


def _cast_fp8(x: torch.Tensor) -> torch.Tensor:
    """float32 -> E4M3, nearest (ties to even), saturating at ±448 (torch's cast would make NaN beyond it)."""
    return x.clamp(-FP8_E4M3_MAX, FP8_E4M3_MAX).to(FP8_DTYPE)


def expand_block_scales(scale_inv: torch.Tensor, n: int, k: int, block: tuple[int, int]) -> torch.Tensor:
    """Block scales [..., ceil(N/bn), ceil(K/bk)] -> one per element [..., N, K] (float32)."""
    s = scale_inv.float().repeat_interleave(block[0], dim=-2).repeat_interleave(block[1], dim=-1)
    return s[..., :n, :k]


def quantize_fp8_block(w: torch.Tensor, block: tuple[int, int] = (128, 128),
                       scale_dtype: torch.dtype = torch.float32) -> tuple[torch.Tensor, torch.Tensor]:
    """w [..., N, K] (floating point) -> (q float8_e4m3fn [..., N, K], scale_inv `scale_dtype`
    [..., ceil(N/bn), ceil(K/bk)]); see the module docstring. NaN is not allowed."""
    if w.dim() < 2 or not w.dtype.is_floating_point:
        raise ValueError(f"quantize_fp8_block needs a floating-point [..., N, K] tensor, got {w.dtype} "
                         f"{tuple(w.shape)}")
    *lead, n, k = w.shape
    bn, bk = block
    rows, cols = -(-n // bn), -(-k // bk)
    x = w.float()
    padded = torch.zeros(*lead, rows * bn, cols * bk, dtype=torch.float32, device=w.device)
    padded[..., :n, :k] = x
    blocks = padded.unflatten(-1, (cols, bk)).unflatten(-3, (rows, bn))  # [..., R, bn, C, bk]
    amax = blocks.abs().amax(dim=(-3, -1))  # [..., R, C]
    scale = torch.where(amax > 0, amax / FP8_E4M3_MAX, 1.0).to(scale_dtype)  # rounded to its storage dtype
    q = _cast_fp8(x / expand_block_scales(scale, n, k, block))
    return q, scale


def dequantize_fp8_block(q: torch.Tensor, scale_inv: torch.Tensor, block: tuple[int, int] = (128, 128),
                         dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """q float8_e4m3fn [..., N, K] and scale_inv [..., ceil(N/bn), ceil(K/bk)] -> [..., N, K] in `dtype`
    (computed in float32: exact there, one rounding into a narrower dtype)."""
    if q.dtype != FP8_DTYPE:
        raise ValueError(f"dequantize_fp8_block needs float8_e4m3fn values, got {q.dtype}")
    n, k = q.shape[-2:]
    if tuple(scale_inv.shape) != block_scale_shape(tuple(q.shape), block):
        raise ValueError(f"FP8 weight {tuple(q.shape)} with blocks {block} needs scale_inv "
                         f"{list(block_scale_shape(tuple(q.shape), block))}, got {list(scale_inv.shape)}")
    return (q.float() * expand_block_scales(scale_inv, n, k, block)).to(dtype)


def quantize_fp8_per_token_group(x: torch.Tensor, group: int = 128) -> tuple[torch.Tensor, torch.Tensor]:
    """Activations [T, K] -> (q float8_e4m3fn [T, K], scales float32 [T, ceil(K/group)]): each token's
    channels in groups of `group`, scale = max(amax, 1e-10) / 448, q = x / scale rounded (saturating)."""
    t, k = x.shape
    groups = -(-k // group)
    padded = torch.zeros(t, groups * group, dtype=torch.float32, device=x.device)
    padded[:, :k] = x.float()
    amax = padded.view(t, groups, group).abs().amax(dim=-1)  # [T, G]
    # the quotient in float64, then rounded to float32: the correctly rounded float32 quotient (53 >= 2 x 24 + 2
    # bits: that double rounding is innocuous) on every device; a float32 tensor / scalar on CUDA multiplies by the
    # reciprocal, one unit off in the last place at times (docs/benchmarks.md, 2026-11-29 ninth session)
    scales = (amax.clamp(min=ACTIVATION_EPS).double() / FP8_E4M3_MAX).float()
    q = _cast_fp8(x.float() / scales.repeat_interleave(group, dim=1)[:, :k])
    return q, scales
