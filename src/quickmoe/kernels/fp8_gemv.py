"""The FP8 block-scaled dense product of a token or a few on CUDA cores: `fp8_block_gemv` (Triton) beside
`fp8_block_gemv_ref` (torch), the same signature as `fp8_gemm.fp8_block_linear`, which hands it its calls of up to
`fp8_gemm.fp8_gemv_max_tokens` tokens (one by default: each program reads its own token's rows of the weights).

At decode sizes the tensor-core GEMM (kernels/fp8_gemm.py) streams the weights through 16-token tiles of which one
token fills one row: Qwen3-30B-A3B's FP8 qkv_proj (10.5 MB) and o_proj (8.4 MB) took 7.1 and 6.3 us a call on the
H200 at M = 1, about 1.4 TB/s (docs/benchmarks.md, 2026-11-29 eighth session), where the MoE's FP8 GEMVs
(kernels/moe_fp8_gemv.py) stream their experts faster. This is the same GEMV for a dense weight: one program per
(token, ROWS weight rows, part of K), each step's C groups of 128 e4m3 columns converted to float32, multiplied by
the token's quantized activations, summed per group and scaled by (activation scale x weight block scale):

    out[m, n] = sum_g (x_scales[m, g] * w_scale_inv[n // bn, g]) * sum_{k in g} x_q[m, k] * w[n, k]  (+ bias[n])

as the tensor-core kernel scales each step's dot, in float32, with the K loop unrolled (the compiler issues a
program's loads ahead of its sums; Triton pipelines only loads that feed a dot). With K in parts (`split_k`) each
part stores its float32 sums and the program that draws the piece's last ticket adds them in order (part 0 first),
adds the bias and stores, as the tensor-core kernel does (kernels/tickets.py).

A program loads its first 1-4 steps' weights and scales before its PDL wait (`Fp8DenseGemvConfig.preload`): the
kernel ahead of it (the norm, the quantizer) lets it launch early (kernels/pdl.py), so at batch 1 the weights
stream while that kernel runs.

The sums run in another order than the tensor cores' (within float32 rounding of the float64 reference), and a
token's row does not depend on the other tokens of the call: every M up to `fp8_gemm.fp8_gemv_max_tokens` gives a
row the same bits, and a row of more tokens (the tensor cores) may differ from it in its last bits.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from quickmoe.kernels.fp8_gemm import FP8_GROUP, _check, fp8_block_linear_ref
from quickmoe.kernels.pdl import pdl_kwargs
from quickmoe.kernels.tickets import MAX_TICKETS, ticket_counters

try:  # CPU installs without triton keep the torch reference
    import triton
    import triton.language as tl

    from quickmoe.kernels.pdl import pdl_wait
    from quickmoe.kernels.tickets import last_ticket, reset_ticket, store_part, sum_parts
except ImportError:  # pragma: no cover
    triton = None

__all__ = ["Fp8DenseGemvConfig", "fp8_block_gemv", "fp8_block_gemv_ref", "gemv_supports"]


@dataclass(frozen=True)
class Fp8DenseGemvConfig:
    """One launch of the dense FP8 GEMV: weight rows a program, warps, 128-column groups a K step (loads issued
    together; at most what divides a part's groups), and parts of K (programs per piece of rows, each over an equal
    run of whole groups; at most what divides K's groups). The default, 2 rows on 1 warp in one part, was the best
    or within 0.16 us of it in `scripts/probes/fp8_dense_gemv_probe.py`'s sweep (rows 2-16, warps 1-4, 1-4 parts)
    at one token on the H200 for all four shapes it times, Qwen3-30B-A3B's and Mixtral-8x7B's qkv and o_proj
    (docs/benchmarks.md, 2026-12-02 second session): many short programs read the weights fastest."""

    rows: int = 2
    warps: int = 1
    groups: int = 4
    split_k: int = 1
    preload: int = 4  # K steps whose weights a program loads before its PDL wait (1-4; kernels/pdl.py)

    def __post_init__(self) -> None:
        for name in ("rows", "warps", "groups"):
            value = getattr(self, name)
            if value < 1 or value & (value - 1):
                raise ValueError(f"Fp8DenseGemvConfig.{name} = {value}: expected a power of two >= 1")
        if self.split_k < 1:
            raise ValueError(f"Fp8DenseGemvConfig.split_k = {self.split_k}: expected >= 1")
        if not 1 <= self.preload <= 4:
            raise ValueError(f"Fp8DenseGemvConfig.preload = {self.preload}: expected 1-4 K steps")


def gemv_supports(k: int, block: tuple[int, int]) -> bool:
    """Whether the GEMV takes a weight of K columns with these scale blocks: whole 128-column groups (its steps
    are unmasked along K) and blocks of 128 columns."""
    return k > 0 and k % FP8_GROUP == 0 and tuple(block)[1] == FP8_GROUP


def _largest_divisor(wanted: int, count: int, power_of_two: bool) -> int:
    """The largest d <= wanted dividing count (a power of two where asked)."""
    best = 1
    for d in range(1, min(wanted, count) + 1):
        if count % d == 0 and (not power_of_two or d & (d - 1) == 0):
            best = d
    return best


def fp8_block_gemv_ref(x_q: torch.Tensor, x_scales: torch.Tensor, w: torch.Tensor, w_scale_inv: torch.Tensor,
                       block: tuple[int, int], bias: torch.Tensor | None = None,
                       out_dtype: torch.dtype = torch.bfloat16, *,
                       config: Fp8DenseGemvConfig | None = None) -> torch.Tensor:
    """`fp8_block_linear_ref`: both operands dequantized, multiplied in float64, rounded once. `config` is the
    kernel's, unused."""
    return fp8_block_linear_ref(x_q, x_scales, w, w_scale_inv, block, bias, out_dtype)


def fp8_block_gemv(x_q: torch.Tensor, x_scales: torch.Tensor, w: torch.Tensor, w_scale_inv: torch.Tensor,
                   block: tuple[int, int], bias: torch.Tensor | None = None, out_dtype: torch.dtype = torch.bfloat16,
                   *, config: Fp8DenseGemvConfig | None = None) -> torch.Tensor:
    """The Triton kernel of `fp8_block_gemv_ref` -> [M, N] out_dtype, one token per program row of the grid."""
    _check(x_q, x_scales, w, w_scale_inv, block, bias, out_dtype)
    if triton is None:
        raise RuntimeError("fp8_block_gemv needs triton; fp8_block_gemv_ref is the torch version")
    (m, k), n = x_q.shape, w.shape[0]
    if not gemv_supports(k, block):
        raise ValueError(f"fp8_block_gemv: K = {k} with blocks {tuple(block)}: expected whole groups of "
                         f"{FP8_GROUP} columns (fp8_block_linear's tensor-core kernel takes the others)")
    cfg = config or Fp8DenseGemvConfig()
    out = torch.empty(m, n, dtype=out_dtype, device=x_q.device)
    if m == 0 or n == 0:
        return out
    x_q, w = (t if t.stride(1) == 1 else t.contiguous() for t in (x_q, w))
    groups = k // FP8_GROUP
    grid_n = triton.cdiv(n, cfg.rows)
    split = _largest_divisor(cfg.split_k, groups, power_of_two=False)
    if m * grid_n > MAX_TICKETS:
        split = 1
    step_groups = _largest_divisor(cfg.groups, groups // split, power_of_two=True)
    partials = counters = out
    if split > 1:
        partials = torch.empty(m * grid_n * split * cfg.rows, dtype=torch.float32, device=x_q.device)
        counters = ticket_counters(x_q.device, "fp8_gemv")
    _fp8_gemv_kernel[(m, grid_n, split)](
        x_q, x_scales, w, w_scale_inv, bias if bias is not None else out, out, partials, counters, n,
        x_q.stride(0), x_scales.stride(0), x_scales.stride(1), w.stride(0), w_scale_inv.stride(0),
        w_scale_inv.stride(1), out.stride(0), K_PER_SPLIT=groups // split * FP8_GROUP, BN_SCALE=block[0],
        HAS_BIAS=bias is not None, ROWS=cfg.rows, C=step_groups, SPLIT_K=split,
        PRELOAD=min(cfg.preload, groups // split // step_groups), num_warps=cfg.warps, **pdl_kwargs(x_q.device))
    return out


if triton is not None:

    @triton.jit
    def gemv_weights(w_ptrs, w_ok, s_ptrs):
        """One GEMV step's weights: the rows' tile [R, C x 128] as stored (e4m3) and their block scales [R, C]."""
        w = tl.load(w_ptrs, mask=w_ok[:, None], other=0.0)
        s = tl.load(s_ptrs, mask=w_ok[:, None], other=0.0)
        return w, s

    @triton.jit
    def gemv_sums(x_ptrs, xs_ptrs, w, s, ROWS: tl.constexpr, C: tl.constexpr):
        """`gemv_step` on weights already loaded (`gemv_weights`)."""
        x = tl.load(x_ptrs).to(tl.float32)  # [R, C x 128] e4m3 values (rows equal)
        part = tl.sum(tl.reshape(w.to(tl.float32) * x, (ROWS, C, 128)), axis=2)  # [R, C]
        factor = tl.load(xs_ptrs)[None, :] * s  # [R, C]
        return tl.sum(part * factor, axis=1)

    @triton.jit
    def gemv_step(x_ptrs, xs_ptrs, w_ptrs, w_ok, s_ptrs, ROWS: tl.constexpr, C: tl.constexpr):
        """C 128-column groups of a GEMV at once: the weight rows [R, C x 128] (e4m3) times the activations'
        quantized groups, summed per group, times (activation scale x the rows' weight scales), summed -> [R]
        float32. x_ptrs [R, C x 128] repeats the one activation row on every weight row, so both tiles take one
        layout and the sums stay within warps; xs_ptrs [C], s_ptrs [R, C]."""
        # written out rather than through gemv_weights + gemv_sums: the MoE GEMVs call it too, and the loads in
        # this order (activations first) gave them other SASS than in that one (GEMV 2: 70 -> 128 registers, the
        # Qwen3-30B-A3B FP8 step's MoE +0.13 ms on the H200; docs/benchmarks.md, 2026-12-02 third session)
        x = tl.load(x_ptrs).to(tl.float32)  # [R, C x 128] e4m3 values (rows equal)
        w = tl.load(w_ptrs, mask=w_ok[:, None], other=0.0).to(tl.float32)  # [R, C x 128]
        part = tl.sum(tl.reshape(w * x, (ROWS, C, 128)), axis=2)  # [R, C]
        factor = tl.load(xs_ptrs)[None, :] * tl.load(s_ptrs, mask=w_ok[:, None], other=0.0)  # [R, C]
        return tl.sum(part * factor, axis=1)

    @triton.jit
    def _fp8_gemv_kernel(x_ptr, xs_ptr, w_ptr, ws_ptr, bias_ptr, out_ptr, partial_ptr, counter_ptr, N, stride_xm,
                         stride_xsm, stride_xsg, stride_wn, stride_wsn, stride_wsg, stride_om,
                         K_PER_SPLIT: tl.constexpr, BN_SCALE: tl.constexpr, HAS_BIAS: tl.constexpr,
                         ROWS: tl.constexpr, C: tl.constexpr, SPLIT_K: tl.constexpr, PRELOAD: tl.constexpr,
                         PDL: tl.constexpr):
        token = tl.program_id(0).to(tl.int64)
        pid_n = tl.program_id(1)
        part = tl.program_id(2)
        rows = pid_n * ROWS + tl.arange(0, ROWS)  # [R] output columns = weight rows
        ok = rows < N
        kk = tl.arange(0, C * 128)
        groups = tl.arange(0, C)
        k_lo = part * K_PER_SPLIT  # this program's run of K: whole groups, the same count in every part
        g_lo = k_lo // 128
        x_ptrs = x_ptr + token * stride_xm + k_lo + kk[None, :] + 0 * rows[:, None]  # [R, C x 128]: the token's
        # row on every weight row (both tiles in one layout: no sum crosses a warp)
        w_ptrs = w_ptr + rows.to(tl.int64)[:, None] * stride_wn + k_lo + kk[None, :]  # [R, C x 128]
        xs_ptrs = xs_ptr + token * stride_xsm + (g_lo + groups) * stride_xsg  # [C]
        s_ptrs = ws_ptr + (rows // BN_SCALE)[:, None] * stride_wsn + (g_lo + groups)[None, :] * stride_wsg  # [R, C]
        # the first PRELOAD steps' weights before the wait (no kernel writes them; kernels/pdl.py): with the
        # kernel ahead (the norm, the quantizer) letting this one start early, they are read while it runs
        w0, s0 = gemv_weights(w_ptrs, ok, s_ptrs)
        if PRELOAD > 1:
            w1, s1 = gemv_weights(w_ptrs + C * 128, ok, s_ptrs + C * stride_wsg)
        if PRELOAD > 2:
            w2, s2 = gemv_weights(w_ptrs + 2 * C * 128, ok, s_ptrs + 2 * C * stride_wsg)
        if PRELOAD > 3:
            w3, s3 = gemv_weights(w_ptrs + 3 * C * 128, ok, s_ptrs + 3 * C * stride_wsg)
        pdl_wait(PDL)
        acc = tl.zeros([ROWS], dtype=tl.float32)
        for k0 in tl.static_range(0, K_PER_SPLIT, C * 128):  # unrolled: loads issued ahead of the sums
            x_k = x_ptrs + k0
            xs_k = xs_ptrs + (k0 // 128) * stride_xsg
            step = k0 // (C * 128)
            if step == 0:
                acc += gemv_sums(x_k, xs_k, w0, s0, ROWS, C)
            elif step == 1 and PRELOAD > 1:
                acc += gemv_sums(x_k, xs_k, w1, s1, ROWS, C)
            elif step == 2 and PRELOAD > 2:
                acc += gemv_sums(x_k, xs_k, w2, s2, ROWS, C)
            elif step == 3 and PRELOAD > 3:
                acc += gemv_sums(x_k, xs_k, w3, s3, ROWS, C)
            else:
                acc += gemv_step(x_k, xs_k, w_ptrs + k0, ok, s_ptrs + (k0 // 128) * stride_wsg, ROWS, C)
        out = out_ptr + token * stride_om + rows
        if SPLIT_K == 1:
            if HAS_BIAS:
                acc += tl.load(bias_ptr + rows, mask=ok, other=0.0).to(tl.float32)
            tl.store(out, acc.to(out_ptr.dtype.element_ty), mask=ok)
        else:
            piece = tl.program_id(0) * tl.num_programs(1) + pid_n  # (token, rows)
            store_part(partial_ptr, piece * SPLIT_K + part, tl.reshape(acc, (1, ROWS)), ok[None, :], 1, ROWS)
            if last_ticket(counter_ptr, piece, SPLIT_K):  # the piece's last program: the other parts are visible
                total = tl.reshape(sum_parts(partial_ptr, piece * SPLIT_K, ok[None, :], SPLIT_K, 1, ROWS),
                                   (ROWS,))  # in order
                reset_ticket(counter_ptr, piece)
                if HAS_BIAS:
                    total += tl.load(bias_ptr + rows, mask=ok, other=0.0).to(tl.float32)
                tl.store(out, total.to(out_ptr.dtype.element_ty), mask=ok)
