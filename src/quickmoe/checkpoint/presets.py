"""gpt-oss model shapes as published (config.json and generation_config.json), plus the tiny default."""

from __future__ import annotations

import copy

_GPT_OSS_COMMON = {
    "architectures": ["GptOssForCausalLM"],
    "model_type": "gpt_oss",
    "attention_bias": True,
    "attention_dropout": 0.0,
    "eos_token_id": 200002,
    "pad_token_id": 199999,
    "head_dim": 64,
    "hidden_act": "silu",
    "hidden_size": 2880,
    "intermediate_size": 2880,
    "initial_context_length": 4096,
    "initializer_range": 0.02,
    "max_position_embeddings": 131072,
    "num_attention_heads": 64,
    "num_key_value_heads": 8,
    "output_router_logits": False,
    "rms_norm_eps": 1e-05,
    "rope_scaling": {"beta_fast": 32.0, "beta_slow": 1.0, "factor": 32.0,
                     "original_max_position_embeddings": 4096, "rope_type": "yarn", "truncate": False},
    "rope_theta": 150000,
    "router_aux_loss_coef": 0.9,
    "sliding_window": 128,
    "swiglu_limit": 7.0,
    "tie_word_embeddings": False,
    "use_cache": True,
    "vocab_size": 201088,
    "quantization_config": {
        "modules_to_not_convert": ["model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens",
                                   "lm_head"],
        "quant_method": "mxfp4",
    },
}

# name -> (overrides of the common config, num_hidden_layers, num_local_experts, experts_per_token)
_SHAPES = {
    "gpt-oss-20b": ({}, 24, 32, 4),
    "gpt-oss-120b": ({}, 36, 128, 4),
    # The embedded default: the real vocabulary (so the real tokenizer works) and tiny layers.
    "tiny": ({"hidden_size": 128, "intermediate_size": 128, "num_attention_heads": 4, "num_key_value_heads": 2,
              "head_dim": 32}, 4, 8, 4),
}
PRESETS = tuple(_SHAPES)

GENERATION_CONFIG = {
    "bos_token_id": 199998,
    "do_sample": True,
    "eos_token_id": [200002, 199999, 200012],
    "pad_token_id": 199999,
}


def alternating_layer_types(num_layers: int) -> list[str]:
    """gpt-oss alternates: even layers use the sliding window, odd layers full attention."""
    return ["sliding_attention" if i % 2 == 0 else "full_attention" for i in range(num_layers)]


def base_config(preset: str) -> dict:
    """A fresh copy of the preset's config.json dict (the caller validates the preset name)."""
    overrides, layers, experts, topk = _SHAPES[preset]
    cfg = copy.deepcopy(_GPT_OSS_COMMON)
    cfg.update(copy.deepcopy(overrides))
    cfg.update(num_hidden_layers=layers, num_local_experts=experts, experts_per_token=topk,
               num_experts_per_tok=topk, layer_types=alternating_layer_types(layers))
    return cfg
