"""MXFP4 (OCP Microscaling): 4-bit E2M1 elements sharing one E8M0 power-of-two scale per 32 elements.

Layout, as stored in the gpt-oss checkpoints (no transpose anywhere in this module):

- `blocks` uint8 [..., K/32, 16]: 32 4-bit codes per block; element 2j of a block is the LOW nibble of
  byte j, element 2j+1 the high nibble.
- `scales` uint8 [..., K/32]: E8M0 exponents, bias 127.
- value = E2M1_LUT[code] * 2**(scale - 127).

Pure, vectorised functions on torch tensors (CPU or CUDA); no model knowledge. Large tensors are
processed in chunks of blocks so that transient memory stays bounded (the gpt-oss-120b gate_up
tensor alone is 128 x 5760 x 90 blocks).
"""

from __future__ import annotations

import functools

import torch

BLOCK_SIZE = 32  # elements per MXFP4 block (one shared scale)
BYTES_PER_BLOCK = BLOCK_SIZE // 2  # two 4-bit codes per byte
E8M0_BIAS = 127
# code -> value. Bit 3 is the sign; bits 0-2 index the magnitudes [0, .5, 1, 1.5, 2, 3, 4, 6]
# (1 exponent-bias E2M1: 2 exponent bits, 1 mantissa bit, subnormals at exponent 0).
E2M1_LUT = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0)
E2M1_VALUES = E2M1_LUT  # alias
E2M1_MAX = 6.0
# The largest E2M1 value is 6 = 1.5 * 2**2, so the element format's emax is 2 (OCP MX spec).
E2M1_EMAX = 2
_CHUNK_BLOCKS = 1 << 18  # blocks (of 32 elements) processed at once: ~32 MiB per float32 temporary

_EXACT_WORK_DTYPES = (torch.float32, torch.bfloat16, torch.float64)


def unpack_fp4(blocks: torch.Tensor) -> torch.Tensor:
    """Split packed FP4 bytes into codes: uint8 [..., n] -> uint8 [..., 2n], values in [0, 16).

    Byte j gives element 2j (its low nibble) then element 2j+1 (its high nibble); with gpt-oss blocks
    [..., K/32, 16] the result is [..., K/32, 32].
    """
    _check_uint8("blocks", blocks)
    low = blocks & 0x0F
    high = blocks >> 4
    return torch.stack((low, high), dim=-1).flatten(-2)  # [..., n, 2] -> [..., 2n]


def pack_fp4(codes: torch.Tensor) -> torch.Tensor:
    """Pack FP4 codes two per byte: uint8 [..., 2n] -> uint8 [..., n] (the inverse of `unpack_fp4`).

    Element 2j goes to the low nibble of byte j and element 2j+1 to the high nibble; only the low
    4 bits of each code are used.
    """
    _check_uint8("codes", codes)
    if codes.shape[-1] % 2:
        raise ValueError(f"pack_fp4 needs an even last dimension, got codes of shape {tuple(codes.shape)}")
    pairs = codes.unflatten(-1, (-1, 2))  # [..., n, 2]
    return (pairs[..., 0] & 0x0F) | (pairs[..., 1] << 4)


def dequantize_mxfp4(blocks: torch.Tensor, scales: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """MXFP4 -> floating point: blocks uint8 [..., G, 16], scales uint8 [..., G] -> [..., G*32] in `dtype`.

    The leading layout is kept (no transpose). Every value is a 2-bit significand times a power of two,
    so the result is exact in float32, bfloat16 and float64 except where the scale overflows the dtype
    (scale 255 gives inf, or NaN for a zero code, like ldexp). float16 is computed in float32 and then
    rounded, so scales outside float16's range overflow or lose subnormal bits there.
    """
    _check_uint8("blocks", blocks)
    _check_uint8("scales", scales)
    if blocks.dim() < 2 or blocks.shape[-1] != BYTES_PER_BLOCK or blocks.shape[:-1] != scales.shape:
        raise ValueError(f"MXFP4 blocks {tuple(blocks.shape)} and scales {tuple(scales.shape)} do not match: "
                         f"expected blocks [..., G, {BYTES_PER_BLOCK}] and scales [..., G]")
    if not dtype.is_floating_point:
        raise ValueError(f"dequantize_mxfp4 needs a floating-point output dtype, got {dtype}")
    work = dtype if dtype in _EXACT_WORK_DTYPES else torch.float32
    pair_lut = _byte_pair_lut(blocks.device, work)  # [256, 2]: byte -> (low value, high value)
    # One gather per byte: view each (low, high) pair as a single integer twice as wide when one exists.
    wide = {2: torch.int32, 4: torch.int64}.get(pair_lut.element_size())
    flat_blocks = blocks.reshape(-1, BYTES_PER_BLOCK)  # [B, 16]
    flat_scales = scales.reshape(-1)  # [B]
    out = torch.empty(flat_blocks.shape[0], BLOCK_SIZE, dtype=dtype, device=blocks.device)  # [B, 32]
    for start in range(0, flat_blocks.shape[0], _CHUNK_BLOCKS):
        rows = slice(start, start + _CHUNK_BLOCKS)
        idx = flat_blocks[rows].to(torch.int32)  # [b, 16]
        if wide is not None:
            pairs = torch.index_select(pair_lut.view(wide).reshape(256), 0, idx.reshape(-1))  # [b*16]
            values = pairs.view(work).reshape(idx.shape[0], BLOCK_SIZE)  # [b, 32], exact
        else:
            values = pair_lut[idx].flatten(-2)  # [b, 16, 2] -> [b, 32]
        factor = e8m0_to_float(flat_scales[rows]).to(work)  # [b], powers of two (exact in `work`)
        if work == dtype:
            torch.mul(values, factor[:, None], out=out[rows])
        else:
            out[rows] = (values * factor[:, None]).to(dtype)
    return out.reshape(*scales.shape[:-1], scales.shape[-1] * BLOCK_SIZE)  # [B, 32] -> [..., G*32]


def quantize_mxfp4(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Floating point [..., K] -> (blocks uint8 [..., K/32, 16], scales uint8 [..., K/32]), along the last dim.

    Shared scale (OCP MX rule): 2**(floor(log2(amax)) - 2) where amax is the block's largest |x|, so the
    block maximum lands in [4, 8); the exponent is clamped to E8M0's [-127, 127], and an all-zero block
    gets scale byte 0 (2**-127). Each x / scale is rounded to the nearest E2M1 value, ties to the even
    code, saturating at ±6; the sign is kept (negative values that round to zero give -0, code 8).
    NaN quantizes to zero and ±inf to ±6 at the largest scale. K must be a multiple of 32, else ValueError.
    """
    if not x.dtype.is_floating_point:
        raise ValueError(f"quantize_mxfp4 needs a floating-point tensor, got {x.dtype}")
    if x.dim() == 0 or x.shape[-1] % BLOCK_SIZE:
        k = x.shape[-1] if x.dim() else None
        raise ValueError(f"MXFP4 quantization needs the last dimension K={k} to be a multiple of {BLOCK_SIZE} "
                         f"(tensor of shape {tuple(x.shape)})")
    work = torch.float64 if x.dtype == torch.float64 else torch.float32
    groups = x.shape[-1] // BLOCK_SIZE
    flat = x.reshape(-1, BLOCK_SIZE)  # [B, 32]
    blocks = torch.empty(flat.shape[0], BYTES_PER_BLOCK, dtype=torch.uint8, device=x.device)  # [B, 16]
    scales = torch.empty(flat.shape[0], dtype=torch.uint8, device=x.device)  # [B]
    for start in range(0, flat.shape[0], _CHUNK_BLOCKS):
        rows = slice(start, start + _CHUNK_BLOCKS)
        v = flat[rows].to(work)  # [b, 32]
        v = torch.where(torch.isnan(v), 0.0, v)  # NaN -> 0; ±inf stay, and saturate below
        amax = v.abs().amax(dim=-1)  # [b]
        # frexp: amax = m * 2**e with m in [0.5, 1), so floor(log2(amax)) = e - 1, exactly (no log rounding)
        _, e = torch.frexp(amax)
        shared = torch.where(amax > 0, e.to(torch.int32) - 1 - E2M1_EMAX, -E8M0_BIAS)
        shared = torch.where(torch.isinf(amax), E8M0_BIAS, shared)
        shared = shared.clamp(-E8M0_BIAS, E8M0_BIAS)  # [b]
        # [b, 32]; a power-of-two factor: exact, except results below 2**-126 (which round to 0 anyway)
        scaled = v * _exp2(-shared).to(work)[:, None]
        blocks[rows] = pack_fp4(round_to_e2m1(scaled))
        scales[rows] = (shared + E8M0_BIAS).to(torch.uint8)
    lead = x.shape[:-1]
    return blocks.reshape(*lead, groups, BYTES_PER_BLOCK), scales.reshape(*lead, groups)


def e8m0_to_float(scales: torch.Tensor) -> torch.Tensor:
    """E8M0 bytes -> float32 2**(scale - 127), built from the bits (exact on every device).

    Byte 0 gives the subnormal 2**-127 and byte 255 gives inf (OCP reserves it for NaN; inf keeps
    ldexp's behaviour, so a zero code times it is NaN).
    """
    _check_uint8("scales", scales)
    return _exp2(scales.to(torch.int32) - E8M0_BIAS)


def _exp2(exponent: torch.Tensor) -> torch.Tensor:
    """int32 exponents in [-127, 128] -> float32 2**exponent, from the bits: 2**-127 is the subnormal
    0x00400000, 2**128 is inf."""
    biased = exponent + E8M0_BIAS  # the float32 exponent field
    bits = torch.where(biased == 0, 1 << 22, biased << 23)
    return bits.view(torch.float32)


def mxfp4_nbytes(n: int, k: int) -> tuple[int, int]:
    """Bytes of the (blocks, scales) of one [n, k] MXFP4 matrix (k a multiple of 32)."""
    if k % BLOCK_SIZE:
        raise ValueError(f"MXFP4 needs K={k} to be a multiple of {BLOCK_SIZE}")
    groups = k // BLOCK_SIZE
    return n * groups * BYTES_PER_BLOCK, n * groups


def round_to_e2m1(scaled: torch.Tensor) -> torch.Tensor:
    """float values (already divided by the block scale) -> uint8 E2M1 codes: nearest value, ties to the
    even code (mantissa bit 0), saturating at ±6; the sign is kept (-0 is code 8). NaN must be removed first."""
    # The magnitude's code counts the midpoints of the grid 0, 0.5, 1, 1.5, 2, 3, 4, 6 it lies past. A value on a
    # midpoint goes to the even code: past 0.75, 1.75 and 3.5 (whose upper neighbour is even) when equal to it,
    # past 0.25, 1.25, 2.5 and 5 only when above it. One comparison a midpoint, summed in uint8 (2.5x faster on the
    # CPU than rounding on each segment and mapping 2|q| to a code).
    mag = scaled.abs()
    code = (mag > 0.25).to(torch.uint8)
    for midpoint, even_above in _E2M1_MIDPOINTS:
        code += (mag >= midpoint) if even_above else (mag > midpoint)
    return code | (torch.signbit(scaled).to(torch.uint8) << 3)


_E2M1_MIDPOINTS = ((0.75, True), (1.25, False), (1.75, True), (2.5, False), (3.5, True), (5.0, False))


@functools.lru_cache(maxsize=None)
def _byte_pair_lut(device: torch.device, dtype: torch.dtype) -> torch.Tensor:
    """[256, 2]: packed byte -> (value of its low nibble, value of its high nibble)."""
    lut = torch.tensor(E2M1_LUT, dtype=torch.float32)
    byte = torch.arange(256)
    return torch.stack((lut[byte & 0x0F], lut[byte >> 4]), dim=-1).to(device=device, dtype=dtype)


def _check_uint8(name: str, t: torch.Tensor) -> None:
    if t.dtype != torch.uint8:
        raise ValueError(f"MXFP4 {name} must be uint8, got {t.dtype} (shape {tuple(t.shape)})")


__all__ = ["BLOCK_SIZE", "E2M1_LUT", "E2M1_MAX", "E8M0_BIAS", "dequantize_mxfp4", "e8m0_to_float", "mxfp4_nbytes",
           "pack_fp4", "quantize_mxfp4", "round_to_e2m1", "unpack_fp4"]
