"""Rotary position embedding, NeoX half-split, with YaRN frequency scaling.

YaRN (arXiv 2309.00071) blends two frequency sets per rotary pair i (dim d, base b):
  extrapolated  f_i = b^(-2i/d)            (kept for high-frequency pairs, many rotations in context)
  interpolated  f_i / factor               (used for low-frequency pairs, few rotations)
with a linear ramp between the pairs that complete `beta_fast` and `beta_slow` rotations over the
original context. The correction dimension for r rotations is d*ln(L/(2*pi*r)) / (2 ln b); with
`truncate` the ramp ends are floored/ceiled (gpt-oss sets truncate=false). cos and sin are finally
scaled by 0.1*ln(factor)+1 (`RopeScaling.cos_sin_scale`), which sharpens attention logits.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from quickmoe.config import RopeScaling


def rope_inv_freq(rope: RopeScaling, head_dim: int) -> torch.Tensor:
    """Inverse frequencies [head_dim/2] in float32."""
    base = rope.rope_theta
    exponents = torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim  # [D/2]
    pos_freqs = base**exponents
    extrapolated = 1.0 / pos_freqs
    if rope.rope_type == "default":
        return extrapolated
    interpolated = 1.0 / (rope.factor * pos_freqs)

    def correction_dim(rotations: float) -> float:
        return head_dim * math.log(rope.original_max_position_embeddings / (rotations * 2 * math.pi)) / (
            2 * math.log(base))

    low, high = correction_dim(rope.beta_fast), correction_dim(rope.beta_slow)
    if rope.truncate:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, head_dim - 1)
    if low == high:
        high += 0.001  # avoid a zero-width ramp
    ramp = ((torch.arange(head_dim // 2, dtype=torch.float32) - low) / (high - low)).clamp(0, 1)  # [D/2]
    keep_extrapolated = 1 - ramp
    return interpolated * (1 - keep_extrapolated) + extrapolated * keep_extrapolated


class RotaryEmbedding(nn.Module):
    """Applies RoPE to q and k given absolute token positions."""

    def __init__(self, rope: RopeScaling, head_dim: int, *, device: torch.device | str) -> None:
        super().__init__()
        self.head_dim = head_dim
        self.scale = rope.cos_sin_scale
        self.register_buffer("inv_freq", rope_inv_freq(rope, head_dim).to(device), persistent=False)

    def cos_sin(self, positions: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """cos, sin [T, D/2] in `dtype` for positions [T]."""
        freqs = positions.float()[:, None] * self.inv_freq[None, :]  # [T, D/2]
        return (freqs.cos() * self.scale).to(dtype), (freqs.sin() * self.scale).to(dtype)

    @staticmethod
    def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        """x [T, heads, D]; cos/sin [T, D/2]. The first half pairs with the second half (NeoX)."""
        x1, x2 = x.chunk(2, dim=-1)
        cos, sin = cos[:, None, :], sin[:, None, :]
        return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)
