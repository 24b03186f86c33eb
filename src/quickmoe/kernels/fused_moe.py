"""The MoE experts computation: grouped GEMM 1 (gate_up + bias + clamped SwiGLU), grouped GEMM 2
(down + bias), weighted by the routing weights and combined into the output.

`fused_moe_ref` is the torch reference; the Triton kernel of the MoE issue takes the same arguments.
Expert weights are out x in: w1 [E, 2I, H] (rows interleaved: even gate, odd up), w2 [E, H, I]. When
scales are given, w1/w2 are MXFP4 blocks [E, N, K/32, 16] with E8M0 scales [E, N, K/32], and are
dequantized here per expert hit, so the stored experts stay MXFP4.
"""

from __future__ import annotations

import torch

from quickmoe.formats.mxfp4 import dequantize_mxfp4


def swiglu_gpt_oss(gate_up: torch.Tensor, limit: float, alpha: float) -> torch.Tensor:
    """gate_up [..., 2I] interleaved -> [..., I]: gate=min(g, limit), up=clamp(u, ±limit),
    out = (up + 1) * gate * sigmoid(alpha * gate)."""
    gate = gate_up[..., 0::2].clamp(max=limit)
    up = gate_up[..., 1::2].clamp(min=-limit, max=limit)
    return (up + 1) * (gate * torch.sigmoid(alpha * gate))


def _expert_weight(w: torch.Tensor, scales: torch.Tensor | None, expert: int, dtype: torch.dtype) -> torch.Tensor:
    if scales is None:
        return w[expert].to(dtype)
    return dequantize_mxfp4(w[expert], scales[expert], dtype=dtype)  # [N, K]


def fused_moe_ref(
    hidden: torch.Tensor,  # [T, H]
    topk_weights: torch.Tensor,  # [T, k]
    topk_ids: torch.Tensor,  # [T, k]
    w1: torch.Tensor,
    w1_bias: torch.Tensor,  # [E, 2I]
    w2: torch.Tensor,
    w2_bias: torch.Tensor,  # [E, H]
    *,
    w1_scales: torch.Tensor | None = None,
    w2_scales: torch.Tensor | None = None,
    swiglu_limit: float = 7.0,
    swiglu_alpha: float = 1.702,
) -> torch.Tensor:
    """Returns [T, H] in hidden's dtype. Loops over the experts hit (a reference, not a kernel)."""
    num_tokens, top_k = topk_ids.shape
    dtype = hidden.dtype
    out = torch.zeros_like(hidden)
    flat_ids = topk_ids.reshape(-1)  # [T*k]
    order = torch.argsort(flat_ids, stable=True)  # assignments grouped by expert
    counts = torch.bincount(flat_ids, minlength=w1.shape[0]).tolist()
    token_of = order // top_k  # [T*k] token of each sorted assignment
    weight_of = topk_weights.reshape(-1)[order]
    start = 0
    for expert, count in enumerate(counts):
        if count == 0:
            continue
        rows = slice(start, start + count)
        start += count
        tokens = token_of[rows]
        x = hidden[tokens]  # [n, H]
        h = x @ _expert_weight(w1, w1_scales, expert, dtype).T + w1_bias[expert].to(dtype)  # [n, 2I]
        a = swiglu_gpt_oss(h, swiglu_limit, swiglu_alpha)  # [n, I]
        y = a @ _expert_weight(w2, w2_scales, expert, dtype).T + w2_bias[expert].to(dtype)  # [n, H]
        out.index_add_(0, tokens, (y * weight_of[rows, None].to(dtype)).to(dtype))
    return out
