"""Dense linear layer whose weight and bias are declared with their checkpoint format.

Unquantized by default; a `LinearMethod` (layers/fp8_linear.py: FP8 block-scaled) declares the weight
in its quantized checkpoint format instead and computes the product from it.
"""

from __future__ import annotations

from typing import Protocol

import torch
import torch.nn.functional as F
from torch import nn

from quickmoe.layers.weights import declare_weight


class LinearMethod(Protocol):
    """How a quantized `Linear` stores its weight and computes x W^T."""

    def create_weights(self, layer: "Linear", *, dtype: torch.dtype, device: torch.device | str) -> None: ...

    def process_weights_after_loading(self, layer: "Linear") -> None: ...

    def apply(self, layer: "Linear", x: torch.Tensor) -> torch.Tensor: ...


class Linear(nn.Module):
    """y = x W^T + b, W [out, in] as in the checkpoint (bf16 there, `dtype` here; or as `quant_method` says)."""

    def __init__(self, in_features: int, out_features: int, *, bias: bool, dtype: torch.dtype,
                 device: torch.device | str, checkpoint_dtype: torch.dtype = torch.bfloat16,
                 quant_method: LinearMethod | None = None) -> None:
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        self.quant_method = quant_method
        if quant_method is None:
            declare_weight(self, "weight", (out_features, in_features), dtype, device,
                           checkpoint_dtype=checkpoint_dtype)
        else:
            quant_method.create_weights(self, dtype=dtype, device=device)
        if bias:
            declare_weight(self, "bias", (out_features,), dtype, device, checkpoint_dtype=checkpoint_dtype)
        else:
            self.bias = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.quant_method is not None:
            return self.quant_method.apply(self, x)
        return F.linear(x, self.weight, self.bias)
