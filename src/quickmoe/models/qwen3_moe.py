"""Qwen3-MoE (Qwen3MoeForCausalLM): GQA attention with per-head q/k RMSNorm and no sinks or biases, plain
RoPE (YaRN when rope_scaling says), softmax top-k routing (renormalised when norm_topk_prob), per-expert
checkpoint tensors `mlp.experts.<e>.{gate,up,down}_proj.weight`, and dense MLP layers where
`mlp_only_layers` / `decoder_sparse_step` say. Parameter names as in the HF checkpoint."""

from __future__ import annotations

import torch

from quickmoe.config import ModelConfig
from quickmoe.distributed import SINGLE, ParallelContext
from quickmoe.layers.attention import Attention
from quickmoe.layers.mlp import GatedMLP
from quickmoe.layers.moe_stacked import ExpertNames
from quickmoe.layers.sparse_moe import SparseMoeBlock
from quickmoe.models.decoder import DecoderLayer, MoECausalLM

EXPERT_NAMES = ExpertNames(gate="gate_proj", up="up_proj", down="down_proj")


class Qwen3MoeForCausalLM(MoECausalLM):
    def make_layer(self, config: ModelConfig, layer_idx: int, *, dtype: torch.dtype, device: torch.device | str,
                   parallel: ParallelContext = SINGLE) -> DecoderLayer:
        attn = Attention(config, layer_idx, dtype=dtype, device=device, qk_norm=True, parallel=parallel)
        if config.is_moe_layer(layer_idx):
            mlp = SparseMoeBlock(config, f"model.layers.{layer_idx}.mlp", EXPERT_NAMES, dtype=dtype, device=device,
                                 parallel=parallel)
        else:
            mlp = GatedMLP(config, layer_idx, dtype=dtype, device=device, parallel=parallel)
        return DecoderLayer(config, attn, mlp, device=device)
