"""The inline PTX that decodes MXFP4 on the GPU (`moe_gemm._MXFP4_TO_BF16_PTX_TEXT`), run through a small
emulator of its instructions against the E2M1 x E8M0 definition: every byte value, several scales. The
GPU tests run the same text for real; this one fails on CPU too when the text is wrong."""

from __future__ import annotations

import random

import pytest

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
        regs = run(moe_gemm._MXFP4_TO_BF16_PTX_TEXT, [0, 0, 0, 0, word, factor, factor])
        # $0: low nibbles of bytes 0, 1; $1: of bytes 2, 3; $2, $3: the high nibbles
        for out, first_byte, nibble in (("$0", 0, 0), ("$1", 2, 0), ("$2", 0, 1), ("$3", 2, 1)):
            for half in range(2):
                code = (word >> (8 * (first_byte + half) + 4 * nibble)) & 0xF
                got = bf16_to_float(regs[out] >> 16 * half)
                assert got == _expected(code, scale), (hex(word), out, half, code)


def test_the_emulator_catches_a_wrong_table():
    broken = moe_gemm._MXFP4_TO_BF16_PTX_TEXT.replace("0xC0800000", "0xC0800001")
    regs = run(broken, [0, 0, 0, 0, 0x00000000, 127 << 7, 127 << 7])
    assert bf16_to_float(regs["$0"]) != 0.0  # code 0 must decode to 0
