"""RMSNorm, alone and fused with the residual add: `rms_norm` / `fused_add_rms_norm` (Triton) beside
`rms_norm_ref` / `fused_add_rms_norm_ref` (torch), same signatures.

    rms_norm(x, w, eps)                 = (w * x32 / sqrt(mean(x32^2) + eps)).to(x.dtype),  x32 = x.float()
    fused_add_rms_norm(x, residual, w)  -> (rms_norm(r, w, eps), r)  with r = x + residual in x's dtype

The sum is rounded to x's dtype before it is normalised, as the unfused `hidden = hidden + out; norm(hidden)`
does, so the residual stream is the same tensor either way.

x may also be an MoE layer's output before its combine: [T, k, H], each token's k weighted expert rows
(`fused_moe(..., combine=False)`). The fused norm then sums them first, in float32 in the order j = 0 .. k-1 and
rounded to x's dtype, which is `moe_combine`'s arithmetic: the same bits as combining, then normalising, in one
launch instead of two (`combine_ref` is the reference's combine). The weight is float32 (gpt-oss keeps its norms
in float32). One program per row, the whole row in registers (hidden sizes up to 16384): one read of each
input and one write of each output instead of the eager path's seven launches.
"""

from __future__ import annotations

import torch

from quickmoe.kernels.pdl import pdl_kwargs

try:  # CPU installs without triton keep the torch references
    import triton
    import triton.language as tl

    from quickmoe.kernels.pdl import pdl_wait
except ImportError:  # pragma: no cover
    triton = None

__all__ = ["combine_ref", "fused_add_rms_norm", "fused_add_rms_norm_ref", "rms_norm", "rms_norm_ref"]

MAX_HIDDEN = 16384


def rms_norm_ref(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """x [T, H], weight [H] float32 -> [T, H] in x's dtype."""
    x32 = x.float()
    x32 = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps)
    return (weight * x32).to(x.dtype)


def combine_ref(x: torch.Tensor) -> torch.Tensor:
    """[T, k, H] -> [T, H]: each token's k rows summed in float32 in order, rounded to x's dtype (`moe_combine`)."""
    acc = torch.zeros(x.shape[0], x.shape[2], dtype=torch.float32, device=x.device)  # [T, H]
    for j in range(x.shape[1]):
        acc = acc + x[:, j].float()
    return acc.to(x.dtype)


def fused_add_rms_norm_ref(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor,
                           eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """x [T, H] (or [T, k, H]: combined first), residual [T, H] -> (rms_norm(x + residual), x + residual), the
    sum in x's dtype."""
    if x.dim() == 3:
        x = combine_ref(x)  # [T, H]
    summed = x + residual
    return rms_norm_ref(summed, weight, eps), summed


def _launch(x: torch.Tensor, residual: torch.Tensor | None, weight: torch.Tensor, eps: float,
            num_warps: int | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The kernel; `num_warps` None: the default for the hidden size (probes may pass another; it must not depend
    on the number of rows, or a row's bits would depend on its batch)."""
    if triton is None:
        raise RuntimeError("the RMSNorm kernels need triton; rms_norm_ref / fused_add_rms_norm_ref are the torch "
                           "versions")
    parts = x.shape[1] if x.dim() == 3 else 0  # [T, k, H]: k rows a token to combine first
    num_rows, hidden = x.shape[0], x.shape[-1]
    if hidden > MAX_HIDDEN:
        raise ValueError(f"rms_norm: hidden size {hidden} > {MAX_HIDDEN} (one row per program)")
    assert x.stride(-1) == 1 and (residual is None or residual.stride(1) == 1)
    assert not parts or (residual is not None and x.stride(1) == hidden), "a combine goes with the residual add"
    out = x.new_empty(num_rows, hidden)
    summed = x.new_empty(num_rows, hidden) if residual is not None else None
    if num_rows:
        block = triton.next_power_of_2(hidden)
        _rms_norm_kernel[(num_rows,)](
            x, residual if residual is not None else x, weight, out, summed if summed is not None else out,
            x.stride(0), residual.stride(0) if residual is not None else 0, hidden, eps,
            HAS_RESIDUAL=residual is not None, PARTS=parts, BLOCK=block, num_warps=num_warps or _num_warps(block),
            **pdl_kwargs(x.device))
    return out, summed


def _num_warps(block: int) -> int:
    """Warps of a row of `block` (a power of two) columns."""
    return min(16, max(1, block // 256))


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """`rms_norm_ref` in one launch."""
    return _launch(x, None, weight, eps)[0]


def fused_add_rms_norm(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor,
                       eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """`fused_add_rms_norm_ref` in one launch."""
    out, summed = _launch(x, residual, weight, eps)
    return out, summed


if triton is not None:

    @triton.jit
    def _rms_norm_kernel(x_ptr, res_ptr, w_ptr, out_ptr, sum_ptr, stride_x, stride_r, hidden, eps,
                         HAS_RESIDUAL: tl.constexpr, PARTS: tl.constexpr, BLOCK: tl.constexpr, PDL: tl.constexpr):
        pdl_wait(PDL)
        row = tl.program_id(0).to(tl.int64)
        cols = tl.arange(0, BLOCK)
        ok = cols < hidden
        if PARTS > 0:  # an MoE output before its combine: the token's PARTS rows, summed as moe_combine does
            acc = tl.zeros([BLOCK], dtype=tl.float32)
            for j in tl.static_range(PARTS):
                acc += tl.load(x_ptr + row * stride_x + j * hidden + cols, mask=ok, other=0.0).to(tl.float32)
            x = acc.to(out_ptr.dtype.element_ty)
        else:
            x = tl.load(x_ptr + row * stride_x + cols, mask=ok, other=0.0)
        if HAS_RESIDUAL:
            # rounded to the activations' dtype first: the residual stream the unfused path would hold
            x = (x.to(tl.float32) + tl.load(res_ptr + row * stride_r + cols, mask=ok, other=0.0).to(tl.float32))
            x = x.to(out_ptr.dtype.element_ty)
            tl.store(sum_ptr + row * hidden + cols, x, mask=ok)
        x32 = x.to(tl.float32)
        inv = 1.0 / tl.sqrt(tl.sum(x32 * x32, axis=0) / hidden + eps)
        w = tl.load(w_ptr + cols, mask=ok, other=0.0)
        tl.store(out_ptr + row * hidden + cols, (w * (x32 * inv)).to(out_ptr.dtype.element_ty), mask=ok)
