"""Builds a model on its device, loads the checkpoint into it, and runs forward steps."""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch

from quickmoe.config import EngineConfig
from quickmoe.distributed import SINGLE, ParallelContext
from quickmoe.errors import ConfigError
from quickmoe.executor.kv_cache import PagedKVCache, kv_cache_budget, plan_kv_cache
from quickmoe.executor.runner_start import start_runner
from quickmoe.executor.step_metadata import build_forward_batch, build_host_metadata, pad_block_tables, to_device
from quickmoe.forward.forward_batch import ForwardBatch
from quickmoe.layers.attention import Attention
from quickmoe.layers.prompt_logprobs import PromptLogprobRequest, prompt_logit_rows, prompt_logprob_table
from quickmoe.layers.sampler import DeviceSample
from quickmoe.startup.early_start import EarlyStart
from quickmoe.startup.report import StartupReport

if TYPE_CHECKING:
    from quickmoe.checkpoint.loader import LoadStats
    from quickmoe.config import ModelConfig
    from quickmoe.executor.cuda_graphs import DecodeGraphs
    from quickmoe.executor.kernel_cache import KernelCache
    from quickmoe.executor.kernel_precompile import KernelPrecompile
    from quickmoe.executor.kernel_warmup import MoEKernelWarmup
    from quickmoe.executor.pinned_staging import PinnedStaging
    from quickmoe.executor.prefill_graphs import PrefillGraphs
    from quickmoe.executor.step_timer import StepTimer
    from quickmoe.layers.sampler import Sampler

logger = logging.getLogger(__name__)


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise ConfigError(f"engine option 'device' = {name!r}: CUDA is not available on this machine "
                          "(expected 'cpu' or 'auto')")
    return torch.device(name)


def resolve_dtype(name: str, device: torch.device) -> torch.dtype:
    if name == "auto":
        return torch.bfloat16 if device.type == "cuda" else torch.float32
    return {"float32": torch.float32, "bfloat16": torch.bfloat16}[name]


class ModelRunner:
    """Owns the model and its paged KV cache: config -> build (parameters allocated on the device) -> load ->
    process -> KV cache -> precompile -> compile -> capture (the start-up buckets' decode CUDA graphs; the others
    are captured when first needed, or by `capture_deferred_graph` while idle), each a phase of the StartupReport.
    Triton's kernel cache is pointed at quickmoe's persistent one right after CUDA init (executor/kernel_cache.py).

    `early_start`, if given, is the background work the process launched before importing torch (see
    startup/early_start.py): its CUDA context is waited for, its page-locked ring feeds the loader, and
    both it and the page-cache prefetch are wound up once the weights are loaded.

    `parallel`: this process is one rank of a model spread over several (tensor / expert parallel): it builds and
    loads its share of the model on its GPU (`parallel.local_rank`), every step runs on every rank (the others
    follow rank 0's, executor/workers.py), rank 0 samples and sends the tokens to the others.

    The start-up itself is `start_runner` (executor/runner_start.py); it sets the attributes below."""

    config: ModelConfig
    model: torch.nn.Module
    kernel_cache: KernelCache
    load_stats: LoadStats
    kv_cache: PagedKVCache
    max_model_len: int
    sampler: Sampler
    prev_sampled: torch.Tensor  # [max_num_seqs] the last step's sampled tokens, the next step's inputs
    step_timer: StepTimer
    staging: PinnedStaging | None  # page-locked memory for each step's host->device copies (CUDA)
    graphs: DecodeGraphs | None
    prefill_graphs: PrefillGraphs | None  # steps with prompt tokens (executor/prefill_graphs.py)
    moe_warmup: MoEKernelWarmup

    def __init__(self, model_dir: str | Path, engine: EngineConfig, report: StartupReport | None = None, *,
                 progress: bool = False, early_start: EarlyStart | None = None,
                 parallel: ParallelContext = SINGLE) -> None:
        if early_start is not None:
            early_start.imports_done()
        self.model_dir = Path(model_dir)
        self.report = report if report is not None else StartupReport()
        self.parallel = parallel
        self.device = resolve_device(engine.device)
        if parallel.sharded and self.device.type == "cuda":
            self.device = torch.device("cuda", parallel.local_rank)
            torch.cuda.set_device(self.device)
        self.dtype = resolve_dtype(engine.dtype, self.device)
        # chosen once, before anything loads: an impossible choice fails now
        self.moe_kernels = engine.resolved_kernels("moe_kernels", self.device)
        self.attention_kernels = engine.resolved_kernels("attention_kernels", self.device)
        self._precompiler: KernelPrecompile | None = None
        self.layers_compiled = False  # torch.compile'd decoder layers (`--compile on` / `aot`), set by start-up
        try:
            start_runner(self, engine, progress, early_start)
        except BaseException:
            if self._precompiler is not None:
                self._precompiler.close()
            if early_start is not None:  # on any failure: no prefetch left running, no ring left pinned
                self._wait_for_device()
                early_start.finish()
            raise

    def capture_deferred_graph(self) -> bool:
        """Capture the next CUDA graph left for later, the decode steps' first, then the prompt steps' (call on the
        step thread while no step runs); False when there is none."""
        return ((self.graphs is not None and self.graphs.capture_next_deferred())
                or (self.prefill_graphs is not None and self.prefill_graphs.capture_next_deferred()))

    def release_graphs(self) -> None:
        """Destroy the CUDA graphs (decode and prompt steps); later steps run eagerly. Every rank of a model spread
        over several calls it before it leaves the process groups (see DecodeGraphs.release: NCCL waits for graphs
        holding its collectives)."""
        if self.prefill_graphs is not None:
            self.prefill_graphs.release()
            self.prefill_graphs = None
        if self.graphs is not None:
            self.graphs.release()
            self.graphs = None

    def warm_next_moe_kernels(self) -> bool:
        """Compile (or load) the MoE kernels of the next prefill batch size (kernel_warmup.py; call on the step
        thread while no step runs); False when all are warm."""
        return self.moe_warmup.warm_next()

    def _wait_for_device(self) -> None:
        """Let every queued copy finish (the ring must not be freed under one); a broken device is logged."""
        if self.device.type != "cuda" or not torch.cuda.is_initialized():
            return
        try:
            torch.cuda.synchronize(self.device)
        except RuntimeError as exc:
            logger.warning("synchronizing %s after a failed start-up: %s", self.device, exc)

    def _init_kv_cache(self, engine: EngineConfig) -> None:
        """Size the paged cache from the memory left after the weights (kv_cache.py) and allocate it once;
        resolve max_model_len (default: max_position_embeddings, capped to what the cache holds)."""
        requested = engine.max_model_len
        if requested is not None and requested > self.config.max_position_embeddings:
            raise ConfigError(f"engine option 'max_model_len' = {requested}: expected at most the model's "
                              f"max_position_embeddings ({self.config.max_position_embeddings})")
        config = self.config
        if self.parallel.sharded:  # this rank's heads: its share of the cache
            attn = next(m for m in self.model.modules() if isinstance(m, Attention))
            config = dataclasses.replace(config, num_attention_heads=attn.num_heads,
                                         num_key_value_heads=attn.num_kv_heads)
        budget = None if engine.num_kv_blocks is not None else kv_cache_budget(
            config, dtype=self.dtype, device=self.device, kv_cache_memory=engine.kv_cache_memory,
            gpu_memory_utilization=engine.gpu_memory_utilization,
            max_num_batched_tokens=engine.max_num_batched_tokens, max_num_seqs=engine.max_num_seqs)
        if budget is not None:  # every rank the same cache: rank 0 hands out blocks all of them hold
            budget = self.parallel.min_over_ranks(budget)
        plan = plan_kv_cache(config, dtype=self.dtype, block_size=engine.block_size, memory_bytes=budget,
                             max_num_seqs=engine.max_num_seqs, max_num_batched_tokens=engine.max_num_batched_tokens,
                             num_blocks=engine.num_kv_blocks, max_model_len=requested or engine.block_size)
        self.max_model_len = requested or min(self.config.max_position_embeddings, plan.max_tokens_per_sequence)
        try:
            self.kv_cache = PagedKVCache(config, plan, dtype=self.dtype, device=self.device,
                                         head_major=engine.kv_cache_layout == "head-major")
        except (torch.OutOfMemoryError, RuntimeError) as exc:  # a num_kv_blocks the device cannot hold
            raise ConfigError(f"cannot allocate the KV cache ({plan.nbytes / 2**30:.2f} GiB on {self.device}): "
                              f"{str(exc).splitlines()[0][:200]}; lower kv_cache_memory, num_kv_blocks or "
                              "gpu_memory_utilization") from None
        for idx, layer in enumerate(self.model.model.layers):  # each step hands a layer its group's window
            assert layer.self_attn.window == plan.groups[self.kv_cache.layer_group[idx]].window, idx
        self.report.info["kv_cache"] = {"bytes": self.kv_cache.nbytes, "block_size": plan.block_size,
                                        "layout": engine.kv_cache_layout,
                                        "groups": {g.name: g.num_blocks for g in plan.groups},
                                        "max_model_len": self.max_model_len}
        logger.info("KV cache: %s; max_model_len %d", self.kv_cache.describe(), self.max_model_len)

    def scratch_block_tables(self, lengths: list[int]) -> list[np.ndarray]:
        """A step's block tables (per group [B, width], `pad_block_tables`) over distinct blocks of the cache, for
        sequences of `lengths` positions: warm-up steps before any request holds a block (the engine's block
        manager hands out the blocks of real requests)."""
        block_size, tables, next_block = self.kv_cache.block_size, [], 0
        groups = self.kv_cache.plan.groups
        for length in lengths:
            count = -(-length // block_size)
            tables.append([list(range(next_block, next_block + count)) for _ in groups])
            next_block += count
        assert all(next_block <= g.num_blocks for g in groups), "warm-up needs a few blocks"
        return pad_block_tables(tables, len(groups))

    def build_batch(self, token_ids: list[list[int]], start_positions: list[int],
                    block_tables: list[np.ndarray]) -> ForwardBatch:
        """A step over this runner's cache; `block_tables[g]` [B, width] holds in row b sequence b's table in cache
        group g, -1 padded (executor/step_metadata.py)."""
        return build_forward_batch(token_ids, start_positions, block_tables, self.kv_cache, self.device,
                                   self.staging)

    @torch.inference_mode()
    def execute(self, token_ids: list[list[int]], start_positions: list[int], block_tables: list[np.ndarray], *,
                prev_rows: list[int] | None = None, sample_rows: list[int] = (), params: list = (),
                generators: list = (), contexts: list | None = None, bitmask=None,
                prompt_logprobs: list[PromptLogprobRequest | None] | None = None) -> DeviceSample | None:
        """One model step, queued without waiting for the device: a decode step that fits a captured bucket
        replays its CUDA graph, anything else runs eagerly (`build_batch` + `forward`). `block_tables[g]` [B, width]:
        row b is sequence b's table in cache group g, -1 padded (executor/step_metadata.py). Row b's last token is the
        token row prev_rows[b] of the previous step sampled (its id in `token_ids` is a placeholder) where
        prev_rows[b] >= 0: it is taken on the device. Rows `sample_rows` are sampled (`params`, `generators`,
        `contexts` per sampled row and `bitmask`, see `Sampler.sample`); the result is kept on the device for the
        next step and its copy to the host is started: `DeviceSample.to_host()` waits for it. prompt_logprobs[b]:
        log-probabilities of prompt tokens that row b's chunk predicts (the step then runs eagerly), returned in
        `DeviceSample.prompt`. None when nothing is sampled and no prompt log-probability asked.
        With several ranks every rank runs the step; rank 0 samples (the others get `params` etc. empty and
        return None) and sends the sampled tokens to the others' `prev_sampled`."""
        self.step_timer.begin()
        if self.staging is not None:
            self.staging.begin_step()
        try:
            return self._execute(token_ids, start_positions, block_tables, prev_rows=prev_rows,
                                 sample_rows=sample_rows, params=params, generators=generators, contexts=contexts,
                                 bitmask=bitmask, prompt_logprobs=prompt_logprobs)
        finally:
            if self.staging is not None:
                self.staging.end_step()

    def _execute(self, token_ids, start_positions, block_tables, *, prev_rows, sample_rows, params, generators,
                 contexts, bitmask, prompt_logprobs) -> DeviceSample | None:
        """`execute` between the staging memory's `begin_step` and `end_step`."""
        prev = prev_rows if prev_rows is not None else [-1] * len(token_ids)
        graphs = self.graphs
        wants_prompt = prompt_logprobs is not None and any(r is not None for r in prompt_logprobs)
        prompt_rows = logits = None
        if graphs is not None and not wants_prompt and len(token_ids) <= graphs.max_batch \
                and all(len(t) == 1 for t in token_ids):
            host = build_host_metadata([1] * len(token_ids), start_positions, block_tables, self.kv_cache.block_size)
            logits = graphs.run([t[0] for t in token_ids], prev, host)
        elif not wants_prompt and self.prefill_graphs is not None:  # None where no captured graph holds the step
            logits = self.prefill_graphs.run(token_ids, start_positions, block_tables, prev)
        if logits is None:
            batch = self.build_batch(token_ids, start_positions, block_tables)
            if any(r >= 0 for r in prev):
                batch.input_ids = self._resolve_previous(batch.input_ids, [len(t) for t in token_ids], prev)
            if wants_prompt:  # the last rows and the prompt rows asked for, in one LM-head call
                rows, prompt_rows = prompt_logit_rows([len(t) for t in token_ids], prompt_logprobs)
                batch.logits_indices = to_device(rows, self.device, self.staging)
                logits = self.model(batch, float_logits=False)
                logits, prompt_logits = logits[:len(token_ids)], logits[len(token_ids):]
            else:
                logits = self.model(batch, float_logits=False)  # the sampler widens what it needs
        sample = None
        driver = self.parallel.is_driver
        if sample_rows and driver:
            if len(sample_rows) != len(token_ids):
                logits = logits[to_device(np.asarray(sample_rows, dtype=np.int64), self.device, self.staging)]
            sample = self.sampler.sample(logits, params, generators, contexts, bitmask)
            self.prev_sampled[:len(sample_rows)].copy_(sample.token_ids)  # the next step's inputs
        if sample_rows and self.parallel.sharded:
            self.parallel.broadcast_(self.prev_sampled[:len(sample_rows)])  # rank 0's tokens on every rank
        if not driver:
            self.step_timer.end(token_ids)
            return None
        if prompt_rows is not None:
            sample = sample if sample is not None else DeviceSample.empty(self.device)
            sample.prompt = prompt_logprob_table(prompt_logits, prompt_logprobs, prompt_rows)
        if sample is not None:
            sample.to_host_async()
        self.step_timer.end(token_ids)
        return sample

    def _resolve_previous(self, input_ids: torch.Tensor, query_lens: list[int], prev_rows: list[int]) -> torch.Tensor:
        """input_ids [T] with each sequence's last token taken from `prev_sampled` where prev_rows >= 0."""
        ends = np.cumsum(query_lens) - 1  # [B] row of each sequence's last token
        rows = np.full(len(input_ids), -1, dtype=np.int64)  # [T]
        rows[ends] = prev_rows
        rows = to_device(rows, self.device, self.staging)
        return torch.where(rows >= 0, self.prev_sampled[rows.clamp(min=0)], input_ids)

    @torch.inference_mode()
    def forward(self, batch: ForwardBatch, *, all_logits: bool = False) -> torch.Tensor:
        """Float32 logits [B, V] of each sequence's last new token ([T, V] with all_logits)."""
        return self.model(batch, all_logits=all_logits)
