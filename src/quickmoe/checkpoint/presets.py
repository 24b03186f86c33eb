"""Model shapes for synthetic checkpoints: the published gpt-oss config.json and generation_config.json
dicts, and `tiny`, the embedded default (the real vocabulary, so the real tokenizer works, with layers
small enough to run on a CPU in seconds).
"""

from __future__ import annotations

import copy
from typing import Any

# Fields shared by every preset, as in the published gpt-oss-20b / gpt-oss-120b config.json.
_GPT_OSS_CONFIG: dict[str, Any] = {
    "architectures": ["GptOssForCausalLM"],
    "attention_bias": True,
    "attention_dropout": 0.0,
    "eos_token_id": 200002,
    "head_dim": 64,
    "hidden_act": "silu",
    "hidden_size": 2880,
    "initial_context_length": 4096,
    "initializer_range": 0.02,
    "intermediate_size": 2880,
    "max_position_embeddings": 131072,
    "model_type": "gpt_oss",
    "num_attention_heads": 64,
    "num_key_value_heads": 8,
    "output_router_logits": False,
    "pad_token_id": 199999,
    "quantization_config": {
        "modules_to_not_convert": [
            "model.layers.*.self_attn",
            "model.layers.*.mlp.router",
            "model.embed_tokens",
            "lm_head",
        ],
        "quant_method": "mxfp4",
    },
    "rms_norm_eps": 1e-05,
    "rope_scaling": {
        "beta_fast": 32.0,
        "beta_slow": 1.0,
        "factor": 32.0,
        "original_max_position_embeddings": 4096,
        "rope_type": "yarn",
        "truncate": False,
    },
    "rope_theta": 150000,
    "router_aux_loss_coef": 0.9,
    "sliding_window": 128,
    "swiglu_limit": 7.0,
    "tie_word_embeddings": False,
    "use_cache": True,
    "vocab_size": 201088,
}

# preset -> what differs from _GPT_OSS_CONFIG (layers, experts and top-k are set for every preset).
_PRESET_FIELDS: dict[str, dict[str, Any]] = {
    "gpt-oss-20b": {"num_hidden_layers": 24, "num_local_experts": 32, "num_experts_per_tok": 4},
    "gpt-oss-120b": {"num_hidden_layers": 36, "num_local_experts": 128, "num_experts_per_tok": 4},
    "tiny": {"num_hidden_layers": 4, "num_local_experts": 8, "num_experts_per_tok": 4, "hidden_size": 128,
             "intermediate_size": 128, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32},
}
PRESETS: tuple[str, ...] = tuple(_PRESET_FIELDS)

# The published generation_config.json (bos <|startoftext|>; eos <|return|>, <|endoftext|>, <|call|>).
GENERATION_CONFIG: dict[str, Any] = {
    "bos_token_id": 199998,
    "do_sample": True,
    "eos_token_id": [200002, 199999, 200012],
    "pad_token_id": 199999,
}


def alternating_layer_types(num_layers: int) -> list[str]:
    """gpt-oss layer kinds: even layers use the sliding window, odd layers attend to everything."""
    return ["sliding_attention" if i % 2 == 0 else "full_attention" for i in range(num_layers)]


def base_config(preset: str) -> dict[str, Any]:
    """A fresh copy of preset `preset`'s config.json dict (KeyError for an unknown name: callers check)."""
    cfg = copy.deepcopy(_GPT_OSS_CONFIG)
    cfg.update(copy.deepcopy(_PRESET_FIELDS[preset]))
    cfg["experts_per_token"] = cfg["num_experts_per_tok"]  # the published files carry both spellings
    cfg["layer_types"] = alternating_layer_types(cfg["num_hidden_layers"])
    return dict(sorted(cfg.items()))


def generation_config(config: dict[str, Any]) -> dict[str, Any]:
    """generation_config.json for `config`: the published one, with special ids that fall outside a
    shrunken test vocabulary replaced by the config's own eos/pad ids (and bos left out)."""
    vocab = config["vocab_size"]
    gen = copy.deepcopy(GENERATION_CONFIG)
    eos = [t for t in gen["eos_token_id"] if t < vocab]
    if config.get("eos_token_id") is not None and config["eos_token_id"] not in eos:
        eos = [config["eos_token_id"], *eos]
    gen["eos_token_id"] = eos
    if gen["pad_token_id"] >= vocab:
        gen["pad_token_id"] = config.get("pad_token_id")
    if gen["bos_token_id"] >= vocab:
        del gen["bos_token_id"]
    return gen
