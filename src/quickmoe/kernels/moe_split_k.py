"""Split-K for the MoE GEMMs of small batches: the finishing kernels.

At batch 1 a gpt-oss layer's GEMM 1 has 4 experts x 45 column tiles = 180 programs for the H100's 132 SMs, and
each program's K loop is a long chain of dependent steps: the SMs are neither full nor busy. A split-K config
(`MoEKernelConfig.split_k`) gives each of a tile's `k_parts` K ranges its own program, which writes its float32
sums; the kernels here add the parts in order and apply the epilogue the unsplit kernel applies:
- `finish_gemm1`: parts [P, A, 2 (gate, up), I] -> the gated activation [A, I] (row scale, bias, SwiGLU);
- `combine_parts`: parts [P, A, H] -> [T, H]: each assignment's (sum x row scale + bias) x routing weight,
  rounded to the output dtype as `moe_gemm2` stores its rows, then summed over the token's k assignments in
  order (`moe_combine`'s arithmetic): GEMM 2's finish and the combine in one launch.
The unsplit kernels with the same `k_parts` sum K in the same parts and add them in the same order, so a
split and an unsplit launch give the same bits (the batch-size invariance of bf16 decoding relies on it).
`finish_gemm1_ref` and `combine_parts_ref` are the torch references, same signatures.
"""

from __future__ import annotations

import torch

from quickmoe.kernels.moe_gemm import _require_triton

try:
    import triton
    import triton.language as tl

    from quickmoe.kernels.moe_gemm import _gemm1_epilogue, _gemm2_epilogue
except ImportError:  # pragma: no cover
    triton = None

__all__ = ["combine_parts", "combine_parts_ref", "finish_gemm1", "finish_gemm1_ref"]

_BLOCK = 512  # columns per finishing program


def finish_gemm1(parts: torch.Tensor, topk_ids: torch.Tensor, bias: torch.Tensor, row_scale: torch.Tensor,
                 out: torch.Tensor, group: int, limit: float, alpha: float, *, has_bias: bool, silu: bool,
                 row_scaled: bool) -> None:
    """parts [P, A, 2, I] float32 (GEMM 1's gate and up sums per K part) -> out [A, I]: the activation of
    (sum of the parts in order) x row_scale [E, 2I] (if row_scaled) + bias [E, 2I] (if has_bias), rows in the
    layout's gate/up groups of `group` columns; topk_ids [T, k] name each assignment's expert."""
    _require_triton()
    k_parts, num_assignments, _, intermediate = parts.shape
    if num_assignments:
        _finish_gemm1_kernel[(num_assignments, triton.cdiv(intermediate, _BLOCK))](
            parts, topk_ids.reshape(-1), bias, row_scale, out, num_assignments, limit, alpha, I=intermediate,
            GROUP=group, K_PARTS=k_parts, BLOCK=_BLOCK, HAS_BIAS=has_bias, SILU=silu, ROW_SCALE=row_scaled)


def finish_gemm1_ref(parts: torch.Tensor, topk_ids: torch.Tensor, bias: torch.Tensor, row_scale: torch.Tensor,
                     out: torch.Tensor, group: int, limit: float, alpha: float, *, has_bias: bool, silu: bool,
                     row_scaled: bool) -> None:
    k_parts, num_assignments, _, intermediate = parts.shape
    total = torch.zeros_like(parts[0])  # [A, 2, I]
    for p in range(k_parts):
        total = total + parts[p]
    gate, up = total[:, 0], total[:, 1]  # [A, I] in natural column order
    cols = torch.arange(intermediate, device=parts.device)
    first = (cols // group) * group  # each column's group start
    size = torch.clamp(intermediate - first, max=group)
    gate_rows = 2 * first + cols % group  # [I] rows of w1 in the layout's gate/up groups
    up_rows = gate_rows + size
    experts = topk_ids.reshape(-1).long()  # [A]
    if row_scaled:
        gate = gate * row_scale[experts][:, gate_rows]
        up = up * row_scale[experts][:, up_rows]
    if has_bias:
        gate = gate + bias[experts][:, gate_rows].float()
        up = up + bias[experts][:, up_rows].float()
    if silu:
        y = gate * torch.sigmoid(gate) * up
    else:
        gate = gate.clamp(max=limit)
        up = up.clamp(min=-limit, max=limit)
        y = (up + 1.0) * (gate * torch.sigmoid(alpha * gate))
    out.copy_(y.to(out.dtype))


def combine_parts(parts: torch.Tensor, topk_ids: torch.Tensor, topk_weights: torch.Tensor, bias: torch.Tensor,
                  row_scale: torch.Tensor, out_dtype: torch.dtype, *, has_bias: bool,
                  row_scaled: bool) -> torch.Tensor:
    """parts [P, A, H] float32 (GEMM 2's sums per K part) -> [T, H] in out_dtype: per assignment a of token t,
    ((sum of the parts in order) x row_scale[e] + bias[e]) x topk_weights[a], rounded to out_dtype; then the
    token's k rows summed in float32 in order."""
    _require_triton()
    k_parts, num_assignments, hidden_size = parts.shape
    num_tokens, top_k = topk_ids.shape
    out = torch.empty(num_tokens, hidden_size, dtype=out_dtype, device=parts.device)
    if num_tokens:
        _combine_parts_kernel[(num_tokens, triton.cdiv(hidden_size, _BLOCK))](
            parts, topk_ids.reshape(-1), topk_weights.reshape(-1), bias, row_scale, out, num_assignments,
            H=hidden_size, TOP_K=top_k, K_PARTS=k_parts, BLOCK=_BLOCK, HAS_BIAS=has_bias, ROW_SCALE=row_scaled)
    return out


def combine_parts_ref(parts: torch.Tensor, topk_ids: torch.Tensor, topk_weights: torch.Tensor, bias: torch.Tensor,
                      row_scale: torch.Tensor, out_dtype: torch.dtype, *, has_bias: bool,
                      row_scaled: bool) -> torch.Tensor:
    k_parts, num_assignments, hidden_size = parts.shape
    num_tokens, top_k = topk_ids.shape
    total = torch.zeros_like(parts[0])  # [A, H]
    for p in range(k_parts):
        total = total + parts[p]
    experts = topk_ids.reshape(-1).long()
    if row_scaled:
        total = total * row_scale[experts]
    if has_bias:
        total = total + bias[experts].float()
    rows = (total * topk_weights.reshape(-1, 1).float()).to(out_dtype).float()  # [A, H], rounded per assignment
    out = torch.zeros(num_tokens, hidden_size, dtype=torch.float32, device=parts.device)
    for j in range(top_k):
        out = out + rows[j::top_k]
    return out.to(out_dtype)


if triton is not None:

    @triton.jit(do_not_specialize=["num_assignments"])
    def _finish_gemm1_kernel(parts_ptr, ids_ptr, bias_ptr, row_scale_ptr, out_ptr, num_assignments, limit, alpha,
                             I: tl.constexpr, GROUP: tl.constexpr, K_PARTS: tl.constexpr, BLOCK: tl.constexpr,
                             HAS_BIAS: tl.constexpr, SILU: tl.constexpr, ROW_SCALE: tl.constexpr):
        a = tl.program_id(0)
        cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)  # [BLOCK] activation columns
        ok = cols < I
        expert = tl.load(ids_ptr + a).to(tl.int64)
        first = (cols // GROUP) * GROUP  # the column's gate/up group: s gate rows, then s up rows
        size = tl.minimum(I - first, GROUP)
        gate_rows = 2 * first + cols % GROUP
        up_rows = gate_rows + size
        gate = tl.zeros([BLOCK], dtype=tl.float32)
        up = tl.zeros([BLOCK], dtype=tl.float32)
        for p in tl.static_range(K_PARTS):  # in order, from zero: the unsplit kernel's sums
            row = (p * num_assignments + a) * 2
            gate += tl.load(parts_ptr + row * I + cols, mask=ok, other=0.0)
            up += tl.load(parts_ptr + (row + 1) * I + cols, mask=ok, other=0.0)
        y = _gemm1_epilogue(gate, up, row_scale_ptr, bias_ptr, expert * 2 * I, gate_rows, up_rows, ok, limit, alpha,
                            ROW_SCALE, HAS_BIAS, SILU)
        tl.store(out_ptr + a * I + cols, y.to(out_ptr.dtype.element_ty), mask=ok)

    @triton.jit(do_not_specialize=["num_assignments"])
    def _combine_parts_kernel(parts_ptr, ids_ptr, route_w_ptr, bias_ptr, row_scale_ptr, out_ptr, num_assignments,
                              H: tl.constexpr, TOP_K: tl.constexpr, K_PARTS: tl.constexpr, BLOCK: tl.constexpr,
                              HAS_BIAS: tl.constexpr, ROW_SCALE: tl.constexpr):
        token = tl.program_id(0)
        cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)  # [BLOCK]
        ok = cols < H
        acc = tl.zeros([BLOCK], dtype=tl.float32)
        for j in tl.static_range(TOP_K):
            a = token * TOP_K + j
            expert = tl.load(ids_ptr + a).to(tl.int64)
            total = tl.zeros([BLOCK], dtype=tl.float32)
            for p in tl.static_range(K_PARTS):
                total += tl.load(parts_ptr + (p * num_assignments + a) * H + cols, mask=ok, other=0.0)
            route_w = tl.load(route_w_ptr + a).to(tl.float32)
            row = _gemm2_epilogue(total, row_scale_ptr, bias_ptr, expert * H, cols, ok, route_w, ROW_SCALE,
                                  HAS_BIAS)
            acc += row.to(out_ptr.dtype.element_ty).to(tl.float32)  # rounded as moe_gemm2 stores its rows
        tl.store(out_ptr + token * H + cols, acc.to(out_ptr.dtype.element_ty), mask=ok)
