"""The dense gated MLP (Qwen3-MoE's `mlp_only_layers` and layers off the `decoder_sparse_step`):
down(SiLU(gate(x)) * up(x)), no biases, checkpoint names `mlp.gate_proj` / `up_proj` / `down_proj`."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from quickmoe.config import ModelConfig
from quickmoe.layers.fp8_linear import linear_method
from quickmoe.layers.linear import Linear


class GatedMLP(nn.Module):
    """[T, H] -> [T, H] through `config.intermediate_size` channels (module `model.layers.<i>.mlp`)."""

    def __init__(self, config: ModelConfig, layer_idx: int, *, dtype: torch.dtype, device: torch.device | str) -> None:
        super().__init__()
        h, i = config.hidden_size, config.intermediate_size

        def linear(name: str, in_f: int, out_f: int) -> Linear:
            quant = linear_method(config, f"model.layers.{layer_idx}.mlp.{name}")
            return Linear(in_f, out_f, bias=False, dtype=dtype, device=device, quant_method=quant)

        self.gate_proj = linear("gate_proj", h, i)
        self.up_proj = linear("up_proj", h, i)
        self.down_proj = linear("down_proj", i, h)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(hidden)) * self.up_proj(hidden))
