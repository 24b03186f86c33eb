"""Random gpt-oss checkpoints in the exact Hugging Face layout, written as a stream.

`write_checkpoint` plans every tensor's place first (names, shapes, dtypes, shards, offsets), writes
each shard's safetensors header, then generates each tensor in bounded chunks and appends its bytes,
so host memory stays small whatever the model size. Each tensor's generator is seeded from
(seed, tensor name): the same seed gives the same bytes.

Weights are scaled so activations stay finite and meaningful through every layer: linear weights
~ N(0, 1/in), norms near 1, sinks ~ N(0, 1), a router with spread, and MXFP4 experts of uniform random
codes whose E8M0 scales give an effective std near 1/sqrt(in).
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import shutil
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from quickmoe.checkpoint.presets import GENERATION_CONFIG, PRESETS, alternating_layer_types, base_config
from quickmoe.checkpoint.safetensors_writer import ShardPlan, plan_shards, write_shard
from quickmoe.config import ModelConfig
from quickmoe.errors import ConfigError

logger = logging.getLogger(__name__)

EXPERTS_DTYPES = ("mxfp4", "bf16")
_E2M1_RMS = math.sqrt(sum(v * v for v in (0, .5, 1, 1.5, 2, 3, 4, 6)) / 8)  # rms of a uniform random code
_CHUNK = 1 << 24  # elements generated at once


@dataclass(frozen=True)
class TensorSpec:
    """One checkpoint tensor: name, shape, safetensors dtype ('BF16' or 'U8'), and how to fill it."""

    name: str
    shape: tuple[int, ...]
    dtype: str
    init: str  # normal | ones_noise | fp4_codes | e8m0
    std: float = 0.0

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * (2 if self.dtype == "BF16" else 1)


def preset_config(preset: str, *, layers: int | None = None, experts: int | None = None,
                  experts_dtype: str = "mxfp4", **overrides) -> dict:
    """The config.json dict of a preset, with optional changes; validated by ModelConfig."""
    if preset not in PRESETS:
        raise ConfigError(f"option 'preset' = {preset!r}: expected one of {list(PRESETS)}")
    if experts_dtype not in EXPERTS_DTYPES:
        raise ConfigError(f"option 'experts_dtype' = {experts_dtype!r}: expected one of {list(EXPERTS_DTYPES)}")
    for name, value in (("layers", layers), ("experts", experts)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise ConfigError(f"option '{name}' = {value!r}: expected a positive integer")
    cfg = base_config(preset)
    if layers is not None:
        cfg.update(num_hidden_layers=layers, layer_types=alternating_layer_types(layers))
    if experts is not None:
        cfg["num_local_experts"] = experts
    if "num_experts_per_tok" in overrides:
        overrides["experts_per_token"] = overrides["num_experts_per_tok"]
    cfg.update(overrides)
    if experts_dtype == "bf16":
        cfg.pop("quantization_config", None)
    ModelConfig.from_dict(cfg, source=f"preset {preset!r}")  # raises ConfigError naming the bad field
    return cfg


def tensor_specs(cfg: dict) -> list[TensorSpec]:
    """Every tensor of the checkpoint, in file order, exactly as the published gpt-oss checkpoints."""
    c = ModelConfig.from_dict(cfg)
    h, i, e, v = c.hidden_size, c.intermediate_size, c.num_local_experts, c.vocab_size
    q, kv = c.num_attention_heads * c.head_dim, c.num_key_value_heads * c.head_dim
    specs = [TensorSpec("model.embed_tokens.weight", (v, h), "BF16", "normal", 1.0)]
    for n in range(c.num_hidden_layers):
        p = f"model.layers.{n}"
        specs += [
            TensorSpec(f"{p}.input_layernorm.weight", (h,), "BF16", "ones_noise", 0.05),
            TensorSpec(f"{p}.post_attention_layernorm.weight", (h,), "BF16", "ones_noise", 0.05),
        ]
        for proj, out_f, in_f in (("q_proj", q, h), ("k_proj", kv, h), ("v_proj", kv, h), ("o_proj", h, q)):
            specs += [TensorSpec(f"{p}.self_attn.{proj}.weight", (out_f, in_f), "BF16", "normal", in_f**-0.5),
                      TensorSpec(f"{p}.self_attn.{proj}.bias", (out_f,), "BF16", "normal", 0.1)]
        specs += [
            TensorSpec(f"{p}.self_attn.sinks", (c.num_attention_heads,), "BF16", "normal", 1.0),
            TensorSpec(f"{p}.mlp.router.weight", (e, h), "BF16", "normal", 2.0 * h**-0.5),
            TensorSpec(f"{p}.mlp.router.bias", (e,), "BF16", "normal", 0.1),
        ]
        x = f"{p}.mlp.experts"
        if c.is_quantized(x):
            specs += [
                TensorSpec(f"{x}.gate_up_proj_blocks", (e, 2 * i, h // 32, 16), "U8", "fp4_codes"),
                TensorSpec(f"{x}.gate_up_proj_scales", (e, 2 * i, h // 32), "U8", "e8m0", h**-0.5),
                TensorSpec(f"{x}.gate_up_proj_bias", (e, 2 * i), "BF16", "normal", 0.1),
                TensorSpec(f"{x}.down_proj_blocks", (e, h, i // 32, 16), "U8", "fp4_codes"),
                TensorSpec(f"{x}.down_proj_scales", (e, h, i // 32), "U8", "e8m0", i**-0.5),
                TensorSpec(f"{x}.down_proj_bias", (e, h), "BF16", "normal", 0.1),
            ]
        else:  # HF's unquantized experts are stored in x out, gate/up interleaved along the last dim
            specs += [
                TensorSpec(f"{x}.gate_up_proj", (e, h, 2 * i), "BF16", "normal", h**-0.5),
                TensorSpec(f"{x}.gate_up_proj_bias", (e, 2 * i), "BF16", "normal", 0.1),
                TensorSpec(f"{x}.down_proj", (e, i, h), "BF16", "normal", i**-0.5),
                TensorSpec(f"{x}.down_proj_bias", (e, h), "BF16", "normal", 0.1),
            ]
    specs.append(TensorSpec("model.norm.weight", (h,), "BF16", "ones_noise", 0.05))
    if not c.tie_word_embeddings:
        specs.append(TensorSpec("lm_head.weight", (v, h), "BF16", "normal", h**-0.5))
    return specs


def _rng(seed: int, name: str) -> np.random.Generator:
    digest = hashlib.sha256(f"{seed}:{name}".encode()).digest()  # stable across processes (unlike hash())
    return np.random.Generator(np.random.PCG64(int.from_bytes(digest[:16], "little")))


def tensor_chunks(spec: TensorSpec, seed: int) -> Iterator[bytes]:
    """The tensor's bytes in order, generated <= _CHUNK elements at a time."""
    rng = _rng(seed, spec.name)
    total = math.prod(spec.shape)
    if spec.init == "e8m0":
        # effective weight std = rms(code) * 2**(s - 127) ~ spec.std; half the blocks one step smaller
        base = 127 + round(math.log2(spec.std / _E2M1_RMS))
    for start in range(0, total, _CHUNK):
        n = min(_CHUNK, total - start)
        if spec.init == "fp4_codes":
            yield rng.bytes(n)  # uniform random nibbles: every E2M1 code equally likely
        elif spec.init == "e8m0":
            yield (base - rng.integers(0, 2, n, dtype=np.uint8)).astype(np.uint8).tobytes()
        else:
            values = rng.standard_normal(n, dtype=np.float32) * np.float32(spec.std)
            if spec.init == "ones_noise":
                values += np.float32(1.0)
            yield torch.from_numpy(values).to(torch.bfloat16).view(torch.uint8).numpy().tobytes()


def write_checkpoint(out_dir: str | Path, *, preset: str = "tiny", layers: int | None = None,
                     experts: int | None = None, seed: int = 0, experts_dtype: str = "mxfp4",
                     overrides: dict | None = None, shard_bytes: int = 5_000_000_000, overwrite: bool = False,
                     progress: bool = True) -> Path:
    """Write a random checkpoint directory that transformers and quickmoe load. Returns its path."""
    out = Path(out_dir)
    cfg = preset_config(preset, layers=layers, experts=experts, experts_dtype=experts_dtype, **(overrides or {}))
    cfg["quickmoe_synthetic"] = {"preset": preset, "seed": seed, "experts_dtype": experts_dtype}
    if out.exists() and (not out.is_dir() or any(out.iterdir())) and not overwrite:
        raise ConfigError(f"output directory {out} exists and is not empty (pass --overwrite to replace it)")
    specs = tensor_specs(cfg)
    plan = plan_shards([(s.name, s.shape, s.dtype, s.nbytes) for s in specs], shard_bytes)
    total = sum(s.nbytes for s in specs)
    tmp = out.parent / f".{out.name}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    t0 = time.perf_counter()
    try:
        bar = _progress_bar(total, progress)
        by_name = {s.name: s for s in specs}
        for shard in plan:
            write_shard(tmp / shard.file_name, shard,
                        lambda name: tensor_chunks(by_name[name], seed), on_bytes=bar.update if bar else None)
        if bar:
            bar.close()
        _write_json(tmp / "model.safetensors.index.json", {
            "metadata": {"total_size": total},
            "weight_map": {name: shard.file_name for shard in plan for name in shard.tensor_names}})
        _write_json(tmp / "config.json", cfg)
        _write_json(tmp / "generation_config.json", _generation_config(cfg))
        _write_tokenizer(tmp)
        if out.exists():
            shutil.rmtree(out)
        os.replace(tmp, out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    dt = time.perf_counter() - t0
    logger.info("wrote %s: %d tensors, %d shard(s), %.2f GB in %.1f s (%.2f GB/s)", out, len(specs), len(plan),
                total / 1e9, dt, total / 1e9 / max(dt, 1e-9))
    return out


def _generation_config(cfg: dict) -> dict:
    gen = dict(GENERATION_CONFIG)
    vocab = cfg["vocab_size"]
    if any(t >= vocab for t in gen["eos_token_id"]):  # shrunken test vocabularies: keep ids inside it
        gen.update(bos_token_id=cfg.get("pad_token_id", 0), eos_token_id=[cfg["eos_token_id"]],
                   pad_token_id=cfg.get("pad_token_id", 0))
    return gen


def _write_json(path: Path, obj: dict) -> None:
    path.write_text(json.dumps(obj, indent=2) + "\n")


def _write_tokenizer(out_dir: Path) -> None:
    from quickmoe.tokenizer import write_tokenizer_files

    write_tokenizer_files(out_dir)


def _progress_bar(total: int, enabled: bool):
    if not enabled or not sys.stderr.isatty():
        return None
    from tqdm import tqdm

    return tqdm(total=total, unit="B", unit_scale=True, unit_divisor=1000, desc="writing", file=sys.stderr)


__all__ = ["PRESETS", "EXPERTS_DTYPES", "TensorSpec", "ShardPlan", "preset_config", "tensor_specs", "plan_shards",
           "write_checkpoint"]
