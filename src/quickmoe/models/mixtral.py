"""Mixtral (MixtralForCausalLM): GQA attention without biases, plain RoPE, an optional sliding window on every
layer, and in every layer a `block_sparse_moe` of softmax top-2 routing (renormalised) over experts stored
per expert as `block_sparse_moe.experts.<e>.w1/w3/w2.weight` (gate, up, down). Parameter names as in the
HF checkpoint."""

from __future__ import annotations

import torch

from quickmoe.config import ModelConfig
from quickmoe.distributed import SINGLE, ParallelContext
from quickmoe.layers.attention import Attention
from quickmoe.layers.moe_stacked import ExpertNames
from quickmoe.layers.sparse_moe import SparseMoeBlock
from quickmoe.models.decoder import DecoderLayer, MoECausalLM

EXPERT_NAMES = ExpertNames(gate="w1", up="w3", down="w2")


class MixtralForCausalLM(MoECausalLM):
    def make_layer(self, config: ModelConfig, layer_idx: int, *, dtype: torch.dtype, device: torch.device | str,
                   parallel: ParallelContext = SINGLE) -> DecoderLayer:
        attn = Attention(config, layer_idx, dtype=dtype, device=device, parallel=parallel)
        moe = SparseMoeBlock(config, f"model.layers.{layer_idx}.block_sparse_moe", EXPERT_NAMES, dtype=dtype,
                             device=device, parallel=parallel)
        return DecoderLayer(config, attn, moe, mlp_name="block_sparse_moe", device=device)
