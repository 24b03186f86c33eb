"""Model classes keyed by the HF `architectures` name in config.json."""

from __future__ import annotations

import torch
from torch import nn

from quickmoe.config import SUPPORTED_ARCHITECTURES, ModelConfig
from quickmoe.errors import ConfigError
from quickmoe.models.gpt_oss import GptOssForCausalLM
from quickmoe.models.mixtral import MixtralForCausalLM
from quickmoe.models.qwen3_moe import Qwen3MoeForCausalLM

MODEL_REGISTRY: dict[str, type[nn.Module]] = {"GptOssForCausalLM": GptOssForCausalLM,
                                              "Qwen3MoeForCausalLM": Qwen3MoeForCausalLM,
                                              "MixtralForCausalLM": MixtralForCausalLM}
assert set(MODEL_REGISTRY) == set(SUPPORTED_ARCHITECTURES)


def build_model(config: ModelConfig, *, dtype: torch.dtype, device: torch.device | str) -> nn.Module:
    """Allocate the model's parameters (uninitialised) on `device`; the checkpoint fills them."""
    try:
        cls = MODEL_REGISTRY[config.architecture]
    except KeyError:
        raise ConfigError(f"{config.source}: architecture {config.architecture!r} has no model; "
                          f"expected one of {sorted(MODEL_REGISTRY)}") from None
    with torch.device(device):
        return cls(config, dtype=dtype, device=device)
