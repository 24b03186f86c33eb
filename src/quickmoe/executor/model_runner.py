"""Builds a model on its device, loads the checkpoint into it, and runs forward steps."""

from __future__ import annotations

import dataclasses
import importlib.util
import logging
import resource
from pathlib import Path

import numpy as np
import torch

from quickmoe.checkpoint.loader import LoadStats, load_weights
from quickmoe.checkpoint.loader_options import LoaderOptions
from quickmoe.checkpoint.reader import CheckpointReader
from quickmoe.config import EngineConfig, ModelConfig
from quickmoe.distributed import SINGLE, ParallelContext
from quickmoe.errors import ConfigError
from quickmoe.executor.cublas_start import CublasStart
from quickmoe.executor.cuda_graphs import DecodeGraphs, decode_buckets
from quickmoe.executor.kernel_cache import KernelCache, use_triton_cache
from quickmoe.executor.kernel_precompile import KernelPrecompile
from quickmoe.executor.kernel_warmup import MoEKernelWarmup
from quickmoe.executor.kv_cache import PagedKVCache, kv_cache_budget, plan_kv_cache
from quickmoe.executor.pinned_staging import PinnedStaging
from quickmoe.executor.rank_report import gather_rank_phases
from quickmoe.executor.step_metadata import build_forward_batch, build_host_metadata, pad_block_tables, to_device
from quickmoe.executor.step_timer import StepTimer
from quickmoe.executor.tables_start import TablesStart, tables_start_enabled
from quickmoe.executor.triton_start import TritonStart
from quickmoe.forward.forward_batch import ForwardBatch
from quickmoe.layers.attention import Attention
from quickmoe.layers.moe import FusedMoE, GptOssMLP
from quickmoe.layers.norm import RMSNorm
from quickmoe.layers.prompt_logprobs import PromptLogprobRequest, prompt_logit_rows, prompt_logprob_table
from quickmoe.layers.rotary import fill_rotary_tables
from quickmoe.layers.sampler import DeviceSample, Sampler
from quickmoe.layers.sparse_moe import SparseMoeBlock
from quickmoe.layouts import default_permutation_cache
from quickmoe.models.registry import build_model
from quickmoe.startup.early_start import EarlyStart
from quickmoe.startup.gc_pause import paused_gc
from quickmoe.startup.report import StartupReport

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
    process -> KV cache -> compile -> capture (the start-up buckets' decode CUDA graphs; the others are captured
    when first needed, or by `capture_deferred_graph` while idle), each a phase of the StartupReport. Triton's
    kernel cache is pointed at quickmoe's persistent one right after CUDA init (executor/kernel_cache.py).

    `early_start`, if given, is the background work the process launched before importing torch (see
    startup/early_start.py): its CUDA context is waited for, its page-locked ring feeds the loader, and
    both it and the page-cache prefetch are wound up once the weights are loaded.

    `parallel`: this process is one rank of a model spread over several (tensor / expert parallel): it builds and
    loads its share of the model on its GPU (`parallel.local_rank`), every step runs on every rank (the others
    follow rank 0's, executor/workers.py), rank 0 samples and sends the tokens to the others."""

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
        try:
            self._start(engine, progress, early_start)
        except BaseException:
            if self._precompiler is not None:
                self._precompiler.close()
            if early_start is not None:  # on any failure: no prefetch left running, no ring left pinned
                self._wait_for_device()
                early_start.finish()
            raise

    def _start(self, engine: EngineConfig, progress: bool, early_start: EarlyStart | None) -> None:
        """cuda_init -> config -> build -> load -> process, each phase marked in the report."""
        if engine.compile == "aot":  # a torch without it fails now, not after the weights load
            from quickmoe.executor.aot_layers import require_aot

            require_aot()
        host_buffers = None
        if self.device.type == "cuda":
            host_buffers = self._await_cuda_preinit(early_start)
            torch.cuda.init()
            torch.empty(1, device=self.device)  # creates the context
            torch.cuda.synchronize(self.device)
        self.kernel_cache: KernelCache = use_triton_cache(self.device)  # before any Triton kernel is compiled or loaded
        if engine.kernel_precompile == "auto" and self._starts_triton() and "triton" in (
                self.moe_kernels, self.attention_kernels):  # its workers start now, beside the load
            self._precompiler = KernelPrecompile(self.device, self._precompile_key(engine),
                                                 local_ranks=self.parallel.world_size, progress=progress)
        triton_start = TritonStart(self.device).start() if self._starts_triton() else None
        cublas_start = CublasStart(self.device, self.dtype).start() if self.device.type == "cuda" else None
        self.report.mark("cuda_init")
        with paused_gc():  # config, build and load make ~10 objects per checkpoint tensor, none of them garbage
            self.config = ModelConfig.from_dir(self.model_dir)
            reader = CheckpointReader(self.model_dir)  # headers only: fails fast on a bad checkpoint
            self.report.mark("config")
            # on CUDA the rotary table is computed beside the load (`TablesStart`; QUICKMOE_TABLES_START=0: here)
            tables_on_thread = tables_start_enabled() and self.device.type == "cuda"  # the value checked everywhere
            self.model = build_model(self.config, dtype=self.dtype, device=self.device, parallel=self.parallel,
                                     defer_tables=tables_on_thread)
        tables_start = TablesStart(self.device, self.model).start() if tables_on_thread else None
        moe_kernels, attention_kernels = self.moe_kernels, self.attention_kernels
        for module in self.model.modules():  # the backends are chosen once, here
            if isinstance(module, (FusedMoE, GptOssMLP, SparseMoeBlock)):  # the experts and their routing
                module.kernels = moe_kernels
            elif isinstance(module, (Attention, RMSNorm)):  # attention, RoPE + KV write, the norms
                module.kernels = attention_kernels
        self.report.mark("build")
        if triton_start is not None:
            triton_start.built()
        options = early_start.options if early_start is not None else LoaderOptions.from_env()
        with paused_gc():
            self.load_stats: LoadStats = load_weights(
                self.model, reader, progress=progress, num_threads=options.threads,
                chunk_bytes=options.chunk_bytes, num_buffers=options.buffers, host_buffers=host_buffers)
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        if early_start is not None:
            early_start.stop_prefetch()
        self.report.mark("load")
        if self.device.type == "cuda":
            self.report.info["gpu_bytes_after_load"] = torch.cuda.memory_allocated(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
        if triton_start is not None:  # Triton's own start ran beside the load
            self.report.info["triton_start_seconds"] = triton_start.join()
        if cublas_start is not None:  # and cuBLAS's
            self.report.info["cublas_start_seconds"] = cublas_start.join()
        if tables_start is not None:  # and the model's tables
            self.report.info["tables_start_seconds"] = tables_start.join()
        fill_rotary_tables(self.model)  # nothing left when the thread filled them; else here, raising what fails
        self.model.process_weights_after_loading()
        self.model.eval()
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            self.report.info["gpu_peak_bytes_during_process"] = torch.cuda.max_memory_allocated(self.device)
            self.report.info["gpu_bytes_after_process"] = torch.cuda.memory_allocated(self.device)
        self.report.mark("process")
        if early_start is not None:
            # Unpinning the ring takes ~0.1 s of driver time that stalls GPU work issued meanwhile, so it
            # waits until the weights are processed (it then overlaps the tokenizer and the first request).
            early_start.finish()
            self.report.info["early_start"] = early_start.info()
        self._init_kv_cache(engine)
        self.sampler = Sampler()
        self.prev_sampled = torch.zeros(engine.max_num_seqs, dtype=torch.long, device=self.device)  # [max_num_seqs]
        self.step_timer = StepTimer(self.device)
        # page-locked memory for each step's host->device copies, reused step after step
        self.staging = PinnedStaging(self.device) if self.device.type == "cuda" else None
        self.report.mark("kv_cache")
        self.graphs: DecodeGraphs | None = None
        graphs = None
        if engine.resolved_cuda_graphs(self.device):
            if self.device.type != "cuda":
                raise ConfigError(f"engine option 'cuda_graphs' = 'on' needs a CUDA device; the model is on "
                                  f"{self.device} (expected 'off')")
            graphs = DecodeGraphs(self, decode_buckets(engine.max_num_seqs),
                                  startup_max=engine.cuda_graphs_startup_max)
        self.moe_warmup = MoEKernelWarmup(self.model, self.dtype, engine.max_num_batched_tokens)
        if self._precompiler is not None:
            self.report.info["precompile"] = self._precompile(engine, graphs)
            self.report.mark("precompile")
        if engine.compile in ("on", "aot"):
            from quickmoe.executor.compile import compile_runner

            self.report.info["compile"] = compile_runner(self, aot=engine.compile == "aot")
            self.report.mark("compile")
        if graphs is not None:
            self.graphs = graphs
            self.report.info["cuda_graphs"] = self.graphs.info  # later captures are added to it
            self.moe_warmup.warm_sizes(list(self.graphs.startup_buckets))  # compiled side by side, not in turn
            self.graphs.capture_startup()
            self.report.mark("capture")
        self.report.info["triton_cache"] = self.kernel_cache.info
        self.kernel_cache.record("startup")
        cache = default_permutation_cache()
        self.report.info["permutation_cache"] = dataclasses.asdict(cache.stats())
        cache.clear()  # the indices served every layer of this model; free them
        self.report.info["peak_host_rss_bytes"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        stats = self.load_stats
        self.report.info["loader"] = {k: getattr(stats, k) for k in (
            "seconds", "num_buffers", "peak_host_buffer_bytes", "peak_device_buffer_bytes", "validate_seconds",
            "read_seconds", "wait_seconds", "deliver_seconds", "finish_seconds", "num_chunks", "chunk_bytes",
            "num_threads", "direct_copies", "copy_calls", "plan_cached")}
        if self.parallel.sharded:  # every rank's phases, and the slowest rank's of each, on rank 0
            self.report.info["ranks"] = gather_rank_phases(self.report, self.parallel)
            if self.parallel.is_driver:
                slowest = self.report.info["ranks"]["slowest"]
                logger.info("start-up over %d ranks, slowest rank per phase: %s", self.parallel.world_size,
                            ", ".join(f"{k} {v['seconds']:.2f} s (rank {v['rank']})" for k, v in slowest.items()))
        self.report.info.update(model=str(self.model_dir), device=str(self.device), moe_kernels=moe_kernels,
                                attention_kernels=attention_kernels,
                                dtype=str(self.dtype).removeprefix("torch."), load_bytes=self.load_stats.num_bytes,
                                load_gb_per_s=self.load_stats.num_bytes / 1e9 / max(self.report.phases["load"], 1e-9))
        logger.info("model %s on %s (%s) ready", self.model_dir, self.device, self.report.info["dtype"])

    def _precompile_key(self, engine: EngineConfig) -> dict:
        """What decides the kernels a start launches: the model's config.json, the engine options (but the seed and
        the checkpoint's path), the ranks and the device."""
        import hashlib

        from quickmoe.executor.kernel_cache import device_name

        try:
            config = hashlib.sha256((self.model_dir / "config.json").read_bytes()).hexdigest()
        except OSError:
            config = None  # the config phase reports it
        options = {k: v for k, v in dataclasses.asdict(engine).items() if k not in ("seed", "model")}
        return {"config": config, "engine": options, "rank": self.parallel.rank, "world": self.parallel.world_size,
                "device": device_name(self.device), "dtype": str(self.dtype)}

    def _precompile(self, engine: EngineConfig, graphs: DecodeGraphs | None) -> dict:
        """Compile in worker processes the Triton kernels the start-up and the idle work will launch and the cache
        lacks (executor/kernel_precompile.py): dry launches of each decode bucket's step, of the MoE warm-up's
        ladder and of the warm-up steps of prefill shapes."""
        from quickmoe.executor.step_shapes import warmup_step_shapes

        if self.parallel.sharded and self.parallel.min_over_ranks(int(self._precompiler.warm)) == 0:
            self._precompiler.warm = False  # the dry launches hold collectives: every rank runs them, or none does
        dry_runs = []
        if graphs is not None:
            for size in graphs.buckets:
                dry_runs.append((f"decode bucket {size}", lambda size=size: graphs.dry_forward(size)))
        if self.moe_warmup.pending:
            stream = torch.cuda.current_stream(self.device)
            dry_runs.append(("MoE warm-up ladder",
                             lambda: [self.moe_warmup.warm(t, stream) for t in self.moe_warmup.pending]))
        for shape in warmup_step_shapes(engine.max_num_batched_tokens, self.max_model_len, engine.max_num_seqs):
            def step(shape=shape) -> None:
                token_ids = [[0] * count for _, count in shape]
                tables = self.scratch_block_tables([start + count for start, count in shape])
                self.execute(token_ids, [start for start, _ in shape], tables)
            dry_runs.append((f"warm-up step of {sum(c for _, c in shape)} tokens", step))
        try:
            return self._precompiler.run(dry_runs)
        except Exception as exc:  # noqa: BLE001 (a dry launch the recording could not stand: start as without it)
            if self.parallel.sharded:
                raise  # the other ranks' dry launches wait in collectives for this one's
            torch.cuda.synchronize(self.device)  # a broken device raises here, as it would at the next step
            logger.warning("the kernel precompile's dry launches failed (%s: %s); kernels compile at their first "
                           "launch", type(exc).__name__, str(exc)[:300])
            return {"warm": False, "skipped": f"{type(exc).__name__}: {str(exc)[:300]}"}

    def capture_deferred_graph(self) -> bool:
        """Capture the next decode CUDA graph left for later (call on the step thread while no step runs); False
        when there is none."""
        return self.graphs is not None and self.graphs.capture_next_deferred()

    def release_graphs(self) -> None:
        """Destroy the decode CUDA graphs; later steps run eagerly. Every rank of a model spread over several
        calls it before it leaves the process groups (see DecodeGraphs.release: NCCL waits for graphs holding
        its collectives)."""
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

    def _starts_triton(self) -> bool:
        """Whether Triton's start may run beside the load (a CUDA device with Triton installed)."""
        return self.device.type == "cuda" and importlib.util.find_spec("triton") is not None

    def _await_cuda_preinit(self, early_start: EarlyStart | None) -> list[torch.Tensor] | None:
        """Wait for the early start's CUDA context (so torch's CUDA init finds it ready); return its
        page-locked ring for the loader, or None (not started, failed, or made for another device)."""
        preinit = early_start.cuda if early_start is not None else None
        if preinit is None:
            return None
        if not preinit.wait():
            logger.info("CUDA pre-initialisation did not succeed (%s); initialising CUDA now", preinit.error)
            return None
        index = self.device.index if self.device.index is not None else torch.cuda.current_device()
        if index != preinit.ordinal:
            return None
        return preinit.host_tensors() or None  # none with QUICKMOE_CUDA_PREINIT=context: the loader pins its own

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
        prompt_rows = None
        if graphs is not None and not wants_prompt and len(token_ids) <= graphs.max_batch \
                and all(len(t) == 1 for t in token_ids):
            host = build_host_metadata([1] * len(token_ids), start_positions, block_tables, self.kv_cache.block_size)
            logits = graphs.run([t[0] for t in token_ids], prev, host)
        else:
            batch = self.build_batch(token_ids, start_positions, block_tables)
            if any(r >= 0 for r in prev):
                batch.input_ids = self._resolve_previous(batch.input_ids, [len(t) for t in token_ids], prev)
            if wants_prompt:  # the last rows and the prompt rows asked for, in one LM-head call
                rows, prompt_rows = prompt_logit_rows([len(t) for t in token_ids], prompt_logprobs)
                batch.logits_indices = to_device(rows, self.device, self.staging)
                logits = self.model(batch)
                logits, prompt_logits = logits[:len(token_ids)], logits[len(token_ids):]
            else:
                logits = self.model(batch)
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
