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

`qk_rms_norm` (beside `qk_rms_norm_ref`): Qwen3's RMSNorm over each head of q and of k (`q_norm`, `k_norm`, weights
[D]) in the QKV projection's output [T, (H + 2 KV) D], v copied as it is: one program per token and one launch
where the unfused path took three (the q heads' norm, the k heads', and the concatenation of q, k and v).
"""

from __future__ import annotations

import torch

from quickmoe.kernels.pdl import pdl_early_trigger, pdl_kwargs

try:  # CPU installs without triton keep the torch references
    import triton
    import triton.language as tl

    from quickmoe.kernels.fp8_quant import quantize_groups
    from quickmoe.kernels.pdl import pdl_trigger, pdl_wait
except ImportError:  # pragma: no cover
    triton = None

__all__ = ["combine_ref", "fused_add_rms_norm", "fused_add_rms_norm_fp8", "fused_add_rms_norm_fp8_ref",
           "fused_add_rms_norm_ref", "qk_rms_norm", "qk_rms_norm_ref", "rms_norm", "rms_norm_ref"]

MAX_HIDDEN = 16384
FP8_GROUP = 128  # columns per scale of the FP8 output


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


def qk_rms_norm_ref(qkv: torch.Tensor, q_weight: torch.Tensor, k_weight: torch.Tensor, num_heads: int,
                    num_kv_heads: int, eps: float) -> torch.Tensor:
    """qkv [T, (H + 2 KV) D] -> the same with each of the H q heads `rms_norm_ref`'d by q_weight [D] and each of
    the KV k heads by k_weight [D]; the v heads as they are."""
    num_tokens, d = qkv.shape[0], q_weight.shape[0]
    q, k, v = qkv.split([num_heads * d, num_kv_heads * d, num_kv_heads * d], dim=-1)
    q = rms_norm_ref(q.reshape(num_tokens * num_heads, d), q_weight, eps).view(num_tokens, num_heads * d)
    k = rms_norm_ref(k.reshape(num_tokens * num_kv_heads, d), k_weight, eps).view(num_tokens, num_kv_heads * d)
    return torch.cat([q, k, v], dim=-1)


def qk_rms_norm(qkv: torch.Tensor, q_weight: torch.Tensor, k_weight: torch.Tensor, num_heads: int,
                num_kv_heads: int, eps: float) -> torch.Tensor:
    """`qk_rms_norm_ref` in one launch."""
    if triton is None:
        raise RuntimeError("the RMSNorm kernels need triton; qk_rms_norm_ref is the torch version")
    num_tokens, width = qkv.shape
    d = q_weight.shape[0]
    if width != (num_heads + 2 * num_kv_heads) * d or k_weight.shape != q_weight.shape:
        raise ValueError(f"qk_rms_norm: qkv of {width} columns for {num_heads} q and {num_kv_heads} kv heads of "
                         f"{d} (q_weight {tuple(q_weight.shape)}, k_weight {tuple(k_weight.shape)})")
    assert qkv.stride(1) == 1
    out = torch.empty(num_tokens, width, dtype=qkv.dtype, device=qkv.device)
    if num_tokens:
        heads = num_heads + 2 * num_kv_heads
        block_d, block_heads = triton.next_power_of_2(d), triton.next_power_of_2(heads)
        _qk_rms_norm_kernel[(num_tokens,)](
            qkv, q_weight, k_weight, out, qkv.stride(0), eps, D=d, NUM_HEADS=num_heads, NUM_KV_HEADS=num_kv_heads,
            BLOCK_HEADS=block_heads, BLOCK_D=block_d, num_warps=_num_warps(block_heads * block_d),
            **pdl_kwargs(qkv.device))
    return out


def _launch(x: torch.Tensor, residual: torch.Tensor | None, weight: torch.Tensor, eps: float,
            num_warps: int | None = None, fp8_out: bool = False
            ) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None, torch.Tensor | None]:
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
    if fp8_out and hidden % FP8_GROUP:
        raise ValueError(f"rms_norm: FP8 output needs whole groups of {FP8_GROUP} columns; hidden size {hidden}")
    out = x.new_empty(num_rows, hidden)
    summed = x.new_empty(num_rows, hidden) if residual is not None else None
    q = torch.empty(num_rows, hidden, dtype=torch.float8_e4m3fn, device=x.device) if fp8_out else None
    scales = torch.empty(num_rows, hidden // FP8_GROUP, dtype=torch.float32, device=x.device) if fp8_out else None
    if num_rows:
        block = max(triton.next_power_of_2(hidden), FP8_GROUP if fp8_out else 1)
        num_warps = num_warps or _num_warps(block)
        # the next kernel (the router, an FP8 GEMV) may start at once and read its weights beside this one
        _rms_norm_kernel[(num_rows,)](
            x, residual if residual is not None else x, weight, out, summed if summed is not None else out,
            q.view(torch.uint8) if q is not None else out, scales if scales is not None else out,
            x.stride(0), residual.stride(0) if residual is not None else 0, hidden, eps,
            HAS_RESIDUAL=residual is not None, PARTS=parts, BLOCK=block, FP8_OUT=fp8_out,
            HW_ROUND=x.device.type == "cuda", EARLY=pdl_early_trigger(x.device, num_rows, num_warps),
            num_warps=num_warps, **pdl_kwargs(x.device))
    return out, summed, q, scales


def _num_warps(block: int) -> int:
    """Warps of a row of `block` (a power of two) columns."""
    return min(16, max(1, block // 256))


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """`rms_norm_ref` in one launch."""
    return _launch(x, None, weight, eps)[0]


def fused_add_rms_norm(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor,
                       eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """`fused_add_rms_norm_ref` in one launch."""
    out, summed, _, _ = _launch(x, residual, weight, eps)
    return out, summed


def fused_add_rms_norm_fp8_ref(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor,
                               eps: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """`fused_add_rms_norm_ref`, and its normalised rows quantized to FP8 per token and 128 columns as an FP8 layer
    takes them (`formats.fp8.quantize_fp8_per_token_group`): (out, sum, q float8_e4m3fn [T, H], scales [T, H/128])."""
    from quickmoe.formats.fp8 import quantize_fp8_per_token_group

    out, summed = fused_add_rms_norm_ref(x, residual, weight, eps)
    return out, summed, *quantize_fp8_per_token_group(out, FP8_GROUP)


def fused_add_rms_norm_fp8(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor,
                           eps: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """`fused_add_rms_norm_fp8_ref` in one launch: the quantizer's bits, without its launch."""
    out, summed, q, scales = _launch(x, residual, weight, eps, fp8_out=True)
    return out, summed, q, scales


if triton is not None:

    @triton.jit
    def _rms_norm_kernel(x_ptr, res_ptr, w_ptr, out_ptr, sum_ptr, q_ptr, s_ptr, stride_x, stride_r, hidden, eps,
                         HAS_RESIDUAL: tl.constexpr, PARTS: tl.constexpr, BLOCK: tl.constexpr, FP8_OUT: tl.constexpr,
                         HW_ROUND: tl.constexpr, EARLY: tl.constexpr, PDL: tl.constexpr):
        pdl_wait(PDL)
        pdl_trigger(EARLY)
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
        y = (w * (x32 * inv)).to(out_ptr.dtype.element_ty)
        tl.store(out_ptr + row * hidden + cols, y, mask=ok)
        if FP8_OUT:  # the quantizer's bits of y (hidden: whole groups of 128; columns past it are zeros)
            bits, scales = quantize_groups(tl.reshape(y.to(tl.float32), (BLOCK // 128, 128)), HW_ROUND)
            tl.store(q_ptr + row * hidden + cols, tl.reshape(bits, (BLOCK,)), mask=ok)
            groups = tl.arange(0, BLOCK // 128)
            tl.store(s_ptr + row * (hidden // 128) + groups, scales, mask=groups < hidden // 128)

    @triton.jit
    def head_rms_norm_halves(x1, x2, w_ptr, eps, HALF: tl.constexpr, dtype: tl.constexpr):
        """`_qk_rms_norm_kernel`'s arithmetic on heads held as two halves: x1, x2 [R, HALF] float32 (a head a row: its
        columns 0..HALF-1 and HALF..2 HALF-1), w_ptr the norm's [2 HALF] weight -> the normalised halves rounded to
        `dtype` (as `qk_rms_norm` stores them), as float32. The squares are summed half by half, then added, so a
        value's last bit may differ from `qk_rms_norm`'s one-row sum."""
        cols = tl.arange(0, HALF)
        squares = tl.sum(x1 * x1, axis=1) + tl.sum(x2 * x2, axis=1)  # [R]
        inv = (1.0 / tl.sqrt(squares / (2 * HALF) + eps))[:, None]
        w1 = tl.load(w_ptr + cols).to(tl.float32)
        w2 = tl.load(w_ptr + HALF + cols).to(tl.float32)
        y1 = (w1[None, :] * (x1 * inv)).to(dtype).to(tl.float32)
        y2 = (w2[None, :] * (x2 * inv)).to(dtype).to(tl.float32)
        return y1, y2

    @triton.jit
    def _qk_rms_norm_kernel(qkv_ptr, q_w_ptr, k_w_ptr, out_ptr, stride_t, eps, D: tl.constexpr,
                            NUM_HEADS: tl.constexpr, NUM_KV_HEADS: tl.constexpr, BLOCK_HEADS: tl.constexpr,
                            BLOCK_D: tl.constexpr, PDL: tl.constexpr):
        pdl_wait(PDL)
        token = tl.program_id(0).to(tl.int64)
        heads = tl.arange(0, BLOCK_HEADS)  # [BH]: q heads, then k heads, then v heads
        cols = tl.arange(0, BLOCK_D)  # [BD]
        ok = (heads < NUM_HEADS + 2 * NUM_KV_HEADS)[:, None] & (cols < D)[None, :]  # [BH, BD]
        offsets = heads[:, None] * D + cols[None, :]
        x = tl.load(qkv_ptr + token * stride_t + offsets, mask=ok, other=0.0)
        x32 = x.to(tl.float32)
        inv = 1.0 / tl.sqrt(tl.sum(x32 * x32, axis=1) / D + eps)  # [BH]
        q_w = tl.load(q_w_ptr + cols, mask=cols < D, other=0.0)  # [BD]
        k_w = tl.load(k_w_ptr + cols, mask=cols < D, other=0.0)
        is_q = (heads < NUM_HEADS)[:, None]
        normed = tl.where(is_q, q_w[None, :], k_w[None, :]) * (x32 * inv[:, None])
        y = tl.where((heads < NUM_HEADS + NUM_KV_HEADS)[:, None], normed.to(out_ptr.dtype.element_ty), x)
        tl.store(out_ptr + token * (NUM_HEADS + 2 * NUM_KV_HEADS) * D + offsets, y, mask=ok)
