"""Warming the MoE kernels of prefill-sized batches while the engine is idle.

The MoE GEMMs take their tiles from tuned configs keyed by batch size (kernels/moe_configs.py), so the first step
of each new size class compiles its kernels (about a second each on an empty kernel cache): on the H100 the first
8,192-token prefill step of a `bench generate` run took 1.32 s against 0.16 s for the next ones. Decode sizes
are compiled when their CUDA graphs are captured; `MoEKernelWarmup` covers the rest: one piece of idle work per
batch size of a ladder (powers of two up to max_num_batched_tokens and the counts after them, and that), each
running the experts of one layer per distinct MoE shape once on random rows, so every tuned config a step can
select, and every alignment variant (moe_align.align_chunk), is compiled (or loaded from the kernel cache)
before a request needs it. A step reads its T's nearest key of a table; most keys are powers of two, which the
ladder hits, and the ladder also takes, for each key of the model's tables, the first T that reads it
(`moe_configs.nearest_key_starts`): keys such as 12, 48 or 96 are read by no power of two nor its successor, and
their tiles would have compiled in the middle of serving (tests/models/test_kernel_warmup.py checks every
shipped table: both GEMMs' configs and the alignment's variant, for every T).

A piece warms a group of sizes side by side on threads (at most WARM_THREADS, and at most max_num_batched_tokens
rows in all, so the group's activations fit where one full step's do). Triton releases the GIL only in parts of
its compile (ptxas, some native passes), so on the H100 machine the threads filled an empty cache ~1.2x faster
for the whole ladder and took the start-up buckets' capture from 11.06 to 6.77 s (docs/benchmarks.md,
2026-11-28 second session); with a warm cache, loading the start-up sizes' kernels one after the other took
`serve`'s /health 0.3-0.4 s later on the H200 (2026-11-30). The threads queue their launches on the caller's
stream. A size whose thread failed is warmed again alone on the calling thread (raising if it fails again): in one
served run on the H200 a thread's first launch of a kernel failed inside Triton's launcher ("function takes exactly
58 arguments (51 given)"), and the server then did no more idle work.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import torch
from torch import nn

from quickmoe.kernels.fused_moe import device_arch
from quickmoe.kernels.moe_configs import CONFIG_DIR, nearest_key_starts, tuned_token_counts
from quickmoe.layers.moe import FusedMoE

__all__ = ["WARM_THREADS", "MoEKernelWarmup", "moe_layer_key_starts", "warmup_token_counts"]

logger = logging.getLogger(__name__)

WARM_THREADS = 8  # batch sizes of one piece compiled side by side


def warmup_token_counts(max_num_batched_tokens: int, key_starts: Iterable[int] = ()) -> list[int]:
    """1, 2, 3, 4, 5, 8, 9, 16, 17, ... up to max_num_batched_tokens, and max_num_batched_tokens itself: each
    power of two and the count after it; and `key_starts`, the first count that reads each key of the model's
    tuned tables (`moe_layer_key_starts`). A step's kernel variants are those of each GEMM's tuned entry nearest
    its T with the alignment's sort chunk of T x top_k (moe_align.align_chunk, a power of two; top_k a power of
    two): the variant changes only where a table's key changes (its start) or the chunk does (at T = 2^j + 1, which
    2^j itself does not reach), so the ladder holds the first T of every run of T with one variant."""
    counts = set()
    for i in range(max_num_batched_tokens.bit_length()):
        counts.update(t for t in (1 << i, (1 << i) + 1) if t <= max_num_batched_tokens)
    counts.update(t for t in key_starts if 1 <= t <= max_num_batched_tokens)
    return sorted(counts | {max_num_batched_tokens})


def moe_layer_key_starts(layer: FusedMoE, device_name: str, arch: str | None,
                         config_dir: Path = CONFIG_DIR) -> set[int]:
    """For each of the tuned tables a MoE layer's two GEMMs read on this device (`fused_moe`: GEMM 1 [E, 2I, H],
    GEMM 2 [E, H, I], this rank's E and I), the first T that reads each of its keys (`nearest_key_starts`, per
    table: the two tables' keys may differ); none for a quant method without a kernel format name."""
    weights = getattr(layer.quant_method, "kernel_weights", None)
    if weights is None:
        return set()
    e, h, i = layer.num_experts, layer.hidden_size, layer.intermediate_size
    gate_up = tuned_token_counts(e, 2 * i, h, weights, device_name, config_dir, arch, proj="gate_up")
    down = tuned_token_counts(e, h, i, weights, device_name, config_dir, arch, proj="down")
    return set(nearest_key_starts(gate_up)) | set(nearest_key_starts(down))


class MoEKernelWarmup:
    """The ladder's batch sizes left to warm, for the model's MoE layers that run Triton kernels on a GPU (none
    otherwise: the torch path compiles nothing)."""

    def __init__(self, model: nn.Module, dtype: torch.dtype, max_num_batched_tokens: int) -> None:
        shapes: dict[tuple, FusedMoE] = {}
        for layer in model.modules():
            if isinstance(layer, FusedMoE) and layer.kernels == "triton":
                weight = next(layer.parameters())
                if weight.is_cuda:
                    key = (type(layer.quant_method), layer.num_experts, layer.top_k, layer.hidden_size,
                           layer.intermediate_size, layer.activation)
                    shapes.setdefault(key, layer)
        self.layers = list(shapes.values())
        self.dtype = dtype
        self.max_rows = max_num_batched_tokens
        starts: set[int] = set()
        for layer in self.layers:
            device = next(layer.parameters()).device
            starts |= moe_layer_key_starts(layer, torch.cuda.get_device_name(device), device_arch(device))
        self.pending = warmup_token_counts(max_num_batched_tokens, starts) if self.layers else []

    def next_group(self) -> list[int]:
        """The batch sizes the next piece warms: the smallest pending ones, up to WARM_THREADS of them and at most
        max_num_batched_tokens rows in all (always at least one)."""
        group, rows = [], 0
        for tokens in self.pending[:WARM_THREADS]:
            if group and rows + tokens > self.max_rows:
                break
            group.append(tokens)
            rows += tokens
        return group

    def warm_next(self) -> bool:
        """Warm the next group of batch sizes (`next_group`), side by side; False when none is left."""
        if not self.pending:
            return False
        group = self.next_group()
        del self.pending[:len(group)]
        self._warm_group(group)
        return True

    def warm_sizes(self, sizes: list[int]) -> None:
        """Warm these batch sizes side by side now (e.g. the decode buckets captured at start-up: their captures
        then find the experts' kernels compiled); they leave the ladder. Nothing without Triton MoE layers."""
        if self.layers and sizes:
            self.pending = [t for t in self.pending if t not in sizes]
            self._warm_group(sorted(sizes))

    def _warm_group(self, group: list[int]) -> None:
        device = next(self.layers[0].parameters()).device
        stream = torch.cuda.current_stream(device)
        t0 = time.perf_counter()
        if len(group) == 1:
            self.warm(group[0], stream)
        else:
            with ThreadPoolExecutor(len(group), thread_name_prefix="quickmoe-moe-warmup") as pool:
                futures = [pool.submit(self.warm, tokens, stream) for tokens in group]
            for tokens, future in zip(group, futures):
                if future.exception() is not None:  # again, alone on this thread; what fails again is raised
                    exc = future.exception()
                    logger.warning("warming the MoE kernels for %d tokens failed on a thread (%s: %s); warming them "
                                   "again on this thread", tokens, type(exc).__name__, str(exc)[:200])
                    self.warm(tokens, stream)
        torch.cuda.synchronize(device)
        logger.debug("MoE kernels warmed for %s tokens in %.3f s", group, time.perf_counter() - t0)

    def warm(self, tokens: int, stream: torch.cuda.Stream) -> None:
        """Run the experts of one layer per distinct shape once on `tokens` random rows (on any thread: the
        device, the stream and inference mode are set here, as they are per thread)."""
        with torch.cuda.device(stream.device), torch.cuda.stream(stream), torch.inference_mode():
            for layer in self.layers:
                device = next(layer.parameters()).device
                hidden = torch.randn(tokens, layer.hidden_size, dtype=self.dtype, device=device)
                scores = torch.rand(tokens, layer.num_experts, device=device)
                topk_weights, topk_ids = scores.topk(layer.top_k, dim=-1)  # [T, k] distinct experts per row
                topk_weights = topk_weights / topk_weights.sum(-1, keepdim=True)  # float32, as the router's
                layer.quant_method.apply(layer, hidden, topk_weights, topk_ids.to(torch.int32))
