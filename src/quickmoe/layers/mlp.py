"""The dense gated MLP (Qwen3-MoE's `mlp_only_layers` and layers off the `decoder_sparse_step`):
down(SiLU(gate(x)) * up(x)), no biases, checkpoint names `mlp.gate_proj` / `up_proj` / `down_proj`.
Tensor parallel: gate and up column-parallel, down row-parallel, the output summed over the ranks."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from quickmoe.config import ModelConfig
from quickmoe.distributed import SINGLE, ParallelContext
from quickmoe.layers.fp8_linear import linear_method
from quickmoe.layers.linear import Linear
from quickmoe.layers.sharding import column_parallel, row_parallel


class GatedMLP(nn.Module):
    """[T, H] -> [T, H] through `config.intermediate_size` channels (module `model.layers.<i>.mlp`)."""

    def __init__(self, config: ModelConfig, layer_idx: int, *, dtype: torch.dtype, device: torch.device | str,
                 parallel: ParallelContext = SINGLE) -> None:
        super().__init__()
        self.parallel = parallel
        h = config.hidden_size

        def quant(name: str):  # noqa: ANN202
            return linear_method(config, f"model.layers.{layer_idx}.mlp.{name}")

        fp8 = quant("down_proj")
        block = math.lcm(*fp8.block) if fp8 is not None else 1  # FP8: whole blocks as rows and as columns
        channels = parallel.shard(config.intermediate_size, field="intermediate_size", unit=block)
        i = channels.size
        self.gate_proj = Linear(h, i, bias=False, dtype=dtype, device=device, quant_method=quant("gate_proj"))
        self.up_proj = Linear(h, i, bias=False, dtype=dtype, device=device, quant_method=quant("up_proj"))
        self.down_proj = Linear(i, h, bias=False, dtype=dtype, device=device, quant_method=quant("down_proj"))
        column_parallel(self.gate_proj, channels)
        column_parallel(self.up_proj, channels)
        row_parallel(self.down_proj, channels, parallel)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.parallel.all_reduce(self.down_proj(F.silu(self.gate_proj(hidden)) * self.up_proj(hidden)))
