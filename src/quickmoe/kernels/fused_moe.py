"""The MoE experts computation: grouped GEMM 1 (gate_up + bias + clamped SwiGLU), grouped GEMM 2
(down + bias), weighted by the routing weights and combined into the output.

`fused_moe_ref` is the torch reference; `fused_moe` runs the Triton kernels (kernels/moe_gemm.py) with the
same arguments.
Expert weights are out x in: w1 [E, 2I, H], w2 [E, H, I], with w1's rows (and w1_bias) in the gate/up
order of `quickmoe.layouts.mxfp4_moe` with group `gate_up_group` (1: the checkpoint interleave, even
rows gate, odd rows up). When scales are given, the weights are quantized in a kernel layout, told apart by
dtypes, and dequantized here per expert hit (the stored experts stay quantized):
- MXFP4 (`layouts.mxfp4_moe`): packed blocks [E, N, K/2] uint8, transposed E8M0 scales [E, K/32, N] uint8;
- FP8 block-scaled (`layouts.quantized_moe`): float8_e4m3fn [E, N, K], scales float32 [E, K/bk, N/R] (one per R rows);
- NVFP4 (`layouts.quantized_moe`): packed [E, N, K/2] uint8, E4M3 scales [E, K/16, N] and the per-row global
  scale `row_scale` float32 [E, N].
The Triton `fused_moe` runs all four; with FP8 weights it quantizes both GEMMs' activations per token and 128
columns (kernels/fp8_quant.py) and multiplies e4m3 by e4m3: `fused_moe_ref(..., fp8_activations=True)` is its
reference (the model's torch path keeps the activations in their dtype).
"""

from __future__ import annotations

import functools

import torch

from quickmoe.kernels.fp8_gemm import token_bound_from_env
from quickmoe.layouts.mxfp4_moe import dequantize_expert, split_gate_up
from quickmoe.layouts.quantized_moe import dequantize_fp8_expert, dequantize_nvfp4_expert


def swiglu_gpt_oss(gate_up: torch.Tensor, limit: float, alpha: float, gate_up_group: int = 1) -> torch.Tensor:
    """gate_up [..., 2I] (gate/up grouped by `gate_up_group`; 1 = interleaved) -> [..., I]:
    gate=min(g, limit), up=clamp(u, ±limit), out = (up + 1) * gate * sigmoid(alpha * gate)."""
    gate, up = split_gate_up(gate_up, gate_up_group)  # [..., I] each, natural column order
    gate = gate.clamp(max=limit)
    up = up.clamp(min=-limit, max=limit)
    return (up + 1) * (gate * torch.sigmoid(alpha * gate))


ACTIVATIONS = ("swiglu_gpt_oss", "silu")


def _check_activation(activation: str) -> None:
    if activation not in ACTIVATIONS:
        raise ValueError(f"fused_moe: activation = {activation!r}: expected one of {list(ACTIVATIONS)}")


def _through_fp8_groups(x: torch.Tensor) -> torch.Tensor:
    """x rounded to FP8 per token and 128 columns and back, in float32 products as the kernels form them."""
    from quickmoe.formats.fp8 import quantize_fp8_per_token_group

    q, scales = quantize_fp8_per_token_group(x)
    return (q.float() * scales.repeat_interleave(128, dim=1)[:, : x.shape[1]]).to(x.dtype)


def _through_mxfp8(x: torch.Tensor) -> torch.Tensor:
    """x rounded to MXFP8 and back, in x's dtype (exact: e4m3 x 2^k fits bf16 and float32)."""
    from quickmoe.kernels.mxfp8_quant import dequantize_mxfp8_ref, quantize_mxfp8_ref

    return dequantize_mxfp8_ref(*quantize_mxfp8_ref(x))[:, : x.shape[1]].to(x.dtype)


@functools.lru_cache(maxsize=16)
def _device_name(device: torch.device) -> str:
    return torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"


FP8_GEMV_MAX_TOKENS = 8  # see fp8_gemv_max_tokens
FP8_GEMV_MAX_K = 2048  # see fp8_gemv_max_tokens


@functools.lru_cache(maxsize=16)
def fp8_gemv_max_tokens(device: torch.device) -> int:
    """Up to how many tokens `fused_moe` runs FP8 experts whose hidden and intermediate sizes are <= FP8_GEMV_MAX_K
    on `moe_fp8_gemv` (CUDA cores, no alignment) instead of the tensor-core GEMMs: FP8_GEMV_MAX_TOKENS, or
    QUICKMOE_FP8_GEMV_MAX_TOKENS from the environment (0: never; for A/B runs). Measured on the H200
    (docs/benchmarks.md, 2026-12-02): Qwen3-30B-A3B's layer (hidden 2048, intermediate 768) 8% faster at T = 1, 19%
    at 2, 6-8% at 4-8, 6% slower at 16; Mixtral-8x7B's (4096, 14336) 1.5-2.8x slower at T = 1-8 (its tensor-core
    GEMMs already stream its few large experts at ~3.4 TB/s, and the GEMV's unrolled loops of 32 and 112 steps hold
    a program's loads in a long chain), hence the bound on K; larger K is not measured."""
    return token_bound_from_env("QUICKMOE_FP8_GEMV_MAX_TOKENS", FP8_GEMV_MAX_TOKENS)


@functools.lru_cache(maxsize=16)
def device_arch(device: torch.device) -> str | None:
    """"sm_90" for a compute-capability 9.0 GPU (the key of `moe_configs.TUNED_DEVICE_ARCH`); None on the CPU."""
    if device.type != "cuda":
        return None
    major, minor = torch.cuda.get_device_capability(device)
    return f"sm_{major}{minor}"


def _expert_weight(w: torch.Tensor, scales: torch.Tensor | None, row_scale: torch.Tensor | None, expert: int,
                   dtype: torch.dtype) -> torch.Tensor:
    """Expert `expert`'s weight [N, K] in `dtype`, dequantized from the kernel layout its dtypes name."""
    if scales is None:
        return w[expert].to(dtype)  # [N, K]
    if w.dtype == torch.float8_e4m3fn:
        return dequantize_fp8_expert(w[expert], scales[expert], dtype)  # [N, K] + [K/bk, N/R]
    if scales.dtype == torch.float8_e4m3fn:
        assert row_scale is not None, "NVFP4 experts need their per-row global scale"
        return dequantize_nvfp4_expert(w[expert], scales[expert], row_scale[expert], dtype)  # [N, K/2] + [K/16, N]
    return dequantize_expert(w[expert], scales[expert], dtype)  # [N, K/2] + [K/32, N] -> [N, K]


def fused_moe_ref(
    hidden: torch.Tensor,  # [T, H]
    topk_weights: torch.Tensor,  # [T, k]
    topk_ids: torch.Tensor,  # [T, k]
    w1: torch.Tensor,  # [E, 2I, H] dense, or MXFP4 blocks [E, 2I, H/2]
    w1_bias: torch.Tensor | None,  # [E, 2I], same row order as w1 (None: no bias)
    w2: torch.Tensor,  # [E, H, I] dense, or MXFP4 blocks [E, H, I/2]
    w2_bias: torch.Tensor | None,  # [E, H]
    *,
    w1_scales: torch.Tensor | None = None,  # [E, H/32, 2I]
    w2_scales: torch.Tensor | None = None,  # [E, I/32, H]
    gate_up_group: int = 1,
    swiglu_limit: float = 7.0,
    swiglu_alpha: float = 1.702,
    mxfp8_activations: bool = False,
    activation: str = "swiglu_gpt_oss",
    w1_row_scale: torch.Tensor | None = None,  # [E, 2I] float32 (NVFP4)
    w2_row_scale: torch.Tensor | None = None,  # [E, H] float32 (NVFP4)
    fp8_activations: bool = False,
    absent_experts: bool = False,
) -> torch.Tensor:
    """Returns [T, H] in hidden's dtype. Loops over the experts hit (a reference, not a kernel).
    `absent_experts`: topk_ids may hold E (w1.shape[0]) for an assignment to no expert here (expert parallel:
    another rank's), which contributes nothing; the reference skips such ids either way.
    `fp8_activations`: both GEMMs' activations are first rounded through FP8 per token and 128 columns (the
    Triton FP8 path, emulated in the activations' dtype).
    `mxfp8_activations`: both GEMMs' activations are first rounded through MXFP8 (`quantize_mxfp8_ref`):
    the MXFP4 x MXFP8 path, emulated in the activations' dtype. `activation`: "swiglu_gpt_oss" (clamped,
    with swiglu_limit / swiglu_alpha) or "silu" (SiLU(gate) * up: Mixtral, Qwen-MoE)."""
    _check_activation(activation)
    through = _through_mxfp8 if mxfp8_activations else _through_fp8_groups if fp8_activations else None
    if through is not None:
        hidden = through(hidden)
    num_tokens, top_k = topk_ids.shape
    dtype = hidden.dtype
    out = torch.zeros_like(hidden)
    flat_ids = topk_ids.reshape(-1)  # [T*k]
    order = torch.argsort(flat_ids, stable=True)  # assignments grouped by expert
    counts = torch.bincount(flat_ids, minlength=w1.shape[0]).tolist()[:w1.shape[0]]  # id E (absent): last, skipped
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
        h = x @ _expert_weight(w1, w1_scales, w1_row_scale, expert, dtype).T  # [n, 2I]
        if w1_bias is not None:
            h = h + w1_bias[expert].to(dtype)
        if activation == "silu":
            gate, up = split_gate_up(h, gate_up_group)  # [n, I] each
            a = torch.nn.functional.silu(gate) * up
        else:
            a = swiglu_gpt_oss(h, swiglu_limit, swiglu_alpha, gate_up_group)  # [n, I]
        if through is not None:
            a = through(a)
        y = a @ _expert_weight(w2, w2_scales, w2_row_scale, expert, dtype).T  # [n, H]
        if w2_bias is not None:
            y = y + w2_bias[expert].to(dtype)
        out.index_add_(0, tokens, (y * weight_of[rows, None].to(dtype)).to(dtype))
    return out


def fused_moe(
    hidden: torch.Tensor,  # [T, H]
    topk_weights: torch.Tensor,  # [T, k]
    topk_ids: torch.Tensor,  # [T, k]
    w1: torch.Tensor,  # [E, 2I, H] dense, or MXFP4 blocks [E, 2I, H/2]
    w1_bias: torch.Tensor | None,  # [E, 2I], same row order as w1 (None: no bias)
    w2: torch.Tensor,  # [E, H, I] dense, or MXFP4 blocks [E, H, I/2]
    w2_bias: torch.Tensor | None,  # [E, H]
    *,
    w1_scales: torch.Tensor | None = None,  # [E, H/32, 2I]
    w2_scales: torch.Tensor | None = None,  # [E, I/32, H]
    gate_up_group: int = 1,
    swiglu_limit: float = 7.0,
    swiglu_alpha: float = 1.702,
    mxfp8_activations: bool = False,
    activation: str = "swiglu_gpt_oss",
    w1_row_scale: torch.Tensor | None = None,
    w2_row_scale: torch.Tensor | None = None,
    fp8_activations: bool = False,
    combine: bool = True,
    absent_experts: bool = False,
    hidden_q: torch.Tensor | None = None,  # [T, H] float8_e4m3fn
    hidden_scales: torch.Tensor | None = None,  # [T, H/128] float32
) -> torch.Tensor:
    """The Triton version of `fused_moe_ref` (same arguments and result): align the assignments by expert,
    grouped GEMM 1 with the SwiGLU epilogue, grouped GEMM 2 with bias and routing weight, combine. With
    `mxfp8_activations`, the activations of both GEMMs are quantized (`quantize_mxfp8`, once per row) and
    decoded inside the GEMMs; on Hopper the MXFP4 x MXFP8 product is emulated in bf16.
    `gate_up_group` must be a power of two >= 16 (the layout's groups are the kernel's column tiles). FP8
    weights always take FP8 activations (per token and 128 columns: the reference with fp8_activations=True);
    `mxfp8_activations` applies to the others. `combine` False: the result before the combine, [T, k, H], each
    token's k rows weighted (their sum in float32, in order, rounded to hidden's dtype, is the result: the next
    residual add + RMSNorm does it, `kernels/rms_norm.py`).
    `hidden_q` / `hidden_scales`: with FP8 experts, hidden already quantized per token and 128 columns, with the
    quantizer's bits (`rms_norm.fused_add_rms_norm_fp8` makes them beside the norm): GEMM 1 takes them, and the
    quantizer does not run on hidden. Other formats ignore them.
    FP8 experts of few tokens (`fp8_gemv_max_tokens`, hidden and intermediate sizes <= FP8_GEMV_MAX_K) run on
    `moe_fp8_gemv` instead: the quantizer, a CUDA-core GEMV per GEMM, no alignment (it skips id E itself).
    `absent_experts`: topk_ids may hold E for an assignment no expert here computes: another rank's (expert
    parallel) or a CUDA graph's padding row's (`route_experts` with num_valid_tokens). The alignment then
    sorts E + 1 ids and leaves id E's tiles past its used length (`moe_align(absent_last=True)`): no GEMM
    computes them (mapped to a real expert with weight 0, they were about half of a rank's rows at 2 ranks, all on
    one expert), and the combine skips their rows of GEMM 2's output, which no tile wrote. combine False leaves
    those rows as the memory held them: only for padding rows, whose every assignment is absent and whose
    results no one reads (a zeroing pass would cost a read and a write of [T, k, H] a layer; expert parallel
    always combines: layers/moe.py)."""
    from quickmoe.kernels.fp8_quant import quantize_fp8_per_token_group
    from quickmoe.kernels.moe_align import moe_align, single_token_alignment
    from quickmoe.kernels.moe_configs import moe_kernel_config
    from quickmoe.kernels.moe_gemm import moe_combine, moe_gemm1_swiglu, moe_gemm2
    from quickmoe.kernels.mxfp8_quant import quantize_mxfp8

    _check_activation(activation)
    if fp8_activations and w1.dtype != torch.float8_e4m3fn:
        raise NotImplementedError("fused_moe: FP8 activations (per token and 128 columns) go with FP8 weights only; "
                                  "use mxfp8_activations for MXFP4 and dense weights")
    if gate_up_group < 16 or gate_up_group & (gate_up_group - 1):
        raise ValueError(f"fused_moe: gate_up_group = {gate_up_group}; the kernel needs a power of two >= 16 "
                         "(convert the experts to the grouped kernel layout first)")
    num_tokens, top_k = topk_ids.shape
    fp8 = w1.dtype == torch.float8_e4m3fn
    weights = ("fp8" if fp8 else "dense" if w1_scales is None
               else "nvfp4" if w1_scales.dtype == torch.float8_e4m3fn else "mxfp4")
    device_name, arch = _device_name(hidden.device), device_arch(hidden.device)
    packed = w1.dtype == torch.uint8
    k1 = w1.shape[2] * (2 if packed else 1)
    k2 = w2.shape[2] * (2 if packed else 1)
    if fp8 and (k1 % 128 or k2 % 128):
        raise ValueError(f"fused_moe: FP8 experts need K (hidden {k1}, intermediate {k2}) in whole 128-column "
                         "scale groups")
    if fp8 and 0 < num_tokens <= fp8_gemv_max_tokens(hidden.device) and max(k1, k2) <= FP8_GEMV_MAX_K:
        from quickmoe.kernels.moe_fp8_gemv import moe_fp8_gemv

        per_assignment = moe_fp8_gemv(hidden, topk_weights, topk_ids, w1, w1_bias, w1_scales, w2, w2_bias, w2_scales,
                                      gate_up_group=gate_up_group, activation=activation, swiglu_limit=swiglu_limit,
                                      swiglu_alpha=swiglu_alpha, hidden_q=hidden_q, hidden_scales=hidden_scales)
        if not combine:
            return per_assignment.view(num_tokens, top_k, -1)  # [T, k, H]
        return moe_combine(per_assignment, top_k, absent_ids=topk_ids if absent_experts else None,
                           num_experts=w1.shape[0])
    config1 = moe_kernel_config(w1.shape[0], w1.shape[1], k1, weights, device_name, num_tokens, arch=arch,
                                proj="gate_up")
    config2 = moe_kernel_config(w2.shape[0], w2.shape[1], k2, weights, device_name, num_tokens, arch=arch,
                                proj="down")
    align = None
    num_experts = w1.shape[0]
    if absent_experts:  # id E: another rank's assignment, sorted last and left out
        align = moe_align(topk_ids, num_experts + 1, config1.block_m, absent_last=True)
    elif num_tokens == 1 and topk_ids.dtype == torch.int32 and topk_ids.is_contiguous():
        align = single_token_alignment(topk_ids, config1.block_m)  # batch-1 decode: no launch, the same bits
    if align is None:
        align = moe_align(topk_ids, num_experts, config1.block_m)  # both GEMMs tile by this BLOCK_M
    quantize = quantize_fp8_per_token_group if fp8 else quantize_mxfp8 if mxfp8_activations else None
    paired = False
    if (config1.register_operand and config2.register_operand and quantize is None and w1_row_scale is None
            and w2_row_scale is None):  # (the Gluon module is imported only where a config asks for it)
        from quickmoe.kernels.moe_gemm_register import moe_gemm1_swiglu_register, moe_gemm2_register, register_pair

        paired = register_pair(hidden, align, w1, w1_scales, w2, w2_scales, config1, config2, gate_up_group,
                               activation)
    if paired:
        # both GEMMs on the register-operand kernels: GEMM 1's epilogue stores GEMM 2's gathered, permuted operand
        gathered = moe_gemm1_swiglu_register(hidden, align, top_k, w1, w1_bias, w1_scales, gate_up_group,
                                             swiglu_limit, swiglu_alpha, stages=config1.num_stages,
                                             steps_per_stage=config1.steps_per_stage,
                                             maxnreg=config1.maxnreg or None, gathered_out=True)
        per_assignment = moe_gemm2_register(gathered, align, topk_weights, w2, w2_bias, w2_scales,
                                            stages=config2.num_stages, steps_per_stage=config2.steps_per_stage,
                                            maxnreg=config2.maxnreg or None, gathered=True)
    else:
        if fp8 and hidden_q is not None and hidden_scales is not None:
            acts, act_scales = hidden_q, hidden_scales  # quantized beside the norm
        else:
            acts, act_scales = quantize(hidden) if quantize else (hidden, None)  # once per token
        inter = moe_gemm1_swiglu(acts, align, top_k, w1, w1_bias, w1_scales, gate_up_group, swiglu_limit,
                                 swiglu_alpha, act_scales=act_scales, out_dtype=hidden.dtype, config=config1,
                                 activation=activation, w1_row_scale=w1_row_scale)
        acts, act_scales = quantize(inter) if quantize else (inter, None)
        per_assignment = moe_gemm2(acts, align, topk_weights, w2, w2_bias, w2_scales, act_scales=act_scales,
                                   out_dtype=hidden.dtype, config=config2, w2_row_scale=w2_row_scale)
    if not combine:  # absent assignments' rows: not written (padding rows only; see the docstring)
        return per_assignment.view(num_tokens, top_k, -1)  # [T, k, H]
    return moe_combine(per_assignment, top_k, absent_ids=topk_ids if absent_experts else None,
                       num_experts=num_experts)
