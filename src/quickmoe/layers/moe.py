"""The MoE block: router + experts, where a quant method owns the experts' weights.

A quant method decides the parameters (sizes, dtypes, alignment, layout), fills them through
`weight_loader`s from the checkpoint tensors, converts them after loading, and applies the experts.
The layer itself never pads or slices activations.
"""

from __future__ import annotations

from typing import Protocol

import torch
from torch import nn

from quickmoe.config import ModelConfig
from quickmoe.kernels.fused_moe import fused_moe_ref
from quickmoe.kernels.routing import topk_softmax_ref
from quickmoe.layers.linear import Linear
from quickmoe.layers.weights import declare_weight, transpose_last2_weight_loader


class MoEQuantMethod(Protocol):
    """How a `FusedMoE` stores and runs its experts."""

    def create_weights(self, layer: "FusedMoE", *, dtype: torch.dtype, device: torch.device | str) -> None: ...

    def process_weights_after_loading(self, layer: "FusedMoE") -> None: ...

    def apply(self, layer: "FusedMoE", hidden: torch.Tensor, topk_weights: torch.Tensor,
              topk_ids: torch.Tensor) -> torch.Tensor: ...


class UnquantizedMoEMethod:
    """bf16 experts. The HF checkpoint stores them in x out (gate_up_proj [E, H, 2I]); they are kept
    out x in here (w1 [E, 2I, H], w2 [E, H, I]), the layout the MXFP4 path and the kernels share."""

    def create_weights(self, layer: "FusedMoE", *, dtype: torch.dtype, device: torch.device | str) -> None:
        e, h, i = layer.num_experts, layer.hidden_size, layer.intermediate_size
        kw = dict(checkpoint_dtype=torch.bfloat16, weight_loader=transpose_last2_weight_loader)
        declare_weight(layer, "gate_up_proj", (e, 2 * i, h), dtype, device, checkpoint_shape=(e, h, 2 * i), **kw)
        declare_weight(layer, "down_proj", (e, h, i), dtype, device, checkpoint_shape=(e, i, h), **kw)
        declare_weight(layer, "gate_up_proj_bias", (e, 2 * i), dtype, device, checkpoint_dtype=torch.bfloat16)
        declare_weight(layer, "down_proj_bias", (e, h), dtype, device, checkpoint_dtype=torch.bfloat16)

    def process_weights_after_loading(self, layer: "FusedMoE") -> None:
        pass

    def apply(self, layer: "FusedMoE", hidden: torch.Tensor, topk_weights: torch.Tensor,
              topk_ids: torch.Tensor) -> torch.Tensor:
        return fused_moe_ref(hidden, topk_weights, topk_ids, layer.gate_up_proj, layer.gate_up_proj_bias,
                             layer.down_proj, layer.down_proj_bias, swiglu_limit=layer.swiglu_limit,
                             swiglu_alpha=layer.swiglu_alpha)


class Mxfp4MoEMethod:
    """MXFP4 experts kept as stored: blocks [E, N, K/32, 16] uint8 and E8M0 scales [E, N, K/32] uint8,
    dequantized inside the experts computation. Biases are kept in the activation dtype."""

    block_size = 32

    def create_weights(self, layer: "FusedMoE", *, dtype: torch.dtype, device: torch.device | str) -> None:
        e, h, i = layer.num_experts, layer.hidden_size, layer.intermediate_size
        u8 = dict(checkpoint_dtype=torch.uint8)
        declare_weight(layer, "gate_up_proj_blocks", (e, 2 * i, h // 32, 16), torch.uint8, device, **u8)
        declare_weight(layer, "gate_up_proj_scales", (e, 2 * i, h // 32), torch.uint8, device, **u8)
        declare_weight(layer, "down_proj_blocks", (e, h, i // 32, 16), torch.uint8, device, **u8)
        declare_weight(layer, "down_proj_scales", (e, h, i // 32), torch.uint8, device, **u8)
        declare_weight(layer, "gate_up_proj_bias", (e, 2 * i), dtype, device, checkpoint_dtype=torch.bfloat16)
        declare_weight(layer, "down_proj_bias", (e, h), dtype, device, checkpoint_dtype=torch.bfloat16)

    def process_weights_after_loading(self, layer: "FusedMoE") -> None:
        pass  # kernel layouts (swizzles through the PermutationCache) arrive with the cold-start issue

    def apply(self, layer: "FusedMoE", hidden: torch.Tensor, topk_weights: torch.Tensor,
              topk_ids: torch.Tensor) -> torch.Tensor:
        return fused_moe_ref(hidden, topk_weights, topk_ids, layer.gate_up_proj_blocks, layer.gate_up_proj_bias,
                             layer.down_proj_blocks, layer.down_proj_bias, w1_scales=layer.gate_up_proj_scales,
                             w2_scales=layer.down_proj_scales, swiglu_limit=layer.swiglu_limit,
                             swiglu_alpha=layer.swiglu_alpha)


class FusedMoE(nn.Module):
    """The experts of one MoE layer (checkpoint prefix `...mlp.experts`)."""

    def __init__(self, config: ModelConfig, quant_method: MoEQuantMethod, *, dtype: torch.dtype,
                 device: torch.device | str) -> None:
        super().__init__()
        self.num_experts, self.top_k = config.num_local_experts, config.num_experts_per_tok
        self.hidden_size, self.intermediate_size = config.hidden_size, config.intermediate_size
        self.swiglu_limit, self.swiglu_alpha = config.swiglu_limit, config.swiglu_alpha
        self.quant_method = quant_method
        quant_method.create_weights(self, dtype=dtype, device=device)

    def forward(self, hidden: torch.Tensor, topk_weights: torch.Tensor, topk_ids: torch.Tensor) -> torch.Tensor:
        return self.quant_method.apply(self, hidden, topk_weights, topk_ids)


class GptOssMLP(nn.Module):
    """Router (linear with bias, top-k then softmax) followed by the experts."""

    def __init__(self, config: ModelConfig, layer_idx: int, *, dtype: torch.dtype,
                 device: torch.device | str) -> None:
        super().__init__()
        self.top_k = config.num_experts_per_tok
        self.router = Linear(config.hidden_size, config.num_local_experts, bias=True, dtype=dtype, device=device)
        quantized = config.is_quantized(f"model.layers.{layer_idx}.mlp.experts")
        method: MoEQuantMethod = Mxfp4MoEMethod() if quantized else UnquantizedMoEMethod()
        self.experts = FusedMoE(config, method, dtype=dtype, device=device)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        router_logits = self.router(hidden)  # [T, E]
        topk_weights, topk_ids = topk_softmax_ref(router_logits, self.top_k)  # [T, k], [T, k]
        return self.experts(hidden, topk_weights, topk_ids)
