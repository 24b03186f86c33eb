"""CUDA graphs of steps with prompt tokens: prefills, and prompt chunks beside decode rows, one graph per bucket of
(tokens, sequences).

Why. Run eagerly, such a step is bound by the host: Qwen3-30B-A3B FP8's step of one 1,000-token prompt launched 786
kernels in 83 ms on the H200 while they ran for 17 ms, gpt-oss-20b's 284 in 39 ms against 16 ms
(scripts/probes/prefill_host_probe.py, docs/benchmarks.md, 2026-12-02 fifth session): that is a lone request's
time to first token, and in a server every step in which a request arrives. A replay queues the same kernels in
tens of microseconds. The buckets reach max_num_batched_tokens (8,192) by default: served at concurrency 32,
Qwen3's mixed steps of ~4,500 tokens took 72-81 ms eagerly and 56-58 ms in graphs (2026-12-04 fifth session).

How. A step of T tokens over B sequences runs the graph of the smallest bucket (T_b >= T, B_b >= B), as a decode
step runs its batch-size bucket (executor/cuda_graphs.py): static input buffers sized for the largest bucket,
filled before each replay, the rest padding that does no harm:
- token rows T..T_b-1: token 0 at position 0, no cache slot (-1: the KV write skips them), in no sequence: the
  prefill attention zeroes their output (kernels/prefill_attention.py), and the MoE blocks route them to no
  expert (`ForwardBatch.num_valid_tokens`, the step's T on the device: cu_query_lens[B_b]), so their rows cost
  the experts nothing (all alike, they would have added up to T_b - T rows to the same k experts: a step of
  1,025 tokens in the 1,152 bucket took 21.8 ms against 18.8 for 1,024 tokens, gpt-oss-20b on the H200) and
  their results, undefined, stay in their own rows;
- sequences B..B_b-1: no new token (cu_query_lens flat at T), context 0, no block: the attention skips them; their
  logits row reads row 0 and is dropped.
Every length the step's kernels read is on the device, and the prefill attention's grid is sized by T_b and B_b
only (its programs find their sequence and query tile on the device), so one capture per bucket serves every step
that fits.
A row's result depends on the bucket only as the kernels' configs depend on the token count (the MoE's tiles).

When. Never on a step's critical path: a bucket is captured only while the engine is idle (`capture_next_deferred`,
the engine's idle work), the sequence buckets in turn (1 first: a lone prompt is the time to first token a user
sees first), each one's token buckets largest first (the smaller ones reuse its transient memory in the pool). A
step whose bucket is not captured yet runs eagerly (`run` returns None). Captures share the decode graphs' memory
pool: replays never overlap, and each replay's logits are sampled before the next replay. A capture that fails
(out of memory, or a kernel that cannot be captured) leaves that bucket to eager steps, with a warning.
`capture=False` (CPU tests) runs the same padded static-buffer step eagerly on each "replay".
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Sequence

import numpy as np
import torch

from quickmoe.executor.capture_warmup import warm_up_then_capture
from quickmoe.executor.step_metadata import build_host_metadata, host_array, to_device
from quickmoe.forward.forward_batch import AttentionMetadata, ForwardBatch, KVGroupMetadata

__all__ = ["PrefillGraphs", "prefill_seq_buckets", "prefill_token_buckets"]

logger = logging.getLogger(__name__)

SEQ_BUCKETS = (1, 4, 16, 64, 256)  # sequences a graph holds (a lone prompt; prompts beside decode rows)


def prefill_token_buckets(max_tokens: int) -> tuple[int, ...]:
    """Token counts of the buckets up to max_tokens: 64, 128, 256, then steps of 128 to 1,024, of 256 to 2,048, of
    512 to 4,096, of 1,024 beyond, and max_tokens itself. Padding rows cost the GPU what real ones do (all of them
    the same token, they load the same experts), so above 256 tokens a step pads by at most a third."""
    sizes, size = set(), 64
    while size < max_tokens:
        sizes.add(size)
        size = size * 2 if size < 256 else size + (128 if size < 1024 else 256 if size < 2048 else
                                                   512 if size < 4096 else 1024)
    return tuple(sorted(sizes | ({max_tokens} if max_tokens > 0 else set())))


def prefill_seq_buckets(max_num_seqs: int) -> tuple[int, ...]:
    """Sequence counts of the buckets: SEQ_BUCKETS below max_num_seqs, and max_num_seqs itself (as the decode
    buckets: every step the scheduler can form has one)."""
    return tuple(b for b in SEQ_BUCKETS if b < max_num_seqs) + (max_num_seqs,)


class _EagerReplay:
    """What a "captured" bucket is with capture=False: its replay runs the padded step eagerly (CPU tests)."""

    def __init__(self, graphs: PrefillGraphs, key: tuple[int, int]) -> None:
        self.graphs, self.key = graphs, key

    def replay(self) -> None:
        self.graphs.outputs[self.key] = self.graphs._forward(*self.key)


class PrefillGraphs:
    """Captured steps with prompt tokens of `runner.model` over `runner.kv_cache`, keyed (tokens, sequences) over
    `token_buckets` x `seq_buckets` (see the module docstring). Static inputs on the device: `meta` [3 + G, max
    tokens] int64 rows (host token ids, previous-step rows, positions, one slot row per cache group), `cu_query_lens`
    [max seqs + 1] int32, `seqs` [2, max seqs] int64 (context lengths, logits rows) and `block_tables` [G, max seqs,
    width] int32."""

    ROW_IDS, ROW_PREV, ROW_POSITIONS, ROW_SLOTS = 0, 1, 2, 3

    @torch.inference_mode()
    def __init__(self, runner, token_buckets: Sequence[int], seq_buckets: Sequence[int], *, capture: bool = True,
                 pool=None, logits: torch.Tensor | None = None) -> None:
        self.runner = runner
        self.token_buckets = tuple(sorted(token_buckets))
        self.seq_buckets = tuple(sorted(seq_buckets))
        self.max_tokens, self.max_seqs = self.token_buckets[-1], self.seq_buckets[-1]
        self.capture_enabled = capture
        cache, device = runner.kv_cache, runner.device
        groups = len(cache.plan.groups)
        self.table_width = -(-runner.max_model_len // cache.block_size)
        self.meta = torch.empty(self.ROW_SLOTS + groups, self.max_tokens, dtype=torch.long, device=device)
        self.cu_query_lens = torch.empty(self.max_seqs + 1, dtype=torch.int32, device=device)
        self.seqs = torch.empty(2, self.max_seqs, dtype=torch.long, device=device)  # context lengths, logits rows
        self.block_tables = torch.empty((groups, self.max_seqs, self.table_width), dtype=torch.int32, device=device)
        # every bucket's logits in one buffer outside the pool, the decode graphs' when given ([>= max seqs, V]):
        # replays never overlap, and a replay's logits are sampled before the next replay
        if logits is None:
            logits = torch.empty(self.max_seqs, runner.config.vocab_size, dtype=runner.dtype, device=device)
        assert logits.shape[0] >= self.max_seqs and logits.shape[1] == runner.config.vocab_size, logits.shape
        self.logits = logits
        self._reset_to_padding()
        self.graphs: dict[tuple[int, int], torch.cuda.CUDAGraph | _EagerReplay] = {}
        self.outputs: dict[tuple[int, int], torch.Tensor] = {}
        self.failed: set[tuple[int, int]] = set()
        self.replays: Counter[tuple[int, int]] = Counter()
        self.pool = pool if pool is not None or not capture else torch.cuda.graph_pool_handle()
        self.deferred = [(t, b) for b in self.seq_buckets for t in reversed(self.token_buckets) if b <= t]
        self.info: dict = {"token_buckets": list(self.token_buckets), "seq_buckets": list(self.seq_buckets),
                           "captures": []}

    def _reset_to_padding(self) -> None:
        """Every row a padding row and every sequence empty (see the module docstring)."""
        self.meta.zero_()
        self.meta[self.ROW_PREV].fill_(-1)
        self.meta[self.ROW_SLOTS:].fill_(-1)
        self.cu_query_lens.zero_()
        self.seqs.zero_()
        self.block_tables.fill_(-1)

    def _forward(self, tokens: int, seqs: int) -> torch.Tensor:
        """The step over the static buffers' first `tokens` rows and `seqs` sequences: logits [seqs, V] in the model's
        dtype (the sampler widens what it needs)."""
        meta = self.meta[:, :tokens]
        prev = meta[self.ROW_PREV]
        input_ids = torch.where(prev >= 0, self.runner.prev_sampled[prev.clamp(min=0)], meta[self.ROW_IDS])  # [T_b]
        batch = ForwardBatch(
            input_ids=input_ids,
            attn=AttentionMetadata(positions=meta[self.ROW_POSITIONS], cu_query_lens=self.cu_query_lens[:seqs + 1],
                                   context_lens=self.seqs[0, :seqs]),
            kv_groups=tuple(KVGroupMetadata(slot_mapping=meta[self.ROW_SLOTS + g],
                                            block_tables=self.block_tables[g, :seqs], window=group.window or 0)
                            for g, group in enumerate(self.runner.kv_cache.plan.groups)),
            logits_indices=self.seqs[1, :seqs], kv_cache=self.runner.kv_cache, query_lens=[0] * seqs,
            num_valid_tokens=self.cu_query_lens[seqs:seqs + 1])  # [1]: the step's tokens (padding: flat at T)
        return self.runner.model(batch, float_logits=False, logits_out=self.logits[:seqs])

    @torch.inference_mode()
    def dry_forward(self, tokens: int, seqs: int) -> None:
        """The eager step a capture of bucket (tokens, seqs) starts with, over padding rows (the precompile records
        its kernel launches: executor/kernel_precompile.py)."""
        self._reset_to_padding()
        self._forward(tokens, seqs)

    def _synchronize(self) -> None:
        if self.runner.device.type == "cuda":
            torch.cuda.synchronize(self.runner.device)

    @torch.inference_mode()
    def _capture(self, key: tuple[int, int]) -> None:
        """Capture bucket `key` (tokens, sequences): static inputs reset to padding (the warm-up writes no cache
        entry), an eager warm-up (kernels compiled or loaded, workspaces allocated; over the layer prefix with
        `QUICKMOE_CAPTURE_WARMUP=prefix`, executor/capture_warmup.py), then the capture."""
        self._reset_to_padding()
        record: dict = {"tokens": key[0], "seqs": key[1]}
        try:
            self.graphs[key] = warm_up_then_capture(self.runner, lambda: self._forward(*key),
                                                    lambda: self._record(key), record)
        except (torch.OutOfMemoryError, RuntimeError) as exc:  # that bucket's steps run eagerly
            self.failed.add(key)
            self._synchronize()
            record["failed"] = str(exc).splitlines()[0][:200]
            logger.warning("could not capture the CUDA graph of prompt steps of %d tokens over %d sequences; they run "
                           "eagerly (%s)", key[0], key[1], record["failed"])
        self.info["captures"].append(record)
        logger.debug("captured the prompt-step CUDA graph of %d tokens over %d sequences in %.3f s (warm-up %.3f s "
                     "over %s layers)", key[0], key[1], record["warmup_s"] + record["capture_s"], record["warmup_s"],
                     record.get("warmup_layers"))

    def _record(self, key: tuple[int, int]) -> torch.cuda.CUDAGraph | _EagerReplay:
        """The capture of bucket `key` over every layer into the shared pool (its eager stand-in without capture)."""
        if not self.capture_enabled:
            return _EagerReplay(self, key)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=self.pool):
            self.outputs[key] = self._forward(*key)  # [seqs, V]: a view of self.logits
        self._synchronize()
        return graph

    def capture_next_deferred(self) -> bool:
        """Capture the next bucket not captured yet (call on the step thread while nothing runs); False when every
        bucket has been tried."""
        if not self.deferred:
            return False
        if not self.info["captures"]:
            self.info["reserved_bytes_before"] = self._reserved()
        self._capture(self.deferred.pop(0))
        if not self.deferred:
            self.info["reserved_bytes_after"] = self._reserved()
            grown = self.info["reserved_bytes_after"] - self.info["reserved_bytes_before"]
            logger.info("captured %d CUDA graphs of prompt steps (up to %d tokens over up to %d sequences) in %.2f s; "
                        "torch's reserved device memory grew by %.2f GiB", len(self.graphs), self.max_tokens,
                        self.max_seqs, sum(c["warmup_s"] + c["capture_s"] for c in self.info["captures"]),
                        grown / 2**30)
        return True

    def _reserved(self) -> int:
        """Bytes torch's caching allocator holds on the device (0 where nothing is captured: CPU tests)."""
        return torch.cuda.memory_reserved(self.runner.device) if self.capture_enabled else 0

    def release(self) -> None:
        """Destroy every captured graph (none may be queued or run after it)."""
        self._synchronize()
        for graph in self.graphs.values():
            if isinstance(graph, torch.cuda.CUDAGraph):
                graph.reset()
        self.graphs.clear()
        self.outputs.clear()
        self.deferred.clear()
        self._synchronize()

    def bucket(self, tokens: int, seqs: int) -> tuple[int, int] | None:
        """The smallest bucket (captured or not) that holds a step of `tokens` over `seqs`, or None (too large)."""
        t = next((b for b in self.token_buckets if b >= tokens), None)
        s = next((b for b in self.seq_buckets if b >= seqs), None)
        return None if t is None or s is None else (t, s)

    @torch.inference_mode()
    def run(self, token_ids: Sequence[Sequence[int]], start_positions: Sequence[int],
            block_tables: Sequence[np.ndarray], prev_rows: Sequence[int]) -> torch.Tensor | None:
        """Logits [B, V] of the step (as `ModelRunner.execute`'s arguments; prev_rows[b] >= 0 takes sequence b's
        last token from the previous step's samples on the device), or None where no captured graph holds it (the
        caller runs it eagerly)."""
        query_lens = [len(t) for t in token_ids]
        num_tokens, num_seqs = sum(query_lens), len(query_lens)
        key = self.bucket(num_tokens, num_seqs)
        graph = self.graphs.get(key) if key is not None else None
        if graph is None:
            return None
        tokens, seqs = key
        host = build_host_metadata(query_lens, start_positions, block_tables, self.runner.kv_cache.block_size)
        width = max(t.shape[1] for t in host.block_tables)
        if width > self.table_width:
            return None
        staging = self.runner.staging  # page-locked memory of this step, or None (then ordinary memory)
        groups = self.block_tables.shape[0]
        meta = host_array(staging, (self.ROW_SLOTS + groups, tokens), np.int64)
        meta[:, num_tokens:] = 0  # padding rows: token 0, position 0
        meta[self.ROW_SLOTS:, num_tokens:] = -1  # no slot: the KV write skips them
        meta[self.ROW_IDS, :num_tokens] = np.fromiter((t for toks in token_ids for t in toks), dtype=np.int64,
                                                      count=num_tokens)
        meta[self.ROW_PREV] = -1
        ends = host.cu_query_lens[1:].astype(np.int64) - 1  # [B] each sequence's last row
        meta[self.ROW_PREV, ends] = prev_rows
        meta[self.ROW_POSITIONS, :num_tokens] = host.positions
        cu = host_array(staging, (seqs + 1,), np.int32)
        cu[:num_seqs + 1] = host.cu_query_lens
        cu[num_seqs + 1:] = num_tokens  # empty sequences
        per_seq = host_array(staging, (2, seqs), np.int64)
        per_seq[:, num_seqs:] = 0  # context 0; logits of row 0, dropped
        per_seq[0, :num_seqs] = host.context_lens
        per_seq[1, :num_seqs] = ends
        tables = host_array(staging, (groups, seqs, width), np.int32)
        tables[:, num_seqs:] = -1
        for g, (slots, table) in enumerate(zip(host.slot_mappings, host.block_tables)):
            meta[self.ROW_SLOTS + g, :num_tokens] = slots
            tables[g, :num_seqs, :table.shape[1]] = table
            tables[g, :num_seqs, table.shape[1]:] = -1
        device = self.meta.device
        self.meta[:, :tokens].copy_(to_device(meta, device, staging))
        self.cu_query_lens[:seqs + 1].copy_(to_device(cu, device, staging))
        self.seqs[:, :seqs].copy_(to_device(per_seq, device, staging))
        self.block_tables[:, :seqs, :width].copy_(to_device(tables, device, staging))
        graph.replay()
        self.replays[key] += 1
        return self.outputs[key][:num_seqs]
