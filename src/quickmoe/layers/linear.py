"""Dense linear layers whose weights and biases are declared with their checkpoint format.

Unquantized by default; a `LinearMethod` (layers/fp8_linear.py: FP8 block-scaled) declares the weight in its
quantized checkpoint format instead and computes the product from it. `FusedLinear` runs several unquantized
projections of one input as one GEMM.
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
    """y = x W^T + b, W [out, in] as in the checkpoint (bf16 there, `dtype` here; or as `quant_method` says).
    `weight_storage` / `bias_storage`: the tensors the parameters are (views of a fused layer's buffers), else
    allocated."""

    def __init__(self, in_features: int, out_features: int, *, bias: bool, dtype: torch.dtype,
                 device: torch.device | str, checkpoint_dtype: torch.dtype = torch.bfloat16,
                 quant_method: LinearMethod | None = None, weight_storage: torch.Tensor | None = None,
                 bias_storage: torch.Tensor | None = None) -> None:
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        self.quant_method = quant_method
        if quant_method is None:
            declare_weight(self, "weight", (out_features, in_features), dtype, device,
                           checkpoint_dtype=checkpoint_dtype, storage=weight_storage)
        else:
            assert weight_storage is None, "a quantized weight is not a view of a fused buffer"
            quant_method.create_weights(self, dtype=dtype, device=device)
        if bias:
            declare_weight(self, "bias", (out_features,), dtype, device, checkpoint_dtype=checkpoint_dtype,
                           storage=bias_storage)
        else:
            self.bias = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.quant_method is not None:
            return self.quant_method.apply(self, x)
        return F.linear(x, self.weight, self.bias)


class FusedLinear(nn.Module):
    """Several projections of the same input as one GEMM. It owns one weight buffer [sum(out), in] (and one bias
    buffer); `part(i)` makes the `Linear` of the i-th projection, whose parameters are row slices of them, for
    the owner to register under the checkpoint's name (q_proj, k_proj, v_proj): the loader fills the fused
    buffers in place, with no copy afterwards. `forward(x)` -> [T, sum(out)], the parts side by side."""

    def __init__(self, in_features: int, sizes: list[int], *, bias: bool, dtype: torch.dtype,
                 device: torch.device | str) -> None:
        super().__init__()
        self.in_features, self.sizes = in_features, list(sizes)
        self.starts = [sum(self.sizes[:i]) for i in range(len(self.sizes))]
        self.dtype, self.device = dtype, device
        self.register_buffer("fused_weight", torch.empty(sum(sizes), in_features, dtype=dtype, device=device),
                             persistent=False)
        self.register_buffer("fused_bias", torch.empty(sum(sizes), dtype=dtype, device=device) if bias else None,
                             persistent=False)

    def part(self, index: int) -> Linear:
        rows = slice(self.starts[index], self.starts[index] + self.sizes[index])
        bias = self.fused_bias[rows] if self.fused_bias is not None else None
        return Linear(self.in_features, self.sizes[index], bias=bias is not None, dtype=self.dtype,
                      device=self.device, weight_storage=self.fused_weight[rows], bias_storage=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, self.fused_weight, self.fused_bias)

    def split(self, fused: torch.Tensor) -> list[torch.Tensor]:
        """[T, sum(out)] -> the parts' [T, out_i] views."""
        return list(fused.split(self.sizes, dim=-1))
