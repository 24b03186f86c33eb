"""Batch metadata passed explicitly through the model (no module globals)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from quickmoe.runtime.kv_cache import KVCache


@dataclass(frozen=True)
class AttentionMetadata:
    """What attention needs of a step, as tensors only (a compiled layer takes it as graph inputs, so no
    Python list of lengths is baked into a graph): device tensors per token, and per sequence host (CPU)
    int64 tensors that the attention op reads without synchronizing with the device."""

    positions: torch.Tensor  # [T] int64, device
    token_slots: torch.Tensor  # [T] int64, device
    seq_slots: torch.Tensor  # [B] int64, CPU
    query_lens: torch.Tensor  # [B] int64, CPU
    context_lens: torch.Tensor  # [B] int64, CPU


@dataclass
class ForwardBatch:
    """One model step over several sequences, their new tokens packed along one axis.

    Sequence i contributes `query_lens[i]` new tokens at positions
    [context_lens[i] - query_lens[i], context_lens[i]) and owns KV-cache slot `seq_slots[i]`.
    """

    input_ids: torch.Tensor  # [T] int64
    positions: torch.Tensor  # [T] int64, absolute position of each token in its sequence
    token_slots: torch.Tensor  # [T] int64, KV-cache slot of each token's sequence
    seq_slots: list[int]  # [B]
    query_lens: list[int]  # [B], sum == T
    context_lens: list[int]  # [B], cached + new tokens after this step
    logits_indices: torch.Tensor  # [B], row of each sequence's last token in the packed batch
    kv_cache: KVCache

    @property
    def num_tokens(self) -> int:
        return int(self.input_ids.shape[0])

    @property
    def attention(self) -> AttentionMetadata:
        return AttentionMetadata(positions=self.positions, token_slots=self.token_slots,
                                 seq_slots=torch.tensor(self.seq_slots, dtype=torch.long),
                                 query_lens=torch.tensor(self.query_lens, dtype=torch.long),
                                 context_lens=torch.tensor(self.context_lens, dtype=torch.long))

    @classmethod
    def build(cls, token_ids: list[list[int]], start_positions: list[int], seq_slots: list[int],
              kv_cache: KVCache, device: torch.device | str) -> "ForwardBatch":
        """Pack the new tokens of each sequence; `start_positions[i]` tokens of sequence i are already cached."""
        assert len(token_ids) == len(start_positions) == len(seq_slots)
        query_lens = [len(t) for t in token_ids]
        assert all(n > 0 for n in query_lens), "every sequence in a step has at least one new token"
        context_lens = [s + n for s, n in zip(start_positions, query_lens)]
        flat = [tok for toks in token_ids for tok in toks]
        positions = [p for s, n in zip(start_positions, query_lens) for p in range(s, s + n)]
        slots = [slot for slot, n in zip(seq_slots, query_lens) for _ in range(n)]
        ends = torch.tensor(query_lens).cumsum(0) - 1  # [B]
        as_long = dict(dtype=torch.long, device=device)
        return cls(
            input_ids=torch.tensor(flat, **as_long),
            positions=torch.tensor(positions, **as_long),
            token_slots=torch.tensor(slots, **as_long),
            seq_slots=list(seq_slots),
            query_lens=query_lens,
            context_lens=context_lens,
            logits_indices=ends.to(device),
            kv_cache=kv_cache,
        )
