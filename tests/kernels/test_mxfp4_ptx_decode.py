"""The inline PTX that decodes FP4 on the GPU, run through a small emulator of its instructions against the E2M1
definition: MXFP4 in mma-pair order (`moe_gemm._MXFP4_PAIRS_TO_BF16_PTX_TEXT`: every code in every column, the
whole scale range it takes) and checkpoint nibbles times a bf16 factor (`_E2M1_NIBBLES_TO_BF16_PTX_TEXT`, NVFP4:
every byte value). The GPU tests run the same texts for real; these fail on CPU too when a text is wrong."""

from __future__ import annotations

import random

import pytest
import torch

from quickmoe.formats.mxfp4_mma_pairs import encode_mma_pairs
from quickmoe.layouts.mxfp4_moe import MAX_SCALE
from tests.kernels.ptx_emulator import bf16_to_float, run

moe_gemm = pytest.importorskip("quickmoe.kernels.moe_gemm")
E2M1 = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)


def _expected(code: int, scale: int) -> float:
    magnitude = E2M1[code & 7] * 2.0 ** (scale - 127)
    return -magnitude if code & 8 else magnitude


@pytest.mark.parametrize("scale", [1, 100, 119, 127, 130, 200])
def test_ptx_decode_matches_e2m1_for_every_byte(scale):
    rng = random.Random(scale)
    factor = (scale << 7) | (scale << 23)  # bf16x2 of 2^(scale - 127), as the kernel passes it
    words = [rng.getrandbits(32) for _ in range(200)]
    words += [b | (b << 8) | (b << 16) | (b << 24) for b in range(256)]  # every byte in every position
    for word in words:
        regs = run(moe_gemm._E2M1_NIBBLES_TO_BF16_PTX_TEXT, [0, 0, 0, 0, word, factor, factor])
        # $0: low nibbles of bytes 0, 1; $1: of bytes 2, 3; $2, $3: the high nibbles
        for out, first_byte, nibble in (("$0", 0, 0), ("$1", 2, 0), ("$2", 0, 1), ("$3", 2, 1)):
            for half in range(2):
                code = (word >> (8 * (first_byte + half) + 4 * nibble)) & 0xF
                got = bf16_to_float(regs[out] >> 16 * half)
                assert got == _expected(code, scale), (hex(word), out, half, code)


def test_the_emulator_catches_a_wrong_table():
    broken = moe_gemm._E2M1_NIBBLES_TO_BF16_PTX_TEXT.replace("0xC0800000", "0xC0800001")
    regs = run(broken, [0, 0, 0, 0, 0x00000000, 127 << 7, 127 << 7])
    assert bf16_to_float(regs["$0"]) != 0.0  # code 0 must decode to 0


def _encoded(word: int) -> int:
    """A checkpoint-order word (column 8g+i at bits 4i..4i+3) in mma-pair order."""
    as_bytes = torch.tensor([(word >> 8 * j) & 0xFF for j in range(4)], dtype=torch.uint8)
    return sum(int(b) << 8 * j for j, b in enumerate(encode_mma_pairs(as_bytes)))


@pytest.mark.parametrize("scale", [60, 64, 100, 119, 127, 130, MAX_SCALE])
def test_mma_pair_decode_gives_each_column_pair_times_2_to_the_minus_64(scale):
    rng = random.Random(scale)
    words = [rng.getrandbits(32) for _ in range(300)]
    words += [sum(c << 4 * i for i in range(8)) for c in range(16)]  # every code in every column
    words += [sum(rng.randrange(16) << 4 * i for i in range(8)) for _ in range(50)]
    for word in words:
        regs = run(moe_gemm._MXFP4_PAIRS_TO_BF16_PTX_TEXT, [0, 0, 0, 0, _encoded(word), scale, scale, scale, scale])
        for p in range(4):  # $p: columns (2p, 2p+1), the even one in the low half
            for half in range(2):
                code = (word >> 4 * (2 * p + half)) & 0xF
                got = bf16_to_float(regs[f"${p}"] >> 16 * half) * moe_gemm.MXFP4_PAIRS_ACC_SCALE
                assert got == _expected(code, scale), (hex(word), p, half, code, scale)


def test_the_emulator_catches_a_wrong_pair_mask():
    broken = moe_gemm._MXFP4_PAIRS_TO_BF16_PTX_TEXT.replace("0x00400040", "0x00000040")  # drops column 7's m
    word = 0x10000000  # column 7: code 1 (0.5)
    regs = run(broken, [0, 0, 0, 0, _encoded(word), 127, 127, 127, 127])
    assert bf16_to_float(regs["$3"] >> 16) * moe_gemm.MXFP4_PAIRS_ACC_SCALE != 0.5
