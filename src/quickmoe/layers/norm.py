"""RMSNorm as gpt-oss defines it: normalise in float32, scale by a float32 weight, cast back; optionally fused
with the residual add that precedes it."""

from __future__ import annotations

import torch
from torch import nn

from quickmoe.forward import custom_ops
from quickmoe.layers.weights import declare_weight


class RMSNorm(nn.Module):
    """y = w * x / sqrt(mean(x^2) + eps), computed in float32 (the weight is kept in float32 too).

    `forward(x)` normalises x; `forward(x, residual)` first adds the residual (in x's dtype) and returns
    (normalised sum, sum): the decoder layers carry the residual stream this way, one launch per norm.
    `kernels` ("torch" or "triton", set once by the model runner) picks the Triton kernel or the reference.
    `forward_fp8` also gives the rows quantized to FP8 for FP8 experts."""

    def __init__(self, hidden_size: int, eps: float, *, device: torch.device | str) -> None:
        super().__init__()
        self.eps = eps
        self.kernels = "torch"
        declare_weight(self, "weight", (hidden_size,), torch.float32, device, checkpoint_dtype=torch.bfloat16)

    def forward(self, x: torch.Tensor,
                residual: torch.Tensor | None = None) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        use_kernels = self.kernels == "triton"
        if residual is None:
            return custom_ops.rms_norm(x, self.weight, self.eps, use_kernels)
        return custom_ops.fused_add_rms_norm(x, residual, self.weight, self.eps, use_kernels)

    def forward_fp8(self, x: torch.Tensor, residual: torch.Tensor
                    ) -> tuple[torch.Tensor, torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        """`forward(x, residual)`, and the normalised rows quantized to FP8 per token and 128 columns (q, scales)
        for a layer that takes them (`FusedMoE.takes_fp8_hidden`): the quantizer's bits, in the norm's launch."""
        out, summed, q, scales = custom_ops.fused_add_rms_norm_fp8(x, residual, self.weight, self.eps,
                                                                   self.kernels == "triton")
        return out, summed, (q, scales)
