"""MXFP4 format: exact LUT, nibble order, OCP scale rule, ties to even, round trips, and bit-exact
agreement with transformers' dequantization."""

from __future__ import annotations

import pytest
import torch

from quickmoe.formats import mxfp4
from quickmoe.formats.mxfp4 import (E2M1_LUT, dequantize_mxfp4, e8m0_to_float, mxfp4_nbytes, pack_fp4,
                                    quantize_mxfp4, unpack_fp4)

FLOAT_DTYPES = (torch.float32, torch.bfloat16, torch.float16)
_INT_VIEW = {torch.float32: torch.int32, torch.bfloat16: torch.int16, torch.float16: torch.int16}


def _random_mxfp4(shape: tuple[int, ...], seed: int, scale_range: tuple[int, int] = (118, 136)):
    """Random blocks [*shape, 16] and scales [*shape] (E8M0 bytes in scale_range, inclusive)."""
    g = torch.Generator().manual_seed(seed)
    blocks = torch.randint(0, 256, (*shape, 16), generator=g, dtype=torch.uint8)
    scales = torch.randint(scale_range[0], scale_range[1] + 1, shape, generator=g, dtype=torch.uint8)
    return blocks, scales


def _bits(t: torch.Tensor) -> torch.Tensor:
    return t.view(_INT_VIEW[t.dtype])


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_every_code_dequantizes_to_its_lut_value(dtype):
    codes = torch.arange(32, dtype=torch.uint8) % 16  # [32]: all 16 codes twice, in element order
    blocks = pack_fp4(codes).reshape(1, 16)  # [G=1, 16]
    for scale_byte, factor in ((127, 1.0), (128, 2.0), (125, 0.25)):
        got = dequantize_mxfp4(blocks, torch.tensor([scale_byte], dtype=torch.uint8), dtype=dtype)
        want = torch.tensor([v * factor for v in E2M1_LUT] * 2, dtype=dtype)
        assert got.dtype == dtype and got.shape == (32,)
        assert torch.equal(_bits(got), _bits(want))  # exact, including -0.0 for code 8
    assert torch.signbit(dequantize_mxfp4(blocks, torch.tensor([127], dtype=torch.uint8))[8])


def test_low_nibble_is_the_even_element():
    blocks = torch.zeros(1, 16, dtype=torch.uint8)
    blocks[0, 0] = 0x72  # element 0 = code 2 (1.0), element 1 = code 7 (6.0)
    blocks[0, 15] = 0x9F  # element 30 = code 15 (-6.0), element 31 = code 9 (-0.5)
    got = dequantize_mxfp4(blocks, torch.tensor([127], dtype=torch.uint8))
    assert got[:2].tolist() == [1.0, 6.0] and got[30:].tolist() == [-6.0, -0.5]
    assert unpack_fp4(torch.tensor([0x72], dtype=torch.uint8)).tolist() == [2, 7]


def test_pack_unpack_round_trip_on_random_bytes():
    blocks, _ = _random_mxfp4((5, 7, 3), seed=1)
    codes = unpack_fp4(blocks)
    assert codes.shape == (5, 7, 3, 32) and codes.dtype == torch.uint8 and int(codes.max()) < 16
    assert torch.equal(pack_fp4(codes), blocks)
    assert torch.equal(unpack_fp4(pack_fp4(codes)), codes)


def test_dequantize_keeps_the_leading_layout():
    blocks, scales = _random_mxfp4((3, 4, 2), seed=2)  # [E, N, K/32]
    got = dequantize_mxfp4(blocks, scales)
    assert got.shape == (3, 4, 64)
    for e, n in ((0, 0), (2, 3), (1, 2)):  # each row is its own blocks dequantized, no transpose
        assert torch.equal(got[e, n], dequantize_mxfp4(blocks[e, n], scales[e, n]))


def test_e8m0_decoding_covers_the_whole_byte_range():
    got = e8m0_to_float(torch.tensor([0, 1, 126, 127, 128, 254, 255], dtype=torch.uint8))
    assert got.tolist() == [2.0**-127, 2.0**-126, 0.5, 1.0, 2.0, 2.0**127, float("inf")]


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_bit_exact_with_transformers_dequantization(dtype):
    hf_mxfp4 = pytest.importorskip("transformers.integrations.mxfp4")
    blocks, scales = _random_mxfp4((3, 10, 4), seed=3, scale_range=(100, 160))  # [E, N, K/32], K = 128
    # transformers returns [E, K, N] (ready for x @ W); ours keeps the checkpoint's [E, N, K]
    want = hf_mxfp4.convert_moe_packed_tensors(blocks.clone(), scales.clone(), dtype=dtype).transpose(1, 2)
    got = dequantize_mxfp4(blocks, scales, dtype=dtype)
    assert got.dtype == want.dtype == dtype and got.shape == want.shape == (3, 10, 128)
    assert torch.equal(_bits(got), _bits(want.contiguous()))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float64])
def test_other_output_dtypes_are_the_float32_values_rounded(dtype):
    blocks, scales = _random_mxfp4((6, 3), seed=4, scale_range=(112, 140))  # within float16's range
    got = dequantize_mxfp4(blocks, scales, dtype=dtype)
    assert got.dtype == dtype
    assert torch.equal(got, dequantize_mxfp4(blocks, scales).to(dtype))
    if dtype == torch.bfloat16:  # exact over the whole E8M0 range except 255 (and 253-254 times 6)
        blocks, scales = _random_mxfp4((64, 4), seed=5, scale_range=(0, 252))
        assert torch.equal(dequantize_mxfp4(blocks, scales, dtype).float(), dequantize_mxfp4(blocks, scales))


def test_quantize_picks_the_ocp_shared_exponent():
    x = torch.zeros(6, 32)
    x[0, 3] = 1.0  # floor(log2 1) - 2 = -2
    x[1, 0] = -6.0  # 2 - 2 = 0
    x[2, 31] = 8.0  # 3 - 2 = 1
    x[3, 5] = 2.0**-140  # below E8M0's range: clamped to -127
    x[4, 7] = 1.5 * 2.0**127  # 127 - 2 = 125
    blocks, scales = quantize_mxfp4(x)  # row 5 is all zeros
    assert blocks.shape == (6, 1, 16) and scales.shape == (6, 1)
    assert scales.flatten().tolist() == [125, 127, 128, 0, 252, 0]
    assert torch.equal(unpack_fp4(blocks[5]), torch.zeros(1, 32, dtype=torch.uint8))  # all-zero block: +0 codes
    codes = unpack_fp4(blocks).reshape(6, 32)
    assert codes[0, 3] == 6 and codes[1, 0] == 15 and codes[2, 31] == 6 and codes[4, 7] == 7  # 4, -6, 4, 6
    huge = torch.zeros(1, 32, dtype=torch.float64)
    huge[0, :2] = torch.tensor([1e300, -3e299], dtype=torch.float64)  # beyond E8M0: exponent clamped to 127
    b, s = quantize_mxfp4(huge)
    assert s.item() == 254 and unpack_fp4(b)[0, 0, :2].tolist() == [7, 15]  # and the values saturate


def test_quantize_non_finite_values():
    x = torch.ones(3, 32)
    x[0, 0], x[1, 0], x[2, 0] = float("nan"), float("inf"), -float("inf")
    blocks, scales = quantize_mxfp4(x)
    codes = unpack_fp4(blocks).reshape(3, 32)
    assert scales[0].item() == 125 and codes[0, 0] == 0 and codes[0, 1] == 6  # NaN -> 0; 1.0 at scale 1/4 -> 4
    assert scales[1:].flatten().tolist() == [254, 254]  # inf: the largest scale, saturated to ±6
    assert codes[1, 0] == 7 and codes[2, 0] == 15


def test_quantize_rounds_to_nearest_with_ties_to_even():
    values = [4.0, 0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 7.5, 0.26, 2.51, 4.99, 5.01, -0.25, -2.5, -0.0]
    want = [4.0, 0.0, 1.0, 1.0, 2.0, 2.0, 4.0, 4.0, 6.0, 0.5, 3.0, 4.0, 6.0, -0.0, -2.0, -0.0]
    x = torch.zeros(32)
    x[: len(values)] = torch.tensor(values)  # amax 7.5 -> shared exponent 0 -> scale 1
    blocks, scales = quantize_mxfp4(x)
    assert scales.tolist() == [127]
    got = dequantize_mxfp4(blocks, scales)[: len(values)]
    assert got.tolist() == want
    assert torch.equal(torch.signbit(got), torch.signbit(torch.tensor(want)))  # -0.25 rounds to -0
    # the same ties one binade up (scale 2): the grid scales, the rule does not change
    b2, s2 = quantize_mxfp4(2 * x)
    assert s2.tolist() == [128] and torch.equal(b2, blocks)


@pytest.mark.parametrize("in_dtype", [torch.float32, torch.bfloat16, torch.float16, torch.float64])
def test_dequantize_of_quantize_error_is_at_most_half_a_step(in_dtype):
    g = torch.Generator().manual_seed(6)
    magnitude = torch.exp2(torch.randint(-6, 7, (40, 8, 1), generator=g).float())  # a different range per block
    x = (torch.randn(40, 8, 32, generator=g) * magnitude).reshape(40, 256).to(in_dtype)
    blocks, scales = quantize_mxfp4(x)
    assert blocks.shape == (40, 8, 16) and scales.shape == (40, 8)
    y = dequantize_mxfp4(blocks, scales, dtype=torch.float64).reshape(40, 8, 32)
    xs = x.double().reshape(40, 8, 32)
    s = e8m0_to_float(scales).double()[..., None]  # [40, 8, 1]
    mag = xs.abs() / s
    half_step = torch.where(mag < 2, 0.25, torch.where(mag < 4, 0.5, 1.0))
    bound = s * torch.maximum(half_step, mag - 6)  # above 6 the value saturates (mag < 8 by the scale rule)
    assert bool(((xs - y).abs() <= bound).all())
    assert bool((mag < 8).all())


@pytest.mark.parametrize("out_dtype", [torch.float32, torch.bfloat16, torch.float64])
def test_quantize_of_dequantize_is_identity_for_canonical_blocks(out_dtype):
    g = torch.Generator().manual_seed(7)
    blocks, scales = _random_mxfp4((12, 24, 5), seed=8, scale_range=(0, 252))
    codes = unpack_fp4(blocks)  # [12, 24, 5, 32]
    # canonical: every block holds a code of magnitude 4 or 6 (codes 6, 7, 14, 15), so its maximum is in [4, 8)
    where = torch.randint(0, 32, (12, 24, 5, 1), generator=g)
    big = torch.tensor([6, 7, 14, 15], dtype=torch.uint8)[torch.randint(0, 4, (12, 24, 5, 1), generator=g)]
    codes = codes.scatter(-1, where, big)
    blocks = pack_fp4(codes)
    x = dequantize_mxfp4(blocks, scales, dtype=out_dtype)
    b2, s2 = quantize_mxfp4(x)
    assert torch.equal(s2, scales)
    assert torch.equal(b2, blocks)  # signed zeros survive too (-0.0 -> code 8)


def test_chunked_processing_matches_one_pass(monkeypatch):
    blocks, scales = _random_mxfp4((3, 7, 5), seed=9)
    x = torch.randn(3, 7, 160, generator=torch.Generator().manual_seed(10))
    whole = dequantize_mxfp4(blocks, scales, torch.bfloat16), quantize_mxfp4(x)
    monkeypatch.setattr(mxfp4, "_CHUNK_BLOCKS", 4)  # 105 blocks -> 27 chunks, the last one partial
    assert torch.equal(dequantize_mxfp4(blocks, scales, torch.bfloat16), whole[0])
    b, s = quantize_mxfp4(x)
    assert torch.equal(b, whole[1][0]) and torch.equal(s, whole[1][1])


def test_quantize_needs_k_multiple_of_32():
    with pytest.raises(ValueError, match="K=48"):
        quantize_mxfp4(torch.zeros(2, 48))
    with pytest.raises(ValueError, match="floating-point"):
        quantize_mxfp4(torch.zeros(2, 32, dtype=torch.int32))


def test_bad_blocks_and_scales_are_rejected():
    blocks, scales = _random_mxfp4((2, 3), seed=11)
    with pytest.raises(ValueError, match="do not match"):
        dequantize_mxfp4(blocks, scales[:, :2])
    with pytest.raises(ValueError, match="uint8"):
        dequantize_mxfp4(blocks.to(torch.int32), scales)
    with pytest.raises(ValueError, match="floating-point"):
        dequantize_mxfp4(blocks, scales, dtype=torch.int32)
    with pytest.raises(ValueError, match="even"):
        pack_fp4(torch.zeros(3, dtype=torch.uint8))


def test_nbytes():
    assert mxfp4_nbytes(5760, 2880) == (5760 * 90 * 16, 5760 * 90)
    with pytest.raises(ValueError, match="K=33"):
        mxfp4_nbytes(4, 33)


@pytest.mark.gpu
def test_cuda_matches_cpu():
    blocks, scales = _random_mxfp4((4, 64, 8), seed=12, scale_range=(0, 252))
    for dtype in FLOAT_DTYPES:
        got = dequantize_mxfp4(blocks.cuda(), scales.cuda(), dtype=dtype).cpu()
        assert torch.equal(_bits(got), _bits(dequantize_mxfp4(blocks, scales, dtype=dtype)))
    x = torch.randn(4, 64, 256, generator=torch.Generator().manual_seed(13))
    b, s = quantize_mxfp4(x.cuda())
    want = quantize_mxfp4(x)
    assert torch.equal(b.cpu(), want[0]) and torch.equal(s.cpu(), want[1])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
def test_e2m1_rounding_matches_a_nearest_value_search(dtype):
    """round_to_e2m1 against the definition, in float64: the nearest of the 15 signed grid values, a tie to the even
    code (mantissa bit 0), beyond ±6 saturated, the sign kept. Random values of several scales, every midpoint and
    the floats just beside each, ±0 and huge values."""
    from quickmoe.formats.mxfp4 import round_to_e2m1

    g = torch.Generator().manual_seed(17)
    mids = torch.tensor([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 6.0], dtype=dtype)
    near = torch.cat([mids, torch.nextafter(mids, torch.zeros_like(mids)), torch.nextafter(mids, 100 * mids)])
    x = torch.cat([torch.randn(4000, generator=g).to(dtype) * s for s in (0.3, 2.0, 8.0)]
                  + [near, -near, torch.tensor([0.0, -0.0, 1e30, -1e30], dtype=dtype)])
    lut = torch.tensor(E2M1_LUT[:8], dtype=torch.float64)  # magnitudes of codes 0-7
    mag = x.double().abs().clamp(max=6.0)[:, None]  # [N, 1]: saturated
    dist = (mag - lut).abs()  # [N, 8]
    best = dist.min(dim=1, keepdim=True).values
    ties = dist == best  # [N, 8]: one or two nearest codes
    code = torch.where(ties[:, 1::2].any(1) & ~ties[:, 0::2].any(1),  # only an odd code is nearest
                       ties.double().argmax(1), (ties & (torch.arange(8) % 2 == 0)).double().argmax(1))
    want = code.to(torch.uint8) | (torch.signbit(x).to(torch.uint8) << 3)
    got = round_to_e2m1(x)
    assert torch.equal(got, want), x[got != want][:8]
