"""The inline PTX that decodes FP4 on the GPU, run through a small emulator of its instructions against the E2M1
definition, in mma-pair order: MXFP4 (`moe_tiles.MXFP4_PAIRS_TO_BF16_PTX_TEXT`: every code in every column, the
whole scale range it takes) and NVFP4 (`NVFP4_PAIRS_TO_BF16_PTX_TEXT`: every code in every column times every
E4M3 scale). The GPU tests run the same texts for real; these fail on CPU too when a text is wrong."""

from __future__ import annotations

import random

import pytest
import torch

from quickmoe.formats.mxfp4_mma_pairs import encode_mma_pairs
from quickmoe.layouts.mxfp4_moe import MAX_SCALE
from tests.kernels.ptx_emulator import bf16_to_float, float_to_bf16, run

moe_tiles = pytest.importorskip("quickmoe.kernels.moe_tiles")
E2M1 = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)


def _expected(code: int, scale: int) -> float:
    magnitude = E2M1[code & 7] * 2.0 ** (scale - 127)
    return -magnitude if code & 8 else magnitude


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
        regs = run(moe_tiles.MXFP4_PAIRS_TO_BF16_PTX_TEXT, [0, 0, 0, 0, _encoded(word), scale, scale, scale, scale])
        for p in range(4):  # $p: columns (2p, 2p+1), the even one in the low half
            for half in range(2):
                code = (word >> 4 * (2 * p + half)) & 0xF
                got = bf16_to_float(regs[f"${p}"] >> 16 * half) * moe_tiles.MXFP4_PAIRS_ACC_SCALE
                assert got == _expected(code, scale), (hex(word), p, half, code, scale)


def test_the_emulator_catches_a_wrong_pair_mask():
    broken = moe_tiles.MXFP4_PAIRS_TO_BF16_PTX_TEXT.replace("0x00400040", "0x00000040")  # drops column 7's m
    word = 0x10000000  # column 7: code 1 (0.5)
    regs = run(broken, [0, 0, 0, 0, _encoded(word), 127, 127, 127, 127])
    assert bf16_to_float(regs["$3"] >> 16) * moe_tiles.MXFP4_PAIRS_ACC_SCALE != 0.5


def _e4m3(byte: int) -> float:
    """The E4M3 value of a byte (exponent bias 7, subnormals at exponent 0), from the format's definition."""
    exponent, mantissa = (byte >> 3) & 0xF, byte & 7
    magnitude = mantissa / 8 * 2.0 ** -6 if exponent == 0 else (1 + mantissa / 8) * 2.0 ** (exponent - 7)
    return -magnitude if byte & 0x80 else magnitude


@pytest.mark.parametrize("chunk", range(4))
def test_nvfp4_pair_decode_gives_each_column_times_its_e4m3_scale(chunk):
    """Every positive finite E4M3 scale (0x00 .. 0x7E, a quarter per case), as the kernel passes it (the value x
    2^119 rounded to bf16, both halves), on every code in every column: value x scale x 2^-7, exactly."""
    rng = random.Random(chunk)
    words = [sum(c << 4 * i for i in range(8)) for c in range(16)]  # every code in every column
    words += [rng.getrandbits(32) for _ in range(12)]
    for byte in range(chunk, 0x7F, 4):
        scale = _e4m3(byte)
        factor = float_to_bf16(scale * moe_tiles.NVFP4_PAIRS_FACTOR_SCALE)
        assert bf16_to_float(factor) == scale * moe_tiles.NVFP4_PAIRS_FACTOR_SCALE  # bf16 holds it exactly
        factor |= factor << 16
        for word in words:
            regs = run(moe_tiles.NVFP4_PAIRS_TO_BF16_PTX_TEXT, [0, 0, 0, 0, _encoded(word), factor, factor])
            for p in range(4):
                for half in range(2):
                    code = (word >> 4 * (2 * p + half)) & 0xF
                    got = bf16_to_float(regs[f"${p}"] >> 16 * half) * moe_tiles.NVFP4_PAIRS_ACC_SCALE
                    want = E2M1[code & 7] * scale
                    assert got == (-want if code & 8 else want), (hex(word), p, half, code, hex(byte))


def test_the_emulator_catches_a_wrong_nvfp4_factor_use():
    broken = moe_tiles.NVFP4_PAIRS_TO_BF16_PTX_TEXT.replace("mov.b32 s, $5;", "mov.b32 s, $6;\nshl.b32 s, s, 1;")
    factor = float_to_bf16(moe_tiles.NVFP4_PAIRS_FACTOR_SCALE)
    factor |= factor << 16
    regs = run(broken, [0, 0, 0, 0, _encoded(0x2), factor, factor])  # column 0: code 2 (1.0), scale 1
    assert bf16_to_float(regs["$0"]) * moe_tiles.NVFP4_PAIRS_ACC_SCALE != 1.0
