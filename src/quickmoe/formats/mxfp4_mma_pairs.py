"""The mma-pair nibble order of MXFP4 codes: how the kernel layout places the 8 codes of each 4-byte word.

The checkpoint packs element 2j in the low nibble of byte j and 2j+1 in its high nibble, so a little-endian
32-bit word w of a row holds the codes of columns 8g .. 8g+7 at bits 4i .. 4i+3 (i = column - 8g; per code:
mantissa m at bit 0, exponent e0 e1 at bits 1, 2, sign s at bit 3).

The GPU decodes a word into four bf16x2 registers, one per pair of adjacent columns (8g+2p, 8g+2p+1), which is
the operand order of the tensor-core mma. A bf16 whose bits are sign << 15 | e1 e0 m << 6 reads as the E2M1
value times 2^-126 (e = 0 lands on the subnormal m/2 x 2^-126), so the kernel layout moves each code's bits to
where one shift and one mask of the word put them at those places, the even column in the low 16 bits and the
odd one 16 bits higher (bit numbers below; the odd column of each pair at +16):

    column   8g+0  8g+2  8g+4  8g+6
    e1 e0 m  8 7 6 5 4 3 2 1 0 14 13 11
    sign     15    12    9     10
    decode   w & 0x81C081C0, (w << 3) & .., (w << 6) & .., then three shifts and masks for 8g+6, 8g+7

This is a permutation of the 32 bits of each word, the same for every word: `encode_mma_pairs` applies it,
`decode_mma_pairs` undoes it (torch, any device; `kernels.mxfp4_mma_pairs` is the GPU kernel of the encode).
"""

from __future__ import annotations

import functools

import torch

__all__ = ["BIT_PLACES", "MOVES", "decode_mma_pairs", "encode_mma_pairs"]

# column i of a word -> bit numbers of its (e1, e0, m, s) in the kernel layout
BIT_PLACES = ((8, 7, 6, 15), (24, 23, 22, 31), (5, 4, 3, 12), (21, 20, 19, 28),
              (2, 1, 0, 9), (18, 17, 16, 25), (14, 13, 11, 10), (30, 29, 27, 26))

# The encode as runs of bits that move together: (mask of the checkpoint word, left shift; negative: right)
MOVES = ((0x00000007, 6), (0x00000008, 12), (0x00000070, 18), (0x00000080, 24),
         (0x00000700, -5), (0x00000800, 1), (0x00007000, 7), (0x00008000, 13),
         (0x00070000, -16), (0x00080000, -10), (0x00700000, -4), (0x00800000, 2),
         (0x01000000, -13), (0x06000000, -12), (0x08000000, -17),
         (0x10000000, -1), (0x60000000, 0), (0x80000000, -5))
_CHUNK_WORDS = 1 << 22


def _bit_permutation() -> list[int]:
    """dest[b]: where checkpoint bit b goes (from BIT_PLACES)."""
    dest = [0] * 32
    for i, (e1, e0, m, s) in enumerate(BIT_PLACES):
        for offset, place in zip(range(4), (m, e0, e1, s)):
            dest[4 * i + offset] = place
    return dest


@functools.cache
def _byte_luts(inverse: bool, device: torch.device) -> torch.Tensor:
    """int64 [4, 256]: byte j's value -> its bits placed in the output word (OR the four to get the word)."""
    dest = _bit_permutation()
    if inverse:
        dest = [dest.index(b) for b in range(32)]
    value = torch.arange(256, dtype=torch.int64)
    luts = torch.zeros(4, 256, dtype=torch.int64)
    for j in range(4):
        for bit in range(8):
            luts[j] |= ((value >> bit) & 1) << dest[8 * j + bit]
    return luts.to(device)


def _permute_words(blocks: torch.Tensor, inverse: bool) -> torch.Tensor:
    if blocks.dtype != torch.uint8 or blocks.dim() == 0 or blocks.shape[-1] % 4:
        raise ValueError(f"MXFP4 mma-pair words: expected uint8 [..., 4m], got {blocks.dtype} "
                         f"{tuple(blocks.shape)}")
    luts = _byte_luts(inverse, blocks.device)
    flat = blocks.reshape(-1, 4)  # [W, 4] bytes of each word, little-endian
    out = torch.empty_like(flat)
    for start in range(0, flat.shape[0], _CHUNK_WORDS):
        rows = slice(start, start + _CHUNK_WORDS)
        b = flat[rows].to(torch.int64)  # [w, 4]
        word = luts[0][b[:, 0]] | luts[1][b[:, 1]] | luts[2][b[:, 2]] | luts[3][b[:, 3]]  # [w]
        out[rows] = torch.stack([(word >> (8 * j)) & 0xFF for j in range(4)], dim=-1).to(torch.uint8)
    return out.reshape(blocks.shape)


def encode_mma_pairs(blocks: torch.Tensor) -> torch.Tensor:
    """Packed MXFP4 bytes in checkpoint nibble order, uint8 [..., 4m] -> the same shape in mma-pair order."""
    return _permute_words(blocks, inverse=False)


def decode_mma_pairs(blocks: torch.Tensor) -> torch.Tensor:
    """The inverse of `encode_mma_pairs`: mma-pair order -> checkpoint nibble order."""
    return _permute_words(blocks, inverse=True)
