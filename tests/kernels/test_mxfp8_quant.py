"""The MXFP8 activation quantizer: the Triton kernel (interpreter on CPU) bit-identical to the torch
reference, and the reference checked against float64 arithmetic (scale rule, round to nearest e4m3,
saturation, the padding it adds itself, zero, NaN and inf)."""

from __future__ import annotations

import pytest
import torch

from quickmoe.kernels.mxfp8_quant import dequantize_mxfp8_ref, quantize_mxfp8, quantize_mxfp8_ref

pytest.importorskip("triton")
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def _inputs(rows: int, k: int, seed: int, dtype=torch.float32) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    magnitude = 10.0 ** torch.empty(rows, 1).uniform_(-4, 4, generator=g)  # a wide range of block scales
    return (torch.randn(rows, k, generator=g) * magnitude).to(dtype)


@pytest.mark.parametrize("rows,k", [(1, 32), (5, 96), (3, 100), (4, 2880), (2, 7)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_kernel_is_bit_identical_to_the_reference(rows, k, dtype):
    x = _inputs(rows, k, seed=rows * 31 + k, dtype=dtype)
    x[0, : min(k, 40)] = 0.0  # an all-zero block
    q, s = quantize_mxfp8(x.to(DEVICE))
    q_ref, s_ref = quantize_mxfp8_ref(x)
    padded = -(-k // 32) * 32
    assert q.shape == (rows, padded) and s.shape == (rows, padded // 32)
    assert torch.equal(q.cpu().view(torch.uint8), q_ref.view(torch.uint8))
    assert torch.equal(s.cpu(), s_ref)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_negative_values_that_round_to_zero_keep_their_sign(dtype):
    """-0.0 where the reference has it: tiny negative values in a block of large ones, and -0.0 itself (the float8
    conversion drops the sign of a zero; on the H200 one value in 150,000 of random rows differed so)."""
    x = _inputs(4, 96, seed=5, dtype=dtype)
    x[:, 2], x[2, 33], x[3, 64] = 300.0, -300.0, 300.0  # each block below holds a large value
    x[1, 5], x[2, 40], x[3, 70], x[0, 0], x[0, 1] = -1e-7, -3e-6, -1e-30, 1e-7, -0.0
    q, s = quantize_mxfp8(x.to(DEVICE))
    q_ref, s_ref = quantize_mxfp8_ref(x)
    assert int(q_ref.view(torch.uint8)[1, 5]) == 0x80 and int(q_ref.view(torch.uint8)[0, 1]) == 0x80
    assert torch.equal(q.cpu().view(torch.uint8), q_ref.view(torch.uint8)) and torch.equal(s.cpu(), s_ref)


def test_reference_rounds_to_nearest_e4m3_within_the_mx_scale():
    x = _inputs(8, 64, seed=2, dtype=torch.float64)
    q, s = quantize_mxfp8_ref(x)
    deq = dequantize_mxfp8_ref(q, s).double()
    blocks = x.view(8, 2, 32)
    amax = blocks.abs().amax(-1)
    want_shared = torch.floor(torch.log2(amax)) - 8
    assert torch.equal(s.double() - 127, want_shared)
    scaled = blocks / torch.exp2(want_shared)[..., None]  # block maxima in [256, 512)
    err = (deq.view(8, 2, 32) - blocks).abs() / torch.exp2(want_shared)[..., None]
    # half an e4m3 ulp (2^(floor(log2|v|) - 3), at least 2^-9), or the saturation at 448
    ulp = torch.exp2(torch.clamp(torch.floor(torch.log2(scaled.abs().clamp(min=1e-30))), min=-6) - 3)
    assert bool(((err <= ulp / 2 + 1e-12) | (scaled.abs() > 448)).all())


def test_pads_zero_and_special_values():
    x = torch.tensor([[1.0] * 7, [float("nan")] + [2.0] * 6, [float("inf")] + [2.0] * 6])
    q, s = quantize_mxfp8_ref(x)
    assert q.shape == (3, 32) and torch.equal(q[:, 7:].float(), torch.zeros(3, 25))
    assert q.float()[1, 0] == 0.0  # NaN -> 0
    assert q.float()[2, 0] == 448.0 and int(s[2, 0]) == 254  # inf saturates at the largest scale
    kq, ks = quantize_mxfp8(x.to(DEVICE))
    assert torch.equal(kq.cpu().view(torch.uint8), q.view(torch.uint8)) and torch.equal(ks.cpu(), s)


@pytest.mark.parametrize("columns", [1, 32, 33, 64, 96, 128, 200, 256, 2880, 4096])
def test_the_launch_gives_each_thread_one_value_or_at_least_four(columns):
    """The warps of a tile (`launch_warps`) never give a thread 2 values: with the default 4 warps, gpt-oss's
    2,880-column rows (256-value tiles, 2 a thread) came out wrong on the H200, every second value."""
    from quickmoe.kernels.fp8_quant import MIN_VALUES_PER_THREAD
    from quickmoe.kernels.mxfp8_quant import launch_warps

    padded = -(-columns // 32) * 32
    block_k = min(256, 1 << (padded - 1).bit_length())
    per_thread = block_k / (32 * launch_warps(block_k))
    assert per_thread == 1 or per_thread >= MIN_VALUES_PER_THREAD, (block_k, launch_warps(block_k))
