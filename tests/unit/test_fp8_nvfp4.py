"""FP8 block-scaled and NVFP4 formats against references written here from the formats' definitions:
E4M3 and E2M1 decoded from their bits, rounding by exhaustive nearest-value search. Bit-exact."""

from __future__ import annotations

import math

import pytest
import torch

from quickmoe.formats.fp8 import dequantize_fp8_block, quantize_fp8_block, quantize_fp8_per_token_group
from quickmoe.formats.nvfp4 import dequantize_nvfp4, quantize_nvfp4


def e4m3_value(byte: int) -> float:
    """OCP E4M3 (fn): sign, 4 exponent bits (bias 7), 3 mantissa bits; exponent 0 is subnormal; S.1111.111 NaN."""
    sign = -1.0 if byte & 0x80 else 1.0
    exponent, mantissa = (byte >> 3) & 0xF, byte & 0x7
    if exponent == 0xF and mantissa == 0x7:
        return math.nan
    if exponent == 0:
        return sign * mantissa / 8 * 2.0 ** -6
    return sign * (1 + mantissa / 8) * 2.0 ** (exponent - 7)


def e2m1_value(code: int) -> float:
    """E2M1: sign bit 3, 2 exponent bits (bias 1), 1 mantissa bit; exponent 0 is subnormal (0 or 0.5)."""
    sign = -1.0 if code & 0x8 else 1.0
    exponent, mantissa = (code >> 1) & 0x3, code & 0x1
    if exponent == 0:
        return sign * mantissa * 0.5
    return sign * (1 + mantissa / 2) * 2.0 ** (exponent - 1)


E4M3 = torch.tensor([e4m3_value(b) for b in range(256)], dtype=torch.float64)
E4M3_FINITE = sorted({v for v in E4M3.tolist() if not math.isnan(v)})


def nearest(values: torch.Tensor, grid: list[float], *, even_code) -> torch.Tensor:
    """Each value rounded to the nearest grid value (saturating at the ends); ties to the value whose
    encoding `even_code(v)` says is even."""
    grid_t = torch.tensor(grid, dtype=torch.float64)
    v = values.double().clamp(grid[0], grid[-1])
    dist = (v[:, None] - grid_t[None, :]).abs()  # [n, G]
    best = dist.min(dim=1, keepdim=True).values
    out = []
    for row, d in zip(v.tolist(), (dist == best).tolist()):
        cands = [g for g, hit in zip(grid, d) if hit]
        if len(cands) > 1:
            cands = [c for c in cands if even_code(c)]
        out.append(cands[0] if row >= 0 or cands[0] != 0 else -0.0)
    return torch.tensor(out, dtype=torch.float64)


def e4m3_even(v: float) -> bool:
    byte = [b for b in range(256) if e4m3_value(b) == v and (b & 0x80) == (0x80 if math.copysign(1, v) < 0 else 0)]
    return (byte[0] & 1) == 0


def ref_dequant_fp8(q: torch.Tensor, scale: torch.Tensor, block: tuple[int, int]) -> torch.Tensor:
    n, k = q.shape
    vals = E4M3[q.view(torch.uint8).long()].float()  # [N, K] from the bits (exact in float32)
    out = torch.empty(n, k, dtype=torch.float32)
    for i in range(n):
        for j in range(0, k):
            out[i, j] = vals[i, j] * scale[i // block[0], j // block[1]].float()  # one float32 rounding
    return out


def random_weights(shape, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    w = torch.randn(shape, generator=g) * torch.exp(torch.randn(shape[0], 1, generator=g))  # varied row scales
    w[0, :8] = 0.0  # zeros inside a block
    return w


@pytest.mark.parametrize("shape, block", [((20, 40), (8, 16)), ((16, 32), (16, 16))])
def test_fp8_block_dequantize_is_the_definition(shape, block):
    w = random_weights(shape, seed=1)
    q, scale = quantize_fp8_block(w, block)
    want = ref_dequant_fp8(q, scale, block)
    got = dequantize_fp8_block(q, scale, block, torch.float32)
    assert torch.equal(got, want)


@pytest.mark.parametrize("scale_dtype", [torch.float32, torch.bfloat16])
def test_fp8_block_quantize_rounds_to_nearest_e4m3(scale_dtype):
    block = (8, 16)
    w = random_weights((20, 40), seed=2)
    w[5, 5] = 1e-9  # underflows to zero
    q, scale = quantize_fp8_block(w, block, scale_dtype=scale_dtype)
    assert q.dtype == torch.float8_e4m3fn and scale.dtype == scale_dtype and scale.shape == (3, 3)
    for bi in range(3):
        for bj in range(3):
            blk = w[bi * 8:(bi + 1) * 8, bj * 16:(bj + 1) * 16]
            amax = blk.abs().max().item()
            want_scale = torch.tensor(amax / 448 if amax > 0 else 1.0, dtype=torch.float32).to(scale_dtype)
            assert scale[bi, bj] == want_scale
    expanded = scale.float().repeat_interleave(8, 0).repeat_interleave(16, 1)[:20, :40]
    want = nearest((w / expanded).flatten(), E4M3_FINITE, even_code=e4m3_even)
    assert torch.equal(E4M3[q.view(torch.uint8).long()].flatten(), want)


def test_fp8_per_token_group_activation_quantization():
    x = random_weights((5, 40), seed=3)
    q, scales = quantize_fp8_per_token_group(x, group=16)
    assert scales.shape == (5, 3)
    for t in range(5):
        for g in range(3):
            amax = x[t, g * 16:(g + 1) * 16].abs().max().item()
            assert scales[t, g].item() == pytest.approx(max(amax, 1e-10) / 448, rel=1e-7)
    want = nearest((x / scales.repeat_interleave(16, 1)[:, :40]).flatten(), E4M3_FINITE, even_code=e4m3_even)
    assert torch.equal(E4M3[q.view(torch.uint8).long()].flatten(), want)


E2M1_GRID = sorted({e2m1_value(c) for c in range(16)})


def ref_dequant_nvfp4(weight: torch.Tensor, scale: torch.Tensor, scale_2: torch.Tensor) -> torch.Tensor:
    n, half = weight.shape
    out = torch.empty(n, 2 * half, dtype=torch.float32)
    s2 = scale_2.item()
    for i in range(n):
        for j in range(half):
            byte = int(weight[i, j])
            for e, code in ((2 * j, byte & 0xF), (2 * j + 1, byte >> 4)):  # low nibble first
                block = e4m3_value(int(scale.view(torch.uint8)[i, e // 16]))
                exact = torch.tensor(e2m1_value(code) * block, dtype=torch.float32)  # exact product
                out[i, e] = exact * torch.tensor(s2, dtype=torch.float32)
    return out


def test_nvfp4_dequantize_is_the_definition():
    w = random_weights((6, 64), seed=4)
    weight, scale, scale_2 = quantize_nvfp4(w)
    assert weight.shape == (6, 32) and scale.shape == (6, 4) and scale_2.shape == () and scale_2.dtype == torch.float32
    assert torch.equal(dequantize_nvfp4(weight, scale, scale_2), ref_dequant_nvfp4(weight, scale, scale_2))


def test_nvfp4_quantize_follows_modelopt_convention():
    w = random_weights((6, 64), seed=5)
    weight, scale, scale_2 = quantize_nvfp4(w)
    assert scale_2.item() == torch.tensor(w.abs().max().item() / (6 * 448), dtype=torch.float32).item()
    codes = torch.stack((weight & 0xF, weight >> 4), dim=-1).flatten(-2)  # [6, 64]
    for i in range(6):
        for b in range(4):
            blk = w[i, b * 16:(b + 1) * 16]
            want_scale = nearest(torch.tensor([blk.abs().max().item() / (6 * scale_2.item())]), E4M3_FINITE,
                                 even_code=e4m3_even)
            got_scale = e4m3_value(int(scale.view(torch.uint8)[i, b]))
            assert got_scale == pytest.approx(want_scale.item(), rel=0, abs=0)
            divisor = torch.tensor(got_scale, dtype=torch.float32) * scale_2
            # even codes (mantissa bit 0) are the values 0, 1, 2, 4
            want = nearest((blk / divisor).double(), E2M1_GRID, even_code=lambda v: abs(v) in (0, 1, 2, 4))
            got = torch.tensor([e2m1_value(int(c)) for c in codes[i, b * 16:(b + 1) * 16]], dtype=torch.float64)
            assert torch.equal(got.abs(), want.abs()) and torch.equal(torch.signbit(got[got != 0]),
                                                                      torch.signbit(blk[got != 0]))
