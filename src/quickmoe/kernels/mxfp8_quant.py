"""MXFP8 activation quantizer: `quantize_mxfp8` (Triton) beside `quantize_mxfp8_ref` (torch).

x [T, K] -> (q float8_e4m3fn [T, Kp], scales uint8 [T, Kp / 32]) with Kp = K rounded up to 32: the
quantizer pads inside itself (columns past K are zeros, an all-zero block gets scale byte 0), so the
caller never pads activations. OCP MX rule: each block of 32 shares the E8M0 scale
2^(floor(log2(amax)) - 8) (e4m3's largest value, 448, is 1.75 * 2^8), so the block maximum lands in
[256, 512) and is saturated to 448 if above; each x / scale is rounded to the nearest e4m3 value, ties
to even. NaN becomes 0; the shared exponent is clamped to [-127, 127].

The kernel rounds explicitly in float32 (the ulp of e4m3 is 2^(e - 3) for normals, 2^-9 below 2^-6), so
the final float8 conversion is exact whatever rounding mode the backend's conversion uses.
"""

from __future__ import annotations

import torch

from quickmoe.kernels.fp8_quant import MIN_VALUES_PER_THREAD

try:  # CPU installs without triton keep the torch reference
    import triton
    import triton.language as tl
except ImportError:  # pragma: no cover
    triton = None

__all__ = ["quantize_mxfp8", "quantize_mxfp8_ref", "dequantize_mxfp8_ref", "launch_warps"]

E4M3_MAX = 448.0
E4M3_EMAX = 8
BLOCK = 32


def _check(x: torch.Tensor) -> None:
    if x.dim() != 2 or not x.dtype.is_floating_point:
        raise ValueError(f"quantize_mxfp8: expected a floating-point [T, K] tensor, got {x.dtype} {tuple(x.shape)}")


def quantize_mxfp8_ref(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """See the module docstring."""
    _check(x)
    num_rows, k = x.shape
    padded = -(-k // BLOCK) * BLOCK
    v = torch.zeros(num_rows, padded, dtype=torch.float32, device=x.device)
    v[:, :k] = torch.nan_to_num(x.float(), nan=0.0, posinf=float("inf"), neginf=float("-inf"))
    blocks = v.view(num_rows, padded // BLOCK, BLOCK)  # [T, G, 32]
    amax = blocks.abs().amax(dim=-1)  # [T, G]
    _, e = torch.frexp(amax)  # amax = m * 2^e, m in [0.5, 1): floor(log2(amax)) = e - 1
    shared = torch.where(amax > 0, e - 1 - E4M3_EMAX, -127)
    shared = torch.where(torch.isinf(amax), 127, shared).clamp(-127, 127)  # [T, G]
    scaled = blocks * torch.exp2(-shared.double()).float()[..., None]  # exact powers of two
    q = scaled.clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn)  # round to nearest even
    return q.view(num_rows, padded), (shared + 127).to(torch.uint8)


def dequantize_mxfp8_ref(q: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    """(q [T, Kp] e4m3, scales [T, Kp/32]) -> float32 [T, Kp]."""
    factor = torch.exp2(scales.double() - 127).float()  # [T, G]
    return (q.float().view(q.shape[0], -1, BLOCK) * factor[..., None]).view(q.shape[0], -1)


def quantize_mxfp8(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The Triton kernel of `quantize_mxfp8_ref` (bit-identical results)."""
    _check(x)
    if triton is None:
        raise RuntimeError("quantize_mxfp8 needs triton (pip install triton); quantize_mxfp8_ref is the torch version")
    num_rows, k = x.shape
    padded = -(-k // BLOCK) * BLOCK
    q = torch.empty(num_rows, padded, dtype=torch.float8_e4m3fn, device=x.device)
    scales = torch.empty(num_rows, padded // BLOCK, dtype=torch.uint8, device=x.device)
    if num_rows and padded:
        block_k = min(256, triton.next_power_of_2(padded))
        grid = (num_rows, triton.cdiv(padded, block_k))
        _quantize_kernel[grid](x, q.view(torch.uint8), scales, k, padded, x.stride(0), x.stride(1), BLOCK_K=block_k,
                               num_warps=launch_warps(block_k))
    return q, scales


def launch_warps(block_k: int) -> int:
    """Warps of a program quantizing block_k (32-256) values of a row: 1 value a thread up to 64 values, else 4 or
    more, never 2. On the H200 with triton 3.6 the default 4 warps gave the 256-value tiles (any row of more than
    128 columns) 2 values a thread, and every second value came out wrong (gpt-oss's 2,880 columns, 2026-11-29),
    the fault `fp8_quant.launch_tile` documents for the FP8 quantizer."""
    if block_k <= 64:
        return max(1, block_k // 32)
    return max(1, min(4, block_k // (32 * MIN_VALUES_PER_THREAD)))


if triton is not None:

    @triton.jit
    def _floor_log2(a):
        """floor(log2(a)) of positive normal float32 values, from the exponent bits (exact)."""
        return ((a.to(tl.int32, bitcast=True) >> 23) & 0xFF) - 127

    @triton.jit
    def _quantize_kernel(x_ptr, q_ptr, s_ptr, K, KP, stride_t, stride_k, BLOCK_K: tl.constexpr):
        row = tl.program_id(0)
        cols = tl.program_id(1) * BLOCK_K + tl.arange(0, BLOCK_K)  # [BK], a multiple of 32 wide
        x = tl.load(x_ptr + row * stride_t + cols * stride_k, mask=cols < K, other=0.0).to(tl.float32)
        x = tl.where(x != x, 0.0, x)  # NaN -> 0
        v = tl.reshape(x, (BLOCK_K // 32, 32))  # [G, 32]
        amax = tl.max(tl.abs(v), axis=1)  # [G]
        # zero (or float32-subnormal) blocks clamp to -127 like the reference; an infinite amax to 127
        shared = tl.where(amax == float("inf"), 127, tl.maximum(_floor_log2(amax) - 8, -127))
        shared = tl.minimum(shared, 127)
        factor = ((127 - shared) << 23).to(tl.float32, bitcast=True)  # 2^-shared, exact (shared > -128)
        infinite = tl.abs(v) == float("inf")
        scaled = tl.where(infinite, v, tl.where(infinite, 0.0, v) * factor[:, None])  # never inf * 0
        scaled = tl.minimum(tl.maximum(scaled, -448.0), 448.0)
        mag = tl.abs(scaled)
        # e4m3 ulp: 2^(floor(log2|v|) - 3) for |v| >= 2^-6, else 2^-9 (subnormals)
        exp = tl.maximum(_floor_log2(tl.maximum(mag, 1e-30)), -6)
        ulp = ((exp - 3 + 127) << 23).to(tl.float32, bitcast=True)
        units = mag / ulp  # exact: division by a power of two
        rounded = tl.floor(units + 0.5)
        tie_to_odd = ((rounded - units) == 0.5) & ((rounded.to(tl.int32) & 1) == 1)
        rounded = tl.where(tie_to_odd, rounded - 1.0, rounded)  # ties to even
        quantized = tl.where(scaled < 0, -rounded * ulp, rounded * ulp)  # on the e4m3 grid: exact below
        q = tl.reshape(quantized, (BLOCK_K,))
        # the sign bit set from the scaled value: a negative value that rounds to zero (and -0.0 itself) stays
        # -0.0 as in the reference, which the float8 conversion drops (the GPU's and the interpreter's alike)
        sign = ((tl.reshape(scaled, (BLOCK_K,)).to(tl.uint32, bitcast=True) >> 31) << 7).to(tl.uint8)
        tl.store(q_ptr + row * KP + cols, q.to(tl.float8e4nv).to(tl.uint8, bitcast=True) | sign, mask=cols < KP)
        groups = tl.program_id(1) * (BLOCK_K // 32) + tl.arange(0, BLOCK_K // 32)
        tl.store(s_ptr + row * (KP // 32) + groups, (shared + 127).to(tl.uint8), mask=groups < KP // 32)
