"""FP8 activation quantizer per token and group of 128 columns: `quantize_fp8_per_token_group` (Triton) beside
`quantize_fp8_per_token_group_ref` (torch: formats.fp8), same signature, bit-identical results.

x [T, K] -> (q float8_e4m3fn [T, K], scales float32 [T, ceil(K/group)]): scale = max(amax, 1e-10) / 448 over
each group, q = x / scale (IEEE division) rounded to the nearest e4m3 value, ties to even, saturating at
448. The FP8 MoE GEMMs multiply these by e4m3 weights and scale each 128-column step's dot by (activation
scale x weight scale). The kernel rounds explicitly in float32, so the final float8 conversion is exact
whatever rounding mode the backend's conversion uses.
"""

from __future__ import annotations

import torch

from quickmoe.formats.fp8 import quantize_fp8_per_token_group as quantize_fp8_per_token_group_ref

try:  # CPU installs without triton keep the torch reference
    import triton
    import triton.language as tl
except ImportError:  # pragma: no cover
    triton = None

__all__ = ["quantize_fp8_per_token_group", "quantize_fp8_per_token_group_ref"]


def quantize_fp8_per_token_group(x: torch.Tensor, group: int = 128) -> tuple[torch.Tensor, torch.Tensor]:
    """The Triton kernel of `quantize_fp8_per_token_group_ref`."""
    if x.dim() != 2 or not x.dtype.is_floating_point:
        raise ValueError(f"quantize_fp8_per_token_group: expected a floating-point [T, K] tensor, got {x.dtype} "
                         f"{tuple(x.shape)}")
    if triton is None:
        raise RuntimeError("quantize_fp8_per_token_group needs triton; the _ref version is the torch one")
    if group & (group - 1):
        raise ValueError(f"quantize_fp8_per_token_group: group = {group}: expected a power of two")
    num_rows, k = x.shape
    groups = -(-k // group)
    q = torch.empty(num_rows, k, dtype=torch.float8_e4m3fn, device=x.device)
    scales = torch.empty(num_rows, groups, dtype=torch.float32, device=x.device)
    if num_rows and k:
        _quantize_kernel[(num_rows, groups)](x, q, scales, k, groups, x.stride(0), x.stride(1), GROUP=group)
    return q, scales


if triton is not None:

    @triton.jit
    def _quantize_kernel(x_ptr, q_ptr, s_ptr, K, G, stride_t, stride_k, GROUP: tl.constexpr):
        row = tl.program_id(0)
        cols = tl.program_id(1) * GROUP + tl.arange(0, GROUP)  # [G] one group of one token
        ok = cols < K
        x = tl.load(x_ptr + row * stride_t + cols * stride_k, mask=ok, other=0.0).to(tl.float32)
        scale = tl.maximum(tl.max(tl.abs(x), axis=0), 1e-10) / 448.0
        v = tl.math.div_rn(x, tl.zeros_like(x) + scale)  # IEEE division, as the reference
        v = tl.minimum(tl.maximum(v, -448.0), 448.0)
        mag = tl.abs(v)
        # e4m3 ulp: 2^(floor(log2|v|) - 3) for |v| >= 2^-6, else 2^-9 (subnormals)
        exp = tl.maximum(((tl.maximum(mag, 1e-30).to(tl.int32, bitcast=True) >> 23) & 0xFF) - 127, -6)
        ulp = ((exp - 3 + 127) << 23).to(tl.float32, bitcast=True)
        units = mag / ulp  # exact: division by a power of two
        rounded = tl.floor(units + 0.5)
        tie_to_odd = ((rounded - units) == 0.5) & ((rounded.to(tl.int32) & 1) == 1)
        rounded = tl.where(tie_to_odd, rounded - 1.0, rounded)  # ties to even
        q = tl.where(v < 0, -rounded * ulp, rounded * ulp)  # on the e4m3 grid: the conversion below is exact
        tl.store(q_ptr + row * K + cols, q.to(tl.float8e4nv), mask=ok)
        tl.store(s_ptr + row * G + tl.program_id(1), scale)
