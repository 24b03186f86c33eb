"""The decoder-only transformer the MoE families share: embedding, decoder layers (x += attn(norm(x));
x += mlp(norm(x))), final norm, LM head. A model file says what its layers are made of (`make_layer`); the
parameter names are the checkpoint's (`model.embed_tokens`, `model.layers.3.self_attn.q_proj`, `lm_head`).

Each residual add is fused into the norm after it: a layer takes and returns (delta, residual), the residual
stream being their sum, so a layer's two norms are two launches and no add runs on its own."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from quickmoe.config import ModelConfig
from quickmoe.distributed import SINGLE, ParallelContext
from quickmoe.forward.forward_batch import AttentionMetadata, ForwardBatch, KVGroupMetadata
from quickmoe.layers.attention import Attention
from quickmoe.layers.embedding import LMHead, VocabEmbedding
from quickmoe.layers.norm import RMSNorm
from quickmoe.layers.rotary import RotaryEmbedding

__all__ = ["DecoderLayer", "DecoderModel", "MoECausalLM"]


class DecoderLayer(nn.Module):
    """x += attn(norm(x)); x += mlp(norm(x)), the MLP (MoE block or dense) registered as `mlp_name` (the
    checkpoint's module name: "mlp", Mixtral's "block_sparse_moe")."""

    def __init__(self, config: ModelConfig, self_attn: Attention, mlp: nn.Module, *, mlp_name: str = "mlp",
                 device: torch.device | str) -> None:
        super().__init__()
        self.input_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps, device=device)
        self.self_attn = self_attn
        self.post_attention_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps, device=device)
        self.mlp_name = mlp_name
        self.add_module(mlp_name, mlp)

    def forward(self, delta: torch.Tensor, residual: torch.Tensor, cos_sin_cache: torch.Tensor,
                k_cache: torch.Tensor, v_cache: torch.Tensor, kv: KVGroupMetadata, attn: AttentionMetadata,
                run_mlp: bool = True, num_valid_tokens: torch.Tensor | None = None) -> tuple[torch.Tensor,
                                                                                            torch.Tensor]:
        """(delta, residual) [T, H] each -> the same after this layer (delta may be an MoE output before its
        combine, [T, k, H], which the next norm takes). Tensors and plain values only (the unit
        torch.compile compiles once per layer kind). run_mlp=False skips the MLP block (a model that runs some
        MoE layers conditionally). num_valid_tokens (`ForwardBatch.num_valid_tokens`): an MoE block routes the
        rows at and past it (a CUDA graph's padding) to no expert; their results are undefined, and no row of a
        token reads them (attention zeroes padding rows and writes no cache slot of theirs)."""
        if self.self_attn.takes_fp8_hidden(residual):  # an FP8 QKV GEMM: the norm quantizes its rows for it
            x, residual, x_fp8 = self.input_layernorm.forward_fp8(delta, residual)
            attn_out = self.self_attn(x, cos_sin_cache, k_cache, v_cache, kv, attn, x_fp8)
        else:
            x, residual = self.input_layernorm(delta, residual)
            attn_out = self.self_attn(x, cos_sin_cache, k_cache, v_cache, kv, attn)
        if not run_mlp:
            return attn_out, residual
        mlp = self._modules[self.mlp_name]
        extra = {}
        if num_valid_tokens is not None and getattr(mlp, "masks_padding_rows", False):
            extra["num_valid_tokens"] = num_valid_tokens
        if getattr(mlp, "takes_fp8_hidden", None) is not None and mlp.takes_fp8_hidden(attn_out):
            # FP8 experts: the norm quantizes its rows for them (one quantizer launch less)
            x, residual, extra["hidden_fp8"] = self.post_attention_layernorm.forward_fp8(attn_out, residual)
        else:
            x, residual = self.post_attention_layernorm(attn_out, residual)
        if getattr(mlp, "defers_combine", False) and not torch.compiler.is_compiling():
            # an MoE block's output may come before its combine ([T, k, H]): the next norm sums it
            return mlp(x, combine=False, **extra), residual
        return mlp(x, **extra), residual


class DecoderModel(nn.Module):
    """Embedding, decoder layers, final norm (checkpoint prefix `model.`), and the RoPE table they share."""

    def __init__(self, config: ModelConfig, layers: Sequence[DecoderLayer], *, dtype: torch.dtype,
                 device: torch.device | str, parallel: ParallelContext = SINGLE) -> None:
        super().__init__()
        self.dtype = dtype
        self.embed_tokens = VocabEmbedding(config.vocab_size, config.hidden_size, dtype=dtype, device=device,
                                           parallel=parallel)
        # computed by build_model, or by the caller it deferred it to (`fill_rotary_tables`)
        self.rotary = RotaryEmbedding(config.rope, config.head_dim, config.max_position_embeddings, device=device,
                                      fill=False)
        self.layers = nn.ModuleList(layers)
        self.norm = RMSNorm(config.hidden_size, config.rms_norm_eps, device=device)

    def forward(self, batch: ForwardBatch, run_mlp: Sequence[bool] | None = None) -> torch.Tensor:
        """run_mlp[i] False skips layer i's MLP block on this step."""
        assert not self.rotary.pending, "the rotary table was never computed (fill_rotary_tables)"
        delta = self.embed_tokens(batch.input_ids)  # [T, H]
        residual = torch.zeros_like(delta)  # the stream is delta + residual
        cache = batch.kv_cache
        for idx, layer in enumerate(self.layers):
            k_cache, v_cache = cache.layer(idx)
            kv = batch.kv_groups[cache.layer_group[idx]]
            delta, residual = layer(delta, residual, self.rotary.cos_sin_cache, k_cache, v_cache, kv, batch.attn,
                                    run_mlp[idx] if run_mlp is not None else True, batch.num_valid_tokens)
        return self.norm(delta, residual)[0]


class MoECausalLM(nn.Module):
    """The model plus the LM head (tied to the embedding when config.tie_word_embeddings). Subclasses build
    each decoder layer in `make_layer`. `forward` returns logits of each sequence's last token (float32 unless
    asked otherwise). `parallel`: this rank's place among the ranks the model is split over (tensor / expert
    parallel); every layer shards itself from it, and the logits are gathered whole on every rank."""

    def __init__(self, config: ModelConfig, *, dtype: torch.dtype, device: torch.device | str,
                 parallel: ParallelContext = SINGLE) -> None:
        super().__init__()
        self.config = config
        self.parallel = parallel
        layers = [self.make_layer(config, i, dtype=dtype, device=device, parallel=parallel)
                  for i in range(config.num_hidden_layers)]
        self.model = DecoderModel(config, layers, dtype=dtype, device=device, parallel=parallel)
        tied = self.model.embed_tokens if config.tie_word_embeddings else None
        self.lm_head = LMHead(config.vocab_size, config.hidden_size, dtype=dtype, device=device, tied_to=tied,
                              parallel=parallel)

    def make_layer(self, config: ModelConfig, layer_idx: int, *, dtype: torch.dtype, device: torch.device | str,
                   parallel: ParallelContext = SINGLE) -> DecoderLayer:
        raise NotImplementedError

    def forward(self, batch: ForwardBatch, *, all_logits: bool = False, float_logits: bool = True,
                logits_out: torch.Tensor | None = None) -> torch.Tensor:
        """Logits [B, V] at each sequence's last new token, or [T, V] for every token with all_logits; float32, or
        in the model's dtype with float_logits=False (the engine's steps: the sampler widens what it needs), then
        written into `logits_out` when given (the CUDA graphs' shared buffer)."""
        hidden = self.model(batch)  # [T, H]
        if not all_logits:
            hidden = hidden[batch.logits_indices]  # [B, H]
        return self.lm_head(hidden, float_logits=float_logits, out=logits_out)

    def process_weights_after_loading(self) -> None:
        """Every quant method converts its layer's weights into the kernel layout (experts and linears)."""
        for module in self.modules():
            method = getattr(module, "quant_method", None)
            if method is not None:
                method.process_weights_after_loading(module)
