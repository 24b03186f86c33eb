"""Model shapes for synthetic checkpoints: the published config.json and generation_config.json dicts of
gpt-oss (20b, 120b), Qwen3-30B-A3B and Mixtral-8x7B, and tiny variants of each (the real vocabulary, so the
tokenizer works, with layers small enough to run on a CPU in seconds; `tiny` is gpt-oss's, the embedded
default).
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

# The published Qwen/Qwen3-30B-A3B config.json.
_QWEN3_MOE_CONFIG: dict[str, Any] = {
    "architectures": ["Qwen3MoeForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
    "bos_token_id": 151643, "decoder_sparse_step": 1, "eos_token_id": 151645, "head_dim": 128, "hidden_act": "silu",
    "hidden_size": 2048, "initializer_range": 0.02, "intermediate_size": 6144, "max_position_embeddings": 40960,
    "max_window_layers": 48, "mlp_only_layers": [], "model_type": "qwen3_moe", "moe_intermediate_size": 768,
    "norm_topk_prob": True, "num_attention_heads": 32, "num_experts": 128, "num_experts_per_tok": 8,
    "num_hidden_layers": 48, "num_key_value_heads": 4, "output_router_logits": False, "rms_norm_eps": 1e-06,
    "rope_scaling": None, "rope_theta": 1000000.0, "router_aux_loss_coef": 0.001, "sliding_window": None,
    "tie_word_embeddings": False, "torch_dtype": "bfloat16", "use_cache": True, "use_sliding_window": False,
    "vocab_size": 151936,
}
# The published mistralai/Mixtral-8x7B-v0.1 config.json.
_MIXTRAL_CONFIG: dict[str, Any] = {
    "architectures": ["MixtralForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 1, "eos_token_id": 2,
    "hidden_act": "silu", "hidden_size": 4096, "initializer_range": 0.02, "intermediate_size": 14336,
    "max_position_embeddings": 32768, "model_type": "mixtral", "num_attention_heads": 32, "num_experts_per_tok": 2,
    "num_hidden_layers": 32, "num_key_value_heads": 8, "num_local_experts": 8, "output_router_logits": False,
    "rms_norm_eps": 1e-05, "rope_theta": 1000000.0, "router_aux_loss_coef": 0.02, "sliding_window": None,
    "tie_word_embeddings": False, "torch_dtype": "bfloat16", "use_cache": True, "vocab_size": 32000,
}
_QWEN3_GENERATION_CONFIG: dict[str, Any] = {"bos_token_id": 151643, "do_sample": True, "eos_token_id": [151645, 151643],
                                            "pad_token_id": 151643, "temperature": 0.6, "top_k": 20, "top_p": 0.95}
_MIXTRAL_GENERATION_CONFIG: dict[str, Any] = {"bos_token_id": 1, "eos_token_id": 2}

# family -> (config.json, generation_config.json, the field counting experts)
FAMILIES: dict[str, tuple[dict[str, Any], dict[str, Any] | None, str]] = {
    "gpt-oss": (_GPT_OSS_CONFIG, None, "num_local_experts"),
    "qwen3-moe": (_QWEN3_MOE_CONFIG, _QWEN3_GENERATION_CONFIG, "num_experts"),
    "mixtral": (_MIXTRAL_CONFIG, _MIXTRAL_GENERATION_CONFIG, "num_local_experts"),
}
_TINY = {"hidden_size": 128, "num_attention_heads": 4, "num_key_value_heads": 2, "num_hidden_layers": 4}
# preset -> (family, what differs from the family's config.json)
_FAMILY_PRESETS: dict[str, tuple[str, dict[str, Any]]] = {
    "qwen3-30b-a3b": ("qwen3-moe", {}),
    "qwen3-moe-tiny": ("qwen3-moe", {**_TINY, "head_dim": 32, "intermediate_size": 256, "moe_intermediate_size": 128,
                                     "num_experts": 8, "num_experts_per_tok": 2, "mlp_only_layers": [1]}),
    "mixtral-8x7b": ("mixtral", {}),
    "mixtral-tiny": ("mixtral", {**_TINY, "intermediate_size": 128, "num_local_experts": 4}),
}
PRESETS: tuple[str, ...] = (*_PRESET_FIELDS, *_FAMILY_PRESETS)


def preset_family(preset: str) -> str:
    """"gpt-oss", "qwen3-moe" or "mixtral" (KeyError for an unknown name: callers check)."""
    return "gpt-oss" if preset in _PRESET_FIELDS else _FAMILY_PRESETS[preset][0]

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
    if preset in _FAMILY_PRESETS:
        family, fields = _FAMILY_PRESETS[preset]
        cfg = copy.deepcopy(FAMILIES[family][0])
        cfg.update(copy.deepcopy(fields))
        return dict(sorted(cfg.items()))
    cfg = copy.deepcopy(_GPT_OSS_CONFIG)
    cfg.update(copy.deepcopy(_PRESET_FIELDS[preset]))
    cfg["experts_per_token"] = cfg["num_experts_per_tok"]  # the published files carry both spellings
    cfg["layer_types"] = alternating_layer_types(cfg["num_hidden_layers"])
    return dict(sorted(cfg.items()))


def generation_config(config: dict[str, Any]) -> dict[str, Any]:
    """generation_config.json for `config`: the published one, with special ids that fall outside a
    shrunken test vocabulary replaced by the config's own eos/pad ids (and bos left out)."""
    vocab = config["vocab_size"]
    family_gen = {arch: FAMILIES[f][1] for f in FAMILIES for arch in FAMILIES[f][0]["architectures"]}
    gen = copy.deepcopy(family_gen.get(config["architectures"][0]) or GENERATION_CONFIG)
    if isinstance(gen["eos_token_id"], int):
        gen["eos_token_id"] = [gen["eos_token_id"]]
    eos = [t for t in gen["eos_token_id"] if t < vocab]
    if config.get("eos_token_id") is not None and config["eos_token_id"] not in eos:
        eos = [config["eos_token_id"], *eos]
    gen["eos_token_id"] = eos
    if gen.get("pad_token_id") is not None and gen["pad_token_id"] >= vocab:
        gen["pad_token_id"] = config.get("pad_token_id")
    if gen.get("bos_token_id") is not None and gen["bos_token_id"] >= vocab:
        del gen["bos_token_id"]
    return gen
