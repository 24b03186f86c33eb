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


def rope_inv_freq(rope: RopeScaling, head_dim: int, device: torch.device | str | None = None) -> torch.Tensor:
    """Inverse frequencies [head_dim/2] in float32, computed on `device` (None: the default device)."""
    base = rope.rope_theta
    exponents = torch.arange(0, head_dim, 2, dtype=torch.float32, device=device) / head_dim  # [D/2]
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
    ramp = ((torch.arange(head_dim // 2, dtype=torch.float32, device=device) - low) / (high - low)).clamp(0, 1)  # [D/2]
    keep_extrapolated = 1 - ramp
    return interpolated * (1 - keep_extrapolated) + extrapolated * keep_extrapolated


class RotaryEmbedding(nn.Module):
    """The table of scaled cos and sin per position, `cos_sin_cache` [max_positions, head_dim] float32 (cos in
    the first half of each row, sin in the second), computed once: a step indexes it by its positions.

    `fill=False` allocates the table and leaves it to `fill()`: `build_model` fills it after construction, or, on a
    GPU (unless `QUICKMOE_TABLES_START=0`), a thread beside the weight load does (`executor/tables_start.py`): there
    the first use of each of its elementwise kernels (pow, clamp, cos, ...) loads that kernel, 0.14 of gpt-oss-20b's
    0.18 s build on the H200. `fill()` computes on the table's device whatever the caller's device context, so the
    bits are the same either way."""

    def __init__(self, rope: RopeScaling, head_dim: int, max_positions: int, *, device: torch.device | str,
                 fill: bool = True) -> None:
        super().__init__()
        self.head_dim = head_dim
        self.scale = rope.cos_sin_scale
        self.rope = rope
        # A model built on the meta device (checks, the ranks' splits) has no values to compute. torch.arange has no
        # meta kernel, and its Python reference imports torch._dynamo (0.7 s on the development machine).
        self.pending = torch.device(device).type != "meta"
        self.register_buffer("cos_sin_cache", torch.empty(max_positions, head_dim, dtype=torch.float32,
                                                          device=device), persistent=False)
        if fill:
            self.fill()

    def fill(self) -> None:
        """Compute the table into `cos_sin_cache`, on its device and the current stream; once (later calls do
        nothing)."""
        if not self.pending:
            return
        device = self.cos_sin_cache.device
        inv_freq = rope_inv_freq(self.rope, self.head_dim, device)
        positions = torch.arange(self.cos_sin_cache.shape[0], device=device, dtype=torch.float32)
        freqs = positions[:, None] * inv_freq[None, :]  # [P, D/2]
        torch.cat([freqs.cos() * self.scale, freqs.sin() * self.scale], dim=-1, out=self.cos_sin_cache)  # [P, D]
        self.pending = False

    def cos_sin(self, positions: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """cos, sin [T, D/2] in `dtype` for positions [T] (rows of the table)."""
        rows = self.cos_sin_cache[positions.long()].to(dtype)  # [T, D]
        return rows[:, :self.head_dim // 2], rows[:, self.head_dim // 2:]


def fill_rotary_tables(model: nn.Module) -> None:
    """`fill()` every rotary table of `model` still to compute."""
    for module in model.modules():
        if isinstance(module, RotaryEmbedding):
            module.fill()
