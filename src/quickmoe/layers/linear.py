"""Dense linear layers whose weights and biases are declared with their checkpoint format.

Unquantized by default; a `LinearMethod` (layers/fp8_linear.py: FP8 block-scaled) declares the weight in its
quantized checkpoint format instead and computes the product from it. `FusedLinear` runs several projections of
one input as one GEMM, unquantized or with a `FusableLinearMethod` whose parts are row slices of its tensors.
"""

from __future__ import annotations

from typing import Protocol

import torch
import torch.nn.functional as F
from torch import nn

from quickmoe.layers.weights import declare_weight


class LinearMethod(Protocol):
    """How a quantized `Linear` stores its weight and computes x W^T. `storage` (create_weights): the tensors the
    parameters are, by name (views of a fused layer's buffers), else allocated."""

    def create_weights(self, layer: "Linear", *, dtype: torch.dtype, device: torch.device | str,
                       storage: dict[str, torch.Tensor] | None = None) -> None: ...

    def process_weights_after_loading(self, layer: "Linear") -> None: ...

    def apply(self, layer: "Linear", x: torch.Tensor) -> torch.Tensor: ...


class FusableLinearMethod(LinearMethod, Protocol):
    """A LinearMethod whose layers `FusedLinear` can stack: the parameters of output rows [start, start + size)
    are row slices of the stacked layer's tensors when `fusable` says so."""

    def fusable(self, sizes: list[int]) -> bool: ...

    def storage(self, out_features: int, in_features: int, device: torch.device | str) -> dict[str, torch.Tensor]:
        ...

    def part_storage(self, storage: dict[str, torch.Tensor], start: int, size: int) -> dict[str, torch.Tensor]: ...

    def product(self, x: torch.Tensor, tensors: dict[str, torch.Tensor], bias: torch.Tensor | None,
                x_fp8: tuple[torch.Tensor, torch.Tensor] | None = None) -> torch.Tensor:
        ...


class Linear(nn.Module):
    """y = x W^T + b, W [out, in] as in the checkpoint (bf16 there, `dtype` here; or as `quant_method` says).
    `weight_storage` / `bias_storage` / `quant_storage` (a quantized weight's tensors by name): the tensors the
    parameters are (views of a fused layer's buffers), else allocated."""

    def __init__(self, in_features: int, out_features: int, *, bias: bool, dtype: torch.dtype,
                 device: torch.device | str, checkpoint_dtype: torch.dtype = torch.bfloat16,
                 quant_method: LinearMethod | None = None, weight_storage: torch.Tensor | None = None,
                 bias_storage: torch.Tensor | None = None,
                 quant_storage: dict[str, torch.Tensor] | None = None) -> None:
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        self.quant_method = quant_method
        if quant_method is None:
            declare_weight(self, "weight", (out_features, in_features), dtype, device,
                           checkpoint_dtype=checkpoint_dtype, storage=weight_storage)
        else:
            assert weight_storage is None, "a quantized weight's views come as quant_storage"
            quant_method.create_weights(self, dtype=dtype, device=device, storage=quant_storage)
        if bias:
            declare_weight(self, "bias", (out_features,), dtype, device, checkpoint_dtype=checkpoint_dtype,
                           storage=bias_storage)
        else:
            self.bias = None

    def takes_fp8_input(self, x: torch.Tensor) -> bool:
        """Whether forward can take x already quantized to FP8 per token and 128 columns (`x_fp8`), as
        `FusedLinear.takes_fp8_input` (o_proj: the attention quantizes its output, `custom_ops.attention_fp8`)."""
        takes = getattr(self.quant_method, "takes_fp8_input", None)
        return takes is not None and takes(x)

    def forward(self, x: torch.Tensor, x_fp8: tuple[torch.Tensor, torch.Tensor] | None = None) -> torch.Tensor:
        """x [T, in] -> [T, out]; x_fp8: x quantized (q, scales) with the quantizer's bits, where `takes_fp8_input`."""
        if x_fp8 is not None:
            assert self.takes_fp8_input(x), "x_fp8 given to a projection that does not take it"
            return self.quant_method.apply(self, x, x_fp8)
        if self.quant_method is not None:
            return self.quant_method.apply(self, x)
        return F.linear(x, self.weight, self.bias)


class FusedLinear(nn.Module):
    """Several projections of the same input as one GEMM. It owns one weight buffer [sum(out), in] (and one bias
    buffer); `part(i)` makes the `Linear` of the i-th projection, whose parameters are row slices of them, for
    the owner to register under the checkpoint's name (q_proj, k_proj, v_proj): the loader fills the fused
    buffers in place, with no copy afterwards. `forward(x)` -> [T, sum(out)], the parts side by side.
    `quant_method` (a FusableLinearMethod whose `fusable(sizes)` holds): the buffers are its tensors (FP8: the
    weight and its block scales, `fused_weight` and `fused_weight_scale_inv`), one quantized GEMM for all."""

    def __init__(self, in_features: int, sizes: list[int], *, bias: bool, dtype: torch.dtype,
                 device: torch.device | str, quant_method: FusableLinearMethod | None = None) -> None:
        super().__init__()
        self.in_features, self.sizes = in_features, list(sizes)
        self.starts = [sum(self.sizes[:i]) for i in range(len(self.sizes))]
        self.dtype, self.device = dtype, device
        self.quant_method = quant_method
        if quant_method is None:
            tensors = {"weight": torch.empty(sum(sizes), in_features, dtype=dtype, device=device)}
        else:
            assert quant_method.fusable(self.sizes), (type(quant_method).__name__, self.sizes)
            tensors = quant_method.storage(sum(sizes), in_features, device)
        self.tensor_names = tuple(tensors)
        for name, tensor in tensors.items():
            self.register_buffer(f"fused_{name}", tensor, persistent=False)
        self.register_buffer("fused_bias", torch.empty(sum(sizes), dtype=dtype, device=device) if bias else None,
                             persistent=False)

    def _tensors(self) -> dict[str, torch.Tensor]:
        return {name: getattr(self, f"fused_{name}") for name in self.tensor_names}

    def part(self, index: int) -> Linear:
        start, size = self.starts[index], self.sizes[index]
        rows = slice(start, start + size)
        bias = self.fused_bias[rows] if self.fused_bias is not None else None
        if self.quant_method is None:
            return Linear(self.in_features, size, bias=bias is not None, dtype=self.dtype, device=self.device,
                          weight_storage=self.fused_weight[rows], bias_storage=bias)
        return Linear(self.in_features, size, bias=bias is not None, dtype=self.dtype, device=self.device,
                      quant_method=self.quant_method, bias_storage=bias,
                      quant_storage=self.quant_method.part_storage(self._tensors(), start, size))

    def takes_fp8_input(self, x: torch.Tensor) -> bool:
        """Whether the product would quantize x to FP8 per token and 128 columns (an FP8 method on its GEMM, over
        whole groups), so that forward can take x quantized already (`x_fp8`, made by the norm before it:
        `RMSNorm.forward_fp8`)."""
        takes = getattr(self.quant_method, "takes_fp8_input", None)
        return takes is not None and takes(x)

    def forward(self, x: torch.Tensor, x_fp8: tuple[torch.Tensor, torch.Tensor] | None = None) -> torch.Tensor:
        """x [T, in] -> [T, sum(sizes)]; x_fp8: x quantized (q, scales) with the quantizer's bits, where
        `takes_fp8_input`."""
        if x_fp8 is not None:
            assert self.takes_fp8_input(x), "x_fp8 given to a projection that does not take it"
            return self.quant_method.product(x, self._tensors(), self.fused_bias, x_fp8)
        if self.quant_method is not None:
            return self.quant_method.product(x, self._tensors(), self.fused_bias)
        return F.linear(x, self.fused_weight, self.fused_bias)

    def split(self, fused: torch.Tensor) -> list[torch.Tensor]:
        """[T, sum(out)] -> the parts' [T, out_i] views."""
        return list(fused.split(self.sizes, dim=-1))
