"""y = x W^T + b for the unquantized dense projections: `dense_gemm` (Triton) beside `dense_gemm_ref` (torch),
same signature, with one rounding of each output for every number of rows.

Why not cuBLAS: at one row (a batch-1 decode step) cuBLAS reads gpt-oss-20b's o_proj (4096 -> 2880, 23.6 MB)
with a split-K kernel and a second launch that sums the parts, 13.5 us a layer on the H100, where the bytes take
about 8.5 us at the HBM's rate. A kernel of our own can read W once at every row count, but it has to run at
every row count: the tokens of a request must not depend on which other requests share its step (bf16 batch
invariance, tests/models/test_quality_gpu.py), and a one-row kernel that rounds differently from the kernel of
64 rows turns near ties into other tokens (a batch-1-only GEMV did: 80% of greedy tokens alike).

The reduction order is what keeps a row's bits fixed. Each output y[m, n] is a float32 sum over K formed by the
tensor cores 16 values of K at a time, in increasing K (one mma / wgmma instruction per 16, chained through the
accumulator); the bias is added once after the sum, then the value is rounded to x's dtype once. The launch
config (rows and columns a program owns, K a step, warps, pipeline stages, and `swap`: the tile computed as
(W x^T)^T with W as the instruction's first operand, which lets 64-wide wgmma tiles serve a step of a few rows)
changes which program forms a sum, not the order of its terms, so the config may change with the row count. A
GPU test checks the bits across configs and row counts (tests/kernels/test_dense_gemm.py).

K in parts. At one row the kernel is a stream of W whose programs each walk all of K, a chain of K / 16 dependent
tensor-core instructions (256 for o_proj's K = 4,096) behind their loads: 11.4 us on the H100 and 11.0 us on the
H200, where the bytes take 8.5 and 5.6 us at those HBMs' rates. So K is cut into parts fixed by K alone
(`dense_k_parts`: about 1,024 columns each, a multiple of 256); each part is summed from zero as above and the parts
are added in increasing order, from zero, in float32: y = ((0 + s_0) + s_1) + ... + s_{P-1} (+ b). A config either
gives each part its own program (`split`: 4x the programs at o_proj's K), which stores its float32 partial, and the
program that draws the output tile's last ticket (kernels/tickets.py) adds the parts in that order; or sums every
part in one program, in one pipelined loop over K that adds a part's sum where the part ends (a loop per part
drained the pipeline at each part: +57% at 256 rows). Both give the same bits, so configs of either kind may serve
different row counts. On the H200 (docs/benchmarks.md, 2026-11-30): o_proj 11.0 -> 9.2 us at 1-16 rows.

Where it runs: the o_proj of unquantized attention in decode steps (forward/custom_ops.py `decode_linear`). At
1-64 rows it beats cuBLAS (H200: 9.2 vs 10.9 us at one row); at 128 and 256 rows cuBLAS is faster (its tiles use the
GPU better at these sizes) but the kernel must run at every batch size for the invariance above, a cost of 4-7 us a
layer there (configs by row count: `dense_config`, below). QKV (2880 -> 5120) stays on cuBLAS: with parts this
kernel took 9.9 against 10.4 us at 1-16 rows but 21-78% longer at 64-256 rows, where a batch-256 step would lose
more (24 x 11.5 us) than a batch-1 step gains.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from quickmoe.kernels.pdl import pdl_kwargs
from quickmoe.kernels.tickets import MAX_TICKETS, ticket_counters

try:  # CPU installs without triton keep the torch reference
    import triton
    import triton.language as tl

    from quickmoe.kernels.pdl import pdl_wait
    from quickmoe.kernels.tickets import last_ticket, reset_ticket, store_part, sum_parts
except ImportError:  # pragma: no cover
    triton = None

__all__ = ["DenseConfig", "dense_config", "dense_gemm", "dense_gemm_ref", "dense_gemm_supported", "dense_k_parts"]

PART_ALIGN = 256  # a part of K is a multiple of this many columns, so every BLOCK_K (<= 256) divides it
PART_TARGET = 1024  # about this many columns a part


@dataclass(frozen=True)
class DenseConfig:
    """One launch of `dense_gemm`: tile rows x columns x K step, warps, stages; `swap`: W as the first operand;
    `split`: one program per part of K (`dense_k_parts`), the parts added by the tile's last program."""

    block_m: int
    block_n: int
    block_k: int
    num_warps: int
    num_stages: int
    swap: bool = False
    group_m: int = 8  # tiles of rows that run next to each other (L2 reuse of W at large row counts)
    split: bool = False

    def __post_init__(self) -> None:
        for name in ("block_m", "block_n", "block_k"):
            value = getattr(self, name)
            if value < 16 or value & (value - 1):
                raise ValueError(f"DenseConfig.{name} = {value}: expected a power of two >= 16")
        if self.block_k > PART_ALIGN:
            raise ValueError(f"DenseConfig.block_k = {self.block_k}: expected <= {PART_ALIGN} (a K step must divide "
                             "a part of K)")
        if self.num_warps not in (1, 2, 4, 8) or self.num_stages < 1 or self.group_m < 1:
            raise ValueError(f"DenseConfig: num_warps {self.num_warps} (1, 2, 4 or 8), num_stages "
                             f"{self.num_stages} and group_m {self.group_m} (>= 1)")


# (largest row count, config): the first entry whose bound holds. Picked on the H200 on gpt-oss-20b's o_proj
# (4096 -> 2880) by scripts/probes/dense_gemm_probe.py (docs/runs/2026-11-30-session/, call 4), us a call, against
# cuBLAS and the single-chain kernel before parts: 9.2 vs 10.9 / 10.9 at 1 row, 9.1 vs 11.5 / 10.0 at 16, 9.8-9.9 vs
# 11.8 / 12.7 at 32, 10.7 vs 10.9 / 12.8 at 64, 15.3 vs 11.3 / 14.5 at 128, 21.4 vs 14.8 / 21.3 at 256; prompts take
# cuBLAS (1.4x faster at 1,024-8,192 rows on the H100: forward/custom_ops.py).
_CONFIGS: tuple[tuple[int, DenseConfig], ...] = (
    (16, DenseConfig(16, 64, 128, 4, 4, swap=True, split=True)),
    (64, DenseConfig(32, 64, 128, 4, 3, swap=True, split=True)),
    (128, DenseConfig(64, 64, 128, 4, 4, swap=True)),
    (256, DenseConfig(64, 64, 128, 4, 3, swap=True)),
    (1 << 62, DenseConfig(128, 128, 64, 8, 3)),
)


def dense_config(rows: int) -> DenseConfig:
    """The launch config for x of `rows` rows (measured on o_proj's shape; any config gives the same bits)."""
    for bound, config in _CONFIGS:
        if rows <= bound:
            return config
    raise AssertionError("the last bound holds every row count")


def dense_k_parts(k: int) -> tuple[int, int]:
    """(parts, columns per part) of a sum over K, from K alone (every config and row count sums a row alike): about
    PART_TARGET columns a part, a multiple of PART_ALIGN; the last part may be shorter (masked past K)."""
    parts = max(1, round(k / PART_TARGET))
    per_part = -(-(-(-k // parts)) // PART_ALIGN) * PART_ALIGN
    return -(-k // per_part), per_part


def dense_gemm_supported(x: torch.Tensor, weight: torch.Tensor) -> bool:
    """Whether `dense_gemm` takes these operands: bf16 / fp16 of one dtype, each row of W contiguous along K."""
    return (triton is not None and x.dtype in (torch.bfloat16, torch.float16) and weight.dtype == x.dtype
            and weight.dim() == 2 and weight.stride(1) == 1 and x.shape[-1] == weight.shape[1])


def dense_gemm_ref(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """x [..., K], weight [N, K], bias [N] or None -> [..., N] in x's dtype (torch: cuBLAS on CUDA)."""
    return F.linear(x, weight, bias)


def dense_gemm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
               config: DenseConfig | None = None) -> torch.Tensor:
    """`dense_gemm_ref` in one Triton launch (`dense_gemm_supported` operands); `config` None: `dense_config`."""
    if not dense_gemm_supported(x, weight):
        raise ValueError(f"dense_gemm: x {tuple(x.shape)} {x.dtype}, weight {tuple(weight.shape)} {weight.dtype} "
                         f"(strides {weight.stride()}): expected bf16 or fp16 operands of one dtype, weight [N, K] "
                         "with K contiguous and K = x.shape[-1]")
    lead = x.shape[:-1]
    x2 = x.reshape(-1, x.shape[-1])  # [M, K]
    if x2.stride(-1) != 1:
        x2 = x2.contiguous()
    rows, k = x2.shape
    n = weight.shape[0]
    out = torch.empty(rows, n, dtype=x.dtype, device=x.device)  # [M, N]
    if rows:
        cfg = config or dense_config(rows)
        tiles = triton.cdiv(rows, cfg.block_m) * triton.cdiv(n, cfg.block_n)
        parts, per_part = dense_k_parts(k)
        split = cfg.split and parts > 1
        if split and tiles > MAX_TICKETS:
            raise ValueError(f"dense_gemm: {rows} rows x {n} columns make {tiles} tiles of {cfg}; a config with "
                             f"split=True serves at most {MAX_TICKETS} (one ticket counter each)")
        partials = counters = out
        if split:  # [tiles, parts, BM x BN] float32 partial sums, and one ticket counter per tile
            partials = torch.empty(tiles * parts * cfg.block_m * cfg.block_n, dtype=torch.float32, device=x.device)
            counters = ticket_counters(x.device, "dense_gemm")
        _dense_gemm_kernel[(tiles, parts if split else 1)](
            x2, weight, bias if bias is not None else weight, out, partials, counters, rows, n, k, x2.stride(0),
            weight.stride(0), HAS_BIAS=bias is not None, BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n,
            BLOCK_K=cfg.block_k, SWAP=cfg.swap, GROUP_M=cfg.group_m, PARTS=parts, K_PART=per_part, SPLIT=split,
            FP32_DOT=x.device.type == "cpu", num_warps=cfg.num_warps, num_stages=cfg.num_stages,
            **pdl_kwargs(x.device))
    return out.view(*lead, n)


if triton is not None:

    @triton.jit
    def _k_step(x_ptrs, w_ptrs, acc, row_ok, col_ok, k_ok, SWAP: tl.constexpr, FP32_DOT: tl.constexpr):
        """acc + the tile's product over one K step: BLOCK_K / 16 tensor-core sums of 16 in increasing K."""
        # zeros past K add exact zeros: the sum's terms and their order are those of any other BLOCK_K
        x = tl.load(x_ptrs, mask=row_ok[:, None] & k_ok[None, :], other=0.0)  # [BM, BK]
        w = tl.load(w_ptrs, mask=col_ok[:, None] & k_ok[None, :], other=0.0)  # [BN, BK]
        if FP32_DOT:  # Triton's CPU interpreter multiplies bf16 operands wrongly; float32 products are exact
            x = x.to(tl.float32)
            w = w.to(tl.float32)
        if SWAP:
            acc = tl.dot(w, tl.trans(x), acc)  # [BN, BM]
        else:
            acc = tl.dot(x, tl.trans(w), acc)  # [BM, BN]
        return acc

    @triton.jit
    def _dense_gemm_kernel(x_ptr, w_ptr, bias_ptr, out_ptr, partial_ptr, counter_ptr, M, N, K, stride_x, stride_w,
                           HAS_BIAS: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                           BLOCK_K: tl.constexpr, SWAP: tl.constexpr, GROUP_M: tl.constexpr, PARTS: tl.constexpr,
                           K_PART: tl.constexpr, SPLIT: tl.constexpr, FP32_DOT: tl.constexpr, PDL: tl.constexpr):
        # program -> (row tile, column tile), GROUP_M row tiles at a time so that neighbours share W's tiles;
        # program_id 1: the part of K (SPLIT), else 0
        pid = tl.program_id(0)
        tiles_m = tl.cdiv(M, BLOCK_M)
        tiles_n = tl.cdiv(N, BLOCK_N)
        per_group = GROUP_M * tiles_n
        first_m = (pid // per_group) * GROUP_M
        group_rows = tl.minimum(tiles_m - first_m, GROUP_M)
        tile_m = first_m + (pid % per_group) % group_rows
        tile_n = (pid % per_group) // group_rows
        rows = tile_m * BLOCK_M + tl.arange(0, BLOCK_M)  # [BM] rows of x
        cols = tile_n * BLOCK_N + tl.arange(0, BLOCK_N)  # [BN] rows of W = output columns
        row_ok = rows < M
        col_ok = cols < N
        ks = tl.arange(0, BLOCK_K)
        x_ptrs = x_ptr + rows[:, None].to(tl.int64) * stride_x + ks[None, :]  # [BM, BK]
        w_ptrs = w_ptr + cols[:, None].to(tl.int64) * stride_w + ks[None, :]  # [BN, BK]
        pdl_wait(PDL)  # x is the previous kernel's output
        if SWAP:  # the accumulators' shape: [BN, BM] (W as the first operand) or [BM, BN]
            acc = tl.zeros([BLOCK_N, BLOCK_M], dtype=tl.float32)
        else:
            acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
        if SPLIT:  # this program's part, summed from zero; the tile's last program adds the parts in order
            part = tl.program_id(1)
            k_lo = part * K_PART
            k_hi = tl.minimum(k_lo + K_PART, K)
            x_ptrs += k_lo
            w_ptrs += k_lo
            for k0 in range(k_lo, k_hi, BLOCK_K):
                acc = _k_step(x_ptrs, w_ptrs, acc, row_ok, col_ok, (k0 + ks) < k_hi, SWAP, FP32_DOT)
                x_ptrs += BLOCK_K
                w_ptrs += BLOCK_K
            slab = pid.to(tl.int64) * PARTS  # this tile's first slab of partials
            if SWAP:
                store_part(partial_ptr, slab + part, acc, row_ok[None, :], BLOCK_N, BLOCK_M)
            else:
                store_part(partial_ptr, slab + part, acc, row_ok[:, None], BLOCK_M, BLOCK_N)
            if last_ticket(counter_ptr, pid, PARTS):  # the other parts are visible to the last program
                if SWAP:
                    total = sum_parts(partial_ptr, slab, row_ok[None, :], PARTS, BLOCK_N, BLOCK_M)
                else:
                    total = sum_parts(partial_ptr, slab, row_ok[:, None], PARTS, BLOCK_M, BLOCK_N)
                reset_ticket(counter_ptr, pid)
                _store(total, bias_ptr, out_ptr, rows, cols, row_ok, col_ok, N, HAS_BIAS, SWAP)
        else:  # every part here, in one pipelined loop over K: a part's sum joins the total where the part ends
            total = tl.zeros_like(acc)
            for k0 in range(0, K, BLOCK_K):
                acc = _k_step(x_ptrs, w_ptrs, acc, row_ok, col_ok, (k0 + ks) < K, SWAP, FP32_DOT)
                if (k0 + BLOCK_K) % K_PART == 0:  # the part ends: add it, start the next from zero
                    total += acc
                    acc = tl.zeros_like(acc)
                x_ptrs += BLOCK_K
                w_ptrs += BLOCK_K
            if K % K_PART != 0:  # the last part, shorter, ended at K
                total += acc
            _store(total, bias_ptr, out_ptr, rows, cols, row_ok, col_ok, N, HAS_BIAS, SWAP)

    @triton.jit
    def _store(total, bias_ptr, out_ptr, rows, cols, row_ok, col_ok, N, HAS_BIAS: tl.constexpr, SWAP: tl.constexpr):
        """y = the float32 sum (+ bias), rounded once to out's dtype, stored [BM, BN]."""
        if SWAP:
            y = tl.trans(total)  # [BM, BN]
        else:
            y = total
        if HAS_BIAS:
            y += tl.load(bias_ptr + cols, mask=col_ok, other=0.0).to(tl.float32)[None, :]
        out_ptrs = out_ptr + rows[:, None].to(tl.int64) * N + cols[None, :]
        tl.store(out_ptrs, y.to(out_ptr.dtype.element_ty), mask=row_ok[:, None] & col_ok[None, :])
