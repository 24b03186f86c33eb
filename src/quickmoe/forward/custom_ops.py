"""The model's opaque steps as torch.library custom ops, so torch.compile treats them as single nodes.

Every argument is a tensor or a plain number: no layer names, indices or counters, so one compiled
decoder layer serves every layer of its kind, in any order and with any layer skipped on any step.
- `quickmoe::moe_experts`: the MoE experts (`fused_moe` with the Triton kernels, else `fused_moe_ref`).
- `quickmoe::write_kv`: writes a step's K and V into one layer's paged cache (mutates the cache in place).
- `quickmoe::paged_attention`: gpt-oss attention (sinks, window, GQA) of every sequence of the step over one
  layer's paged cache (kernels/paged_attention.py: the Triton kernels, or their torch references).
Each op has a fake (meta) implementation giving the output's shape, so compilation never runs it. Outside
torch.compile the model calls the implementations directly (`_dispatch`).
"""

from __future__ import annotations

import torch

from quickmoe.kernels.fused_moe import fused_moe, fused_moe_ref
from quickmoe.kernels.paged_attention import (
    paged_decode_attention,
    paged_decode_attention_ref,
    paged_prefill_attention,
    paged_prefill_attention_ref,
    write_kv_paged,
    write_kv_paged_ref,
)

__all__ = ["moe_experts", "moe_experts_op", "paged_attention", "paged_attention_op", "write_kv", "write_kv_op"]


def _moe_experts(hidden: torch.Tensor, topk_weights: torch.Tensor, topk_ids: torch.Tensor, w1: torch.Tensor,
                w1_bias: torch.Tensor | None, w2: torch.Tensor, w2_bias: torch.Tensor | None,
                w1_scales: torch.Tensor | None, w2_scales: torch.Tensor | None, gate_up_group: int,
                swiglu_limit: float, swiglu_alpha: float, use_kernels: bool, activation: str = "swiglu_gpt_oss",
                w1_row_scale: torch.Tensor | None = None, w2_row_scale: torch.Tensor | None = None) -> torch.Tensor:
    """[T, H] -> [T, H]: the arguments of `fused_moe_ref`; use_kernels picks `fused_moe` (Triton)."""
    experts = fused_moe if use_kernels else fused_moe_ref
    return experts(hidden, topk_weights, topk_ids, w1, w1_bias, w2, w2_bias, w1_scales=w1_scales,
                   w2_scales=w2_scales, gate_up_group=gate_up_group, swiglu_limit=swiglu_limit,
                   swiglu_alpha=swiglu_alpha, activation=activation, w1_row_scale=w1_row_scale,
                   w2_row_scale=w2_row_scale)


moe_experts_op = torch.library.custom_op("quickmoe::moe_experts", _moe_experts, mutates_args=())


@moe_experts_op.register_fake
def _moe_experts_fake(hidden, topk_weights, topk_ids, w1, w1_bias, w2, w2_bias, w1_scales, w2_scales, gate_up_group,
                      swiglu_limit, swiglu_alpha, use_kernels, activation="swiglu_gpt_oss", w1_row_scale=None,
                      w2_row_scale=None):
    return torch.empty_like(hidden)


def _write_kv(k: torch.Tensor, v: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
             slot_mapping: torch.Tensor, use_kernels: bool) -> None:
    """k, v [T, KV, D] into one layer's paged cache [blocks, block_size, KV, D] at slot_mapping [T] (-1: skip)."""
    (write_kv_paged if use_kernels else write_kv_paged_ref)(k, v, k_cache, v_cache, slot_mapping)


write_kv_op = torch.library.custom_op("quickmoe::write_kv", _write_kv, mutates_args=("k_cache", "v_cache"))


@write_kv_op.register_fake
def _write_kv_fake(k, v, k_cache, v_cache, slot_mapping, use_kernels):
    return None


def _paged_attention(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, block_tables: torch.Tensor,
                    cu_query_lens: torch.Tensor, context_lens: torch.Tensor, max_query_len: torch.Tensor,
                    sinks: torch.Tensor, window: int, scale: float, use_kernels: bool) -> torch.Tensor:
    """q [T, H, D] (sequences packed in order) -> [T, H, D] over one layer's paged cache; window <= 0: full
    attention. A step with one token per sequence (T == B: decode, the CUDA-graph case) runs the decode
    kernel, which reads nothing on the host; others the prefill kernel, gridded by `max_query_len` (CPU)."""
    if q.shape[0] == context_lens.shape[0]:
        decode = paged_decode_attention if use_kernels else paged_decode_attention_ref
        return decode(q, k_cache, v_cache, block_tables, context_lens, sinks, window, scale)
    if use_kernels:
        return paged_prefill_attention(q, k_cache, v_cache, block_tables, cu_query_lens, context_lens, sinks,
                                       window, scale, max_query_len=int(max_query_len))
    return paged_prefill_attention_ref(q, k_cache, v_cache, block_tables, cu_query_lens, context_lens, sinks,
                                       window, scale)


paged_attention_op = torch.library.custom_op("quickmoe::paged_attention", _paged_attention, mutates_args=())


@paged_attention_op.register_fake
def _paged_attention_fake(q, k_cache, v_cache, block_tables, cu_query_lens, context_lens, max_query_len, sinks,
                          window, scale, use_kernels):
    return torch.empty_like(q)


def _dispatch(op, impl):
    """While torch.compile traces, the registered op (one opaque node); otherwise the implementation itself,
    without torch.library's Python dispatch (tens of microseconds per call, and a lazy import of Dynamo on the
    first call)."""

    def call(*args):
        return op(*args) if torch.compiler.is_compiling() else impl(*args)

    call.__doc__ = impl.__doc__
    call.__name__ = impl.__name__.lstrip("_")
    return call


moe_experts = _dispatch(moe_experts_op, _moe_experts)
write_kv = _dispatch(write_kv_op, _write_kv)
paged_attention = _dispatch(paged_attention_op, _paged_attention)
