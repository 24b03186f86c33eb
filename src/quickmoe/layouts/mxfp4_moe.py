"""The kernel layout of MXFP4 MoE experts, and the conversion to it from the gpt-oss checkpoint layout.

This module is the single definition of the layout: `Mxfp4MoEMethod.process_weights_after_loading`
converts to it, `kernels.fused_moe.fused_moe_ref` (and the Triton grouped GEMM that shares its
signature) reads it through `split_gate_up` / `dequantize_expert`.

Checkpoint layout (per expert, out x in; N output rows, K input columns, G = K/32 blocks per row):
    blocks uint8 [E, N, G, 16]   byte j of a block: element 2j low nibble, 2j+1 high nibble
    scales uint8 [E, N, G]       E8M0, one per 32 elements
    bias         [E, N]
    gate_up: N = 2I, rows interleaved, row 2c = gate column c, row 2c+1 = up column c (bias likewise).
    down:    N = H, K = I.

Kernel layout (`Mxfp4MoELayout(gate_up_group=g)`):
    blocks uint8 [E, N, K/2]     K-contiguous packed codes, each 4-byte word (columns 8g .. 8g+7) in the
                                 mma-pair bit order of `formats.mxfp4_mma_pairs` (the GPU decodes a word
                                 into the tensor cores' bf16x2 column pairs with a shift and a mask each).
                                 A row is G*16 bytes, so a BLOCK_K = 32m tile of a row is one aligned
                                 16m-byte load. Scale bytes must be at most MAX_SCALE (192: 2^65), which
                                 the decode needs (see `kernels.moe_gemm`).
    scales uint8 [E, G, N]       transposed: scales[e, b, r] is the scale of row r, block b. A tile of
                                 BLOCK_N rows x BLOCK_K columns reads BLOCK_K/32 contiguous runs of
                                 BLOCK_N bytes (coalesced), instead of BLOCK_N strided runs of
                                 BLOCK_K/32 bytes.
    bias         [E, N]
    gate_up rows (blocks, scales' N axis and bias, all in the same order) are de-interleaved in
    groups of g intermediate columns: group j = [j*g, j*g + s_j), s_j = min(g, I - j*g), occupies
    kernel rows [2*j*g, 2*j*g + 2*s_j): first the s_j gate rows of its columns, then their s_j up
    rows. Kernel row r, with j = r // (2g), w = r - 2*j*g:
        w <  s_j: gate of column j*g + w       -> checkpoint row 2*(j*g + w)
        w >= s_j: up of column j*g + w - s_j   -> checkpoint row 2*(j*g + w - s_j) + 1
    g = 1 is exactly the checkpoint interleave. Only the last group can be partial (I % g != 0), so
    no padding is needed and the kernel masks the ragged tile (s_j is a scalar it computes).
    Checkpoints with separate gate and up tensors per expert (Qwen3-MoE, Mixtral) are stacked at load
    *concatenated*: rows [0, I) gate, [I, 2I) up, which is the grouped layout with g = I; the same
    formula maps them to any g with `concatenated=True` (gate of column c -> source row c, up -> I + c).
    down is not permuted (its K axis is the SwiGLU output, in natural column order).

Why: a grouped-GEMM tile that produces SwiGLU outputs [j*g, j*g + g) loads one contiguous slab of
2*g weight rows (g gate rows, then g up rows) and computes gate and up as two dots of the same A
tile, with no strided even/odd split and no cross-lane shuffle in the epilogue; a tile of BLOCK_N = m*g
outputs reads m slabs. The default g = 64 divides gpt-oss's I = 2880 (128 does not), so every
group of the real models is full; it is a layout parameter, part of every cache key.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

import torch

from quickmoe.formats.mxfp4 import BYTES_PER_BLOCK, dequantize_mxfp4
from quickmoe.formats.mxfp4_mma_pairs import decode_mma_pairs, encode_mma_pairs
from quickmoe.layouts.permutation_cache import LayoutParams, PermutationCache, Transform

logger = logging.getLogger(__name__)

DEFAULT_GATE_UP_GROUP = 64
MAX_SCALE = 192  # the largest E8M0 scale byte the kernels' mma-pair decode takes: 2^65 (weights up to 6 x 2^65)


@dataclass(frozen=True)
class Mxfp4MoELayout:
    """The kernel layout's parameters (see the module docstring for the layout itself)."""

    gate_up_group: int = DEFAULT_GATE_UP_GROUP  # g: intermediate columns per gate/up group (BLOCK_N)

    def __post_init__(self) -> None:
        if self.gate_up_group < 1:
            raise ValueError(f"gate_up_group must be >= 1, got {self.gate_up_group}")

    @property
    def params(self) -> LayoutParams:
        return (("gate_up_group", self.gate_up_group),)


def gate_up_row_order(intermediate: int, group: int, concatenated: bool = False) -> torch.Tensor:
    """int64 [2I]: the source row of each kernel row of gate_up (the formula of the module doc), from the
    interleaved checkpoint rows, or from concatenated gate-then-up rows."""
    r = torch.arange(2 * intermediate, dtype=torch.int64)  # kernel rows
    j = r // (2 * group)  # group of each row
    w = r - 2 * group * j  # offset inside the group's slab
    size = torch.clamp(intermediate - j * group, max=group)  # s_j
    is_up = (w >= size).to(torch.int64)
    column = j * group + w - is_up * size
    return is_up * intermediate + column if concatenated else 2 * column + is_up


def gate_up_rows_transform(intermediate: int, row: int, layout: Mxfp4MoELayout, *,
                           concatenated: bool = False) -> Transform:
    """gate_up rows of `row` contiguous elements (K/2 bytes of blocks, or 1 bias value) -> kernel order."""
    return Transform("gate_up_rows_concat" if concatenated else "gate_up_rows", 2 * intermediate, row, layout.params,
                     lambda: gate_up_row_order(intermediate, layout.gate_up_group, concatenated))


def scales_transform(n: int, groups: int, layout: Mxfp4MoELayout, *, gate_up: bool,
                     concatenated: bool = False) -> Transform:
    """scales [N, G] -> [G, N], the N axis in gate_up kernel order when `gate_up`: one index per scale,
    dst[b * N + r] = src[order[r] * G + b]."""

    def build() -> torch.Tensor:
        order = (gate_up_row_order(n // 2, layout.gate_up_group, concatenated) if gate_up
                 else torch.arange(n, dtype=torch.int64))
        return (order[None, :] * groups + torch.arange(groups, dtype=torch.int64)[:, None]).reshape(-1)  # [G*N]

    if gate_up:
        name = "scales_t_gate_up_rows_concat" if concatenated else "scales_t_gate_up_rows"
        return Transform(name, n * groups, 1, layout.params, build)
    return Transform("scales_t", n * groups, 1, (), build)


def convert_experts_(blocks: torch.Tensor, scales: torch.Tensor, bias: torch.Tensor, *, gate_up: bool,
                     layout: Mxfp4MoELayout, cache: PermutationCache,
                     encode_: Callable[[torch.Tensor], torch.Tensor] | None = None
                     ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Checkpoint layout -> kernel layout, in place (the storage is reused, never duplicated). `encode_`: the
    in-place mma-pair encode of the blocks (default: torch's, `formats.mxfp4_mma_pairs`).

    blocks [E, N, G, 16], scales [E, N, G], bias [E, N] -> views of the same storages:
    blocks [E, N, K/2], scales [E, G, N], bias [E, N].
    """
    experts, n, groups, nbytes = blocks.shape
    if nbytes != BYTES_PER_BLOCK or scales.shape != (experts, n, groups) or bias.shape != (experts, n):
        raise ValueError(f"MXFP4 experts do not match: blocks {tuple(blocks.shape)}, scales {tuple(scales.shape)}, "
                         f"bias {tuple(bias.shape)}; expected [E, N, G, 16], [E, N, G], [E, N]")
    if gate_up and n % 2:
        raise ValueError(f"gate_up needs an even number of rows, got N={n}")
    row_bytes = groups * BYTES_PER_BLOCK
    if gate_up:
        cache.permute_experts_(blocks, gate_up_rows_transform(n // 2, row_bytes, layout))  # [E, N, K/2]
        cache.permute_experts_(bias, gate_up_rows_transform(n // 2, 1, layout))  # [E, N]
    largest = int(scales.max()) if scales.numel() else 0
    if largest > MAX_SCALE:
        raise ValueError(f"MXFP4 {'gate_up' if gate_up else 'down'} experts: a scale byte of {largest} "
                         f"(2^{largest - 127}); the MoE kernels take scales up to {MAX_SCALE} (2^{MAX_SCALE - 127}), "
                         "far beyond any trained weight: is the checkpoint corrupt?")
    cache.permute_experts_(scales, scales_transform(n, groups, layout, gate_up=gate_up))  # [E, G*N]
    (encode_ if encode_ is not None else encode_mma_pairs_ref_)(blocks)  # [E, N, G, 16] in place
    return blocks.view(experts, n, row_bytes), scales.view(experts, groups, n), bias


def encode_mma_pairs_ref_(blocks: torch.Tensor) -> torch.Tensor:
    """The codes of every word into mma-pair order, in place, with torch (the layers pass the Triton kernel,
    `kernels.mxfp4_mma_pairs.encode_mma_pairs_`, on a GPU)."""
    return blocks.copy_(encode_mma_pairs(blocks))


def split_gate_up(gate_up: torch.Tensor, group: int) -> tuple[torch.Tensor, torch.Tensor]:
    """[..., 2I] in kernel row order (group g; g = 1 is the checkpoint interleave) -> gate, up [..., I],
    both in natural column order."""
    two_i = gate_up.shape[-1]
    intermediate = two_i // 2
    full = intermediate // group  # groups of g columns; then one partial group of r columns
    r = intermediate - full * group
    head = gate_up[..., : 2 * full * group].unflatten(-1, (full, 2, group))  # [..., F, 2, g]
    tail = gate_up[..., 2 * full * group:]  # [..., 2r]
    gate = torch.cat((head[..., 0, :].flatten(-2), tail[..., :r]), dim=-1)  # [..., I]
    up = torch.cat((head[..., 1, :].flatten(-2), tail[..., r:]), dim=-1)  # [..., I]
    return gate, up


def dequantize_expert(blocks: torch.Tensor, scales: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """One expert in kernel layout, blocks [N, K/2] and scales [G, N] -> [N, K] in `dtype` (rows in the
    kernel order of the layout)."""
    n, half_k = blocks.shape
    groups = half_k // BYTES_PER_BLOCK
    if scales.shape != (groups, n):
        raise ValueError(f"kernel-layout MXFP4 expert: blocks {tuple(blocks.shape)} need scales [{groups}, {n}], "
                         f"got {tuple(scales.shape)}")
    codes = decode_mma_pairs(blocks).view(n, groups, BYTES_PER_BLOCK)  # checkpoint nibble order
    return dequantize_mxfp4(codes, scales.t(), dtype=dtype)  # [N, G*32]


__all__ = ["DEFAULT_GATE_UP_GROUP", "MAX_SCALE", "Mxfp4MoELayout", "convert_experts_", "dequantize_expert",
           "encode_mma_pairs_ref_",
           "gate_up_row_order", "gate_up_rows_transform", "scales_transform", "split_gate_up"]
