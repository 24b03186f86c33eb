"""Export trained weights as a gpt-oss checkpoint in the exact Hugging Face layout, through the same writer as
`make-checkpoint` (`tensor_specs` names, shapes and dtypes; `plan_shards` / `write_shard`).

The caller hands float tensors under the checkpoint's names, experts in Hugging Face's bf16 layout (`gate_up_proj`
[E, H, 2I] in x out with gate/up columns interleaved, `down_proj` [E, I, H]). With an MXFP4 config (a
`quantization_config`), the experts are quantized (`formats.mxfp4.quantize_mxfp4`, out x in: `*_blocks`
[E, N, K/32, 16], `*_scales` [E, N, K/32]); everything else is written as bf16. Extra files (tokenizer.json,
tokenizer_config.json, a manifest) are written beside, and the directory is assembled under a temporary name.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import torch

from quickmoe.checkpoint.presets import generation_config
from quickmoe.checkpoint.safetensors_writer import plan_shards, tensor_nbytes, write_shard
from quickmoe.checkpoint.synth import tensor_specs
from quickmoe.config import ModelConfig
from quickmoe.errors import ConfigError
from quickmoe.formats.mxfp4 import quantize_mxfp4

logger = logging.getLogger(__name__)

_QUANTIZED_SUFFIXES = ("_blocks", "_scales")


def _spec_bytes(name: str, shape: tuple[int, ...], dtype: str, tensors: Mapping[str, torch.Tensor],
                cache: dict[str, tuple[torch.Tensor, torch.Tensor]]) -> torch.Tensor:
    """The bytes (a contiguous CPU tensor) of checkpoint tensor `name`."""
    if name.endswith(_QUANTIZED_SUFFIXES):  # ...experts.gate_up_proj_blocks <- ...experts.gate_up_proj [E, K, N]
        source = name.rsplit("_", 1)[0]
        if source not in cache:
            if source not in tensors:
                raise ConfigError(f"export: tensor {source!r} (the bf16 layout of {name!r}) was not given")
            cache.clear()  # one expert tensor at a time
            cache[source] = quantize_mxfp4(tensors[source].detach().float().cpu().transpose(1, 2))  # [E, N, K]
        out = cache[source][0 if name.endswith("_blocks") else 1]
    else:
        if name not in tensors:
            raise ConfigError(f"export: tensor {name!r} was not given")
        out = tensors[name].detach().cpu()
        if dtype == "BF16":
            out = out.to(torch.bfloat16)
    if tuple(out.shape) != tuple(shape):
        raise ConfigError(f"export: tensor {name!r} has shape {tuple(out.shape)}, expected {tuple(shape)}")
    return out.contiguous()


def _chunks(specs: list, tensors: Mapping[str, torch.Tensor]) -> Iterator[tuple[str, Any]]:
    cache: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}
    for spec in specs:
        data = _spec_bytes(spec.name, spec.shape, spec.dtype, tensors, cache)
        yield spec.name, data.view(torch.uint8).numpy() if data.dtype == torch.bfloat16 else data.numpy()


def write_trained_checkpoint(out_dir: str | Path, config: dict[str, Any], tensors: Mapping[str, torch.Tensor], *,
                             extra_files: Mapping[str, bytes] = (), shard_bytes: int = 5_000_000_000,
                             overwrite: bool = False) -> Path:
    """Write config.json, generation_config.json, the safetensors shards with their index, and `extra_files`
    (name -> bytes) into `out_dir`; return it. `config` is a gpt-oss config.json dict (validated); `tensors` maps
    every checkpoint name (bf16 expert names for quantized experts) to its float values. Unused tensors are an
    error, as are missing ones or wrong shapes."""
    out = Path(out_dir)
    ModelConfig.from_dict(config, source="export config")
    specs = tensor_specs(config)
    wanted = {s.name.rsplit("_", 1)[0] if s.name.endswith(_QUANTIZED_SUFFIXES) else s.name for s in specs}
    unused = sorted(set(tensors) - wanted)
    if unused:
        raise ConfigError(f"export: tensor {unused[0]!r} is not part of the checkpoint (expected names of "
                          f"{sorted(wanted)[:3]}...)")
    if out.exists() and any(out.iterdir()) and not overwrite:
        raise ConfigError(f"output directory {out} exists and is not empty (pass overwrite=True)")
    plan = plan_shards(specs, shard_bytes)
    total = sum(tensor_nbytes(s.shape, s.dtype) for s in specs)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.tmp-", dir=out.parent))
    try:
        chunks = _chunks(specs, tensors)
        for shard in plan:
            write_shard(tmp / shard.file_name, shard, chunks)
        weight_map = {t.name: shard.file_name for shard in plan for t in shard.tensors}
        files: dict[str, bytes] = {
            "model.safetensors.index.json": _json({"metadata": {"total_size": total},
                                                   "weight_map": dict(sorted(weight_map.items()))}),
            "config.json": _json(dict(sorted(config.items()))),
            "generation_config.json": _json(generation_config(config)),
            **dict(extra_files)}
        for name, data in files.items():
            (tmp / name).write_bytes(data)
        os.chmod(tmp, 0o755)
        if out.exists():
            shutil.rmtree(out)
        os.rename(tmp, out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    logger.info("exported %s: %d tensors, %.2f MB", out, len(specs), total / 1e6)
    return out


def _json(obj: Any) -> bytes:
    return (json.dumps(obj, indent=2) + "\n").encode()
