"""Kernel layouts of FP8 block-scaled and NVFP4 MoE experts, and the conversions to them from experts
stacked at load (per-expert checkpoint tensors, gate then up rows: `layouts.mxfp4_moe`'s concatenated order).

Both follow the MXFP4 kernel layout (`layouts.mxfp4_moe`): weights out x in [E, N, K] (FP8 bytes) or
[E, N, K/2] (NVFP4 packed nibbles, each 4-byte word's codes in MXFP4's mma-pair order,
`formats.mxfp4_mma_pairs`: the GPU decodes a word into bf16 pairs by shifts and masks), gate_up rows in the groups of
`Mxfp4MoELayout.gate_up_group`, scales transposed so that a tile's scales are contiguous along N:

FP8 (checkpoint: weight_scale_inv [E, N/bn, K/bk], one per bn x bk block)
    scales float32 [E, K/bk, N/R]  one per (R kernel rows, block of bk columns): the rows' block scale. R is
                                   the largest power of two <= bn whose aligned groups of kernel rows each lie
                                   in one checkpoint block (the gate/up groups permute rows; R = 1 if nothing
                                   else fits), so a kernel tile of BLOCK_N <= R aligned rows takes one scale
                                   per 128 columns, and any tile reads a [BLOCK_K/bk, BLOCK_N/R] slab.
NVFP4 (checkpoint: weight_scale [E, N, K/16] E4M3, weight_scale_2 per expert and projection)
    scales float8_e4m3fn [E, K/16, N]   transposed, same bytes
    row_scale float32 [E, N]            the global scale folded per row (gate rows take gate's
                                        weight_scale_2, up rows up's): applied once per output, after the
                                        K loop, since it is constant along K.
Every gather uses indices from the PermutationCache: one per (transform, shape, parameters), one batched
gather per chunk of experts.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import torch

from quickmoe.formats.fp8 import FP8_DTYPE
from quickmoe.formats.mxfp4_mma_pairs import decode_mma_pairs
from quickmoe.formats.nvfp4 import NVFP4_BLOCK_SIZE, dequantize_nvfp4
from quickmoe.layouts.mxfp4_moe import (Mxfp4MoELayout, encode_mma_pairs_ref_, gate_up_row_order,
                                        gate_up_rows_transform, scales_transform)
from quickmoe.layouts.permutation_cache import PermutationCache, Transform

__all__ = ["convert_fp8_experts", "convert_nvfp4_experts_", "dequantize_fp8_expert", "dequantize_nvfp4_expert",
           "fp8_scale_rows"]


def _source_rows(n: int, layout: Mxfp4MoELayout, gate_up: bool) -> torch.Tensor:
    """int64 [N]: the stacked (checkpoint) row of each kernel row."""
    return gate_up_row_order(n // 2, layout.gate_up_group, concatenated=True) if gate_up else torch.arange(n)


@functools.lru_cache(maxsize=64)
def fp8_scale_rows(n: int, bn: int, layout: Mxfp4MoELayout, gate_up: bool) -> int:
    """R of the FP8 kernel layout: the largest power of two <= min(bn, 128) dividing N whose aligned groups of R
    kernel rows each come from one checkpoint block of bn rows."""
    block_row = _source_rows(n, layout, gate_up) // bn  # [N]
    rows = 1
    while rows * 2 <= min(bn, 128) and n % (rows * 2) == 0:
        groups = block_row.view(n // (rows * 2), rows * 2)
        if not torch.equal(groups, groups[:, :1].expand_as(groups)):
            break
        rows *= 2
    return rows


def _fp8_scales_transform(n: int, k_blocks: int, src_rows: int, bn: int, rows: int, layout: Mxfp4MoELayout,
                          gate_up: bool) -> Transform:
    """block scales [N/bn, K/bk] -> scales [K/bk, N/R] in kernel row order (R = rows, `fp8_scale_rows`):
    dst[b * N/R + j] = src[(source_row(j R) // bn) * (K/bk) + b]."""

    def build() -> torch.Tensor:
        block_row = _source_rows(n, layout, gate_up)[::rows] // bn  # [N/R]
        return (block_row[None, :] * k_blocks + torch.arange(k_blocks)[:, None]).reshape(-1)  # [K/bk * N/R]

    params = (*(layout.params if gate_up else ()), ("block_rows", bn), ("source_rows", src_rows),
              ("scale_rows", rows))
    return Transform("fp8_scales_t" + ("_gate_up_rows_concat" if gate_up else ""), n // rows * k_blocks, 1, params,
                     build)


def convert_fp8_experts(weight: torch.Tensor, scale_inv: torch.Tensor, *, gate_up: bool, block: tuple[int, int],
                        layout: Mxfp4MoELayout, cache: PermutationCache) -> torch.Tensor:
    """weight float8_e4m3fn [E, N, K] (stacked rows) is permuted in place into kernel row order; returns the
    kernel-layout scales float32 [E, K/bk, N/R] built from scale_inv [E, ceil(N/bn), K/bk] (any float dtype),
    R = `fp8_scale_rows`. K must be a multiple of bk (whole column blocks)."""
    experts, n, k = weight.shape
    bn, bk = block
    if weight.dtype != FP8_DTYPE or k % bk or scale_inv.shape != (experts, -(-n // bn), k // bk):
        raise ValueError(f"FP8 experts do not match: weight {weight.dtype} {tuple(weight.shape)}, scale_inv "
                         f"{tuple(scale_inv.shape)}; expected [E, N, K] float8_e4m3fn with K a multiple of {bk} "
                         f"and [E, ceil(N/{bn}), K/{bk}]")
    if gate_up:
        cache.permute_experts_(weight, gate_up_rows_transform(n // 2, k, layout, concatenated=True))  # [E, N, K]
    rows = fp8_scale_rows(n, bn, layout, gate_up)
    out = torch.empty(experts, k // bk, n // rows, dtype=torch.float32, device=weight.device)  # [E, K/bk, N/R]
    transform = _fp8_scales_transform(n, k // bk, scale_inv.shape[1], bn, rows, layout, gate_up)
    return cache.gather_experts(scale_inv.float().contiguous(), transform, out)


def dequantize_fp8_expert(weight: torch.Tensor, scales: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """One expert in kernel layout, weight [N, K] float8_e4m3fn and scales [K/bk, N/R] -> [N, K] in `dtype`."""
    n, k = weight.shape
    bk, rows = k // scales.shape[0], n // scales.shape[1]
    return (weight.float() * scales.t().repeat_interleave(rows, dim=0).repeat_interleave(bk, dim=1)).to(dtype)


def _row_scale_transform(n: int, shards: int, layout: Mxfp4MoELayout, gate_up: bool) -> Transform:
    """global scales [shards] (gate, up; or one) -> one per kernel row [N]: the shard of its source row."""

    def build() -> torch.Tensor:
        return _source_rows(n, layout, gate_up) // (n // shards)  # [N] in [0, shards)

    params = (*(layout.params if gate_up else ()), ("shards", shards))
    return Transform("nvfp4_row_scale" + ("_gate_up_rows_concat" if gate_up else ""), n, 1, params, build)


def convert_nvfp4_experts_(weight: torch.Tensor, weight_scale: torch.Tensor, weight_scale_2: torch.Tensor, *,
                           gate_up: bool, layout: Mxfp4MoELayout, cache: PermutationCache,
                           encode_: Callable[[torch.Tensor], torch.Tensor] | None = None
                           ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """weight uint8 [E, N, K/2] and weight_scale float8_e4m3fn [E, N, K/16] (stacked rows), weight_scale_2
    float32 [E, shards] (2: gate, up) -> (weight [E, N, K/2] in mma-pair order and scales [E, K/16, N], both in
    place, and row_scale float32 [E, N], new). `encode_`: the in-place mma-pair encode of the weight (default:
    torch's; the layers pass the Triton pass, `kernels.mxfp4_mma_pairs.encode_mma_pairs_`, on a GPU)."""
    experts, n, half_k = weight.shape
    groups = 2 * half_k // NVFP4_BLOCK_SIZE
    if (weight.dtype != torch.uint8 or weight_scale.dtype != FP8_DTYPE or weight_scale.shape != (experts, n, groups)
            or weight_scale_2.dim() != 2 or weight_scale_2.shape[0] != experts or n % weight_scale_2.shape[1]):
        raise ValueError(f"NVFP4 experts do not match: weight {weight.dtype} {tuple(weight.shape)}, weight_scale "
                         f"{weight_scale.dtype} {tuple(weight_scale.shape)}, weight_scale_2 "
                         f"{tuple(weight_scale_2.shape)}; "
                         f"expected uint8 [E, N, K/2], float8_e4m3fn [E, N, K/16], float32 [E, shards]")
    if half_k % 4:
        raise ValueError(f"NVFP4 experts: K = {2 * half_k} columns; the kernel layout needs a multiple of 8 (whole "
                         "4-byte words)")
    if gate_up:
        cache.permute_experts_(weight, gate_up_rows_transform(n // 2, half_k, layout, concatenated=True))
    (encode_ if encode_ is not None else encode_mma_pairs_ref_)(weight)  # [E, N, K/2] in place
    scales = weight_scale.view(torch.uint8)  # the permutation moves bytes
    cache.permute_experts_(scales, scales_transform(n, groups, layout, gate_up=gate_up, concatenated=True))
    row_scale = torch.empty(experts, n, dtype=torch.float32, device=weight.device)
    cache.gather_experts(weight_scale_2.float().contiguous(),
                         _row_scale_transform(n, weight_scale_2.shape[1], layout, gate_up), row_scale)
    return weight, weight_scale.view(experts, groups, n), row_scale


def dequantize_nvfp4_expert(weight: torch.Tensor, scales: torch.Tensor, row_scale: torch.Tensor,
                            dtype: torch.dtype) -> torch.Tensor:
    """One expert in kernel layout, weight [N, K/2] (mma-pair order), scales [K/16, N] E4M3, row_scale [N] -> [N, K]
    in `dtype`."""
    return dequantize_nvfp4(decode_mma_pairs(weight), scales.t(), row_scale[:, None], dtype)
