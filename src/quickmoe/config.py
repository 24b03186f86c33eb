"""Model configuration parsed and validated from a Hugging Face `config.json`.

`ModelConfig` is frozen: everything derived at run time (dtypes, devices, buffer sizes) lives in the
runtime, not here. Every invalid or missing field raises `ConfigError` naming the field, the value
and what was expected. Three architectures are read, each with the defaults of its transformers
configuration class: gpt-oss, Qwen3-MoE and Mixtral (`ARCHITECTURES`). `EngineConfig` (how to run a
model, engine_config.py), `QuantizationConfig` (quant_config.py) and `RopeScaling` (rope_config.py) are
re-exported here; config_fields.py reads single fields for all of them.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from quickmoe.config_fields import field_error, read_field
from quickmoe.engine_config import EngineConfig
from quickmoe.errors import ConfigError
from quickmoe.paths import read_regular
from quickmoe.quant_config import QuantizationConfig, parse_quantization
from quickmoe.rope_config import RopeScaling, parse_rope

__all__ = ["ARCHITECTURES", "EngineConfig", "LAYER_TYPES", "ModelConfig", "QuantizationConfig", "RopeScaling",
           "SUPPORTED_ARCHITECTURES"]

LAYER_TYPES = ("sliding_attention", "full_attention")
HIDDEN_ACTS = ("silu",)


@dataclass(frozen=True)
class ArchitectureDefaults:
    """What differs between the architectures' config.json files: their transformers defaults, the field
    naming the experts, and the quantization schemes quickmoe runs for them."""

    rope_theta: float
    rms_norm_eps: float
    max_position_embeddings: int
    attention_bias: bool | None  # None: not configurable (the model has no attention biases)
    experts_field: str
    quant_schemes: tuple[str, ...]
    default_top_k: int | None = None


ARCHITECTURES: dict[str, ArchitectureDefaults] = {
    "GptOssForCausalLM": ArchitectureDefaults(150000.0, 1e-5, 131072, True, "num_local_experts", ("mxfp4",)),
    "Qwen3MoeForCausalLM": ArchitectureDefaults(10000.0, 1e-6, 32768, False, "num_experts", ("fp8", "nvfp4"), 8),
    "MixtralForCausalLM": ArchitectureDefaults(1e6, 1e-5, 131072, None, "num_local_experts", ("fp8", "nvfp4"), 2),
}
SUPPORTED_ARCHITECTURES = tuple(ARCHITECTURES)


@dataclass(frozen=True)
class ModelConfig:
    """A validated config.json. `quantization` is None for an unquantized checkpoint.

    Experts: `num_local_experts` of `moe_intermediate_size` each (Qwen3's `num_experts` /
    `moe_intermediate_size`; gpt-oss and Mixtral: `intermediate_size`), `num_experts_per_tok` per token.
    `intermediate_size` is the dense MLP's width (Qwen3's `mlp_only_layers`, and layers off the
    `decoder_sparse_step`). `norm_topk_prob`: the top-k routing weights are renormalised to sum to 1
    (Mixtral always; gpt-oss's top-k-then-softmax weights sum to 1 by construction).
    """

    architecture: str
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    num_local_experts: int
    num_experts_per_tok: int
    sliding_window: int | None
    layer_types: tuple[str, ...]
    rms_norm_eps: float
    rope: RopeScaling
    max_position_embeddings: int
    moe_intermediate_size: int = 0  # 0: intermediate_size
    norm_topk_prob: bool = False
    decoder_sparse_step: int = 1
    mlp_only_layers: tuple[int, ...] = ()
    hidden_act: str = "silu"
    swiglu_limit: float = 7.0
    swiglu_alpha: float = 1.702
    attention_bias: bool = True
    tie_word_embeddings: bool = False
    eos_token_ids: tuple[int, ...] = ()
    pad_token_id: int | None = None
    quantization: QuantizationConfig | None = None
    source: str = field(default="config.json", compare=False)

    def __post_init__(self) -> None:
        src = self.source
        if self.moe_intermediate_size == 0:
            object.__setattr__(self, "moe_intermediate_size", self.intermediate_size)
        if self.num_attention_heads % self.num_key_value_heads:
            raise field_error("num_key_value_heads", self.num_key_value_heads,
                        f"a divisor of num_attention_heads={self.num_attention_heads}", src)
        if self.num_experts_per_tok > self.num_local_experts:
            raise field_error("num_experts_per_tok", self.num_experts_per_tok,
                        f"at most the number of experts ({self.num_local_experts})", src)
        if self.head_dim % 2:
            raise field_error("head_dim", self.head_dim, "an even number (RoPE rotates halves)", src)
        if len(self.layer_types) != self.num_hidden_layers:
            raise field_error("layer_types", list(self.layer_types),
                        f"{self.num_hidden_layers} entries (num_hidden_layers)", src)
        for i, kind in enumerate(self.layer_types):
            if kind not in LAYER_TYPES:
                raise field_error(f"layer_types[{i}]", kind, f"one of {list(LAYER_TYPES)}", src)
        if "sliding_attention" in self.layer_types and self.sliding_window is None:
            raise field_error("sliding_window", None, "a positive integer (layer_types has sliding layers)", src)
        for i in self.mlp_only_layers:
            if not 0 <= i < self.num_hidden_layers:
                raise field_error("mlp_only_layers", list(self.mlp_only_layers),
                            f"layer indices in [0, {self.num_hidden_layers})", src)
        for i, tok in enumerate(self.eos_token_ids):
            if not 0 <= tok < self.vocab_size:
                raise field_error(f"eos_token_id[{i}]", tok, f"a token id in [0, {self.vocab_size})", src)
        self._check_quantization()

    def _check_quantization(self) -> None:
        q, src = self.quantization, self.source
        if q is None:
            return
        supported = ARCHITECTURES[self.architecture].quant_schemes
        if q.scheme not in supported:
            raise ConfigError(f"{src}: quantization {q.scheme!r} (quant_method {q.quant_method!r}) is not supported "
                              f"for {self.architecture}: expected one of {list(supported)}, or no quantization_config")
        multiple = {"mxfp4": 32, "nvfp4": q.group_size or 16}.get(q.scheme)
        if q.scheme == "fp8" and q.weight_block_size is not None:
            multiple = None  # partial blocks at the edges are fine, except between the stacked gate and up rows
            if self.moe_intermediate_size % q.weight_block_size[0]:
                raise field_error("moe_intermediate_size" if self.architecture == "Qwen3MoeForCausalLM" else
                            "intermediate_size", self.moe_intermediate_size, f"a multiple of the FP8 block's "
                            f"{q.weight_block_size[0]} rows (gate and up stack into whole blocks)", src)
        for name, value in (("hidden_size", self.hidden_size), ("moe_intermediate_size", self.moe_intermediate_size)):
            if multiple is not None and value % multiple:
                raise field_error(name, value, f"a multiple of {multiple} ({q.scheme} block size)", src)

    def is_quantized(self, module_name: str) -> bool:
        """Whether checkpoint module `module_name` is quantized: a quantization config is present and no
        `modules_to_not_convert` pattern (fnmatch-style, or a dotted prefix) names the module."""
        return self.quantization is not None and not self.quantization.excludes(module_name)

    def quant_scheme(self, module_name: str) -> str | None:
        """The scheme quantizing checkpoint module `module_name` ("mxfp4", "fp8", "nvfp4"), or None."""
        return self.quantization.scheme if self.is_quantized(module_name) else None

    def is_moe_layer(self, layer_idx: int) -> bool:
        """Whether decoder layer `layer_idx` has experts (else a dense MLP of `intermediate_size`): not in
        `mlp_only_layers`, and (layer_idx + 1) a multiple of `decoder_sparse_step` (transformers' rule)."""
        return layer_idx not in self.mlp_only_layers and (layer_idx + 1) % self.decoder_sparse_step == 0

    @property
    def num_kv_groups(self) -> int:
        return self.num_attention_heads // self.num_key_value_heads

    def layer_window(self, layer_idx: int) -> int | None:
        """The sliding window of a layer in tokens (a query sees itself and window-1 earlier tokens), or None."""
        return self.sliding_window if self.layer_types[layer_idx] == "sliding_attention" else None

    @classmethod
    def from_dir(cls, path: str | Path) -> "ModelConfig":
        path = Path(path)
        cfg_path = path / "config.json"
        if not path.is_dir():
            raise ConfigError(f"{path}: not a directory (expected a model directory holding config.json)")
        if not os.path.lexists(cfg_path):
            raise ConfigError(f"{cfg_path}: missing (expected a Hugging Face config.json)")
        try:
            raw = json.loads(read_regular(cfg_path).decode("utf-8"))
        except OSError as exc:  # unreadable, a directory, a FIFO...
            raise ConfigError(f"{cfg_path}: cannot read it ({exc}; expected a readable Hugging Face config.json)") \
                from None
        except UnicodeDecodeError as exc:
            raise ConfigError(f"{cfg_path}: not valid UTF-8 ({exc})") from None
        except (json.JSONDecodeError, RecursionError) as exc:
            raise ConfigError(f"{cfg_path}: not valid JSON ({exc})") from None
        return cls.from_dict(raw, source=str(cfg_path), model_dir=path)

    @classmethod
    def from_dict(cls, raw: Any, source: str = "config.json", model_dir: Path | None = None) -> "ModelConfig":
        """Parse a config.json dict (`model_dir`: where to look for hf_quant_config.json)."""
        if not isinstance(raw, dict):
            raise ConfigError(f"{source}: expected a JSON object, got {type(raw).__name__}")
        archs = read_field(raw, "architectures", list, source)
        supported = [a for a in archs if a in ARCHITECTURES]
        if not supported:
            raise field_error("architectures", archs, f"one of {list(ARCHITECTURES)}", source)
        arch = supported[0]
        d = ARCHITECTURES[arch]

        def pos_int(name: str, default: Any = ...) -> int:
            return read_field(raw, name, int, source, default=default, positive=True)

        hidden = pos_int("hidden_size")
        heads = pos_int("num_attention_heads")
        layers = pos_int("num_hidden_layers")
        experts_per_tok = raw.get("num_experts_per_tok", raw.get("experts_per_token"))
        topk_raw = {"num_experts_per_tok": experts_per_tok} if experts_per_tok is not None else {}
        head_dim = pos_int("head_dim", default=hidden // heads if hidden % heads == 0 else ...)
        experts_field = d.experts_field if d.experts_field in raw else "num_local_experts"
        eos = raw.get("eos_token_id")
        eos_ids = [] if eos is None else (eos if isinstance(eos, list) else [eos])
        if any(not isinstance(t, int) or isinstance(t, bool) for t in eos_ids):
            raise field_error("eos_token_id", eos, "an integer or a list of integers", source)
        window, layer_types = _parse_attention_layers(raw, arch, layers, source)
        hidden_act = read_field(raw, "hidden_act", str, source, default="silu")
        if arch != "GptOssForCausalLM" and hidden_act not in HIDDEN_ACTS:
            raise field_error("hidden_act", hidden_act, f"one of {list(HIDDEN_ACTS)}", source)
        sparse = arch == "Qwen3MoeForCausalLM"
        mlp_only = read_field(raw, "mlp_only_layers", list, source, default=[]) if sparse else []
        if any(isinstance(i, bool) or not isinstance(i, int) for i in mlp_only):
            raise field_error("mlp_only_layers", mlp_only, "a list of layer indices", source)
        intermediate = pos_int("intermediate_size")
        return cls(
            architecture=arch,
            vocab_size=pos_int("vocab_size"),
            hidden_size=hidden,
            intermediate_size=intermediate,
            num_hidden_layers=layers,
            num_attention_heads=heads,
            num_key_value_heads=pos_int("num_key_value_heads", default=heads if arch == "MixtralForCausalLM" else ...),
            head_dim=head_dim,
            num_local_experts=pos_int(experts_field),
            num_experts_per_tok=read_field(topk_raw, "num_experts_per_tok", int, source, positive=True,
                                     default=d.default_top_k if d.default_top_k is not None else ...),
            sliding_window=window,
            layer_types=layer_types,
            rms_norm_eps=read_field(raw, "rms_norm_eps", float, source, default=d.rms_norm_eps, positive=True),
            rope=parse_rope(raw, source, d.rope_theta),
            max_position_embeddings=pos_int("max_position_embeddings", default=d.max_position_embeddings),
            moe_intermediate_size=pos_int("moe_intermediate_size") if sparse else intermediate,
            norm_topk_prob=(read_field(raw, "norm_topk_prob", bool, source, default=False) if sparse
                            else arch == "MixtralForCausalLM"),
            decoder_sparse_step=pos_int("decoder_sparse_step", default=1) if sparse else 1,
            mlp_only_layers=tuple(mlp_only),
            hidden_act=hidden_act,
            swiglu_limit=read_field(raw, "swiglu_limit", float, source, default=7.0, positive=True),
            swiglu_alpha=read_field(raw, "swiglu_alpha", float, source, default=1.702, positive=True),
            attention_bias=(False if d.attention_bias is None else
                            read_field(raw, "attention_bias", bool, source, default=d.attention_bias)),
            tie_word_embeddings=read_field(raw, "tie_word_embeddings", bool, source, default=False),
            eos_token_ids=tuple(eos_ids),
            pad_token_id=read_field(raw, "pad_token_id", int, source, default=None),
            quantization=parse_quantization(raw, source, model_dir),
            source=source,
        )


def _parse_attention_layers(raw: dict, arch: str, layers: int, source: str) -> tuple[int | None, tuple[str, ...]]:
    """(sliding window, layer types). gpt-oss: `layer_types`, by default even layers slide (window 128).
    Qwen3-MoE: every layer slides when `use_sliding_window` (window `sliding_window`, 4096 by default), none
    otherwise. Mixtral: every layer slides when `sliding_window` is set."""
    if arch == "GptOssForCausalLM":
        window = read_field(raw, "sliding_window", int, source, default=128, positive=True)
        layer_types = read_field(raw, "layer_types", list, source, default=None)
        if layer_types is None:  # HF default: even layers slide, odd layers see everything
            layer_types = ["sliding_attention" if i % 2 == 0 else "full_attention" for i in range(layers)]
        return window, tuple(layer_types)
    if arch == "Qwen3MoeForCausalLM":
        on = read_field(raw, "use_sliding_window", bool, source, default=False)
        window = read_field(raw, "sliding_window", int, source, default=4096, positive=True) if on else None
    else:
        window = read_field(raw, "sliding_window", int, source, default=None, positive=True)
    return window, ("sliding_attention" if window is not None else "full_attention",) * layers
