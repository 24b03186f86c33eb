"""The tensors of Qwen3-MoE and Mixtral checkpoints in their published layouts: names, shapes, dtypes, in file
order, with the fill of the quantized ones (bf16; FP8 block-scaled as Qwen's FP8 releases; NVFP4 as NVIDIA
ModelOpt exports), and the quantization configs those releases carry.

Qwen3-MoE layer n (`model.layers.n.`): input_layernorm, self_attn.{q,k,v,o}_proj (+ biases when
attention_bias), self_attn.{q,k}_norm [head_dim], post_attention_layernorm, then either mlp.gate [E, H] and
mlp.experts.<e>.{gate,up,down}_proj, or (mlp_only_layers / decoder_sparse_step) the dense
mlp.{gate,up,down}_proj. Mixtral layer n: input_layernorm, self_attn.{q,k,v,o}_proj, post_attention_layernorm,
block_sparse_moe.gate [E, H], block_sparse_moe.experts.<e>.{w1,w2,w3} (gate [I, H], down [H, I], up [I, H]).
A quantized linear `<m>.weight` [out, in] becomes: FP8 `<m>.weight` F8_E4M3 [out, in] + `<m>.weight_scale_inv`
BF16 [ceil(out/bn), ceil(in/bk)]; NVFP4 `<m>.weight` U8 [out, in/2] + `<m>.weight_scale` F8_E4M3 [out, in/16] +
`<m>.weight_scale_2` F32 [] + `<m>.input_scale` F32 []. Routers, norms, embeddings and lm_head stay bf16.
"""

from __future__ import annotations

from typing import Any

from quickmoe.checkpoint.random_quantized import quantized_fill
from quickmoe.checkpoint.random_weights import Fill
from quickmoe.checkpoint.safetensors_writer import TensorSpec
from quickmoe.config import ModelConfig

__all__ = ["FAMILY_WEIGHTS", "family_specs", "hf_quant_config", "quantization_config"]

FAMILY_WEIGHTS = ("bf16", "fp8", "nvfp4")
FP8_BLOCK = (128, 128)
MODELOPT_PRODUCER = {"name": "modelopt", "version": "0.33.0"}


def _router(arch: str) -> str:
    return "block_sparse_moe.gate" if arch == "MixtralForCausalLM" else "mlp.gate"


def _unquantized(c: ModelConfig) -> list[str]:
    """Module patterns the quantized releases leave in bf16: lm_head, the embedding, the routers."""
    return ["lm_head", "model.embed_tokens", f"model.layers.*.{_router(c.architecture)}"]


def quantization_config(weights: str, c: ModelConfig) -> dict[str, Any] | None:
    """config.json's `quantization_config` of a `weights` release (None for bf16)."""
    if weights == "fp8":
        return {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
                "modules_to_not_convert": _unquantized(c), "weight_block_size": list(FP8_BLOCK)}
    if weights == "nvfp4":
        return {"quant_method": "modelopt", "quant_algo": "NVFP4", "group_size": 16, "producer": MODELOPT_PRODUCER,
                "ignore": _nvfp4_excluded(c)}
    return None


def _nvfp4_excluded(c: ModelConfig) -> list[str]:
    """What the NVFP4 releases leave unquantized, and attention and dense MLPs (quickmoe runs NVFP4 for experts)."""
    dense = [f"model.layers.{i}.mlp.{p}" for i in range(c.num_hidden_layers) if not c.is_moe_layer(i)
             for p in ("gate_proj", "up_proj", "down_proj")]
    return [*_unquantized(c), "model.layers.*.self_attn*", *dense]


def hf_quant_config(weights: str, c: ModelConfig) -> dict[str, Any] | None:
    """hf_quant_config.json of a ModelOpt release (NVFP4), else None."""
    if weights != "nvfp4":
        return None
    return {"producer": MODELOPT_PRODUCER, "quantization": {"quant_algo": "NVFP4", "kv_cache_quant_algo": None,
                                                            "group_size": 16, "exclude_modules": _nvfp4_excluded(c)}}


def _linear(c: ModelConfig, module: str, out_f: int, in_f: int, twin: bool,
            quantizable: bool = True) -> list[tuple[TensorSpec, Fill | None]]:
    """The checkpoint tensors of linear `module` [out, in] (no bias), and the fills of the quantized ones."""
    scheme = c.quant_scheme(module) if quantizable else None
    name, shape = f"{module}.weight", (out_f, in_f)
    if scheme is None:
        return [(TensorSpec(name, shape, "BF16"), None)]
    if twin:
        return [(TensorSpec(name, shape, "F32"), quantized_fill(name, shape, scheme, "dequantized", FP8_BLOCK))]
    if scheme == "fp8":
        bn, bk = FP8_BLOCK
        scale_shape = (-(-out_f // bn), -(-in_f // bk))
        return [(TensorSpec(name, shape, "F8_E4M3"), quantized_fill(name, shape, "fp8", "weight", FP8_BLOCK)),
                (TensorSpec(f"{module}.weight_scale_inv", scale_shape, "BF16"),
                 quantized_fill(name, shape, "fp8", "weight_scale_inv", FP8_BLOCK))]
    return [(TensorSpec(name, (out_f, in_f // 2), "U8"), quantized_fill(name, shape, "nvfp4", "weight")),
            (TensorSpec(f"{module}.weight_scale", (out_f, in_f // 16), "F8_E4M3"),
             quantized_fill(name, shape, "nvfp4", "weight_scale")),
            (TensorSpec(f"{module}.weight_scale_2", (), "F32"), quantized_fill(name, shape, "nvfp4", "weight_scale_2")),
            (TensorSpec(f"{module}.input_scale", (), "F32"), quantized_fill(name, shape, "nvfp4", "input_scale"))]


def family_specs(c: ModelConfig, *, twin: bool = False) -> list[tuple[TensorSpec, Fill | None]]:
    """Every tensor of a Qwen3-MoE or Mixtral checkpoint for `c`, in file order, each with its fill (None: the
    name's default rule). `twin`: the quantized linears as float32 dequantized values (no scales)."""
    h, v, e = c.hidden_size, c.vocab_size, c.num_local_experts
    q, kv, d = c.num_attention_heads * c.head_dim, c.num_key_value_heads * c.head_dim, c.head_dim
    qwen = c.architecture == "Qwen3MoeForCausalLM"
    out: list[tuple[TensorSpec, Fill | None]] = [(TensorSpec("model.embed_tokens.weight", (v, h), "BF16"), None)]
    for n in range(c.num_hidden_layers):
        p = f"model.layers.{n}"
        out.append((TensorSpec(f"{p}.input_layernorm.weight", (h,), "BF16"), None))
        for proj, out_f, in_f in (("q_proj", q, h), ("k_proj", kv, h), ("v_proj", kv, h), ("o_proj", h, q)):
            out += _linear(c, f"{p}.self_attn.{proj}", out_f, in_f, twin)
            if c.attention_bias:
                out.append((TensorSpec(f"{p}.self_attn.{proj}.bias", (out_f,), "BF16"), None))
        if qwen:
            out += [(TensorSpec(f"{p}.self_attn.q_norm.weight", (d,), "BF16"), None),
                    (TensorSpec(f"{p}.self_attn.k_norm.weight", (d,), "BF16"), None)]
        out.append((TensorSpec(f"{p}.post_attention_layernorm.weight", (h,), "BF16"), None))
        if not c.is_moe_layer(n):
            i = c.intermediate_size
            for proj, out_f, in_f in (("gate_proj", i, h), ("up_proj", i, h), ("down_proj", h, i)):
                out += _linear(c, f"{p}.mlp.{proj}", out_f, in_f, twin)
            continue
        out += _linear(c, f"{p}.{_router(c.architecture)}", e, h, twin, quantizable=False)
        i = c.moe_intermediate_size
        names = (("gate_proj", i, h), ("up_proj", i, h), ("down_proj", h, i)) if qwen else \
            (("w1", i, h), ("w2", h, i), ("w3", i, h))
        experts = f"{p}.mlp.experts" if qwen else f"{p}.block_sparse_moe.experts"
        for x in range(e):
            for proj, out_f, in_f in names:
                out += _linear(c, f"{experts}.{x}.{proj}", out_f, in_f, twin)
    out.append((TensorSpec("model.norm.weight", (h,), "BF16"), None))
    if not c.tie_word_embeddings:
        out.append((TensorSpec("lm_head.weight", (v, h), "BF16"), None))
    return out
