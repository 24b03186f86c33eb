"""A step's metadata built on the host from the scheduler's token lists and block tables: positions, each
token's cache slot per group (numpy, vectorised over tokens), then uploaded as a `ForwardBatch` (eager path) or
copied into the CUDA graphs' static buffers (executor/cuda_graphs.py).

A step's block tables come per cache group as one [B, width] int32 array, row b sequence b's table padded with
-1 (the engine's block manager gathers them from rows it keeps, engine/block_table_rows.py; `pad_block_tables`
makes them from per-sequence lists)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from quickmoe.executor.kv_cache import PagedKVCache
from quickmoe.executor.pinned_staging import PinnedStaging
from quickmoe.forward.forward_batch import AttentionMetadata, ForwardBatch, KVGroupMetadata

__all__ = ["HostMetadata", "build_forward_batch", "build_host_metadata", "host_array", "pad_block_tables", "to_device"]


def to_device(array: np.ndarray, device: torch.device | str, staging: PinnedStaging | None = None) -> torch.Tensor:
    """A host array on `device`. On CUDA through page-locked memory and without waiting: the copy is queued on
    the current stream (a copy from pageable memory could wait for the work queued before it). That memory is
    `staging`'s where given (reused step after step), else a block of torch's caching host allocator, which keeps
    it until the copy is done."""
    if torch.device(device).type != "cuda":
        return torch.from_numpy(np.ascontiguousarray(array)).to(device)
    if staging is not None:
        return staging.to_device(array)
    return torch.from_numpy(np.ascontiguousarray(array)).pin_memory().to(device, non_blocking=True)


def host_array(staging: PinnedStaging | None, shape: tuple[int, ...], dtype) -> np.ndarray:
    """An uninitialised host array of `shape` for a step's copy to the device: in the step's page-locked `staging`
    memory where it fits (the CUDA graphs' static inputs are filled from these), else ordinary memory."""
    array = staging.host_array(shape, dtype) if staging is not None else None
    return array if array is not None else np.empty(shape, dtype=dtype)


def pad_block_tables(tables: Sequence[Sequence[Sequence[int]]], num_groups: int) -> list[np.ndarray]:
    """Per-sequence tables (`tables[b][g]`: sequence b's block ids in group g) -> per group a [B, width] int32
    array padded with -1 to the longest table of the group (width at least 1)."""
    out = []
    for g in range(num_groups):
        width = max([len(t[g]) for t in tables] + [1])
        table = np.full((len(tables), width), -1, dtype=np.int32)
        for b, t in enumerate(tables):
            table[b, :len(t[g])] = t[g]
        out.append(table)
    return out


def build_forward_batch(token_ids: Sequence[Sequence[int]], start_positions: Sequence[int],
                        block_tables: Sequence[np.ndarray], kv_cache: PagedKVCache,
                        device: torch.device | str, staging: PinnedStaging | None = None) -> ForwardBatch:
    """Pack the new tokens of each sequence. `start_positions[b]` tokens of sequence b are already cached;
    `block_tables[g]` [B, width] holds in row b sequence b's block table in group g (-1 where a block was
    released, and past its end), covering every position of this step. `staging`: page-locked memory for the
    uploads (see `to_device`)."""
    query_lens = [len(t) for t in token_ids]
    assert query_lens and all(n > 0 for n in query_lens), "every sequence in a step has a new token"
    assert len(block_tables) == len(kv_cache.plan.groups)
    host = build_host_metadata(query_lens, start_positions, block_tables, kv_cache.block_size)
    flat = np.fromiter((tok for toks in token_ids for tok in toks), dtype=np.int64, count=sum(query_lens))
    return ForwardBatch(
        input_ids=to_device(flat, device, staging),
        attn=AttentionMetadata(positions=to_device(host.positions, device, staging),
                               cu_query_lens=to_device(host.cu_query_lens, device, staging),
                               context_lens=to_device(host.context_lens, device, staging)),
        kv_groups=tuple(KVGroupMetadata(slot_mapping=to_device(slots, device, staging),
                                        block_tables=to_device(tables, device, staging), window=group.window or 0)
                        for slots, tables, group in zip(host.slot_mappings, host.block_tables, kv_cache.plan.groups)),
        logits_indices=to_device(host.cu_query_lens[1:].astype(np.int64) - 1, device, staging),
        kv_cache=kv_cache,
        query_lens=query_lens,
    )


@dataclass(frozen=True)
class HostMetadata:
    """The step's metadata as numpy arrays (see `ForwardBatch`); the CUDA-graph runner copies these into its
    static buffers, the eager path uploads them."""

    positions: np.ndarray  # [T] int64
    cu_query_lens: np.ndarray  # [B + 1] int32
    context_lens: np.ndarray  # [B] int64
    slot_mappings: list[np.ndarray]  # per group [T] int64
    block_tables: list[np.ndarray]  # per group [B, width] int32


def build_host_metadata(query_lens: Sequence[int], start_positions: Sequence[int],
                        block_tables: Sequence[np.ndarray], block_size: int) -> HostMetadata:
    """Vectorised over tokens: positions, and each token's slot in every group, from the step's block tables
    (per group [B, width], -1 padded; see the module docstring)."""
    q = np.asarray(query_lens, dtype=np.int64)  # [B]
    starts = np.asarray(start_positions, dtype=np.int64)
    cu = np.zeros(len(q) + 1, dtype=np.int64)
    np.cumsum(q, out=cu[1:])
    seq_of_token = np.repeat(np.arange(len(q)), q)  # [T]
    positions = np.arange(cu[-1], dtype=np.int64) - cu[seq_of_token] + starts[seq_of_token]  # [T]
    slot_mappings, tables_out = [], []
    block_index = positions // block_size  # [T]
    for table in block_tables:
        assert table.shape[0] == len(q) and (len(block_index) == 0 or block_index.max() < table.shape[1]), \
            "a table per sequence, covering every new token"
        block = table[seq_of_token, block_index].astype(np.int64)  # [T]
        assert (block >= 0).all(), "every new token's block is allocated"
        slot_mappings.append(block * block_size + positions % block_size)
        tables_out.append(table.astype(np.int32, copy=False))
    return HostMetadata(positions=positions, cu_query_lens=cu.astype(np.int32),
                        context_lens=starts + q, slot_mappings=slot_mappings,
                        block_tables=tables_out)
