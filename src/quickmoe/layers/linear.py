"""Dense linear layer whose weight and bias are declared with their checkpoint format."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from quickmoe.layers.weights import declare_weight


class Linear(nn.Module):
    """y = x W^T + b, W [out, in] as in the checkpoint (bf16 there, `dtype` here)."""

    def __init__(self, in_features: int, out_features: int, *, bias: bool, dtype: torch.dtype,
                 device: torch.device | str, checkpoint_dtype: torch.dtype = torch.bfloat16) -> None:
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        declare_weight(self, "weight", (out_features, in_features), dtype, device, checkpoint_dtype=checkpoint_dtype)
        if bias:
            declare_weight(self, "bias", (out_features,), dtype, device, checkpoint_dtype=checkpoint_dtype)
        else:
            self.bias = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, self.weight, self.bias)
