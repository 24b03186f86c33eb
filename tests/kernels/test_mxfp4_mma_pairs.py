"""The mma-pair order of MXFP4 codes (`formats.mxfp4_mma_pairs`): the encode is a bit permutation that
`decode_mma_pairs` undoes, places each column's bits where BIT_PLACES says (checked bit by bit here), and the
Triton kernel that applies it in place at load time gives the torch reference's bytes (interpreter; GPU)."""

from __future__ import annotations

import pytest
import torch

from quickmoe.formats.mxfp4_mma_pairs import (
    BIT_PLACES,
    MOVES,
    decode_mma_pairs,
    encode_mma_pairs,
)
from quickmoe.kernels.mxfp4_mma_pairs import encode_mma_pairs_, encode_mma_pairs_ref_

pytest.importorskip("triton")
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def _word(b: torch.Tensor) -> int:
    return int(b[0]) | int(b[1]) << 8 | int(b[2]) << 16 | int(b[3]) << 24


def test_each_code_lands_on_its_places_and_decode_undoes_it():
    blocks = torch.randint(0, 256, (7, 64), dtype=torch.uint8)
    encoded = encode_mma_pairs(blocks)
    assert torch.equal(decode_mma_pairs(encoded), blocks)
    for row in range(3):
        for g in range(16):
            old, new = _word(blocks[row, 4 * g:4 * g + 4]), _word(encoded[row, 4 * g:4 * g + 4])
            for i, (e1, e0, m, s) in enumerate(BIT_PLACES):
                code = (old >> 4 * i) & 0xF
                placed = (new >> m & 1) | (new >> e0 & 1) << 1 | (new >> e1 & 1) << 2 | (new >> s & 1) << 3
                assert placed == code, (row, g, i)
    # the runs of MOVES spell out the same permutation
    for word in torch.randint(0, 2**31, (200,)).tolist() + [0xFFFFFFFF, 0x80000000]:
        moved = 0
        for mask, shift in MOVES:
            moved |= (word & mask) << shift if shift >= 0 else (word & mask) >> -shift
        as_bytes = torch.tensor([(word >> 8 * j) & 0xFF for j in range(4)], dtype=torch.uint8)
        assert moved == _word(encode_mma_pairs(as_bytes))


def test_the_kernel_gives_the_reference_bytes():
    blocks = torch.randint(0, 256, (3, 40, 720), dtype=torch.uint8, device=DEVICE)  # 3 x 40 x 180 words
    want = encode_mma_pairs_ref_(blocks.clone())
    got = blocks.clone()
    ptr = got.data_ptr()
    encode_mma_pairs_(got)
    assert got.data_ptr() == ptr and torch.equal(got, want) and not torch.equal(got, blocks)
    with pytest.raises(ValueError, match="contiguous, 4-byte aligned"):
        encode_mma_pairs_(blocks[:, :, 1:5])
