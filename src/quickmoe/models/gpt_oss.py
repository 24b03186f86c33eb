"""gpt-oss (GptOssForCausalLM): decoder layers of sink attention + MoE, parameter names as in the HF
checkpoint, so checkpoint tensor `model.layers.3.mlp.experts.down_proj_blocks` fills the parameter of
the same name."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from quickmoe.config import ModelConfig
from quickmoe.forward.forward_batch import AttentionMetadata, ForwardBatch, KVGroupMetadata
from quickmoe.layers.attention import Attention
from quickmoe.layers.embedding import LMHead, VocabEmbedding
from quickmoe.layers.moe import GptOssMLP
from quickmoe.layers.norm import RMSNorm
from quickmoe.layers.rotary import RotaryEmbedding


class GptOssDecoderLayer(nn.Module):
    """x += attn(norm(x)); x += moe(norm(x))."""

    def __init__(self, config: ModelConfig, layer_idx: int, *, dtype: torch.dtype, device: torch.device | str,
                 rotary: RotaryEmbedding) -> None:
        super().__init__()
        self.input_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps, device=device)
        self.self_attn = Attention(config, layer_idx, dtype=dtype, device=device, rotary=rotary, sinks=True)
        self.post_attention_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps, device=device)
        self.mlp = GptOssMLP(config, layer_idx, dtype=dtype, device=device)

    def forward(self, hidden: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, k_cache: torch.Tensor,
                v_cache: torch.Tensor, kv: KVGroupMetadata, attn: AttentionMetadata,
                run_mlp: bool = True) -> torch.Tensor:
        """Tensors and plain values only (the unit torch.compile compiles once per layer kind).
        run_mlp=False skips the MoE block (a model that runs some MoE layers conditionally)."""
        hidden = hidden + self.self_attn(self.input_layernorm(hidden), cos, sin, k_cache, v_cache, kv, attn)
        if not run_mlp:
            return hidden
        return hidden + self.mlp(self.post_attention_layernorm(hidden))


class GptOssModel(nn.Module):
    """Embedding, decoder layers, final norm (checkpoint prefix `model.`)."""

    def __init__(self, config: ModelConfig, *, dtype: torch.dtype, device: torch.device | str) -> None:
        super().__init__()
        self.dtype = dtype
        self.embed_tokens = VocabEmbedding(config.vocab_size, config.hidden_size, dtype=dtype, device=device)
        self.rotary = RotaryEmbedding(config.rope, config.head_dim, device=device)
        self.layers = nn.ModuleList(
            GptOssDecoderLayer(config, i, dtype=dtype, device=device, rotary=self.rotary)
            for i in range(config.num_hidden_layers))
        self.norm = RMSNorm(config.hidden_size, config.rms_norm_eps, device=device)

    def forward(self, batch: ForwardBatch, run_mlp: Sequence[bool] | None = None) -> torch.Tensor:
        """run_mlp[i] False skips layer i's MoE block on this step (models whose experts run conditionally)."""
        hidden = self.embed_tokens(batch.input_ids)  # [T, H]
        cos, sin = self.rotary.cos_sin(batch.positions, hidden.dtype)  # [T, D/2] each
        cache = batch.kv_cache
        for idx, layer in enumerate(self.layers):
            k_cache, v_cache = cache.layer(idx)
            kv = batch.kv_groups[cache.layer_group[idx]]
            hidden = layer(hidden, cos, sin, k_cache, v_cache, kv, batch.attn,
                           run_mlp[idx] if run_mlp is not None else True)
        return self.norm(hidden)


class GptOssForCausalLM(nn.Module):
    """The model plus the LM head. `forward` returns float32 logits of each sequence's last token."""

    def __init__(self, config: ModelConfig, *, dtype: torch.dtype, device: torch.device | str) -> None:
        super().__init__()
        self.config = config
        self.model = GptOssModel(config, dtype=dtype, device=device)
        tied = self.model.embed_tokens if config.tie_word_embeddings else None
        self.lm_head = LMHead(config.vocab_size, config.hidden_size, dtype=dtype, device=device, tied_to=tied)

    def forward(self, batch: ForwardBatch, *, all_logits: bool = False) -> torch.Tensor:
        """Logits [B, V] at each sequence's last new token, or [T, V] for every token with all_logits."""
        hidden = self.model(batch)  # [T, H]
        if not all_logits:
            hidden = hidden[batch.logits_indices]  # [B, H]
        return self.lm_head(hidden)

    def process_weights_after_loading(self) -> None:
        for layer in self.model.layers:
            layer.mlp.experts.quant_method.process_weights_after_loading(layer.mlp.experts)
