"""Step metadata passed explicitly through the model (no module globals).

A step packs the new tokens of several sequences along one axis (sequence b: rows cu_query_lens[b] ..
cu_query_lens[b+1], the last query_lens[b] of its context_lens[b] positions). Attention reads and writes
the paged cache through per-group metadata: layers of one group (full attention, or one sliding window)
share block tables, so a token's cache slot is block_tables[b][p // block_size] * block_size +
p % block_size in its layer's group.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import torch

__all__ = ["AttentionMetadata", "ForwardBatch", "KVCacheTensors", "KVGroupMetadata"]


class KVCacheTensors(Protocol):
    """What the model reads of the paged KV cache (executor/kv_cache.py allocates it): each layer's K and V
    tensors [num_blocks, block_size, KV, D], and the index of its group in the step's `kv_groups`."""

    layer_group: list[int]

    def layer(self, idx: int) -> tuple[torch.Tensor, torch.Tensor]: ...


@dataclass(frozen=True)
class AttentionMetadata:
    """What every attention layer needs of a step, as tensors only (a compiled layer takes it as graph
    inputs, so no Python list of lengths is baked into a graph), all on the device: no kernel reads a length on
    the host, so a CUDA graph of a step serves every step of its shape's bucket."""

    positions: torch.Tensor  # [T] int64: absolute position of each token in its sequence
    cu_query_lens: torch.Tensor  # [B + 1] int32: where each sequence's rows start
    context_lens: torch.Tensor  # [B] int64: positions of each sequence after this step


@dataclass(frozen=True)
class KVGroupMetadata:
    """A layer group's view of the step: where each token's K/V go, each sequence's blocks, and the group's
    sliding window. The window travels here rather than as a layer attribute so that torch.compile takes it as an
    input (a symbolic int) instead of a constant: one compiled graph then serves layers of every window."""

    slot_mapping: torch.Tensor  # [T] int64; -1: write nothing (padding)
    block_tables: torch.Tensor  # [B, max_blocks] int32; -1: no block (released or past the end)
    window: int  # the group's sliding window; 0: full attention


@dataclass
class ForwardBatch:
    """One model step over several sequences, their new tokens packed along one axis."""

    input_ids: torch.Tensor  # [T] int64
    attn: AttentionMetadata
    kv_groups: tuple[KVGroupMetadata, ...]  # one per group of `kv_cache.plan.groups`
    logits_indices: torch.Tensor  # [B]: row of each sequence's last token
    kv_cache: KVCacheTensors
    query_lens: list[int]  # [B], host copy
    # an integer [1] on the device, or None: the rows at and past it are a CUDA graph's padding (prompt-step
    # graphs, executor/prefill_graphs.py: int32; decode graphs, executor/cuda_graphs.py: int64), which the MoE
    # blocks route to no expert; None: every row is a token
    num_valid_tokens: torch.Tensor | None = None

    @property
    def num_tokens(self) -> int:
        return int(self.input_ids.shape[0])

    @property
    def positions(self) -> torch.Tensor:
        return self.attn.positions
