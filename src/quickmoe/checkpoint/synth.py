"""Random checkpoints (gpt-oss, Qwen3-MoE, Mixtral) in the exact Hugging Face layout, written as a stream.

`write_checkpoint` plans every tensor's place first (names, shapes, dtypes, shards, offsets), writes
each shard's safetensors header, then appends the tensors' bytes in order as `random_weights`
generates them in bounded chunks on a few threads, so host memory stays small whatever the model
size. The directory is assembled under a temporary name and renamed at the end: an interrupted run
leaves no half checkpoint behind.

The same seed gives byte-identical files. Weights are scaled so that activations stay finite and
meaningful through every layer (see `random_weights`). bf16 experts (`experts_dtype="bf16"`) are
exactly the dequantized MXFP4 experts of the same seed, in Hugging Face's unquantized layout (in x out),
so both formats describe the same model. Qwen3-MoE and Mixtral checkpoints come in bf16, FP8 block-scaled
or NVFP4 (`weights`; checkpoint/moe_specs.py); an FP8 or NVFP4 checkpoint quantizes the bf16 one of the same
seed, and its `dequantized_twin` holds the float32 values it stands for (a reference for transformers).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from quickmoe.checkpoint import random_weights
from quickmoe.checkpoint.moe_specs import FAMILY_WEIGHTS, family_specs, hf_quant_config, quantization_config
from quickmoe.checkpoint.output_dir import check_output_dir, directory_mode, install_output_dir
from quickmoe.checkpoint.presets import (
    FAMILIES,
    PRESETS,
    alternating_layer_types,
    base_config,
    generation_config,
    preset_family,
)
from quickmoe.checkpoint.safetensors_writer import ShardPlan, TensorSpec, plan_shards, tensor_nbytes, write_shard
from quickmoe.config import ModelConfig
from quickmoe.errors import ConfigError
from quickmoe.formats.mxfp4 import BLOCK_SIZE

logger = logging.getLogger(__name__)

EXPERTS_DTYPES = ("mxfp4", "bf16")  # gpt-oss's experts
WEIGHTS = {"gpt-oss": EXPERTS_DTYPES, "qwen3-moe": FAMILY_WEIGHTS, "mixtral": FAMILY_WEIGHTS}
_MAX_WORKERS = 8  # generator threads (the bytes do not depend on it; each quantizes one weight at a time)


def preset_config(preset: str, *, layers: int | None = None, experts: int | None = None,
                  experts_dtype: str | None = None, **overrides: Any) -> dict[str, Any]:
    """The config.json dict of `preset`, optionally with `layers` decoder layers (gpt-oss: layer_types
    alternate sliding/full), `experts` experts per layer, `experts_dtype` (the weights: gpt-oss "mxfp4"
    (default) or "bf16" experts; Qwen3-MoE and Mixtral "bf16" (default), "fp8" or "nvfp4", with the
    quantization_config of those releases) and other config.json fields replaced (`overrides`, e.g.
    hidden_size=64, vocab_size=512). When a smaller vocabulary leaves the published eos/pad ids out of range
    and they are not overridden, they become vocab_size-2 and vocab_size-1. Validated by ModelConfig: anything
    invalid raises ConfigError naming the field, the value and what was expected."""
    if preset not in PRESETS:
        raise ConfigError(f"option 'preset' = {preset!r}: expected one of {list(PRESETS)}")
    family = preset_family(preset)
    weights = experts_dtype if experts_dtype is not None else WEIGHTS[family][0]
    if weights not in WEIGHTS[family]:
        raise ConfigError(f"option 'experts_dtype' (weights) = {weights!r}: expected one of {list(WEIGHTS[family])} "
                          f"for preset {preset!r}")
    for option, value in (("layers", layers), ("experts", experts)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise ConfigError(f"option '{option}' = {value!r}: expected a positive integer (or None for the "
                              f"preset's own)")
    if family != "gpt-oss":
        return _family_config(preset, family, weights, layers, experts, overrides)
    cfg = base_config(preset)
    _override(cfg, preset, set(cfg), "num_local_experts", layers, experts, overrides)
    if "layer_types" not in overrides:
        cfg["layer_types"] = alternating_layer_types(cfg["num_hidden_layers"])
    top_k = overrides.get("num_experts_per_tok", overrides.get("experts_per_token", cfg["num_experts_per_tok"]))
    cfg["num_experts_per_tok"] = cfg["experts_per_token"] = top_k
    if weights == "bf16":
        del cfg["quantization_config"]
    ModelConfig.from_dict(cfg, source=f"preset {preset!r}")
    return cfg


def _override(cfg: dict[str, Any], preset: str, allowed: set[str], experts_field: str, layers: int | None,
              experts: int | None, overrides: dict[str, Any]) -> None:
    """Apply the layer and expert counts and the field overrides (only `allowed` fields) to `cfg`; special token
    ids a smaller vocabulary leaves out of range (and not overridden) become vocab_size-1 (pad) or -2 (eos, bos)."""
    unknown = sorted(set(overrides) - allowed)
    if unknown:
        raise ConfigError(f"override {unknown[0]!r} = {overrides[unknown[0]]!r}: not a field of the {preset!r} "
                          f"config.json; expected one of {sorted(allowed)}")
    if layers is not None:
        cfg["num_hidden_layers"] = layers
    if experts is not None:
        cfg[experts_field] = experts
    cfg.update(overrides)
    vocab = cfg["vocab_size"]
    if isinstance(vocab, int) and vocab > 0:
        for key, fallback in (("pad_token_id", vocab - 1), ("eos_token_id", vocab - 2), ("bos_token_id", vocab - 2)):
            if key not in overrides and isinstance(cfg.get(key), int) and cfg[key] >= vocab:
                cfg[key] = max(fallback, 0)


def _family_config(preset: str, family: str, weights: str, layers: int | None, experts: int | None,
                   overrides: dict[str, Any]) -> dict[str, Any]:
    """preset_config for Qwen3-MoE and Mixtral presets."""
    cfg = base_config(preset)
    _override(cfg, preset, set(cfg) | {"pad_token_id", "rope_scaling"}, FAMILIES[family][2], layers, experts,
              overrides)
    if "mlp_only_layers" in cfg and "mlp_only_layers" not in overrides:
        cfg["mlp_only_layers"] = [i for i in cfg["mlp_only_layers"] if i < cfg["num_hidden_layers"]]
    quant = quantization_config(weights, ModelConfig.from_dict(cfg, source=f"preset {preset!r}"))
    if quant is not None:
        cfg["quantization_config"] = quant
    ModelConfig.from_dict(cfg, source=f"preset {preset!r}")
    return dict(sorted(cfg.items()))


def tensor_specs(config: dict[str, Any]) -> list[TensorSpec]:
    """Every tensor of a checkpoint for config.json dict `config`, in file order, with the names, shapes and
    dtypes of the published checkpoints. gpt-oss: experts as MXFP4 `*_blocks` [E, N, K/32, 16] and `*_scales`
    [E, N, K/32] (out x in) when the config quantizes them, else Hugging Face's bf16 `gate_up_proj` [E, H, 2I]
    and `down_proj` [E, I, H] (in x out); everything else bf16. Qwen3-MoE, Mixtral: checkpoint/moe_specs.py."""
    c = ModelConfig.from_dict(config)
    if c.architecture != "GptOssForCausalLM":
        return [spec for spec, _ in family_specs(c)]
    h, inter, e, v = c.hidden_size, c.intermediate_size, c.num_local_experts, c.vocab_size
    q, kv = c.num_attention_heads * c.head_dim, c.num_key_value_heads * c.head_dim
    specs = [TensorSpec("model.embed_tokens.weight", (v, h), "BF16")]
    for n in range(c.num_hidden_layers):
        p = f"model.layers.{n}"
        specs.append(TensorSpec(f"{p}.input_layernorm.weight", (h,), "BF16"))
        for proj, out_f, in_f in (("q_proj", q, h), ("k_proj", kv, h), ("v_proj", kv, h), ("o_proj", h, q)):
            specs += [TensorSpec(f"{p}.self_attn.{proj}.weight", (out_f, in_f), "BF16"),
                      TensorSpec(f"{p}.self_attn.{proj}.bias", (out_f,), "BF16")]
        specs += [TensorSpec(f"{p}.self_attn.sinks", (c.num_attention_heads,), "BF16"),
                  TensorSpec(f"{p}.post_attention_layernorm.weight", (h,), "BF16"),
                  TensorSpec(f"{p}.mlp.router.weight", (e, h), "BF16"),
                  TensorSpec(f"{p}.mlp.router.bias", (e,), "BF16")]
        x = f"{p}.mlp.experts"
        if c.is_quantized(x):  # out x in; gate_up rows interleaved (even gate, odd up)
            specs += [TensorSpec(f"{x}.gate_up_proj_blocks", (e, 2 * inter, h // BLOCK_SIZE, 16), "U8"),
                      TensorSpec(f"{x}.gate_up_proj_scales", (e, 2 * inter, h // BLOCK_SIZE), "U8"),
                      TensorSpec(f"{x}.gate_up_proj_bias", (e, 2 * inter), "BF16"),
                      TensorSpec(f"{x}.down_proj_blocks", (e, h, inter // BLOCK_SIZE, 16), "U8"),
                      TensorSpec(f"{x}.down_proj_scales", (e, h, inter // BLOCK_SIZE), "U8"),
                      TensorSpec(f"{x}.down_proj_bias", (e, h), "BF16")]
        else:  # in x out; gate_up columns interleaved (even gate, odd up)
            specs += [TensorSpec(f"{x}.gate_up_proj", (e, h, 2 * inter), "BF16"),
                      TensorSpec(f"{x}.gate_up_proj_bias", (e, 2 * inter), "BF16"),
                      TensorSpec(f"{x}.down_proj", (e, inter, h), "BF16"),
                      TensorSpec(f"{x}.down_proj_bias", (e, h), "BF16")]
    specs.append(TensorSpec("model.norm.weight", (h,), "BF16"))
    if not c.tie_word_embeddings:
        specs.append(TensorSpec("lm_head.weight", (v, h), "BF16"))
    return specs


def write_checkpoint(out_dir: str | Path, *, preset: str = "tiny", layers: int | None = None,
                     experts: int | None = None, seed: int = 0, experts_dtype: str | None = None,
                     overrides: dict[str, Any] | None = None, shard_bytes: int = 5_000_000_000,
                     overwrite: bool = False, progress: bool = True, dequantized_twin: bool = False) -> Path:
    """Write a random checkpoint directory (config.json, generation_config.json, safetensors shards of about
    `shard_bytes`, model.safetensors.index.json, hf_quant_config.json for NVFP4, tokenizer files) that
    transformers and quickmoe load, and return its path. `preset`, `layers`, `experts`, `experts_dtype` (the
    weights), `overrides`: as in `preset_config`. `dequantized_twin` (FP8 / NVFP4 presets of Qwen3-MoE and
    Mixtral): the same model with the quantized weights written as their float32 values and no quantization
    config, for transformers (quickmoe reads the quantized files). Refuses a non-empty existing `out_dir`
    unless `overwrite` (and then only one that looks like a checkpoint). Shows a byte progress bar when
    `progress` and stderr is a terminal."""
    out = Path(out_dir)
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ConfigError(f"option 'seed' = {seed!r}: expected a non-negative integer")
    if isinstance(shard_bytes, bool) or not isinstance(shard_bytes, int) or shard_bytes < 1:
        raise ConfigError(f"option 'shard_bytes' = {shard_bytes!r}: expected a positive integer")
    cfg = preset_config(preset, layers=layers, experts=experts, experts_dtype=experts_dtype, **(overrides or {}))
    family = preset_family(preset)
    weights = experts_dtype if experts_dtype is not None else WEIGHTS[family][0]
    cfg["quickmoe_synthetic"] = {"preset": preset, "seed": seed, "experts_dtype": weights}
    check_output_dir(out, overwrite)
    fills: dict[str, random_weights.Fill] = {}
    extra_files: dict[str, dict[str, Any]] = {}
    if family == "gpt-oss":
        if dequantized_twin:
            raise ConfigError("option 'dequantized_twin': only for FP8 / NVFP4 Qwen3-MoE and Mixtral presets "
                              "(gpt-oss's "
                              "bf16 experts are already the MXFP4 model's twin)")
        specs = tensor_specs(cfg)
    else:
        c = ModelConfig.from_dict(cfg)
        pairs = family_specs(c, twin=dequantized_twin)
        specs = [spec for spec, _ in pairs]
        fills = {spec.name: fill for spec, fill in pairs if fill is not None}
        if dequantized_twin:
            if c.quantization is None:
                raise ConfigError("option 'dequantized_twin': the checkpoint is not quantized (expected weights fp8 "
                                  "or nvfp4)")
            del cfg["quantization_config"]
            cfg["quickmoe_synthetic"]["dequantized_twin"] = True
        elif hf_quant_config(weights, c) is not None:
            extra_files["hf_quant_config.json"] = hf_quant_config(weights, c)
    plan = plan_shards(specs, shard_bytes)
    total = sum(tensor_nbytes(s.shape, s.dtype) for s in specs)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.tmp-", dir=out.parent))
    os.chmod(tmp, directory_mode())  # mkdtemp makes it private; the checkpoint gets the usual permissions
    t0 = time.perf_counter()
    bar = _progress_bar(total, progress)
    try:
        if family == "gpt-oss":  # first: if it fails, it fails before minutes of weights are written
            _write_tokenizer(tmp)
        else:
            _write_family_tokenizer(tmp, family)
        def fill_rule(spec: TensorSpec) -> random_weights.Fill:
            return fills.get(spec.name) or random_weights.fill_for(spec)

        workers = min(_MAX_WORKERS, os.cpu_count() or 1)
        chunks = random_weights.tensor_chunks(specs, seed, workers=workers, fill_rule=fill_rule)
        threads = torch.get_num_threads()
        if workers > 1:  # one weight per thread: torch's own pool per caller would oversubscribe the cores
            torch.set_num_threads(1)
        try:
            for shard in plan:
                write_shard(tmp / shard.file_name, shard, chunks, on_bytes=bar.update if bar else None)
            if next(chunks, None) is not None:
                raise RuntimeError("chunks were generated beyond the planned tensors")
        finally:
            chunks.close()
            torch.set_num_threads(threads)
        _write_json(tmp / "model.safetensors.index.json", _index(plan, total))
        _write_json(tmp / "config.json", cfg)
        _write_json(tmp / "generation_config.json", generation_config(cfg))
        for name, obj in extra_files.items():
            _write_json(tmp / name, obj)
        install_output_dir(tmp, out)
    finally:
        if bar is not None:
            bar.close()
        shutil.rmtree(tmp, ignore_errors=True)
    seconds = time.perf_counter() - t0
    logger.info("wrote %s: %d tensors, %d shard(s), %.2f GB in %.1f s (%.2f GB/s)", out, len(specs), len(plan),
                total / 1e9, seconds, total / 1e9 / max(seconds, 1e-9))
    return out


def _index(plan: list[ShardPlan], total: int) -> dict[str, Any]:
    weight_map = {t.name: shard.file_name for shard in plan for t in shard.tensors}
    return {"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))}


def _write_json(path: Path, obj: dict[str, Any]) -> None:
    path.write_text(json.dumps(obj, indent=2, sort_keys=path.name != "model.safetensors.index.json") + "\n")


def _write_tokenizer(out_dir: Path) -> None:
    """Write the real gpt-oss tokenizer files (another module's job); skipped, with a warning, when that
    module is not available."""
    try:
        from quickmoe.tokenizer import write_tokenizer_files
    except ImportError as exc:
        logger.warning("no tokenizer files written into %s: quickmoe.tokenizer.write_tokenizer_files is not "
                       "available (%s)", out_dir, exc)
        return
    write_tokenizer_files(out_dir)


def _write_family_tokenizer(out_dir: Path, family: str) -> None:
    """A generated byte-level BPE tokenizer with the family's special tokens and chat template (a real
    checkpoint brings its own)."""
    from quickmoe.tokenizer.synthetic_bpe import write_synthetic_tokenizer

    write_synthetic_tokenizer(out_dir, family)


def _progress_bar(total: int, enabled: bool) -> Any:
    if not enabled or not sys.stderr.isatty():
        return None
    from tqdm import tqdm

    return tqdm(total=total, unit="B", unit_scale=True, unit_divisor=1000, desc="writing checkpoint",
                file=sys.stderr, dynamic_ncols=True)


__all__ = ["EXPERTS_DTYPES", "PRESETS", "ShardPlan", "TensorSpec", "plan_shards", "preset_config", "tensor_specs",
           "write_checkpoint"]
