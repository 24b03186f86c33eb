"""Top-k expert routing."""

from __future__ import annotations

import torch


def topk_softmax_ref(router_logits: torch.Tensor, top_k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """gpt-oss routing: top-k on the logits, then softmax over the k selected.

    router_logits [T, E] -> (topk_weights [T, k] in the logits' dtype, topk_ids [T, k] int64).
    """
    values, topk_ids = torch.topk(router_logits, top_k, dim=-1)  # [T, k]
    return torch.softmax(values, dim=-1), topk_ids
