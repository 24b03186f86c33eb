"""Model classes keyed by the HF `architectures` name in config.json."""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

from quickmoe.checkpoint.loader import expected_tensors
from quickmoe.checkpoint.reader import CheckpointReader
from quickmoe.config import SUPPORTED_ARCHITECTURES, ModelConfig
from quickmoe.distributed import SINGLE, ParallelContext
from quickmoe.errors import ConfigError
from quickmoe.layers.rotary import fill_rotary_tables
from quickmoe.models.gpt_oss import GptOssForCausalLM
from quickmoe.models.mixtral import MixtralForCausalLM
from quickmoe.models.qwen3_moe import Qwen3MoeForCausalLM

MODEL_REGISTRY: dict[str, type[nn.Module]] = {"GptOssForCausalLM": GptOssForCausalLM,
                                              "Qwen3MoeForCausalLM": Qwen3MoeForCausalLM,
                                              "MixtralForCausalLM": MixtralForCausalLM}
assert set(MODEL_REGISTRY) == set(SUPPORTED_ARCHITECTURES)


def build_model(config: ModelConfig, *, dtype: torch.dtype, device: torch.device | str,
                parallel: ParallelContext = SINGLE, defer_tables: bool = False) -> nn.Module:
    """Allocate the model's parameters (uninitialised) on `device`, this rank's share of them when `parallel`
    spreads the model over several; the checkpoint fills them. The rotary table is computed here, unless
    `defer_tables`: then the caller runs `fill_rotary_tables(model)` before the first forward."""
    try:
        cls = MODEL_REGISTRY[config.architecture]
    except KeyError:
        raise ConfigError(f"{config.source}: architecture {config.architecture!r} has no model; "
                          f"expected one of {sorted(MODEL_REGISTRY)}") from None
    with torch.device(device):
        model = cls(config, dtype=dtype, device=device, parallel=parallel)
    if not defer_tables:
        fill_rotary_tables(model)
    return model


def check_checkpoint(model_dir: str | Path) -> tuple[ModelConfig, CheckpointReader]:
    """Everything a load validates before reading a weight, without loading one: config.json, the index and
    every shard header, and the tensors against the model's parameters (names, shapes, dtypes; built on the
    meta device, so no memory is allocated). Raises the same ConfigError / CheckpointError a load would."""
    config = ModelConfig.from_dir(model_dir)
    reader = CheckpointReader(model_dir)
    reader.validate(expected_tensors(build_model(config, dtype=torch.bfloat16, device="meta")))
    return config, reader
