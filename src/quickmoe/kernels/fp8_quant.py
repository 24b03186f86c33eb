"""FP8 activation quantizer per token and group of 128 columns: `quantize_fp8_per_token_group` (Triton) beside
`quantize_fp8_per_token_group_ref` (torch: formats.fp8), same signature, bit-identical results.

x [T, K] -> (q float8_e4m3fn [T, K], scales float32 [T, ceil(K/group)]): scale = max(amax, 1e-10) / 448 over
each group, q = x / scale (IEEE division) rounded to the nearest e4m3 value, ties to even, saturating at
448. The FP8 MoE GEMMs multiply these by e4m3 weights and scale each 128-column step's dot by (activation
scale x weight scale). On the GPU the conversion rounds (cvt.rn.satfinite: to nearest, ties to even, the
reference's rounding); the interpreter's float8 conversion does not round that way, so there the kernel rounds
explicitly in float32 and the conversion is exact. The explicit rounding was the kernel's cost on the GPU too: with
the conversion rounding, Qwen3-30B-A3B's 65,536 x 768 intermediate at T = 8,192 took 40 against 81 us on the H200,
near the HBM rate (docs/benchmarks.md, 2026-11-29 seventh session). A program takes a [ROWS, GROUPS, GROUP] tile of
up to 4,096 values (up to 2,048 columns of a row; GROUPS divides a row's groups, so no lane is masked where K is
whole groups), fewer at decode sizes: one program per (token, group) of 128 values was launch-bound at prefill
sizes (81 us for 8,192 tokens x 2,048 columns on the H100, 30 us as tiles).
"""

from __future__ import annotations

import torch

from quickmoe.formats.fp8 import quantize_fp8_per_token_group as quantize_fp8_per_token_group_ref
from quickmoe.kernels.pdl import pdl_early_trigger

try:  # CPU installs without triton keep the torch reference
    import triton
    import triton.language as tl

    from quickmoe.kernels.pdl import pdl_trigger
except ImportError:  # pragma: no cover
    triton = None

__all__ = ["launch_tile", "quantize_fp8_per_token_group", "quantize_fp8_per_token_group_ref"]


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
        rows, per_program, num_warps = launch_tile(num_rows, groups, group)
        grid = (triton.cdiv(num_rows, rows), triton.cdiv(groups, per_program))
        # the next kernel (an FP8 GEMV) may start at once and read its weights beside this one
        _quantize_kernel[grid](
            x, q.view(torch.uint8), scales, num_rows, k, groups, x.stride(0), x.stride(1), GROUP=group,
            GROUPS=per_program, ROWS=rows, HW_ROUND=x.device.type == "cuda",
            EARLY=pdl_early_trigger(x.device, grid[0] * grid[1], num_warps), num_warps=num_warps)
    return q, scales


def launch_tile(num_rows: int, groups: int, group: int = 128) -> tuple[int, int, int]:
    """(rows, groups of a row, warps) of one program. About 256 programs while each has <= 4,096 values, so decode
    sizes keep many small programs; the results do not depend on the tiling (a group's maximum is exact in any
    order). The groups of a program are the largest power of two that divides a row's groups (768 columns: 2 of 6,
    where the next power of two, 8, masked a quarter of every tile: 128 -> 81 us for 65,536 rows on the H200). The
    warps give each thread 1 value (a one-group tile on 4 warps) or >= 4 (`MIN_VALUES_PER_THREAD`), never 2: on the
    H200 with triton 3.6 every tile of exactly 2 values a thread (64 a warp: [1, 1, 128] on 2 warps, [1, 2, 128] or
    [2, 1, 128] on 4, [1, 4, 128] on 8) computed wrong bits in bf16 and float32 alike, and with the 4 warps this
    once took for every tile, FP8 `fused_moe` was wrong wherever a GEMM's activations had 512-1,023 groups (e.g. 16
    x 4,096, 128 x 768); 1 value a thread and 4 or more were right (`scripts/probes/fp8_quant_tiles_probe.py`,
    docs/benchmarks.md). Since the GPU's conversion rounds, every tile and warp count of that probe computed the
    right bits on the H200, 2 values a thread included (the MXFP8 quantizer, which still rounds in float32, still
    fails there: the fault lies in the float32 rounding's code); the rule stays, as the interpreter's path keeps
    that code."""
    total = num_rows * groups * group
    tile = max(group, min(_TILE_ELEMENTS, 1 << max(0, (total // 256).bit_length() - 1)))
    per_program = min(groups & -groups, max(1, min(tile, _ROW_ELEMENTS) // group))  # of a row: divides it
    rows = max(1, tile // (per_program * group))
    num_warps = 4 if tile == group else max(1, min(4, tile // (32 * MIN_VALUES_PER_THREAD)))
    return rows, per_program, num_warps


_TILE_ELEMENTS = 4096  # values a program quantizes
MIN_VALUES_PER_THREAD = 4  # see launch_tile
_ROW_ELEMENTS = 2048  # at most this many columns of a row per program


if triton is not None:

    @triton.jit
    def _quantize_kernel(x_ptr, q_ptr, s_ptr, T, K, G, stride_t, stride_k, GROUP: tl.constexpr,
                         GROUPS: tl.constexpr, ROWS: tl.constexpr, HW_ROUND: tl.constexpr, EARLY: tl.constexpr):
        pdl_trigger(EARLY)  # launched without PDL (nothing it reads is written early); only lets the next start
        rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)  # [R] tokens
        groups = tl.program_id(1) * GROUPS + tl.arange(0, GROUPS)  # [Gp] groups of 128 (GROUP) columns
        cols = groups[:, None] * GROUP + tl.arange(0, GROUP)[None, :]  # [Gp, GROUP]
        row_ok = rows < T
        ok = row_ok[:, None, None] & (cols < K)[None, :, :]  # [R, Gp, GROUP]
        x = tl.load(x_ptr + rows.to(tl.int64)[:, None, None] * stride_t + cols[None, :, :] * stride_k, mask=ok,
                    other=0.0).to(tl.float32)
        amax = tl.maximum(tl.max(tl.abs(x), axis=2), 1e-10)  # [R, Gp]
        scale = tl.math.div_rn(amax, tl.zeros_like(amax) + 448.0)  # IEEE division (Triton's `/` is approximate)
        v = tl.math.div_rn(x, tl.zeros_like(x) + scale[:, :, None])  # IEEE division, as the reference
        v = tl.minimum(tl.maximum(v, -448.0), 448.0)
        bits = e4m3_rne_bits(v, HW_ROUND)
        tl.store(q_ptr + rows.to(tl.int64)[:, None, None] * K + cols[None, :, :], bits, mask=ok)
        tl.store(s_ptr + rows[:, None] * G + groups[None, :], scale, mask=row_ok[:, None] & (groups < G)[None, :])

    @triton.jit
    def quantize_groups(x, HW_ROUND: tl.constexpr):
        """float32 x [G, 128] (groups of a row) -> (e4m3 bits uint8 [G, 128], scales [G]): the quantizer's
        arithmetic, for kernels that quantize rows they hold (`rms_norm`'s FP8 output)."""
        amax = tl.maximum(tl.max(tl.abs(x), axis=1), 1e-10)
        scale = tl.math.div_rn(amax, tl.zeros_like(amax) + 448.0)  # IEEE division (Triton's `/` is approximate)
        v = tl.math.div_rn(x, tl.zeros_like(x) + scale[:, None])  # IEEE division
        v = tl.minimum(tl.maximum(v, -448.0), 448.0)
        return e4m3_rne_bits(v, HW_ROUND), scale

    @triton.jit
    def e4m3_rne_bits(v, HW_ROUND: tl.constexpr):
        """float32 v within +-448 -> the bits (uint8) of the nearest e4m3 value, ties to even."""
        if HW_ROUND:  # the GPU's conversion: to nearest, ties to even, saturating (v is within +-448)
            bits = v.to(tl.float8e4nv, fp_downcast_rounding="rtne").to(tl.uint8, bitcast=True)
        else:
            mag = tl.abs(v)
            # e4m3 ulp: 2^(floor(log2|v|) - 3) for |v| >= 2^-6, else 2^-9 (subnormals)
            exp = tl.maximum(((tl.maximum(mag, 1e-30).to(tl.int32, bitcast=True) >> 23) & 0xFF) - 127, -6)
            ulp = ((exp - 3 + 127) << 23).to(tl.float32, bitcast=True)
            units = mag / ulp  # exact: division by a power of two
            rounded = tl.floor(units + 0.5)
            tie_to_odd = ((rounded - units) == 0.5) & ((rounded.to(tl.int32) & 1) == 1)
            rounded = tl.where(tie_to_odd, rounded - 1.0, rounded)  # ties to even
            q = tl.where(v < 0, -rounded * ulp, rounded * ulp)  # on the e4m3 grid: the conversion below is exact
            # the sign bit set again: a value that rounds to zero keeps its sign (-0.0, as the reference), which
            # the interpreter's float8 conversion drops
            sign = ((v.to(tl.uint32, bitcast=True) >> 31) << 7).to(tl.uint8)
            bits = q.to(tl.float8e4nv).to(tl.uint8, bitcast=True) | sign
        return bits
