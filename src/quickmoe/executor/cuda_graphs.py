"""CUDA graphs of the decode step (one new token per sequence), one per batch-size bucket.

A decode step of B sequences runs the graph of the smallest bucket b >= B: its inputs are static device
buffers sized for the largest bucket, filled before each replay, the rows B..b-1 padded so they do no harm:
token 0 at position 0, no cache slot (-1: the KV write skips it), no block and no context (the attention
of an empty context is 0), and no expert: the MoE blocks route rows at and past B to id E, which no GEMM
computes (`ForwardBatch.num_valid_tokens`, B on the device; not in bucket 1, which is never padded and keeps
the single-token alignment, nor with compiled decoder layers, whose graphs were traced without it: a new argument
would recompile them at the first step, and it was not measured there). Their logits are computed and dropped.
Steps with prompt tokens replay graphs of their own (executor/prefill_graphs.py); decodes of more sequences than
the largest bucket run eagerly.

Every index the decode step reads is on the device (the paged decode kernel, the MoE kernels' alignment),
so one capture per bucket serves every later step; block tables are copied only up to the widest table of
the step (the kernel reads no column past a sequence's context). Host metadata reaches the buffers through
page-locked memory without synchronising, so the host can prepare the next step while the GPU runs this one.

When each bucket is captured (the start-up cost): the buckets up to `startup_max` (8 by default: a fresh
server's first requests arrive one or a few at a time, and batch 1 is every request's first decode) are captured
at start-up, largest first into one memory pool; each larger bucket is captured the first time a decode step
needs it (`run`), or earlier by `capture_next_deferred` when the engine is idle, always on the thread that runs
the steps: a capture never overlaps other GPU work of the process. Every capture resets the static buffers to
padding first, so its eager warm-up writes no cache entry, and the step then fills them and replays. Later
captures share the same pool; that is safe because replays never overlap and each replay's logits are consumed
(sampled, on the same stream) before the next replay. For the same reason every bucket writes its logits into one
buffer outside the pool (`logits`, [largest bucket, V] in the model's dtype), and so do the prompt graphs
(executor/prefill_graphs.py): kept apart in the pool, the 20 default buckets' logits held 0.88 GB for
gpt-oss-20b's vocabulary, the prompt graphs' 1.58 GB. `info` records
every capture (start-up or later) with its warm-up (first launches: Triton compiles or loads kernels) and capture
seconds.

`capture=False` runs the same padded static-buffer path eagerly (CPU tests): a "capture" is the warm-up, and
its replay runs the padded step eagerly.
"""

from __future__ import annotations

import logging
import time
from collections import Counter

import numpy as np
import torch

from quickmoe.executor.capture_warmup import warm_up_then_capture
from quickmoe.executor.step_metadata import HostMetadata, host_array, to_device
from quickmoe.forward.forward_batch import AttentionMetadata, ForwardBatch, KVGroupMetadata

__all__ = ["DecodeGraphs", "decode_buckets"]

logger = logging.getLogger(__name__)


def decode_buckets(max_num_seqs: int, sizes: tuple[int, ...] | None = None) -> tuple[int, ...]:
    """The decode graphs' batch sizes: `sizes` (`EngineConfig.cuda_graph_sizes`) when given, else powers of two
    up to 32, steps of 16 up to 256 and of 32 beyond; max_num_seqs always, so that every decode step the scheduler
    can form has a graph (they stopped at 256 until 2026-11-30, and with --max-num-seqs 512 the steps of 512 ran
    eagerly: 27 ms of host time to queue each against 1 ms for a graph's, gpt-oss-20b 10,893 against 17,651 output
    tok/s). Padding rows cost little since they route to no expert, but a step just past a power of two still ran
    its padded bucket's MoE tiles, dense GEMMs and LM head: with powers of two only, batch 129 took 7.05 ms where
    bucket 144 takes 6.67 (gpt-oss-20b; Qwen3-30B-A3B FP8 14.00 against 13.68; H200, docs/benchmarks.md). Buckets
    past the start-up ones are captured while idle or when first needed; a start without a precompile manifest
    still records each bucket's dry step (2.79 s for these 20 against 1.14 s for the 9 powers of two, over all 24
    layers; over the layer prefix of executor/dry_layers.py, with the prompt graphs' steps, 1.62 s)."""
    if sizes is None:
        sizes = (1, 2, 4, 8, 16, 32, *range(48, 257, 16), *range(288, max_num_seqs + 1, 32))
    return tuple(sorted({s for s in sizes if s <= max_num_seqs} | {max_num_seqs}))


class _EagerReplay:
    """What a "captured" bucket is with capture=False: its replay runs the padded step eagerly (CPU tests)."""

    def __init__(self, graphs: DecodeGraphs, size: int) -> None:
        self.graphs, self.size = graphs, size

    def replay(self) -> None:
        self.graphs.outputs[self.size] = self.graphs._forward(self.size)


class DecodeGraphs:
    """Captured decode steps of `runner.model` over `runner.kv_cache` for `buckets` batch sizes; those up to
    `startup_max` are captured by `capture_startup`, the others when first needed (see the module docstring).

    Static inputs, all on the device: `meta` [5 + G, max] int64 rows (host token ids, previous-step rows, positions,
    context lengths, the step's batch size B in every column, one slot row per cache group) and `block_tables`
    [G, max, width] int32; a step fills their first columns with two host->device copies from page-locked memory.
    Inside the graph each row's input token is `runner.prev_sampled[prev_row]` (a token the previous step sampled,
    still on the device) where prev_row >= 0, else the host's id: so a step can be launched before the previous
    one's tokens reach the host."""

    ROW_IDS, ROW_PREV, ROW_POSITIONS, ROW_CONTEXT, ROW_COUNT, ROW_SLOTS = 0, 1, 2, 3, 4, 5

    @torch.inference_mode()  # static inputs are inference tensors like the eager path's (no compiled guard fails)
    def __init__(self, runner, buckets: tuple[int, ...], *, capture: bool = True, startup_max: int = 8) -> None:
        self.runner = runner
        self.buckets = tuple(sorted(buckets))
        self.max_batch = self.buckets[-1]
        self.capture_enabled = capture
        cache, device, size = runner.kv_cache, runner.device, self.max_batch
        groups = len(cache.plan.groups)
        self.table_width = -(-runner.max_model_len // cache.block_size)
        self.meta = torch.empty(self.ROW_SLOTS + groups, size, dtype=torch.long, device=device)
        self.block_tables = torch.empty((groups, size, self.table_width), dtype=torch.int32, device=device)
        self._reset_to_padding()
        self.cu_query_lens = torch.arange(size + 1, dtype=torch.int32, device=device)  # decode: row b = sequence b
        self.logits_indices = torch.arange(size, dtype=torch.long, device=device)
        # every bucket's logits in one buffer outside the pool: a replay's are sampled before the next replay
        self.logits = torch.empty(size, runner.config.vocab_size, dtype=runner.dtype, device=device)  # [max, V]
        self.graphs: dict[int, torch.cuda.CUDAGraph | _EagerReplay] = {}
        self.outputs: dict[int, torch.Tensor] = {}
        self.replays: Counter[int] = Counter()  # bucket -> steps that ran it
        self.pool = torch.cuda.graph_pool_handle() if capture else None
        self.startup_buckets = tuple(b for b in self.buckets if b <= startup_max)
        self.capture_seconds = 0.0  # of the start-up captures
        # the report's view (StartupReport.info["cuda_graphs"]), kept current as buckets are captured later
        self.info: dict = {"batch_sizes": list(self.buckets), "startup_batch_sizes": list(self.startup_buckets),
                           "deferred": [b for b in self.buckets if b > startup_max], "seconds": 0.0, "captures": []}

    def _reset_to_padding(self) -> None:
        """Every row of the static inputs a padding row: token 0, no previous row, position and context 0, no slot."""
        self.meta.zero_()
        self.meta[self.ROW_PREV].fill_(-1)
        self.meta[self.ROW_SLOTS:].fill_(-1)
        self.block_tables.fill_(-1)

    def _forward(self, size: int) -> torch.Tensor:
        """The decode step over the static buffers' first `size` columns: logits [size, V] in the model's dtype."""
        meta = self.meta[:, :size]
        prev = meta[self.ROW_PREV]
        input_ids = torch.where(prev >= 0, self.runner.prev_sampled[prev.clamp(min=0)], meta[self.ROW_IDS])  # [size]
        masks_padding = size > 1 and not self.runner.layers_compiled  # (see the module docstring)
        batch = ForwardBatch(
            input_ids=input_ids,
            attn=AttentionMetadata(positions=meta[self.ROW_POSITIONS], cu_query_lens=self.cu_query_lens[:size + 1],
                                   context_lens=meta[self.ROW_CONTEXT]),
            kv_groups=tuple(KVGroupMetadata(slot_mapping=meta[self.ROW_SLOTS + g],
                                            block_tables=self.block_tables[g, :size], window=group.window or 0)
                            for g, group in enumerate(self.runner.kv_cache.plan.groups)),
            logits_indices=self.logits_indices[:size], kv_cache=self.runner.kv_cache, query_lens=[1] * size,
            num_valid_tokens=meta[self.ROW_COUNT, :1] if masks_padding else None)  # [1]: B (rows B.. padding)
        return self.runner.model(batch, float_logits=False, logits_out=self.logits[:size])  # (the sampler widens)

    @torch.inference_mode()
    def dry_forward(self, size: int) -> None:
        """The eager step a capture of bucket `size` starts with, over padding rows (the precompile records its
        kernel launches: executor/kernel_precompile.py)."""
        self._reset_to_padding()
        self._forward(size)

    def _synchronize(self) -> None:
        if self.runner.device.type == "cuda":
            torch.cuda.synchronize(self.runner.device)

    @torch.inference_mode()
    def _capture(self, size: int, when: str) -> None:
        """Capture bucket `size` ("startup", "step": a step needs it now, "idle": the engine had nothing to run):
        its static inputs reset to padding, an eager warm-up (kernels compiled or loaded, workspaces allocated; over
        the layer prefix with `QUICKMOE_CAPTURE_WARMUP=prefix`, executor/capture_warmup.py), then the capture into
        the shared pool. Recorded in `info`."""
        self._reset_to_padding()  # the warm-up runs: on a previous step's inputs it would overwrite cache entries
        record: dict = {"batch_size": size, "when": when}
        try:
            graph = warm_up_then_capture(self.runner, lambda: self._forward(size), lambda: self._record(size), record)
        except torch.OutOfMemoryError as exc:
            if when == "startup":
                raise
            logger.warning("no memory to capture the decode CUDA graph of batch size %d; its steps run eagerly (%s)",
                           size, str(exc).splitlines()[0][:200])
            graph, record["failed"] = _EagerReplay(self, size), "out of memory"
        self.graphs[size] = graph
        if size in self.info["deferred"]:
            self.info["deferred"].remove(size)
        self.info["captures"].append(record)
        if when != "startup":
            logger.info("captured the decode CUDA graph of batch size %d (%s) in %.3f s (warm-up %.3f s over %s "
                        "layers)", size, "a step needed it" if when == "step" else "while idle",
                        record["warmup_s"] + record["capture_s"], record["warmup_s"], record.get("warmup_layers"))

    def _record(self, size: int) -> torch.cuda.CUDAGraph | _EagerReplay:
        """The capture of bucket `size` over every layer into the shared pool (its eager stand-in without capture)."""
        if not self.capture_enabled:
            return _EagerReplay(self, size)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=self.pool):
            self.outputs[size] = self._forward(size)  # [size, V]: a view of self.logits
        self._synchronize()
        return graph

    def capture_startup(self) -> float:
        """Capture the start-up buckets, largest first (the smaller graphs reuse the larger ones' transient memory
        in the pool); returns the seconds it took."""
        t0 = time.perf_counter()
        for size in reversed(self.startup_buckets):
            self._capture(size, "startup")
        self.capture_seconds = self.info["seconds"] = time.perf_counter() - t0
        logger.info("captured decode CUDA graphs for batch sizes %s in %.2f s; %s captured when first needed",
                    list(self.startup_buckets), self.capture_seconds, self.info["deferred"] or "none")
        return self.capture_seconds

    def capture_next_deferred(self) -> bool:
        """Capture the smallest bucket not captured yet (call it on the step thread while nothing runs); False when
        every bucket is captured."""
        if not self.info["deferred"]:
            return False
        self._capture(self.info["deferred"][0], "idle")
        return True

    def release(self) -> None:
        """Destroy every captured graph (after the last step; none may be queued or run after it). A graph that
        captured NCCL collectives holds a reference on their communicator, and NCCL's teardown
        (`destroy_process_group`) waits until it is dropped: a rank that left its process group with its graphs
        alive hung there (two H200s, tensor parallel). `run` captures anew if called after."""
        self._synchronize()  # no replay still running
        for graph in self.graphs.values():
            if isinstance(graph, torch.cuda.CUDAGraph):
                graph.reset()
        self.graphs.clear()
        self.outputs.clear()
        self._synchronize()

    def bucket(self, batch_size: int) -> int | None:
        """The smallest bucket holding `batch_size` sequences, or None (run eagerly)."""
        return next((b for b in self.buckets if b >= batch_size), None)

    @torch.inference_mode()
    def run(self, token_ids: list[int], prev_rows: list[int], host: HostMetadata) -> torch.Tensor:
        """Logits [B, V] of a decode step of B = len(token_ids) sequences (B <= the largest bucket); prev_rows[b]
        >= 0 takes row b's token from the previous step's samples on the device (its host id is a placeholder).
        A bucket not captured yet is captured first."""
        batch = len(token_ids)
        size = self.bucket(batch)
        assert size is not None and len(host.positions) == batch
        if size not in self.graphs:
            self._capture(size, "step")
        groups = self.block_tables.shape[0]
        width = max(t.shape[1] for t in host.block_tables)
        assert width <= self.table_width, "a block table is wider than max_model_len allows"
        staging = self.runner.staging  # page-locked memory of this step, or None (then ordinary memory)
        meta = host_array(staging, (self.ROW_SLOTS + groups, size), np.int64)
        tables = host_array(staging, (groups, size, width), np.int32)
        meta[:, batch:] = 0  # padding: token 0, position 0, context 0
        meta[self.ROW_PREV, batch:] = -1
        meta[self.ROW_SLOTS:, batch:] = -1  # no slot: the KV write skips padding rows
        meta[self.ROW_IDS, :batch] = token_ids
        meta[self.ROW_PREV, :batch] = prev_rows
        meta[self.ROW_POSITIONS, :batch] = host.positions
        meta[self.ROW_CONTEXT, :batch] = host.context_lens
        meta[self.ROW_COUNT] = batch
        tables[:, batch:] = -1
        for g, (slots, table) in enumerate(zip(host.slot_mappings, host.block_tables)):
            meta[self.ROW_SLOTS + g, :batch] = slots
            tables[g, :batch, :table.shape[1]] = table
            tables[g, :batch, table.shape[1]:] = -1
        self.meta[:, :size].copy_(to_device(meta, self.meta.device, staging))
        self.block_tables[:, :size, :width].copy_(to_device(tables, self.meta.device, staging))
        self.graphs[size].replay()
        self.replays[size] += 1
        return self.outputs[size][:batch]
