"""Step metadata passed explicitly through the model (no module globals).

A step packs the new tokens of several sequences along one axis (sequence b: rows cu_query_lens[b] ..
cu_query_lens[b+1], the last query_lens[b] of its context_lens[b] positions). Attention reads and writes
the paged cache through per-group metadata: layers of one group (full attention, or one sliding window)
share block tables, so a token's cache slot is block_tables[b][p // block_size] * block_size +
p % block_size in its layer's group.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from quickmoe.runtime.kv_cache import PagedKVCache

__all__ = ["AttentionMetadata", "ForwardBatch", "KVGroupMetadata"]


@dataclass(frozen=True)
class AttentionMetadata:
    """What every attention layer needs of a step, as tensors only (a compiled layer takes it as graph
    inputs, so no Python list of lengths is baked into a graph). Device tensors, except `max_query_len`, a
    0-dim CPU tensor the attention op reads on the host (never synchronizing with the device)."""

    positions: torch.Tensor  # [T] int64: absolute position of each token in its sequence
    cu_query_lens: torch.Tensor  # [B + 1] int32: where each sequence's rows start
    context_lens: torch.Tensor  # [B] int32: positions of each sequence after this step
    max_query_len: torch.Tensor  # [] int64, CPU


@dataclass(frozen=True)
class KVGroupMetadata:
    """A layer group's view of the step: where each token's K/V go, and each sequence's blocks."""

    slot_mapping: torch.Tensor  # [T] int64; -1: write nothing (padding)
    block_tables: torch.Tensor  # [B, max_blocks] int32; -1: no block (released or past the end)


@dataclass
class ForwardBatch:
    """One model step over several sequences, their new tokens packed along one axis."""

    input_ids: torch.Tensor  # [T] int64
    attn: AttentionMetadata
    kv_groups: tuple[KVGroupMetadata, ...]  # one per group of `kv_cache.plan.groups`
    logits_indices: torch.Tensor  # [B]: row of each sequence's last token
    kv_cache: PagedKVCache
    query_lens: list[int]  # [B], host copy

    @property
    def num_tokens(self) -> int:
        return int(self.input_ids.shape[0])

    @property
    def positions(self) -> torch.Tensor:
        return self.attn.positions

    @classmethod
    def build(cls, token_ids: Sequence[Sequence[int]], start_positions: Sequence[int],
              block_tables: Sequence[Sequence[Sequence[int]]], kv_cache: PagedKVCache,
              device: torch.device | str) -> "ForwardBatch":
        """Pack the new tokens of each sequence. `start_positions[b]` tokens of sequence b are already cached;
        `block_tables[g][b]` is sequence b's block table in group g (-1 where a block was released),
        covering every position of this step."""
        query_lens = [len(t) for t in token_ids]
        assert query_lens and all(n > 0 for n in query_lens), "every sequence in a step has a new token"
        assert len(block_tables) == len(kv_cache.plan.groups)
        host = build_host_metadata(query_lens, start_positions, block_tables, kv_cache.block_size)
        flat = [tok for toks in token_ids for tok in toks]
        to = dict(device=device, non_blocking=True)
        return cls(
            input_ids=torch.tensor(flat, dtype=torch.long).to(**to),
            attn=AttentionMetadata(positions=torch.from_numpy(host.positions).to(**to),
                                   cu_query_lens=torch.from_numpy(host.cu_query_lens).to(**to),
                                   context_lens=torch.from_numpy(host.context_lens).to(**to),
                                   max_query_len=torch.tensor(max(query_lens), dtype=torch.long)),
            kv_groups=tuple(KVGroupMetadata(slot_mapping=torch.from_numpy(slots).to(**to),
                                            block_tables=torch.from_numpy(tables).to(**to))
                            for slots, tables in zip(host.slot_mappings, host.block_tables)),
            logits_indices=torch.from_numpy(host.cu_query_lens[1:].astype(np.int64) - 1).to(**to),
            kv_cache=kv_cache,
            query_lens=query_lens,
        )


@dataclass(frozen=True)
class HostMetadata:
    """The step's metadata as numpy arrays (see `ForwardBatch`); the CUDA-graph runner copies these into its
    static buffers, the eager path uploads them."""

    positions: np.ndarray  # [T] int64
    cu_query_lens: np.ndarray  # [B + 1] int32
    context_lens: np.ndarray  # [B] int32
    slot_mappings: list[np.ndarray]  # per group [T] int64
    block_tables: list[np.ndarray]  # per group [B, max_blocks] int32


def build_host_metadata(query_lens: Sequence[int], start_positions: Sequence[int],
                        block_tables: Sequence[Sequence[Sequence[int]]], block_size: int,
                        max_blocks: int | None = None) -> HostMetadata:
    """Vectorised over tokens: positions, and each token's slot in every group, from the block tables
    (padded with -1 to the longest table, or to `max_blocks`)."""
    q = np.asarray(query_lens, dtype=np.int64)  # [B]
    starts = np.asarray(start_positions, dtype=np.int64)
    cu = np.zeros(len(q) + 1, dtype=np.int64)
    np.cumsum(q, out=cu[1:])
    seq_of_token = np.repeat(np.arange(len(q)), q)  # [T]
    positions = np.arange(cu[-1], dtype=np.int64) - cu[seq_of_token] + starts[seq_of_token]  # [T]
    slot_mappings, tables_out = [], []
    for tables in block_tables:
        width = max_blocks if max_blocks is not None else max(len(t) for t in tables)
        table = np.full((len(q), max(width, 1)), -1, dtype=np.int64)
        for b, t in enumerate(tables):
            if t:
                table[b, :len(t)] = t
        block = table[seq_of_token, positions // block_size]  # [T]
        assert (block >= 0).all(), "every new token's block is allocated"
        slot_mappings.append(block * block_size + positions % block_size)
        tables_out.append(table.astype(np.int32))
    return HostMetadata(positions=positions, cu_query_lens=cu.astype(np.int32),
                        context_lens=(starts + q).astype(np.int32), slot_mappings=slot_mappings,
                        block_tables=tables_out)
