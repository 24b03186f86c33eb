"""Token embedding and the LM head (separate weights in gpt-oss; tied weights share one tensor)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from quickmoe.layers.weights import declare_weight


class VocabEmbedding(nn.Module):
    """Looks up rows of `weight` [vocab, hidden]."""

    def __init__(self, vocab_size: int, hidden_size: int, *, dtype: torch.dtype, device: torch.device | str) -> None:
        super().__init__()
        declare_weight(self, "weight", (vocab_size, hidden_size), dtype, device, checkpoint_dtype=torch.bfloat16)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return F.embedding(input_ids, self.weight)


class LMHead(nn.Module):
    """logits = h W^T with W [vocab, hidden]; returned in float32 for sampling."""

    def __init__(self, vocab_size: int, hidden_size: int, *, dtype: torch.dtype, device: torch.device | str,
                 tied_to: VocabEmbedding | None = None) -> None:
        super().__init__()
        self.tied_to = tied_to
        if tied_to is None:
            declare_weight(self, "weight", (vocab_size, hidden_size), dtype, device, checkpoint_dtype=torch.bfloat16)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        weight = self.tied_to.weight if self.tied_to is not None else self.weight
        return F.linear(hidden, weight).float()
