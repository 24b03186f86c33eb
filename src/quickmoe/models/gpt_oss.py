"""gpt-oss (GptOssForCausalLM): decoder layers of sink attention (GQA, YaRN RoPE, a 128-token window on the
layers `layer_types` says) + MoE (router with bias, top-k then softmax, MXFP4 or bf16 experts with the clamped
SwiGLU), parameter names as in the HF checkpoint, so checkpoint tensor `model.layers.3.mlp.experts.
down_proj_blocks` fills the parameter of the same name."""

from __future__ import annotations

import torch

from quickmoe.config import ModelConfig
from quickmoe.distributed import SINGLE, ParallelContext
from quickmoe.layers.attention import Attention
from quickmoe.layers.moe import GptOssMLP
from quickmoe.models.decoder import DecoderLayer, MoECausalLM


class GptOssForCausalLM(MoECausalLM):
    def make_layer(self, config: ModelConfig, layer_idx: int, *, dtype: torch.dtype, device: torch.device | str,
                   parallel: ParallelContext = SINGLE) -> DecoderLayer:
        attn = Attention(config, layer_idx, dtype=dtype, device=device, sinks=True, parallel=parallel)
        mlp = GptOssMLP(config, layer_idx, dtype=dtype, device=device, parallel=parallel)
        return DecoderLayer(config, attn, mlp, device=device)
