"""RMSNorm as gpt-oss defines it: normalise in float32, scale by a float32 weight, cast back."""

from __future__ import annotations

import torch
from torch import nn

from quickmoe.layers.weights import declare_weight


class RMSNorm(nn.Module):
    """y = w * x / sqrt(mean(x^2) + eps), computed in float32 (the weight is kept in float32 too)."""

    def __init__(self, hidden_size: int, eps: float, *, device: torch.device | str) -> None:
        super().__init__()
        self.eps = eps
        declare_weight(self, "weight", (hidden_size,), torch.float32, device, checkpoint_dtype=torch.bfloat16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x32 = x.float()
        x32 = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)
        return (self.weight * x32).to(x.dtype)
