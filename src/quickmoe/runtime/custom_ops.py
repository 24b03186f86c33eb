"""The model's opaque steps as torch.library custom ops, so torch.compile treats them as single nodes.

Every argument is a tensor or a plain number: no layer names, indices or counters, so one compiled
decoder layer serves every layer of its kind, in any order and with any layer skipped on any step.
- `quickmoe::moe_experts`: the MoE experts (`fused_moe` with the Triton kernels, else `fused_moe_ref`).
- `quickmoe::write_kv`: writes a step's K and V into one layer's cache (mutates the cache in place).
- `quickmoe::sink_attention`: gpt-oss attention of every sequence of the step over one layer's cache. The
  per-sequence lengths and cache slots arrive as CPU int64 tensors (read on the host, never synchronizing
  with the device); the paged, kernel-based attention of the engine issue replaces the loop inside.
Each op has a fake (meta) implementation giving the output's shape, so compilation never runs it.
"""

from __future__ import annotations

import torch

from quickmoe.kernels.fused_moe import fused_moe, fused_moe_ref

__all__ = ["moe_experts", "sink_attention", "write_kv"]


@torch.library.custom_op("quickmoe::moe_experts", mutates_args=())
def moe_experts(hidden: torch.Tensor, topk_weights: torch.Tensor, topk_ids: torch.Tensor, w1: torch.Tensor,
                w1_bias: torch.Tensor | None, w2: torch.Tensor, w2_bias: torch.Tensor | None,
                w1_scales: torch.Tensor | None, w2_scales: torch.Tensor | None, gate_up_group: int,
                swiglu_limit: float, swiglu_alpha: float, use_kernels: bool) -> torch.Tensor:
    """[T, H] -> [T, H]: the arguments of `fused_moe_ref`; use_kernels picks `fused_moe` (Triton)."""
    experts = fused_moe if use_kernels else fused_moe_ref
    return experts(hidden, topk_weights, topk_ids, w1, w1_bias, w2, w2_bias, w1_scales=w1_scales,
                   w2_scales=w2_scales, gate_up_group=gate_up_group, swiglu_limit=swiglu_limit,
                   swiglu_alpha=swiglu_alpha)


@moe_experts.register_fake
def _moe_experts_fake(hidden, topk_weights, topk_ids, w1, w1_bias, w2, w2_bias, w1_scales, w2_scales, gate_up_group,
                      swiglu_limit, swiglu_alpha, use_kernels):
    return torch.empty_like(hidden)


@torch.library.custom_op("quickmoe::write_kv", mutates_args=("k_cache", "v_cache"))
def write_kv(k: torch.Tensor, v: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
             token_slots: torch.Tensor, positions: torch.Tensor) -> None:
    """k, v [T, KV, D] into k_cache, v_cache [slots, max_len, KV, D] at (token_slots[t], positions[t])."""
    k_cache[token_slots, positions] = k.to(k_cache.dtype)
    v_cache[token_slots, positions] = v.to(v_cache.dtype)


@write_kv.register_fake
def _write_kv_fake(k, v, k_cache, v_cache, token_slots, positions):
    return None


@torch.library.custom_op("quickmoe::sink_attention", mutates_args=())
def sink_attention(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, sinks: torch.Tensor,
                   positions: torch.Tensor, seq_slots: torch.Tensor, query_lens: torch.Tensor,
                   context_lens: torch.Tensor, window: int, scale: float) -> torch.Tensor:
    """q [T, H, D] (sequences packed in order) -> [T, H, D]. Sequence i: query_lens[i] rows, cache row
    seq_slots[i] holding context_lens[i] positions; window <= 0: full attention."""
    from quickmoe.layers.attention import sink_attention_ref

    out = torch.empty_like(q)
    start = 0
    for slot, n, ctx in zip(seq_slots.tolist(), query_lens.tolist(), context_lens.tolist()):
        rows = slice(start, start + n)
        out[rows] = sink_attention_ref(q[rows], k_cache[slot, :ctx], v_cache[slot, :ctx], sinks, positions[rows],
                                       window if window > 0 else None, scale)
        start += n
    return out


@sink_attention.register_fake
def _sink_attention_fake(q, k_cache, v_cache, sinks, positions, seq_slots, query_lens, context_lens, window, scale):
    return torch.empty_like(q)
