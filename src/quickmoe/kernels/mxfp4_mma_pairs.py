"""MXFP4 codes into the mma-pair nibble order (`formats.mxfp4_mma_pairs`), in place, in one pass over the words:
the GPU version of `encode_mma_pairs` (same bits; tests/kernels/test_mxfp4_mma_pairs.py), which at load time
would take ~10 passes of int64 gathers over gpt-oss-20b's 12 GB of expert blocks."""

from __future__ import annotations

import torch

from quickmoe.formats.mxfp4_mma_pairs import MOVES, encode_mma_pairs

try:
    import triton
    import triton.language as tl
except ImportError:  # pragma: no cover
    triton = None

__all__ = ["encode_mma_pairs_", "encode_mma_pairs_ref_"]

_BLOCK = 4096  # words per program


def encode_mma_pairs_ref_(blocks: torch.Tensor) -> torch.Tensor:
    """The torch reference: `blocks` (uint8 [..., 4m]) re-encoded in place; returns it."""
    blocks.copy_(encode_mma_pairs(blocks))
    return blocks


def encode_mma_pairs_(blocks: torch.Tensor) -> torch.Tensor:
    """`blocks` (uint8 [..., 4m], contiguous) re-encoded in place by the Triton kernel; returns it."""
    if triton is None:
        raise RuntimeError("encode_mma_pairs_ needs triton; encode_mma_pairs_ref_ is the torch version")
    if (blocks.dtype != torch.uint8 or not blocks.is_contiguous() or blocks.numel() % 4
            or blocks.data_ptr() % 4):
        raise ValueError(f"encode_mma_pairs_: expected contiguous, 4-byte aligned uint8 words, got {blocks.dtype} "
                         f"{tuple(blocks.shape)}")
    words = blocks.view(-1).view(torch.int32)
    if words.numel():
        _encode_kernel[(triton.cdiv(words.numel(), _BLOCK),)](words, words.numel(), BLOCK=_BLOCK)
    return blocks


if triton is not None:
    assert MOVES == ((0x00000007, 6), (0x00000008, 12), (0x00000070, 18), (0x00000080, 24),
                     (0x00000700, -5), (0x00000800, 1), (0x00007000, 7), (0x00008000, 13),
                     (0x00070000, -16), (0x00080000, -10), (0x00700000, -4), (0x00800000, 2),
                     (0x01000000, -13), (0x06000000, -12), (0x08000000, -17),
                     (0x10000000, -1), (0x60000000, 0), (0x80000000, -5)), "the kernel spells out MOVES"

    @triton.jit
    def _encode_kernel(words_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
        ok = offs < n
        w = tl.load(words_ptr + offs, mask=ok).to(tl.uint32, bitcast=True)  # [BLOCK]
        out = ((w & 0x7) << 6) | ((w & 0x8) << 12) | ((w & 0x70) << 18) | ((w & 0x80) << 24)
        out |= ((w & 0x700) >> 5) | ((w & 0x800) << 1) | ((w & 0x7000) << 7) | ((w & 0x8000) << 13)
        out |= ((w & 0x70000) >> 16) | ((w & 0x80000) >> 10) | ((w & 0x700000) >> 4) | ((w & 0x800000) << 2)
        out |= ((w & 0x1000000) >> 13) | ((w & 0x6000000) >> 12) | ((w & 0x8000000) >> 17)
        out |= ((w & 0x10000000) >> 1) | (w & 0x60000000) | ((w & 0x80000000) >> 5)
        tl.store(words_ptr + offs, out.to(tl.int32, bitcast=True), mask=ok)
