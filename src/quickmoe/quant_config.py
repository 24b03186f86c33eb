"""A checkpoint's quantization, parsed and validated: config.json's `quantization_config`, or NVIDIA
ModelOpt's `hf_quant_config.json` beside it.

Three schemes are understood, each by the spelling its publisher uses:
- `mxfp4` (gpt-oss): `{"quant_method": "mxfp4", "modules_to_not_convert": [...]}`.
- `fp8` block-scaled (Qwen, DeepSeek): `{"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic",
  "weight_block_size": [128, 128], "modules_to_not_convert": [...]}`; float8_e4m3fn `weight` and its
  `weight_scale_inv` (one per block, the dequantization multiplier).
- `nvfp4` (ModelOpt): `hf_quant_config.json` `{"producer": {"name": "modelopt"}, "quantization": {"quant_algo":
  "NVFP4", "group_size": 16, "exclude_modules": [...]}}`, or config.json `{"quant_method": "modelopt",
  "quant_algo": "NVFP4", "group_size": 16, "ignore": [...]}`; uint8-packed E2M1 `weight`, float8_e4m3fn
  `weight_scale` per 16 elements, float32 `weight_scale_2` and `input_scale` per tensor.
Module patterns (fnmatch, or a dotted prefix) name the modules left unquantized.
"""

from __future__ import annotations

import fnmatch
import json
from dataclasses import dataclass
from pathlib import Path

from quickmoe.config_fields import field_error
from quickmoe.errors import ConfigError

__all__ = ["HF_QUANT_CONFIG", "QUANT_METHODS", "QUANT_SCHEMES", "QuantizationConfig", "parse_quantization"]

HF_QUANT_CONFIG = "hf_quant_config.json"
QUANT_METHODS = ("mxfp4", "fp8", "modelopt")  # config.json quant_method values understood
MODELOPT_ALGOS = ("NVFP4",)
QUANT_SCHEMES = ("mxfp4", "fp8", "nvfp4")
FP8_FORMATS = ("e4m3",)
FP8_ACTIVATION_SCHEMES = ("dynamic",)
NVFP4_GROUP_SIZE = 16


@dataclass(frozen=True)
class QuantizationConfig:
    """What is quantized and how. `scheme` is one of QUANT_SCHEMES; `quant_method` the checkpoint's own
    spelling; `weight_block_size` (fp8) the [rows, columns] of one scale block; `group_size` (nvfp4) the
    elements per block scale; `modules_to_not_convert` the patterns of modules left unquantized."""

    quant_method: str
    scheme: str = ""
    modules_to_not_convert: tuple[str, ...] = ()
    weight_block_size: tuple[int, int] | None = None
    group_size: int | None = None

    def __post_init__(self) -> None:
        if not self.scheme:
            object.__setattr__(self, "scheme", self.quant_method)
        if self.scheme not in QUANT_SCHEMES:
            raise ConfigError(f"quantization scheme {self.scheme!r}: expected one of {list(QUANT_SCHEMES)}")

    def excludes(self, module_name: str) -> bool:
        """Whether a `modules_to_not_convert` pattern (fnmatch-style) names the module or one of its parents."""
        return any(fnmatch.fnmatchcase(module_name, p) or fnmatch.fnmatchcase(module_name, p + ".*")
                   for p in self.modules_to_not_convert)


def _patterns(raw: dict, key: str, source: str) -> tuple[str, ...]:
    value = raw.get(key) or []
    if not isinstance(value, list) or any(not isinstance(m, str) for m in value):
        raise field_error(key, value, "a list of module name patterns", source)
    return tuple(value)


def parse_quantization(raw: dict, source: str, model_dir: Path | None = None) -> QuantizationConfig | None:
    """config.json's `quantization_config`, else `hf_quant_config.json` in `model_dir`; None: unquantized."""
    q = raw.get("quantization_config")
    if q is None and model_dir is not None and (model_dir / HF_QUANT_CONFIG).is_file():
        path = model_dir / HF_QUANT_CONFIG
        try:
            hf_quant = json.loads(path.read_text())
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise ConfigError(f"{path}: not valid JSON ({exc})") from None
        return _parse_modelopt(hf_quant, str(path))
    if q is None:
        return None
    if not isinstance(q, dict):
        raise field_error("quantization_config", q, "an object", source)
    sub = f"{source} (quantization_config)"
    method = q.get("quant_method")
    if method == "mxfp4":
        return QuantizationConfig("mxfp4", modules_to_not_convert=_patterns(q, "modules_to_not_convert", sub))
    if method == "fp8":
        return _parse_fp8(q, sub)
    if method == "modelopt":
        return _parse_modelopt(q, sub)
    raise field_error("quantization_config.quant_method", method, f"one of {list(QUANT_METHODS)}", source)


def _parse_fp8(q: dict, source: str) -> QuantizationConfig:
    fmt = q.get("fmt", "e4m3")
    if fmt not in FP8_FORMATS:
        raise field_error("fmt", fmt, f"one of {list(FP8_FORMATS)}", source)
    scheme = q.get("activation_scheme", "dynamic")
    if scheme not in FP8_ACTIVATION_SCHEMES:
        raise field_error("activation_scheme", scheme, f"one of {list(FP8_ACTIVATION_SCHEMES)} (static activation "
                    "scales are not supported)", source)
    block = q.get("weight_block_size")
    if (not isinstance(block, list) or len(block) != 2
            or any(isinstance(b, bool) or not isinstance(b, int) or b < 1 for b in block)):
        raise field_error("weight_block_size", block, "[rows, columns] of positive integers (per-tensor FP8 scales are "
                    "not supported)", source)
    return QuantizationConfig("fp8", modules_to_not_convert=_patterns(q, "modules_to_not_convert", source),
                              weight_block_size=(block[0], block[1]))


def _parse_modelopt(q: dict, source: str) -> QuantizationConfig:
    """hf_quant_config.json (`quantization` holding quant_algo, group_size, exclude_modules) or the
    config.json spelling (quant_algo, group_size and `ignore` at the top)."""
    if not isinstance(q, dict):
        raise ConfigError(f"{source}: expected a JSON object, got {type(q).__name__}")
    body = q.get("quantization", q)
    if not isinstance(body, dict):
        raise field_error("quantization", body, "an object", source)
    algo = body.get("quant_algo")
    if not isinstance(algo, str) or algo.upper() not in MODELOPT_ALGOS:
        raise field_error("quant_algo", algo, f"one of {list(MODELOPT_ALGOS)}", source)
    group = body.get("group_size", NVFP4_GROUP_SIZE)
    if group != NVFP4_GROUP_SIZE:
        raise field_error("group_size", group, f"{NVFP4_GROUP_SIZE} (NVFP4's block)", source)
    if body.get("kv_cache_quant_algo") not in (None, "none", "None"):
        raise field_error("kv_cache_quant_algo", body.get("kv_cache_quant_algo"), "null (the KV cache is not quantized)",
                    source)
    key = "exclude_modules" if "exclude_modules" in body else "ignore"
    return QuantizationConfig("modelopt", scheme="nvfp4", modules_to_not_convert=_patterns(body, key, source),
                              group_size=group)
