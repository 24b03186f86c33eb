"""MXFP4 (OCP Microscaling, FP4 E2M1 elements with a shared E8M0 scale per 32 elements).

Layout, as in the gpt-oss checkpoints: `blocks` uint8 [..., K/32, 16] hold 32 4-bit codes per block,
element 2j in the LOW nibble of byte j and element 2j+1 in the high nibble; `scales` uint8 [..., K/32]
are E8M0 exponents. value = E2M1_VALUES[code] * 2**(scale - 127).

Pure functions on torch tensors (CPU or CUDA); no model knowledge.
"""

from __future__ import annotations

import torch

BLOCK_SIZE = 32
E8M0_BIAS = 127
# code -> value; bit 3 is the sign, bits 0-2 index [0, .5, 1, 1.5, 2, 3, 4, 6]
E2M1_VALUES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0)
E2M1_MAX = 6.0
# E2M1 has 2 exponent bits (bias 1): the largest value 6 = 1.5 * 2**2, so emax = 2.
E2M1_EMAX = 2
_CHUNK_ELEMENTS = 1 << 26  # bound on elements processed at once (transient memory)


def unpack_fp4(blocks: torch.Tensor) -> torch.Tensor:
    """[..., 16] uint8 -> [..., 32] uint8 codes (low nibble first)."""
    low = blocks & 0x0F
    high = blocks >> 4
    return torch.stack((low, high), dim=-1).flatten(-2)  # [..., 16, 2] -> [..., 32]


def pack_fp4(codes: torch.Tensor) -> torch.Tensor:
    """[..., 32] uint8 codes in [0, 16) -> [..., 16] uint8 (element 2j in the low nibble of byte j)."""
    pairs = codes.unflatten(-1, (-1, 2))  # [..., 16, 2]
    return pairs[..., 0] | (pairs[..., 1] << 4)


def _chunks(leading: int, per_row: int) -> list[slice]:
    rows = max(1, _CHUNK_ELEMENTS // max(per_row, 1))
    return [slice(i, min(i + rows, leading)) for i in range(0, leading, rows)]


def dequantize_mxfp4(blocks: torch.Tensor, scales: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """blocks [..., G, 16], scales [..., G] -> values [..., G*32] in `dtype` (same leading layout).

    Exact for every dtype with at least 8 exponent bits (float32, bfloat16): each value is a 2-bit
    mantissa times a power of two. Scales outside a dtype's range over/underflow as ldexp would.
    """
    if blocks.shape[:-1] != scales.shape or blocks.shape[-1] != BLOCK_SIZE // 2:
        raise ValueError(f"MXFP4 blocks {tuple(blocks.shape)} and scales {tuple(scales.shape)} do not match "
                         f"(expected blocks [..., G, 16] and scales [..., G])")
    lut = torch.tensor(E2M1_VALUES, dtype=torch.float32, device=blocks.device)
    lead = blocks.shape[:-2]
    groups = blocks.shape[-2]
    flat_blocks = blocks.reshape(-1, groups, BLOCK_SIZE // 2)  # [R, G, 16]
    flat_scales = scales.reshape(-1, groups)  # [R, G]
    out = torch.empty(flat_blocks.shape[0], groups * BLOCK_SIZE, dtype=dtype, device=blocks.device)
    for rows in _chunks(flat_blocks.shape[0], groups * BLOCK_SIZE):
        codes = unpack_fp4(flat_blocks[rows]).long()  # [r, G, 32]
        values = lut[codes]  # [r, G, 32] float32, exact
        exponents = flat_scales[rows].to(torch.int32) - E8M0_BIAS  # [r, G]
        values = torch.ldexp(values, exponents[..., None].to(torch.float32))
        out[rows] = values.flatten(-2).to(dtype)
    return out.reshape(*lead, groups * BLOCK_SIZE)


def quantize_mxfp4(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """values [..., K] -> (blocks [..., K/32, 16] uint8, scales [..., K/32] uint8), along the last dim.

    Scale (OCP MX rule): 2**(floor(log2(amax)) - emax) with emax = 2, so the block maximum lands in
    [4, 8); the E8M0 exponent is clamped to [-127, 127] (an all-zero block gets exponent -127). Each
    element x / scale is rounded to the nearest E2M1 value, ties to the even code, and saturates at ±6.
    """
    k = x.shape[-1]
    if k % BLOCK_SIZE:
        raise ValueError(f"MXFP4 quantization needs the last dimension K={k} to be a multiple of {BLOCK_SIZE}")
    lead = x.shape[:-1]
    flat = x.reshape(-1, k // BLOCK_SIZE, BLOCK_SIZE)  # [R, G, 32]
    blocks = torch.empty(*flat.shape[:2], BLOCK_SIZE // 2, dtype=torch.uint8, device=x.device)
    scales = torch.empty(flat.shape[:2], dtype=torch.uint8, device=x.device)
    for rows in _chunks(flat.shape[0], k):
        blk = flat[rows].float()
        amax = blk.abs().amax(dim=-1)  # [r, G]
        # frexp: amax = m * 2**e with m in [0.5, 1), so floor(log2(amax)) = e - 1 (exact, no log rounding)
        _, e = torch.frexp(amax)
        exponent = torch.where(amax > 0, e.to(torch.int32) - 1 - E2M1_EMAX, torch.full_like(e, -E8M0_BIAS,
                                                                                            dtype=torch.int32))
        exponent = exponent.clamp(-E8M0_BIAS, E8M0_BIAS)
        scaled = torch.ldexp(blk, (-exponent)[..., None].to(torch.float32))  # [r, G, 32]
        blocks[rows] = pack_fp4(_round_to_e2m1_codes(scaled))
        scales[rows] = (exponent + E8M0_BIAS).to(torch.uint8)
    return blocks.reshape(*lead, k // BLOCK_SIZE, BLOCK_SIZE // 2), scales.reshape(*lead, k // BLOCK_SIZE)


def _round_to_e2m1_codes(v: torch.Tensor) -> torch.Tensor:
    """float values -> uint8 codes of the nearest E2M1 value (ties to the even code), saturating at ±6."""
    mag = v.abs().clamp(max=E2M1_MAX)
    grid = torch.tensor(E2M1_VALUES[:8], dtype=v.dtype, device=v.device)  # [8] ascending magnitudes
    # Midpoints between neighbouring magnitudes; bucketize sends a value equal to a midpoint to the lower
    # neighbour, then a tie whose lower code is odd (mantissa bit 1) moves up to the even code.
    mids = (grid[1:] + grid[:-1]) / 2  # [7]
    idx = torch.bucketize(mag, mids)  # index of the nearest grid value, ties go to the lower neighbour
    tie = (mag.unsqueeze(-1) == mids).any(dim=-1)
    idx = torch.where(tie & (idx % 2 == 1), idx + 1, idx)  # at a tie pick the even code
    sign = (v < 0) | ((v == 0) & torch.signbit(v))
    return (idx.to(torch.uint8) | (sign.to(torch.uint8) << 3))
