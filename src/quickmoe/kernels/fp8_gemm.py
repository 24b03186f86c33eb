"""FP8 block-scaled dense GEMM on tensor cores: `fp8_block_linear` (Triton) beside `fp8_block_linear_ref` (torch),
same signature. The product of the FP8 dense layers (layers/fp8_linear.py) on CUDA.

Operands (formats/fp8.py): activations x_q float8_e4m3fn [M, K] with float32 scales x_scales [M, ceil(K/128)],
one per token and group of 128 columns (kernels/fp8_quant.py); weights w float8_e4m3fn [N, K] with float32
w_scale_inv [ceil(N/bn), ceil(K/bk)], one per block of bn rows x bk columns, bk = 128. Both dequantize by one
multiplication, x[m, k] = x_q[m, k] * x_scales[m, k // 128] and W[n, k] = w[n, k] * w_scale_inv[n // bn, k // 128],
so within one 128-column group g both scales are constant along k and factor out of the group's dot:

    out[m, n] = sum_g (x_scales[m, g] * w_scale_inv[n // bn, g]) * sum_{k in g} x_q[m, k] * w[n, k]  (+ bias[n])

The kernel steps K by one group (128 columns): an e4m3 x e4m3 tensor-core dot of the step's tiles into a fresh
float32 tile (every product of two e4m3 values is exact in float32), scaled by the step's factor [BM, BN] (the
outer product of the two scale vectors; one scalar for the weights when BLOCK_N divides bn), added to the float32
accumulator; bias after the K loop, one rounding into out_dtype at the store. Ragged M, N and K are masked (the
loads give 0 past the edges, so a partial last group adds nothing spurious). Triton's CPU interpreter runs the
dots on float32 operands (exact conversions of e4m3, as kernels/moe_gemm.py does).

Orientation (`swap_ab`, as the MoE GEMMs): x_q @ w^T ([BM, BK] x [BK, BN]), or the transposed product
w @ x_q^T ([BN, BK] x [BK, BM]), which puts the weights on the wide side of Hopper's wgmma (M >= 64 per warp
group) and the tokens on the narrow one (16 at decode). Both operands are read K-contiguous, as FP8 wgmma needs.

Decode sizes: K in parts (`split_k`). At a few tokens the GEMM is a stream of the weights, and a program's K loop
is a chain of steps each waiting on its loads and its dot: Qwen3-30B-A3B's o_proj (K = 4,096: 32 steps on 32
programs at M = 1) took 10.8 us on the H200 where its 8.4 MB take ~2 us at the HBM's rate. With `split_k` the
output tile's K groups are cut into equal parts, one program each. Each part sums its steps from zero as above
and stores its float32 tile; the program that takes the tile's last ticket (an atomic counter, kernels/tickets.py,
as the router does) adds the parts in order (part 0 first), adds the bias and stores. The result does not depend
on which program finishes last, but it is another float32 sum than one program's, so `_config` takes the split
from K alone: every token count up to 64 (the transposed tiles) gives a row the same bits.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass

import torch

from quickmoe.formats.fp8 import FP8_DTYPE, block_scale_shape, dequantize_fp8_block, expand_block_scales
from quickmoe.kernels.fp8_quant import quantize_fp8_per_token_group, quantize_fp8_per_token_group_ref
from quickmoe.kernels.pdl import pdl_kwargs
from quickmoe.kernels.tickets import MAX_TICKETS, ticket_counters

try:  # CPU installs without triton keep the torch reference
    import triton
    import triton.language as tl

    from quickmoe.kernels.pdl import pdl_wait
    from quickmoe.kernels.tickets import last_ticket, reset_ticket, store_part, sum_parts
except ImportError:  # pragma: no cover
    triton = None

__all__ = ["FP8_GROUP", "Fp8GemmConfig", "fp8_block_linear", "fp8_block_linear_ref", "fp8_quant_block_linear",
           "fp8_quant_block_linear_ref"]

FP8_GROUP = 128  # columns per activation scale and per weight scale block (bk): the kernel's K step
OUT_DTYPES = (torch.bfloat16, torch.float16, torch.float32)
FP8_GEMV_MAX_TOKENS = 1  # see fp8_gemv_max_tokens


def token_bound_from_env(name: str, default: int) -> int:
    """A kernel choice's bound on tokens: the environment's `name` (a number of tokens >= 0; 0: never; for A/B
    runs), else `default`."""
    value = os.environ.get(name)
    if value is None:
        return default
    if not value.isdigit():
        raise ValueError(f"{name} = {value!r}: expected a number of tokens >= 0")
    return int(value)


@functools.lru_cache(maxsize=16)
def fp8_gemv_max_tokens(device: torch.device) -> int:
    """Up to how many tokens `fp8_block_linear` (without an explicit config) runs on `fp8_gemv.fp8_block_gemv`
    (CUDA cores) instead of the tensor-core kernel, where K is whole 128-column groups: FP8_GEMV_MAX_TOKENS, or
    QUICKMOE_FP8_DENSE_GEMV_MAX_TOKENS from the environment (0: never; for A/B runs). One token: on the H200 the
    GEMV took Qwen3-30B-A3B's qkv_proj in 5.4 against 6.6 us and Mixtral-8x7B's in 8.6 against 10.8 us, but each
    program reads its token's rows of the weights, so at 4 tokens it read them four times and lost (9.7 against
    7.2 us at its first launch config; docs/benchmarks.md, 2026-12-02 second session)."""
    return token_bound_from_env("QUICKMOE_FP8_DENSE_GEMV_MAX_TOKENS", FP8_GEMV_MAX_TOKENS)


@dataclass(frozen=True)
class Fp8GemmConfig:
    """One launch of the FP8 GEMM: a program's tokens (block_m) x output columns (block_n), warps, pipeline
    stages, orientation (swap_ab); split_k: programs per output tile, each over an equal run of whole K groups
    (the last to finish sums the parts in order, see the module docstring)."""

    block_m: int
    block_n: int
    num_warps: int = 4
    num_stages: int = 3
    swap_ab: bool = False
    split_k: int = 1

    def __post_init__(self) -> None:
        for name in ("block_m", "block_n"):
            value = getattr(self, name)
            if value < 1 or value & (value - 1):
                raise ValueError(f"Fp8GemmConfig.{name} = {value}: expected a power of two")
        if self.split_k < 1:
            raise ValueError(f"Fp8GemmConfig.split_k = {self.split_k}: expected >= 1")


def _config(m: int, n: int, k: int) -> Fp8GemmConfig:
    """The launch config for M tokens: tuned for Qwen3-30B-A3B's qkv_proj (2048 -> 5120) and o_proj (4096 -> 2048),
    the best sum of both per M of scripts/probes/fp8_gemm_probe.py --sweep (H100, 2026-11-24: tiles; H200,
    2026-11-29: K in parts; re-tune there for other shapes). Up to 64 tokens they sit on wgmma's narrow side
    (swap_ab; the plain orientation at BLOCK_M 16 compiles to fp16 mma.sync, not fp8 wgmma), with K in parts of
    about 8 groups (`_split_k`: o_proj at M = 1 went 13.0 -> 8.5 us with 4 parts; qkv_proj, 16 groups, within the
    sweep's spread with 2); larger M: 64 x 64, then 64 x 128 tiles, in one part. The choices were within 10% of one
    another at 1024+ tokens."""
    if m <= 16:
        return Fp8GemmConfig(16, 64, num_warps=4, num_stages=6, swap_ab=True, split_k=_split_k(k))
    if m <= 64:
        return Fp8GemmConfig(32, 64, num_warps=4, num_stages=4, swap_ab=True, split_k=_split_k(k))
    if m <= 256:
        return Fp8GemmConfig(64, 64, num_warps=4, num_stages=4)
    return Fp8GemmConfig(64, 128, num_warps=4, num_stages=3)


def _split_k(k: int) -> int:
    """Parts of K for the decode-sized tiles: one per 8 groups of 128 columns, from K alone (a row's bits then
    do not depend on the token count, see the module docstring)."""
    return max(1, -(-k // FP8_GROUP) // 8)


def _check_weights(w, w_scale_inv, block, bias, out_dtype, k: int) -> None:
    n = w.shape[0]
    if w.shape[1] != k:
        raise ValueError(f"fp8_block_linear: activations of {k} columns and w {tuple(w.shape)} differ in K")
    if tuple(block)[1:] != (FP8_GROUP,) or len(block) != 2 or block[0] <= 0:
        raise ValueError(f"fp8_block_linear: block = {tuple(block)}: expected (bn, {FP8_GROUP}), the activations' "
                         "scale group along K")
    want = block_scale_shape((n, k), tuple(block))
    if w_scale_inv.dtype != torch.float32 or tuple(w_scale_inv.shape) != want:
        raise ValueError(f"fp8_block_linear: w {tuple(w.shape)} with blocks {tuple(block)} needs float32 "
                         f"w_scale_inv {list(want)}, got {w_scale_inv.dtype} {tuple(w_scale_inv.shape)}")
    if bias is not None and tuple(bias.shape) != (n,):
        raise ValueError(f"fp8_block_linear: expected bias [{n}], got {tuple(bias.shape)}")
    if out_dtype not in OUT_DTYPES:
        raise ValueError(f"fp8_block_linear: out_dtype {out_dtype}: expected one of {OUT_DTYPES}")


def _check(x_q, x_scales, w, w_scale_inv, block, bias, out_dtype) -> None:
    if x_q.dim() != 2 or w.dim() != 2 or x_q.dtype != FP8_DTYPE or w.dtype != FP8_DTYPE:
        raise ValueError(f"fp8_block_linear: expected float8_e4m3fn x_q [M, K] and w [N, K], got x_q {x_q.dtype} "
                         f"{tuple(x_q.shape)}, w {w.dtype} {tuple(w.shape)}")
    m, k = x_q.shape
    _check_weights(w, w_scale_inv, block, bias, out_dtype, k)
    groups = -(-k // FP8_GROUP)
    if x_scales.dtype != torch.float32 or tuple(x_scales.shape) != (m, groups):
        raise ValueError(f"fp8_block_linear: expected float32 x_scales [{m}, {groups}], got {x_scales.dtype} "
                         f"{tuple(x_scales.shape)}")
    _check_devices(x_q, x_scales, w, w_scale_inv, bias)


def _check_unquantized(x, w, w_scale_inv, block, bias, out_dtype) -> None:
    if x.dim() != 2 or not x.dtype.is_floating_point or x.dtype == FP8_DTYPE or w.dim() != 2 or w.dtype != FP8_DTYPE:
        raise ValueError(f"fp8_quant_block_linear: expected floating-point x [M, K] (not FP8) and float8_e4m3fn w "
                         f"[N, K], got x {x.dtype} {tuple(x.shape)}, w {w.dtype} {tuple(w.shape)}")
    _check_weights(w, w_scale_inv, block, bias, out_dtype, x.shape[1])
    _check_devices(x, w, w_scale_inv, bias)


def _check_devices(*tensors) -> None:
    devices = {t.device for t in tensors if t is not None}
    if len(devices) > 1:
        raise ValueError(f"fp8_block_linear: operands on several devices: {sorted(map(str, devices))}")


def fp8_block_linear_ref(x_q: torch.Tensor, x_scales: torch.Tensor, w: torch.Tensor, w_scale_inv: torch.Tensor,
                         block: tuple[int, int], bias: torch.Tensor | None = None,
                         out_dtype: torch.dtype = torch.bfloat16) -> torch.Tensor:
    """Both operands dequantized (exact in float64), multiplied in float64, rounded once into out_dtype."""
    _check(x_q, x_scales, w, w_scale_inv, block, bias, out_dtype)
    m, k = x_q.shape
    x = x_q.double() * expand_block_scales(x_scales, m, k, (1, FP8_GROUP)).double()
    out = x @ dequantize_fp8_block(w, w_scale_inv, tuple(block), torch.float64).T
    if bias is not None:
        out += bias.double()
    return out.to(out_dtype)


def fp8_block_linear(x_q: torch.Tensor, x_scales: torch.Tensor, w: torch.Tensor, w_scale_inv: torch.Tensor,
                     block: tuple[int, int], bias: torch.Tensor | None = None, out_dtype: torch.dtype = torch.bfloat16,
                     *, config: Fp8GemmConfig | None = None) -> torch.Tensor:
    """The Triton kernel of `fp8_block_linear_ref` -> [M, N] out_dtype. `config`: a launch config other than
    `_config`'s (the probe's sweep). Without one, up to `fp8_gemv_max_tokens` tokens run on the CUDA-core GEMV
    (kernels/fp8_gemv.py) where K is whole groups."""
    _check(x_q, x_scales, w, w_scale_inv, block, bias, out_dtype)
    if triton is None:
        raise RuntimeError("fp8_block_linear needs triton; fp8_block_linear_ref is the torch version")
    (m, k), n = x_q.shape, w.shape[0]
    if config is None and 0 < m <= fp8_gemv_max_tokens(x_q.device):
        from quickmoe.kernels import fp8_gemv

        if fp8_gemv.gemv_supports(k, block):
            return fp8_gemv.fp8_block_gemv(x_q, x_scales, w, w_scale_inv, block, bias, out_dtype)
    out = torch.empty(m, n, dtype=out_dtype, device=x_q.device)
    if m == 0 or n == 0:
        return out
    if k == 0:
        return out.copy_(bias.to(out_dtype).expand(m, n)) if bias is not None else out.zero_()
    x_q, w = (t if t.stride(1) == 1 else t.contiguous() for t in (x_q, w))
    cfg = config or _config(m, n, k)
    groups = triton.cdiv(k, FP8_GROUP)
    grid_m, grid_n = triton.cdiv(m, cfg.block_m), triton.cdiv(n, cfg.block_n)
    # parts of K: the largest count up to the config's that divides the groups (equal parts, none past K), and
    # one ticket counter per output tile
    split = max(d for d in range(1, min(cfg.split_k, groups) + 1) if groups % d == 0)
    if grid_m * grid_n > MAX_TICKETS:
        split = 1
    partials = counters = out
    if split > 1:
        partials = torch.empty(grid_m * grid_n * split * cfg.block_m * cfg.block_n, dtype=torch.float32,
                               device=x_q.device)
        counters = ticket_counters(x_q.device, "fp8_gemm")
    on_cpu = x_q.device.type == "cpu"  # the interpreter: float32 operands, exact products, IEEE dots
    _fp8_gemm_kernel[(grid_m, grid_n, split)](
        x_q, x_scales, w, w_scale_inv, bias if bias is not None else out, out, partials, counters, m, n,
        x_q.stride(0), x_scales.stride(0), x_scales.stride(1), w.stride(0), w_scale_inv.stride(0),
        w_scale_inv.stride(1), out.stride(0), K=k, BN_SCALE=block[0], HAS_BIAS=bias is not None,
        BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n, BLOCK_K=FP8_GROUP, SWAP_AB=cfg.swap_ab, SPLIT_K=split,
        K_PER_SPLIT=groups // split * FP8_GROUP, DOT_DTYPE=tl.float32 if on_cpu else tl.float8e4nv,
        PRECISION="ieee" if on_cpu else "tf32", num_warps=cfg.num_warps, num_stages=cfg.num_stages,
        **pdl_kwargs(x_q.device))
    return out


def fp8_quant_block_linear_ref(x: torch.Tensor, w: torch.Tensor, w_scale_inv: torch.Tensor, block: tuple[int, int],
                               bias: torch.Tensor | None = None,
                               out_dtype: torch.dtype = torch.bfloat16) -> torch.Tensor:
    """x [M, K] quantized per token and 128 columns (`quantize_fp8_per_token_group_ref`), then
    `fp8_block_linear_ref`: what the FP8 dense layers compute."""
    _check_unquantized(x, w, w_scale_inv, block, bias, out_dtype)
    x_q, x_scales = quantize_fp8_per_token_group_ref(x, FP8_GROUP)
    return fp8_block_linear_ref(x_q, x_scales, w, w_scale_inv, block, bias, out_dtype)


def fp8_quant_block_linear(x: torch.Tensor, w: torch.Tensor, w_scale_inv: torch.Tensor, block: tuple[int, int],
                           bias: torch.Tensor | None = None, out_dtype: torch.dtype = torch.bfloat16,
                           *, config: Fp8GemmConfig | None = None) -> torch.Tensor:
    """The Triton version of `fp8_quant_block_linear_ref`: the quantizer's launch, then `fp8_block_linear`. (A
    quantizer inside the GEMM, each program quantizing the groups it reads, was 2-6x slower at decode sizes on
    the H200: every column tile quantizes the whole activations again, padding rows included;
    docs/benchmarks.md, 2026-11-29 eighth session.)"""
    _check_unquantized(x, w, w_scale_inv, block, bias, out_dtype)
    if triton is None:
        raise RuntimeError("fp8_quant_block_linear needs triton; fp8_quant_block_linear_ref is the torch version")
    x_q, x_scales = quantize_fp8_per_token_group(x, FP8_GROUP)
    return fp8_block_linear(x_q, x_scales, w, w_scale_inv, block, bias, out_dtype, config=config)


if triton is not None:

    @triton.jit(do_not_specialize=["M"])  # one compilation per (K, config) for every token count
    def _fp8_gemm_kernel(x_ptr, xs_ptr, w_ptr, ws_ptr, bias_ptr, out_ptr, partial_ptr, counter_ptr, M, N, stride_xm,
                         stride_xsm, stride_xsg, stride_wn, stride_wsn, stride_wsg, stride_om, K: tl.constexpr,
                         BN_SCALE: tl.constexpr, HAS_BIAS: tl.constexpr, BLOCK_M: tl.constexpr,
                         BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, SWAP_AB: tl.constexpr, SPLIT_K: tl.constexpr,
                         K_PER_SPLIT: tl.constexpr, DOT_DTYPE: tl.constexpr, PRECISION: tl.constexpr,
                         PDL: tl.constexpr):
        pdl_wait(PDL)
        rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)  # [BM] tokens
        cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)  # [BN] output columns = weight rows
        m_ok = rows < M
        n_ok = cols < N
        kk = tl.arange(0, BLOCK_K)
        x_rows = x_ptr + rows.to(tl.int64) * stride_xm  # [BM] row pointers (int64: M x K may pass 2^31)
        w_rows = w_ptr + cols.to(tl.int64) * stride_wn  # [BN]
        xs_rows = xs_ptr + rows.to(tl.int64) * stride_xsm
        ONE_W_SCALE: tl.constexpr = BN_SCALE % BLOCK_N == 0  # the tile lies in one scale row
        if ONE_W_SCALE:
            ws_row = ws_ptr + (tl.program_id(1) * BLOCK_N // BN_SCALE) * stride_wsn
        else:
            ws_rows = ws_ptr + (cols // BN_SCALE) * stride_wsn  # [BN]
        if SWAP_AB:
            acc = tl.zeros([BLOCK_N, BLOCK_M], dtype=tl.float32)
        else:
            acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
        # this program's part of K: K_PER_SPLIT columns (whole groups, the same count in every part) from k_lo
        k_lo = tl.program_id(2) * K_PER_SPLIT if SPLIT_K > 1 else 0
        for step in range(0, K_PER_SPLIT, BLOCK_K):
            k0 = k_lo + step
            g = k0 // BLOCK_K  # the scale group
            k = k0 + kk
            k_ok = k < K
            w = tl.load(w_rows[:, None] + k[None, :], mask=n_ok[:, None] & k_ok[None, :], other=0.0)  # [BN, BK]
            a_s = tl.load(xs_rows + g * stride_xsg, mask=m_ok, other=0.0)  # [BM]
            if ONE_W_SCALE:
                w_s = tl.load(ws_row + g * stride_wsg)
            else:
                w_s = tl.load(ws_rows + g * stride_wsg, mask=n_ok, other=0.0)  # [BN]
            if SWAP_AB:
                a = tl.load(x_rows[None, :] + k[:, None], mask=k_ok[:, None] & m_ok[None, :], other=0.0)  # [BK, BM]
                part = tl.dot(w.to(DOT_DTYPE), a.to(DOT_DTYPE), input_precision=PRECISION)  # [BN, BM]
                if ONE_W_SCALE:
                    acc += part * (a_s * w_s)[None, :]
                else:
                    acc += part * (w_s[:, None] * a_s[None, :])
            else:
                a = tl.load(x_rows[:, None] + k[None, :], mask=m_ok[:, None] & k_ok[None, :], other=0.0)  # [BM, BK]
                part = tl.dot(a.to(DOT_DTYPE), tl.trans(w.to(DOT_DTYPE)), input_precision=PRECISION)  # [BM, BN]
                if ONE_W_SCALE:
                    acc += part * (a_s * w_s)[:, None]
                else:
                    acc += part * (a_s[:, None] * w_s[None, :])
        if SWAP_AB:
            acc = tl.trans(acc)  # [BM, BN]
        out = out_ptr + rows.to(tl.int64)[:, None] * stride_om + cols[None, :]
        if SPLIT_K == 1:
            if HAS_BIAS:
                acc += tl.load(bias_ptr + cols, mask=n_ok, other=0.0).to(tl.float32)[None, :]
            tl.store(out, acc.to(out_ptr.dtype.element_ty), mask=m_ok[:, None] & n_ok[None, :])
        else:
            tile_id = tl.program_id(0) * tl.num_programs(1) + tl.program_id(1)
            store_part(partial_ptr, tile_id * SPLIT_K + tl.program_id(2), acc, m_ok[:, None], BLOCK_M, BLOCK_N)
            if last_ticket(counter_ptr, tile_id, SPLIT_K):  # the tile's last program: the other parts are visible
                total = sum_parts(partial_ptr, tile_id * SPLIT_K, m_ok[:, None], SPLIT_K, BLOCK_M, BLOCK_N)  # in order
                reset_ticket(counter_ptr, tile_id)
                if HAS_BIAS:
                    total += tl.load(bias_ptr + cols, mask=n_ok, other=0.0).to(tl.float32)[None, :]
                tl.store(out, total.to(out_ptr.dtype.element_ty), mask=m_ok[:, None] & n_ok[None, :])
