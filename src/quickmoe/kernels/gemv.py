"""y = x W^T + b for a few rows of x (decode at batch <= GEMV_MAX_ROWS): a Triton GEMV beside `gemv_ref`.

At batch 1 the attention projections are matrix-vector products: their time is reading W (gpt-oss-20b: 53 MB a
layer), and cuBLAS's small-M kernels do not always reach HBM's rate there (o_proj: a split-K kernel and a
separate reduction launch, 1.26 TB/s against this kernel's 2.0 TB/s on the H100). The model uses it for one
row only (`forward.custom_ops.linear`): at 2 and 4 rows cuBLAS measured as fast or faster.
Here program n reads BLOCK_N whole rows of W, BLOCK_K columns a step (16-byte loads along K), multiplies them
by the M rows of x in float32 and keeps the products in an [M, BLOCK_N, BLOCK_K] accumulator that is summed
across K once at the end: one launch, W read once, the bias added in the epilogue. Outputs in x's dtype.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

try:  # CPU installs without triton keep the torch reference
    import triton
    import triton.language as tl
except ImportError:  # pragma: no cover
    triton = None

__all__ = ["GEMV_MAX_ROWS", "gemv", "gemv_ref"]

GEMV_MAX_ROWS = 4  # rows of x the kernel takes (its accumulator holds M x BLOCK_N x BLOCK_K floats)


def gemv_ref(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """x [M, K], weight [N, K], bias [N] or None -> [M, N] (torch)."""
    return F.linear(x, weight, bias)


def gemv(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, *, block_n: int = 8,
         block_k: int = 512, num_warps: int = 4) -> torch.Tensor:
    """`gemv_ref` in one Triton launch, for M <= GEMV_MAX_ROWS rows with a K-contiguous weight. The default
    tiles won the one-row sweep on the H100 for gpt-oss-20b's QKV, router and LM head (o_proj: within a few
    percent; scripts/probes/small_batch_probe.py)."""
    if triton is None:
        raise RuntimeError("gemv needs triton; gemv_ref is the torch version")
    rows, k = x.shape
    n = weight.shape[0]
    if rows > GEMV_MAX_ROWS or weight.shape[1] != k or weight.stride(1) != 1 or x.stride(1) != 1:
        raise ValueError(f"gemv: x {tuple(x.shape)} and weight {tuple(weight.shape)} (strides {weight.stride()}): "
                         f"expected at most {GEMV_MAX_ROWS} rows, a matching K and K-contiguous operands")
    out = torch.empty(rows, n, dtype=x.dtype, device=x.device)
    m_pow2 = max(triton.next_power_of_2(rows), 1)
    # keep the accumulator at <= 32 floats a thread
    while m_pow2 * block_n * block_k > 32 * 32 * num_warps and block_k > 32:
        block_k //= 2
    _gemv_kernel[(triton.cdiv(n, block_n),)](
        x, weight, bias if bias is not None else weight, out, rows, n, x.stride(0), weight.stride(0), K=k,
        M_POW2=m_pow2, BLOCK_N=block_n, BLOCK_K=block_k, HAS_BIAS=bias is not None, num_warps=num_warps)
    return out


if triton is not None:

    @triton.jit
    def _gemv_kernel(x_ptr, w_ptr, bias_ptr, out_ptr, M, N, stride_x, stride_w, K: tl.constexpr,
                     M_POW2: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, HAS_BIAS: tl.constexpr):
        rows = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)  # [BN] rows of W = output columns
        n_ok = rows < N
        m = tl.arange(0, M_POW2)  # [M]
        m_ok = m < M
        acc = tl.zeros([M_POW2, BLOCK_N, BLOCK_K], dtype=tl.float32)
        for k0 in range(0, K, BLOCK_K):
            cols = k0 + tl.arange(0, BLOCK_K)  # [BK]
            k_ok = cols < K
            w = tl.load(w_ptr + rows[:, None] * stride_w + cols[None, :], mask=n_ok[:, None] & k_ok[None, :],
                        other=0.0).to(tl.float32)  # [BN, BK]
            x = tl.load(x_ptr + m[:, None] * stride_x + cols[None, :], mask=m_ok[:, None] & k_ok[None, :],
                        other=0.0).to(tl.float32)  # [M, BK]
            acc += x[:, None, :] * w[None, :, :]
        y = tl.sum(acc, axis=2)  # [M, BN]
        if HAS_BIAS:
            y += tl.load(bias_ptr + rows, mask=n_ok, other=0.0).to(tl.float32)[None, :]
        tl.store(out_ptr + m[:, None] * N + rows[None, :], y.to(out_ptr.dtype.element_ty),
                 mask=m_ok[:, None] & n_ok[None, :])
