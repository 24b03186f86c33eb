"""CUDA graphs of the decode step (one new token per sequence), one per batch-size bucket.

A decode step of B sequences runs the graph of the smallest bucket b >= B: its inputs are static device
buffers sized for the largest bucket, filled before each replay, the rows B..b-1 padded so they do no harm:
token 0 at position 0, no cache slot (-1: the KV write skips it), no block and no context (the attention
of an empty context is 0). Their logits are computed and dropped. Steps with a prefill, or more sequences
than the largest bucket, run eagerly.

Every index the decode step reads is on the device (the paged decode kernel, the MoE kernels' alignment),
so one capture per bucket serves every later step; block tables are copied only up to the widest table of
the step (the kernel reads no column past a sequence's context). Buckets are captured largest first into
one memory pool, so the smaller graphs reuse the larger ones' transient memory.

`capture=False` runs the same padded static-buffer path eagerly (CPU tests of the padding logic).
"""

from __future__ import annotations

import logging
import time

import numpy as np
import torch

from quickmoe.executor.step_metadata import HostMetadata
from quickmoe.forward.forward_batch import AttentionMetadata, ForwardBatch, KVGroupMetadata

__all__ = ["DecodeGraphs", "decode_buckets"]

logger = logging.getLogger(__name__)


def decode_buckets(max_num_seqs: int, largest: int = 256) -> tuple[int, ...]:
    """Powers of two up to min(max_num_seqs, largest), and that bound itself: few graphs, so capture stays short,
    and at most 2x padding."""
    top = min(max_num_seqs, largest)
    sizes = {1 << i for i in range(top.bit_length()) if 1 << i <= top} | {top}
    return tuple(sorted(sizes))


class DecodeGraphs:
    """Captured decode steps of `runner.model` over `runner.kv_cache` for `buckets` batch sizes."""

    def __init__(self, runner, buckets: tuple[int, ...], *, capture: bool = True) -> None:
        self.runner = runner
        self.buckets = tuple(sorted(buckets))
        self.max_batch = self.buckets[-1]
        self.capture_enabled = capture
        cache, device, size = runner.kv_cache, runner.device, self.max_batch
        self.table_width = -(-runner.max_model_len // cache.block_size)
        as_long = dict(dtype=torch.long, device=device)
        self.input_ids = torch.zeros(size, **as_long)
        self.positions = torch.zeros(size, **as_long)
        self.cu_query_lens = torch.arange(size + 1, dtype=torch.int32, device=device)  # decode: row b = sequence b
        self.context_lens = torch.zeros(size, dtype=torch.int32, device=device)
        self.slot_mappings = [torch.full((size,), -1, **as_long) for _ in cache.plan.groups]
        self.block_tables = [torch.full((size, self.table_width), -1, dtype=torch.int32, device=device)
                             for _ in cache.plan.groups]
        self.logits_indices = torch.arange(size, **as_long)
        self.graphs: dict[int, torch.cuda.CUDAGraph] = {}
        self.outputs: dict[int, torch.Tensor] = {}
        self.capture_seconds = 0.0

    def batch_view(self, size: int) -> ForwardBatch:
        """The static buffers' first `size` rows as a decode step."""
        return ForwardBatch(
            input_ids=self.input_ids[:size],
            attn=AttentionMetadata(positions=self.positions[:size], cu_query_lens=self.cu_query_lens[:size + 1],
                                   context_lens=self.context_lens[:size], max_query_len=torch.tensor(1)),
            kv_groups=tuple(KVGroupMetadata(slot_mapping=s[:size], block_tables=t[:size])
                            for s, t in zip(self.slot_mappings, self.block_tables)),
            logits_indices=self.logits_indices[:size], kv_cache=self.runner.kv_cache, query_lens=[1] * size)

    @torch.inference_mode()
    def capture(self) -> float:
        """Capture every bucket (largest first, one memory pool); returns the seconds it took."""
        t0 = time.perf_counter()
        if not self.capture_enabled:
            return 0.0
        pool = torch.cuda.graph_pool_handle()
        for size in reversed(self.buckets):
            batch = self.batch_view(size)
            self.runner.model(batch)  # warm-up outside the graph: kernels compiled, workspaces allocated
            torch.cuda.synchronize(self.runner.device)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, pool=pool):
                self.outputs[size] = self.runner.model(batch)  # [size, V] float32, in the pool
            self.graphs[size] = graph
        torch.cuda.synchronize(self.runner.device)
        self.capture_seconds = time.perf_counter() - t0
        logger.info("captured decode CUDA graphs for batch sizes %s in %.2f s", list(self.buckets),
                    self.capture_seconds)
        return self.capture_seconds

    def bucket(self, batch_size: int) -> int | None:
        """The smallest bucket holding `batch_size` sequences, or None (run eagerly)."""
        return next((b for b in self.buckets if b >= batch_size), None)

    @torch.inference_mode()
    def run(self, token_ids: list[int], host: HostMetadata) -> torch.Tensor:
        """Logits [B, V] of a decode step of B = len(token_ids) sequences (B <= the largest bucket)."""
        batch = len(token_ids)
        size = self.bucket(batch)
        assert size is not None and len(host.positions) == batch
        pad = size - batch

        def padded(values: np.ndarray, fill: int) -> torch.Tensor:
            return torch.from_numpy(np.concatenate([values, np.full(pad, fill, dtype=values.dtype)]) if pad else values)

        self.input_ids[:size].copy_(padded(np.asarray(token_ids, dtype=np.int64), 0), non_blocking=True)
        self.positions[:size].copy_(padded(host.positions, 0), non_blocking=True)
        self.context_lens[:size].copy_(padded(host.context_lens, 0), non_blocking=True)
        for g, (slots, table) in enumerate(zip(host.slot_mappings, host.block_tables)):
            self.slot_mappings[g][:size].copy_(padded(slots, -1), non_blocking=True)
            width = table.shape[1]
            assert width <= self.table_width, "a block table is wider than max_model_len allows"
            rows = np.full((size, width), -1, dtype=np.int32)
            rows[:batch] = table
            self.block_tables[g][:size, :width].copy_(torch.from_numpy(rows), non_blocking=True)
        if size in self.graphs:
            self.graphs[size].replay()
            return self.outputs[size][:batch]
        return self.runner.model(self.batch_view(size))[:batch]  # capture=False: the same path, eagerly
