"""Model configuration parsed and validated from a Hugging Face `config.json`.

`ModelConfig` is frozen: everything derived at run time (dtypes, devices, buffer sizes) lives in the
runtime, not here. Every invalid or missing field raises `ConfigError` naming the field, the value
and what was expected.
"""

from __future__ import annotations

import fnmatch
import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from quickmoe.errors import ConfigError
from quickmoe.paths import read_regular

if TYPE_CHECKING:
    import torch

SUPPORTED_ARCHITECTURES = ("GptOssForCausalLM",)
LAYER_TYPES = ("sliding_attention", "full_attention")
QUANT_METHODS = ("mxfp4",)
ROPE_TYPES = ("yarn", "default")


def _fail(field_name: str, value: Any, expected: str, source: str) -> ConfigError:
    return ConfigError(f"{source}: field '{field_name}' = {value!r}: expected {expected}")


def _get(raw: dict, name: str, kind: type | tuple, source: str, *, default: Any = ..., positive: bool = False):
    """Read `raw[name]`, check its type (bool is never an int here) and, optionally, that it is > 0."""
    if name not in raw or raw[name] is None:
        if default is ...:
            raise ConfigError(f"{source}: missing field '{name}' (expected {_kind_name(kind)})")
        return default
    value = raw[name]
    kinds = kind if isinstance(kind, tuple) else (kind,)
    ok = isinstance(value, kinds) and not (isinstance(value, bool) and bool not in kinds)
    if float in kinds and isinstance(value, int) and not isinstance(value, bool):
        ok, value = True, float(value)
    if not ok:
        raise _fail(name, value, _kind_name(kind), source)
    if positive and not value > 0:
        raise _fail(name, value, f"a positive {_kind_name(kind)}", source)
    return value


def _kind_name(kind: type | tuple) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    return " or ".join({int: "an integer", float: "a number", bool: "a boolean", str: "a string",
                        list: "a list", dict: "an object"}.get(k, k.__name__) for k in kinds)


@dataclass(frozen=True)
class RopeScaling:
    """RoPE parameters. gpt-oss uses YaRN: NeoX half-split rotation, frequencies blended between
    interpolation and extrapolation over a ramp, and cos/sin scaled by `attention_factor`."""

    rope_theta: float
    rope_type: str = "yarn"
    factor: float = 1.0
    beta_fast: float = 32.0
    beta_slow: float = 1.0
    original_max_position_embeddings: int = 4096
    truncate: bool = True
    attention_factor: float | None = None

    @property
    def cos_sin_scale(self) -> float:
        """Factor on cos/sin: explicit `attention_factor`, else YaRN's 0.1*ln(factor)+1 (1 when factor <= 1)."""
        if self.attention_factor is not None:
            return self.attention_factor
        if self.rope_type != "yarn" or self.factor <= 1:
            return 1.0
        return 0.1 * math.log(self.factor) + 1.0


@dataclass(frozen=True)
class QuantizationConfig:
    """`quantization_config` of the checkpoint. Only MXFP4 experts are quantized in gpt-oss."""

    quant_method: str
    modules_to_not_convert: tuple[str, ...] = ()


@dataclass(frozen=True)
class ModelConfig:
    """A validated gpt-oss `config.json`. `quantization` is None for bf16 experts."""

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
    sliding_window: int
    layer_types: tuple[str, ...]
    rms_norm_eps: float
    rope: RopeScaling
    max_position_embeddings: int
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
        if self.num_attention_heads % self.num_key_value_heads:
            raise _fail("num_key_value_heads", self.num_key_value_heads,
                        f"a divisor of num_attention_heads={self.num_attention_heads}", src)
        if self.num_experts_per_tok > self.num_local_experts:
            raise _fail("num_experts_per_tok", self.num_experts_per_tok,
                        f"at most num_local_experts={self.num_local_experts}", src)
        if self.head_dim % 2:
            raise _fail("head_dim", self.head_dim, "an even number (RoPE rotates halves)", src)
        if len(self.layer_types) != self.num_hidden_layers:
            raise _fail("layer_types", list(self.layer_types),
                        f"{self.num_hidden_layers} entries (num_hidden_layers)", src)
        for i, kind in enumerate(self.layer_types):
            if kind not in LAYER_TYPES:
                raise _fail(f"layer_types[{i}]", kind, f"one of {list(LAYER_TYPES)}", src)
        if self.quantization is not None and self.hidden_size % 32:
            raise _fail("hidden_size", self.hidden_size, "a multiple of 32 (MXFP4 block size)", src)
        if self.quantization is not None and self.intermediate_size % 32:
            raise _fail("intermediate_size", self.intermediate_size, "a multiple of 32 (MXFP4 block size)", src)
        for i, tok in enumerate(self.eos_token_ids):
            if not 0 <= tok < self.vocab_size:
                raise _fail(f"eos_token_id[{i}]", tok, f"a token id in [0, {self.vocab_size})", src)

    def is_quantized(self, module_name: str) -> bool:
        """Whether checkpoint module `module_name` is quantized: a quantization config is present and no
        `modules_to_not_convert` pattern (fnmatch-style, or a dotted prefix) names the module."""
        if self.quantization is None:
            return False
        for pattern in self.quantization.modules_to_not_convert:
            if fnmatch.fnmatchcase(module_name, pattern) or module_name.startswith(pattern + "."):
                return False
        return True

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
        return cls.from_dict(raw, source=str(cfg_path))

    @classmethod
    def from_dict(cls, raw: Any, source: str = "config.json") -> "ModelConfig":
        if not isinstance(raw, dict):
            raise ConfigError(f"{source}: expected a JSON object, got {type(raw).__name__}")
        archs = _get(raw, "architectures", list, source)
        supported = [a for a in archs if a in SUPPORTED_ARCHITECTURES]
        if not supported:
            raise _fail("architectures", archs, f"one of {list(SUPPORTED_ARCHITECTURES)}", source)

        def pos_int(name: str, default: Any = ...) -> int:
            return _get(raw, name, int, source, default=default, positive=True)

        hidden = pos_int("hidden_size")
        heads = pos_int("num_attention_heads")
        layers = pos_int("num_hidden_layers")
        experts_per_tok = raw.get("num_experts_per_tok", raw.get("experts_per_token"))
        topk_raw = {"num_experts_per_tok": experts_per_tok} if experts_per_tok is not None else {}
        head_dim = pos_int("head_dim", default=hidden // heads if hidden % heads == 0 else ...)
        layer_types = _get(raw, "layer_types", list, source, default=None)
        if layer_types is None:  # HF default: even layers slide, odd layers see everything
            layer_types = ["sliding_attention" if i % 2 == 0 else "full_attention" for i in range(layers)]
        eos = raw.get("eos_token_id")
        eos_ids = [] if eos is None else (eos if isinstance(eos, list) else [eos])
        if any(not isinstance(t, int) or isinstance(t, bool) for t in eos_ids):
            raise _fail("eos_token_id", eos, "an integer or a list of integers", source)
        pad = _get(raw, "pad_token_id", int, source, default=None)
        return cls(
            architecture=supported[0],
            vocab_size=pos_int("vocab_size"),
            hidden_size=hidden,
            intermediate_size=pos_int("intermediate_size"),
            num_hidden_layers=layers,
            num_attention_heads=heads,
            num_key_value_heads=pos_int("num_key_value_heads"),
            head_dim=head_dim,
            num_local_experts=pos_int("num_local_experts"),
            num_experts_per_tok=_get(topk_raw, "num_experts_per_tok", int, source, positive=True),
            sliding_window=pos_int("sliding_window", default=128),
            layer_types=tuple(layer_types),
            rms_norm_eps=_get(raw, "rms_norm_eps", float, source, default=1e-5, positive=True),
            rope=_parse_rope(raw, source),
            max_position_embeddings=pos_int("max_position_embeddings", default=131072),
            swiglu_limit=_get(raw, "swiglu_limit", float, source, default=7.0, positive=True),
            swiglu_alpha=_get(raw, "swiglu_alpha", float, source, default=1.702, positive=True),
            attention_bias=_get(raw, "attention_bias", bool, source, default=True),
            tie_word_embeddings=_get(raw, "tie_word_embeddings", bool, source, default=False),
            eos_token_ids=tuple(eos_ids),
            pad_token_id=pad,
            quantization=_parse_quantization(raw, source),
            source=source,
        )


def _parse_rope(raw: dict, source: str) -> RopeScaling:
    """Accept both spellings: `rope_scaling` + top-level `rope_theta` (published gpt-oss), or
    `rope_parameters` holding `rope_theta` (transformers 5)."""
    if raw.get("rope_parameters") is not None:
        params = _get(raw, "rope_parameters", dict, source)
        prefix = "rope_parameters"
        theta_src, theta_name = params, "rope_theta"
    else:
        params = _get(raw, "rope_scaling", dict, source, default=None) or {"rope_type": "default"}
        prefix = "rope_scaling"
        theta_src, theta_name = raw, "rope_theta"
    sub = f"{source} ({prefix})" if theta_src is params else source
    theta = _get(theta_src, theta_name, float, sub, default=150000.0, positive=True)
    psrc = f"{source} ({prefix})"
    rope_type = params.get("rope_type", params.get("type", "default"))
    if rope_type not in ROPE_TYPES:
        raise _fail(f"{prefix}.rope_type", rope_type, f"one of {list(ROPE_TYPES)}", source)
    if rope_type == "default":
        return RopeScaling(rope_theta=theta, rope_type="default")
    return RopeScaling(
        rope_theta=theta,
        rope_type=rope_type,
        factor=_get(params, "factor", float, psrc, positive=True),
        beta_fast=_get(params, "beta_fast", float, psrc, default=32.0, positive=True),
        beta_slow=_get(params, "beta_slow", float, psrc, default=1.0, positive=True),
        original_max_position_embeddings=_get(params, "original_max_position_embeddings", int, psrc,
                                              positive=True),
        truncate=_get(params, "truncate", bool, psrc, default=True),
        attention_factor=_get(params, "attention_factor", float, psrc, default=None),
    )


def _parse_quantization(raw: dict, source: str) -> QuantizationConfig | None:
    q = _get(raw, "quantization_config", dict, source, default=None)
    if q is None:
        return None
    method = q.get("quant_method")
    if method not in QUANT_METHODS:
        raise _fail("quantization_config.quant_method", method, f"one of {list(QUANT_METHODS)}", source)
    skip = _get(q, "modules_to_not_convert", list, f"{source} (quantization_config)", default=[])
    if any(not isinstance(m, str) for m in skip):
        raise _fail("quantization_config.modules_to_not_convert", skip, "a list of strings", source)
    return QuantizationConfig(quant_method=method, modules_to_not_convert=tuple(skip))


DEVICES = ("auto", "cpu", "cuda")
DTYPES = ("auto", "float32", "bfloat16")
MOE_KERNELS = ("auto", "torch", "triton")
COMPILE_MODES = ("off", "on")
CUDA_GRAPH_MODES = ("auto", "off", "on")


KV_BLOCK_SIZES = (16, 32, 64, 128)
SEED_RANGE = (-(2**63), 2**64 - 1)  # what torch.Generator.manual_seed takes
CPU_LONG_PREFILL_TOKENS = 128  # the default prefill chunk cap on a CPU (EngineConfig.long_prefill_token_threshold)


@dataclass(frozen=True)
class EngineConfig:
    """How to run a model: where, in which precision, and how much context, batch and cache to allow.

    `model` None means the embedded default (a tiny random checkpoint built once into the cache).
    `device` auto picks CUDA when available; `dtype` auto is bfloat16 on CUDA and float32 on CPU.
    `moe_kernels` / `attention_kernels`: "triton" runs the MoE experts / the paged attention with the Triton
    kernels, "torch" with their torch references; "auto" (the default) is "triton" on CUDA when triton is
    installed, else "torch" (`resolved_kernels`).
    `compile`: "on" compiles the decoder layers with torch.compile at start-up (one graph per layer kind,
    cached on disk: executor/compile.py); "off" (the default until the compiled path has been validated on
    the GPU; `--enforce-eager` on the command line) runs eagerly. `cuda_graphs`: "on" captures the decode
    step in CUDA graphs for batch-size buckets at start-up (executor/cuda_graphs.py; CUDA only); "auto" (the
    default) does so on CUDA; "off" decodes eagerly.
    Scheduling: at most `max_num_seqs` sequences run at once and one step computes at most
    `max_num_batched_tokens` tokens (long prompts are prefilled in chunks). `long_prefill_token_threshold`: the
    most prompt tokens one sequence prefills in one step, so that running decodes and new requests are never held
    up by more than one such chunk (None: CPU_LONG_PREFILL_TOKENS on a CPU, a quarter of max_num_batched_tokens
    on CUDA; `resolved_long_prefill_token_threshold`). `max_model_len` (prompt + output
    tokens; default: the model's max_position_embeddings, capped to what the KV cache holds) bounds a request.
    KV cache: blocks of `block_size` positions; its size is `kv_cache_memory` bytes when given, else on CUDA
    what `gpu_memory_utilization` of the GPU leaves after the weights and the activations of a full step, else
    (CPU) 1 GiB; `num_kv_blocks` sets the full-attention group's block count directly (tests, tuning).
    """

    model: str | None = None
    device: str = "auto"
    dtype: str = "auto"
    max_model_len: int | None = None
    max_num_seqs: int = 256
    max_num_batched_tokens: int = 8192
    seed: int = 0
    moe_kernels: str = "auto"
    attention_kernels: str = "auto"
    compile: str = "off"
    cuda_graphs: str = "auto"
    block_size: int = 16
    kv_cache_memory: int | None = None
    gpu_memory_utilization: float = 0.9
    num_kv_blocks: int | None = None
    long_prefill_token_threshold: int | None = None

    def resolved_long_prefill_token_threshold(self, device_type: str) -> int:
        """The prefill chunk cap on a device of `device_type` ("cpu", "cuda"): the option when set, else
        CPU_LONG_PREFILL_TOKENS on a CPU (a token costs ~1 ms there on the tiny model) and a quarter of the step's
        budget on CUDA; never more than max_num_batched_tokens."""
        if self.long_prefill_token_threshold is not None:
            chosen = self.long_prefill_token_threshold
        elif device_type == "cuda":
            chosen = max(self.max_num_batched_tokens // 4, 1)
        else:
            chosen = CPU_LONG_PREFILL_TOKENS
        return min(chosen, self.max_num_batched_tokens)

    def resolved_cuda_graphs(self, device: torch.device) -> bool:
        """Whether decode steps run in CUDA graphs on `device` ("auto": on CUDA)."""
        return self.cuda_graphs == "on" or (self.cuda_graphs == "auto" and device.type == "cuda")

    def resolved_kernels(self, which: str, device: torch.device) -> str:
        """"triton" or "torch" for `which` ("moe_kernels" or "attention_kernels") on `device`. An explicit
        "triton" needs triton installed and a CUDA device (or TRITON_INTERPRET=1: Triton's CPU interpreter, for
        tests); else ConfigError, rather than a silent fallback or a traceback from Triton's driver."""
        import importlib.util

        choice = getattr(self, which)
        has_triton = importlib.util.find_spec("triton") is not None
        if choice == "triton":
            if not has_triton:
                raise ConfigError(f"engine option '{which}' = 'triton': triton is not installed (expected 'auto' or "
                                  "'torch', or `pip install triton`)")
            if device.type != "cuda" and os.environ.get("TRITON_INTERPRET") != "1":
                raise ConfigError(f"engine option '{which}' = 'triton' needs a CUDA device; the model runs on "
                                  f"{device.type} (expected 'auto' or 'torch' there, or TRITON_INTERPRET=1 for "
                                  "Triton's CPU interpreter)")
        if choice != "auto":
            return choice
        return "triton" if device.type == "cuda" and has_triton else "torch"

    def __post_init__(self) -> None:
        def fail(name: str, expected: str) -> ConfigError:
            return ConfigError(f"engine option '{name}' = {getattr(self, name)!r}: expected {expected}")

        def is_int(value: object) -> bool:
            return isinstance(value, int) and not isinstance(value, bool)

        if not isinstance(self.device, str) or (self.device not in DEVICES and not self.device.startswith("cuda:")):
            raise fail("device", f"one of {list(DEVICES)} or 'cuda:N'")
        if self.dtype not in DTYPES:
            raise fail("dtype", f"one of {list(DTYPES)}")
        if self.max_model_len is not None and (not is_int(self.max_model_len) or self.max_model_len < 2):
            raise fail("max_model_len", "an integer >= 2")
        for name in ("moe_kernels", "attention_kernels"):
            if getattr(self, name) not in MOE_KERNELS:
                raise fail(name, f"one of {list(MOE_KERNELS)}")
        if self.compile not in COMPILE_MODES:
            raise fail("compile", f"one of {list(COMPILE_MODES)}")
        if self.cuda_graphs not in CUDA_GRAPH_MODES:
            raise fail("cuda_graphs", f"one of {list(CUDA_GRAPH_MODES)}")
        if not is_int(self.max_num_seqs) or self.max_num_seqs < 1:
            raise fail("max_num_seqs", "an integer >= 1")
        if not is_int(self.max_num_batched_tokens) or self.max_num_batched_tokens < 1:
            raise fail("max_num_batched_tokens", "an integer >= 1")
        if self.block_size not in KV_BLOCK_SIZES:
            raise fail("block_size", f"one of {list(KV_BLOCK_SIZES)}")
        if self.kv_cache_memory is not None and (not is_int(self.kv_cache_memory) or self.kv_cache_memory < 1):
            raise fail("kv_cache_memory", "a number of bytes >= 1")
        if isinstance(self.gpu_memory_utilization, bool) or not isinstance(self.gpu_memory_utilization, (int, float)) \
                or not 0 < self.gpu_memory_utilization <= 1:
            raise fail("gpu_memory_utilization", "a fraction in (0, 1]")
        if self.num_kv_blocks is not None and (not is_int(self.num_kv_blocks) or self.num_kv_blocks < 1):
            raise fail("num_kv_blocks", "an integer >= 1")
        if self.long_prefill_token_threshold is not None and (not is_int(self.long_prefill_token_threshold)
                                                              or self.long_prefill_token_threshold < 1):
            raise fail("long_prefill_token_threshold", "None or an integer >= 1")
        if not is_int(self.seed) or not SEED_RANGE[0] <= self.seed <= SEED_RANGE[1]:
            raise fail("seed", f"an integer in [{SEED_RANGE[0]}, {SEED_RANGE[1]}]")
        if self.model is not None and not isinstance(self.model, str):
            raise fail("model", "None or a checkpoint directory")
