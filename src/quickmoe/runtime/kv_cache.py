"""A contiguous KV cache: one [slots, max_len, kv_heads, head_dim] buffer per layer for K and for V.

Paged blocks replace this in the engine issue; the model only sees `KVCache.layer(i)`.
"""

from __future__ import annotations

import torch

from quickmoe.config import ModelConfig
from quickmoe.errors import RequestError


class KVCache:
    """Per-layer K and V buffers; sequence `slot` owns row `slot` of every layer."""

    def __init__(self, config: ModelConfig, num_slots: int, max_len: int, *, dtype: torch.dtype,
                 device: torch.device | str) -> None:
        shape = (num_slots, max_len, config.num_key_value_heads, config.head_dim)
        self.num_slots, self.max_len = num_slots, max_len
        self.keys = [torch.empty(shape, dtype=dtype, device=device) for _ in range(config.num_hidden_layers)]
        self.values = [torch.empty(shape, dtype=dtype, device=device) for _ in range(config.num_hidden_layers)]

    def layer(self, idx: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.keys[idx], self.values[idx]

    def check_fits(self, context_len: int) -> None:
        if context_len > self.max_len:
            raise RequestError(f"sequence of {context_len} tokens exceeds the KV cache length {self.max_len} "
                               "(raise max_model_len)")

    @property
    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in self.keys + self.values)
