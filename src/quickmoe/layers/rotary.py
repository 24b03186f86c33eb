"""Rotary position embedding, NeoX half-split, with YaRN frequency scaling.

YaRN (arXiv 2309.00071) blends two frequency sets per rotary pair i (dim d, base b):
  extrapolated  f_i = b^(-2i/d)            (kept for high-frequency pairs, many rotations in context)
  interpolated  f_i / factor               (used for low-frequency pairs, few rotations)
with a linear ramp between the pairs that complete `beta_fast` and `beta_slow` rotations over the
original context. The correction dimension for r rotations is d*ln(L/(2*pi*r)) / (2 ln b); with
`truncate` the ramp ends are floored/ceiled (gpt-oss sets truncate=false). cos and sin are finally
scaled by 0.1*ln(factor)+1 (`RopeScaling.cos_sin_scale`), which sharpens attention logits.

The rotation itself happens in the attention layer's `attention` op, fused with the KV-cache write
(kernels/rotary_kv_write.py) and, in decode steps, with the attention (kernels/decode_attention.py); this module
owns the table they read.
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
    """The table of scaled cos and sin per position, `cos_sin_cache` [max_positions, head_dim] float32 (cos in
    the first half of each row, sin in the second), computed once: a step indexes it by its positions."""

    def __init__(self, rope: RopeScaling, head_dim: int, max_positions: int, *, device: torch.device | str) -> None:
        super().__init__()
        self.head_dim = head_dim
        self.scale = rope.cos_sin_scale
        if torch.device(device).type == "meta":
            # A model built for its shapes only (checks, the ranks' splits): no values. torch.arange has no meta
            # kernel, and its Python reference imports torch._dynamo (0.7 s on the development machine).
            cache = torch.empty(max_positions, head_dim, dtype=torch.float32, device=device)
        else:
            inv_freq = rope_inv_freq(rope, head_dim).to(device)
            positions = torch.arange(max_positions, device=device, dtype=torch.float32)
            freqs = positions[:, None] * inv_freq[None, :]  # [P, D/2]
            cache = torch.cat([freqs.cos() * self.scale, freqs.sin() * self.scale], dim=-1)  # [P, D]
        self.register_buffer("cos_sin_cache", cache, persistent=False)

    def cos_sin(self, positions: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """cos, sin [T, D/2] in `dtype` for positions [T] (rows of the table)."""
        rows = self.cos_sin_cache[positions.long()].to(dtype)  # [T, D]
        return rows[:, :self.head_dim // 2], rows[:, self.head_dim // 2:]
