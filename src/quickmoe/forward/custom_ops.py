"""The model's opaque steps as torch.library custom ops, so torch.compile treats them as single nodes.

Every argument is a tensor or a plain number: no layer names, indices or counters, so one compiled
decoder layer serves every layer of its kind, in any order and with any layer skipped on any step.
`use_kernels` picks the Triton kernel (kernels/) or its torch reference, which have the same signatures.
- `quickmoe::rms_norm` / `quickmoe::fused_add_rms_norm`: RMSNorm, alone or after the residual add (x [T, H], or
  an MoE output before its combine, [T, k, H], summed first).
- `quickmoe::fused_add_rms_norm_fp8`: the same after the residual add, and its rows quantized to FP8 per token and
  128 columns for an FP8 layer that takes them (the FP8 experts), so that layer's quantizer does not run.
- `quickmoe::qk_rms_norm`: RMSNorm over each q and k head of a QKV projection's output (Qwen3), v as it is.
- `quickmoe::attention`: Qwen3's per-head q/k RMSNorm where given, RoPE on q and k, K and V written into one
  layer's paged cache (mutated in place), then gpt-oss attention (sinks, window, GQA) of every sequence of the step
  over that cache: for one token per sequence (decode) one kernel does all (`rotary_paged_decode_attention`), else
  `qk_rms_norm`, `rotary_write_kv`, then the prefill kernel. `quickmoe::attention_fp8`: the same, and its output
  quantized to FP8 per token and 128 columns for an FP8 o_proj (by the decode kernels themselves in a decode step).
- `quickmoe::decode_linear`: x W^T + b of an unquantized projection; in a decode step (one token per sequence)
  the Triton GEMM (`dense_gemm`, whose rounding does not depend on the batch), else cuBLAS.
- `quickmoe::route_experts`: the router (linear, bias optional), then top-k and softmax in either order (gpt-oss:
  top-k then softmax; Mixtral, Qwen: softmax then top-k), in one kernel where faster (`kernels/router.py`);
  weights float32, ids int32 with the kernels (gpt-oss's torch reference keeps the logits' dtype and int64 ids).
- `quickmoe::moe_experts`: the MoE experts (`fused_moe` with the Triton kernels, else `fused_moe_ref`): MXFP4,
  NVFP4, FP8 block-scaled or dense weights, gpt-oss's SwiGLU or SiLU * up.
Each op has a fake (meta) implementation giving the output's shape, so compilation never runs it. Outside
torch.compile the model calls the implementations directly (`_dispatch`).
"""

from __future__ import annotations

import torch

from quickmoe.kernels.decode_attention import (
    paged_decode_attention,
    paged_decode_attention_ref,
    rotary_paged_decode_attention,
    rotary_supported,
)
from quickmoe.kernels.decode_attention import FP8_GROUP
from quickmoe.kernels.dense_gemm import dense_gemm, dense_gemm_supported
from quickmoe.kernels.fp8_quant import quantize_fp8_per_token_group, quantize_fp8_per_token_group_ref
from quickmoe.kernels.fused_moe import fused_moe, fused_moe_ref
from quickmoe.kernels.prefill_attention import paged_prefill_attention, paged_prefill_attention_ref
from quickmoe.kernels.rms_norm import fused_add_rms_norm as fused_add_rms_norm_kernel
from quickmoe.kernels.rms_norm import fused_add_rms_norm_fp8 as fused_add_rms_norm_fp8_kernel
from quickmoe.kernels.rms_norm import fused_add_rms_norm_fp8_ref, fused_add_rms_norm_ref, qk_rms_norm_ref, rms_norm_ref
from quickmoe.kernels.rms_norm import qk_rms_norm as qk_rms_norm_kernel
from quickmoe.kernels.rms_norm import rms_norm as rms_norm_kernel
from quickmoe.kernels.rotary_kv_write import rotary_write_kv as rotary_write_kv_kernel
from quickmoe.kernels.rotary_kv_write import rotary_write_kv_ref
from quickmoe.kernels.router import router_route, router_route_preferred
from quickmoe.kernels.routing import mask_padding_rows, route, route_ref, topk_softmax_ref

__all__ = ["attention", "attention_fp8", "decode_linear", "fused_add_rms_norm", "fused_add_rms_norm_fp8", "moe_experts",
           "qk_rms_norm", "rms_norm", "route_experts"]


def _rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float, use_kernels: bool) -> torch.Tensor:
    return (rms_norm_kernel if use_kernels else rms_norm_ref)(x, weight, eps)


rms_norm_op = torch.library.custom_op("quickmoe::rms_norm", _rms_norm, mutates_args=())


@rms_norm_op.register_fake
def _rms_norm_fake(x, weight, eps, use_kernels):
    return torch.empty_like(x)


def _fused_add_rms_norm(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float,
                        use_kernels: bool) -> tuple[torch.Tensor, torch.Tensor]:
    return (fused_add_rms_norm_kernel if use_kernels else fused_add_rms_norm_ref)(x, residual, weight, eps)


fused_add_rms_norm_op = torch.library.custom_op("quickmoe::fused_add_rms_norm", _fused_add_rms_norm,
                                                mutates_args=())


@fused_add_rms_norm_op.register_fake
def _fused_add_rms_norm_fake(x, residual, weight, eps, use_kernels):
    return torch.empty_like(residual), torch.empty_like(residual)


def _fused_add_rms_norm_fp8(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float,
                            use_kernels: bool) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """`fused_add_rms_norm`, and its rows quantized to FP8 per token and 128 columns (q, scales) for an FP8 layer."""
    return (fused_add_rms_norm_fp8_kernel if use_kernels else fused_add_rms_norm_fp8_ref)(x, residual, weight, eps)


fused_add_rms_norm_fp8_op = torch.library.custom_op("quickmoe::fused_add_rms_norm_fp8", _fused_add_rms_norm_fp8,
                                                    mutates_args=())


@fused_add_rms_norm_fp8_op.register_fake
def _fused_add_rms_norm_fp8_fake(x, residual, weight, eps, use_kernels):
    rows, hidden = residual.shape
    return (torch.empty_like(residual), torch.empty_like(residual),
            residual.new_empty((rows, hidden), dtype=torch.float8_e4m3fn),
            residual.new_empty((rows, hidden // 128), dtype=torch.float32))


def _qk_rms_norm(qkv: torch.Tensor, q_weight: torch.Tensor, k_weight: torch.Tensor, num_heads: int,
                 num_kv_heads: int, eps: float, use_kernels: bool) -> torch.Tensor:
    return (qk_rms_norm_kernel if use_kernels else qk_rms_norm_ref)(qkv, q_weight, k_weight, num_heads,
                                                                    num_kv_heads, eps)


qk_rms_norm_op = torch.library.custom_op("quickmoe::qk_rms_norm", _qk_rms_norm, mutates_args=())


@qk_rms_norm_op.register_fake
def _qk_rms_norm_fake(qkv, q_weight, k_weight, num_heads, num_kv_heads, eps, use_kernels):
    return torch.empty_like(qkv)


def _rotary_write_kv(qkv: torch.Tensor, positions: torch.Tensor, cos_sin_cache: torch.Tensor, k_cache: torch.Tensor,
                     v_cache: torch.Tensor, slot_mapping: torch.Tensor, use_kernels: bool) -> torch.Tensor:
    """qkv [T, (H + 2 KV) D] -> rotated q [T, H, D]; rotated k and v into the cache at slot_mapping [T] (-1: skip)."""
    impl = rotary_write_kv_kernel if use_kernels else rotary_write_kv_ref
    return impl(qkv, positions, cos_sin_cache, k_cache, v_cache, slot_mapping)


def _paged_attention(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, block_tables: torch.Tensor,
                     cu_query_lens: torch.Tensor, context_lens: torch.Tensor, sinks: torch.Tensor, window: int,
                     scale: float, use_kernels: bool) -> torch.Tensor:
    """q [T, H, D] (sequences packed in order) -> [T, H, D] over one layer's paged cache; window <= 0: full
    attention. A step with one token per sequence (T == B: decode) runs the decode kernel, others the prefill
    kernel; neither reads a length on the host."""
    if q.shape[0] == context_lens.shape[0]:
        decode = paged_decode_attention if use_kernels else paged_decode_attention_ref
        return decode(q, k_cache, v_cache, block_tables, context_lens, sinks, window, scale)
    if use_kernels:
        return paged_prefill_attention(q, k_cache, v_cache, block_tables, cu_query_lens, context_lens, sinks,
                                       window, scale)
    return paged_prefill_attention_ref(q, k_cache, v_cache, block_tables, cu_query_lens, context_lens, sinks,
                                       window, scale)


def _one_decode_kernel(qkv: torch.Tensor, context_lens: torch.Tensor, head_dim: int, use_kernels: bool) -> bool:
    """Whether the step's attention is one fused decode kernel: one token per sequence (T == B) on the kernels, heads
    the fused kernel takes."""
    return use_kernels and qkv.shape[0] == context_lens.shape[0] and rotary_supported(head_dim)


def _qk_norm(q_norm_weight: torch.Tensor | None, k_norm_weight: torch.Tensor | None, norm_eps: float) -> tuple | None:
    """The decode kernel's qk_norm argument: (q weight, k weight, eps), or None without Qwen3's head norms."""
    if (q_norm_weight is None) != (k_norm_weight is None):
        raise ValueError("attention: q_norm_weight and k_norm_weight go together")
    return (q_norm_weight, k_norm_weight, norm_eps) if q_norm_weight is not None else None


def _attention(qkv: torch.Tensor, positions: torch.Tensor, cos_sin_cache: torch.Tensor, k_cache: torch.Tensor,
               v_cache: torch.Tensor, slot_mapping: torch.Tensor, block_tables: torch.Tensor,
               cu_query_lens: torch.Tensor, context_lens: torch.Tensor, sinks: torch.Tensor, window: int,
               scale: float, num_heads: int, head_dim: int, use_kernels: bool,
               q_norm_weight: torch.Tensor | None = None, k_norm_weight: torch.Tensor | None = None,
               norm_eps: float = 0.0) -> torch.Tensor:
    """qkv [T, (H + 2 KV) D] -> [T, H, D]: with q_norm_weight / k_norm_weight [D] (Qwen3) q's and k's heads
    RMS-normalised (`qk_rms_norm`, eps norm_eps), RoPE, the KV-cache write at slot_mapping [T] (-1: skip), then the
    attention of every sequence (packed in order) over one layer's paged cache; window <= 0: full attention. H
    and D are given as numbers (the layer's constants), so a compiled graph knows the output's shape but for T.
    A step with one token per sequence (T == B: decode, the CUDA-graph case) runs one kernel that reads nothing on
    the host, the norm included; others `qk_rms_norm`, `rotary_write_kv` and the prefill kernel, whose grid the
    token and sequence counts size (no length read on the host: a CUDA graph serves every step of its bucket)."""
    qk_norm = _qk_norm(q_norm_weight, k_norm_weight, norm_eps)
    if _one_decode_kernel(qkv, context_lens, head_dim, use_kernels):
        return rotary_paged_decode_attention(qkv, positions, cos_sin_cache, k_cache, v_cache, slot_mapping,
                                             block_tables, context_lens, sinks, window, scale, qk_norm=qk_norm)
    if qk_norm is not None:
        qkv = _qk_rms_norm(qkv, q_norm_weight, k_norm_weight, num_heads, k_cache.shape[2], norm_eps, use_kernels)
    q = _rotary_write_kv(qkv, positions, cos_sin_cache, k_cache, v_cache, slot_mapping, use_kernels)
    return _paged_attention(q, k_cache, v_cache, block_tables, cu_query_lens, context_lens, sinks,
                            window, scale, use_kernels)


attention_op = torch.library.custom_op("quickmoe::attention", _attention, mutates_args=("k_cache", "v_cache"))


@attention_op.register_fake
def _attention_fake(qkv, positions, cos_sin_cache, k_cache, v_cache, slot_mapping, block_tables, cu_query_lens,
                    context_lens, sinks, window, scale, num_heads, head_dim, use_kernels,
                    q_norm_weight=None, k_norm_weight=None, norm_eps=0.0):
    return qkv.new_empty((qkv.shape[0], num_heads, head_dim))


def _attention_fp8(qkv: torch.Tensor, positions: torch.Tensor, cos_sin_cache: torch.Tensor, k_cache: torch.Tensor,
                   v_cache: torch.Tensor, slot_mapping: torch.Tensor, block_tables: torch.Tensor,
                   cu_query_lens: torch.Tensor, context_lens: torch.Tensor, sinks: torch.Tensor, window: int,
                   scale: float, num_heads: int, head_dim: int, use_kernels: bool,
                   q_norm_weight: torch.Tensor | None = None, k_norm_weight: torch.Tensor | None = None,
                   norm_eps: float = 0.0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """`_attention`'s output [T, H, D], and its rows [T, H D] quantized to FP8 per token and 128 columns (e4m3
    [T, H D], scales [T, H D / 128]) with the activation quantizer's bits, for an FP8 o_proj that takes them. In a
    decode step with heads of whole 128-column groups (Qwen3) the decode kernels quantize what they store (no
    quantizer launch); otherwise the quantizer runs after the attention."""
    if _one_decode_kernel(qkv, context_lens, head_dim, use_kernels) and head_dim % FP8_GROUP == 0:
        return rotary_paged_decode_attention(qkv, positions, cos_sin_cache, k_cache, v_cache, slot_mapping,
                                             block_tables, context_lens, sinks, window, scale,
                                             qk_norm=_qk_norm(q_norm_weight, k_norm_weight, norm_eps), fp8_out=True)
    out = _attention(qkv, positions, cos_sin_cache, k_cache, v_cache, slot_mapping, block_tables, cu_query_lens,
                     context_lens, sinks, window, scale, num_heads, head_dim, use_kernels,
                     q_norm_weight, k_norm_weight, norm_eps)
    quantize = quantize_fp8_per_token_group if use_kernels else quantize_fp8_per_token_group_ref
    return (out, *quantize(out.view(out.shape[0], -1), FP8_GROUP))


attention_fp8_op = torch.library.custom_op("quickmoe::attention_fp8", _attention_fp8,
                                           mutates_args=("k_cache", "v_cache"))


@attention_fp8_op.register_fake
def _attention_fp8_fake(qkv, positions, cos_sin_cache, k_cache, v_cache, slot_mapping, block_tables, cu_query_lens,
                        context_lens, sinks, window, scale, num_heads, head_dim, use_kernels,
                        q_norm_weight=None, k_norm_weight=None, norm_eps=0.0):
    tokens, width = qkv.shape[0], num_heads * head_dim
    return (qkv.new_empty((tokens, num_heads, head_dim)), qkv.new_empty((tokens, width), dtype=torch.float8_e4m3fn),
            qkv.new_empty((tokens, -(-width // FP8_GROUP)), dtype=torch.float32))


def _decode_linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, context_lens: torch.Tensor,
                   use_kernels: bool) -> torch.Tensor:
    """x [T, K] -> x W^T + b [T, N]. In a decode step (T == B, one token per sequence: context_lens [B]) the Triton
    GEMM (`dense_gemm`): one launch that reads W once at one row (cuBLAS splits K there and sums the parts in a
    second launch), with the same rounding at every batch size, so a sequence's tokens do not depend on its
    batch. Other steps (prompts) take cuBLAS, faster at thousands of rows (kernels/dense_gemm.py)."""
    if use_kernels and x.shape[0] == context_lens.shape[0] and dense_gemm_supported(x, weight):
        return dense_gemm(x, weight, bias)
    return torch.nn.functional.linear(x, weight, bias)


decode_linear_op = torch.library.custom_op("quickmoe::decode_linear", _decode_linear, mutates_args=())


@decode_linear_op.register_fake
def _decode_linear_fake(x, weight, bias, context_lens, use_kernels):
    return x.new_empty((x.shape[0], weight.shape[0]))


def _route_experts(hidden: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, top_k: int,
                   softmax_first: bool, renormalize: bool, use_kernels: bool,
                   num_valid_tokens: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """hidden [T, H] -> (topk_weights [T, k], topk_ids [T, k]): the router's logits hidden W^T + b (one GEMM),
    then gpt-oss's scoring (the k largest logits, a softmax over them) or, with softmax_first, Mixtral's and
    Qwen's (a softmax over all experts, the k largest, divided by their sum when renormalize). The kernels do
    both in one launch (`router_route`) where that was measured faster (`router_route_preferred`).
    num_valid_tokens (an integer [1] on the device): rows at and past it are a CUDA graph's padding and get expert id E
    (no expert: `moe_experts` with absent_experts) and weight 0."""
    scoring = "softmax_topk" if softmax_first else "topk_softmax"
    if use_kernels and router_route_preferred(weight.shape[0], hidden.shape[0]):
        return router_route(hidden, weight, bias, top_k, scoring=scoring, renormalize=renormalize,
                            num_valid_tokens=num_valid_tokens)
    router_logits = torch.nn.functional.linear(hidden, weight, bias)  # [T, E]
    if use_kernels:
        return route(router_logits, top_k, scoring=scoring, renormalize=renormalize,
                     num_valid_tokens=num_valid_tokens)
    if softmax_first:
        return route_ref(router_logits, top_k, scoring=scoring, renormalize=renormalize,
                         num_valid_tokens=num_valid_tokens)
    topk_weights, topk_ids = topk_softmax_ref(router_logits, top_k)
    if num_valid_tokens is not None:
        return mask_padding_rows(topk_weights, topk_ids, num_valid_tokens, weight.shape[0])
    return topk_weights, topk_ids


route_experts_op = torch.library.custom_op("quickmoe::route_experts", _route_experts, mutates_args=())


@route_experts_op.register_fake
def _route_experts_fake(hidden, weight, bias, top_k, softmax_first, renormalize, use_kernels, num_valid_tokens=None):
    shape = (hidden.shape[0], top_k)
    if use_kernels or softmax_first:
        return hidden.new_empty(shape, dtype=torch.float32), hidden.new_empty(shape, dtype=torch.int32)
    return hidden.new_empty(shape), hidden.new_empty(shape, dtype=torch.int64)


def _moe_experts(hidden: torch.Tensor, topk_weights: torch.Tensor, topk_ids: torch.Tensor, w1: torch.Tensor,
                 w1_bias: torch.Tensor | None, w2: torch.Tensor, w2_bias: torch.Tensor | None,
                 w1_scales: torch.Tensor | None, w2_scales: torch.Tensor | None, gate_up_group: int,
                 swiglu_limit: float, swiglu_alpha: float, use_kernels: bool, activation: str = "swiglu_gpt_oss",
                 w1_row_scale: torch.Tensor | None = None, w2_row_scale: torch.Tensor | None = None,
                 combine: bool = True, absent_experts: bool = False, hidden_q: torch.Tensor | None = None,
                 hidden_scales: torch.Tensor | None = None) -> torch.Tensor:
    """[T, H] -> [T, H]: the arguments of `fused_moe_ref`; use_kernels picks `fused_moe` (Triton). With the kernels
    and combine False: [T, k, H] before the combine, which the next `fused_add_rms_norm` sums (one launch less).
    absent_experts: topk_ids may hold E for an assignment computed by no one: another rank's (expert parallel) or
    a CUDA graph's padding row's (`route_experts` with num_valid_tokens).
    hidden_q / hidden_scales: hidden quantized to FP8 beside its norm, for FP8 experts' kernels (the reference
    keeps hidden in its dtype and ignores them)."""
    if not use_kernels:
        return fused_moe_ref(hidden, topk_weights, topk_ids, w1, w1_bias, w2, w2_bias, w1_scales=w1_scales,
                             w2_scales=w2_scales, gate_up_group=gate_up_group, swiglu_limit=swiglu_limit,
                             swiglu_alpha=swiglu_alpha, activation=activation, w1_row_scale=w1_row_scale,
                             w2_row_scale=w2_row_scale, absent_experts=absent_experts)
    return fused_moe(hidden, topk_weights, topk_ids, w1, w1_bias, w2, w2_bias, w1_scales=w1_scales,
                     w2_scales=w2_scales, gate_up_group=gate_up_group, swiglu_limit=swiglu_limit,
                     swiglu_alpha=swiglu_alpha, activation=activation, w1_row_scale=w1_row_scale,
                     w2_row_scale=w2_row_scale, combine=combine, absent_experts=absent_experts, hidden_q=hidden_q,
                     hidden_scales=hidden_scales)


moe_experts_op = torch.library.custom_op("quickmoe::moe_experts", _moe_experts, mutates_args=())


@moe_experts_op.register_fake
def _moe_experts_fake(hidden, topk_weights, topk_ids, w1, w1_bias, w2, w2_bias, w1_scales, w2_scales, gate_up_group,
                      swiglu_limit, swiglu_alpha, use_kernels, activation="swiglu_gpt_oss", w1_row_scale=None,
                      w2_row_scale=None, combine=True, absent_experts=False, hidden_q=None, hidden_scales=None):
    if use_kernels and not combine:
        return hidden.new_empty((hidden.shape[0], topk_ids.shape[1], hidden.shape[1]))
    return torch.empty_like(hidden)


def _dispatch(op, impl):
    """While torch.compile traces, the registered op (one opaque node); otherwise the implementation itself,
    without torch.library's Python dispatch (tens of microseconds per call, and a lazy import of Dynamo on the
    first call)."""

    def call(*args):
        return op(*args) if torch.compiler.is_compiling() else impl(*args)

    call.__doc__ = impl.__doc__
    call.__name__ = impl.__name__.lstrip("_")
    return call


rms_norm = _dispatch(rms_norm_op, _rms_norm)
fused_add_rms_norm = _dispatch(fused_add_rms_norm_op, _fused_add_rms_norm)
fused_add_rms_norm_fp8 = _dispatch(fused_add_rms_norm_fp8_op, _fused_add_rms_norm_fp8)
qk_rms_norm = _dispatch(qk_rms_norm_op, _qk_rms_norm)
attention = _dispatch(attention_op, _attention)
attention_fp8 = _dispatch(attention_fp8_op, _attention_fp8)
decode_linear = _dispatch(decode_linear_op, _decode_linear)
route_experts = _dispatch(route_experts_op, _route_experts)
moe_experts = _dispatch(moe_experts_op, _moe_experts)
