"""The ModelRunner's start-up (`start_runner`, called by `ModelRunner.__init__`): CUDA's context (the early start's,
when the process launched one), the model built and its checkpoint loaded beside Triton's, cuBLAS's and the rotary
tables' own starts, the weights processed, the paged KV cache, the kernel precompile in worker processes,
torch.compile and the start-up buckets' decode CUDA graphs, each a phase of the StartupReport (startup/report.py)."""

from __future__ import annotations

import dataclasses
import importlib.util
import logging
import resource
from typing import TYPE_CHECKING

import torch

from quickmoe.checkpoint.loader import load_weights
from quickmoe.checkpoint.loader_options import LoaderOptions
from quickmoe.checkpoint.reader import CheckpointReader
from quickmoe.config import EngineConfig, ModelConfig
from quickmoe.errors import ConfigError
from quickmoe.executor.cublas_start import CublasStart
from quickmoe.executor.cuda_graphs import DecodeGraphs, decode_buckets
from quickmoe.executor.dry_layers import dry_layers
from quickmoe.executor.kernel_cache import use_triton_cache
from quickmoe.executor.kernel_precompile import KernelPrecompile
from quickmoe.executor.kernel_warmup import MoEKernelWarmup
from quickmoe.executor.pinned_staging import PinnedStaging
from quickmoe.executor.prefill_graphs import PrefillGraphs, prefill_seq_buckets, prefill_token_buckets
from quickmoe.executor.rank_report import gather_rank_phases
from quickmoe.executor.step_timer import StepTimer
from quickmoe.executor.tables_start import TablesStart, tables_start_enabled
from quickmoe.executor.triton_start import TritonStart
from quickmoe.layers.attention import Attention
from quickmoe.layers.moe import FusedMoE, GptOssMLP
from quickmoe.layers.norm import RMSNorm
from quickmoe.layers.rotary import fill_rotary_tables
from quickmoe.layers.sampler import Sampler
from quickmoe.layers.sparse_moe import SparseMoeBlock
from quickmoe.layouts import default_permutation_cache
from quickmoe.models.registry import build_model
from quickmoe.startup.early_start import EarlyStart
from quickmoe.startup.gc_pause import paused_gc

if TYPE_CHECKING:
    from quickmoe.executor.model_runner import ModelRunner

__all__ = ["start_runner"]

logger = logging.getLogger(__name__)


def start_runner(runner: ModelRunner, engine: EngineConfig, progress: bool, early_start: EarlyStart | None) -> None:
    """The start-up of `runner` (`ModelRunner.__init__`): cuda_init -> config -> build -> load -> process -> kv_cache ->
    precompile -> compile -> capture, each phase marked in its report; the runner's attributes are set here."""
    if engine.compile == "aot":  # a torch without it fails now, not after the weights load
        from quickmoe.executor.aot_layers import require_aot

        require_aot()
    host_buffers = None
    if runner.device.type == "cuda":
        host_buffers = _await_cuda_preinit(runner.device, early_start)
        torch.cuda.init()
        torch.empty(1, device=runner.device)  # creates the context
        torch.cuda.synchronize(runner.device)
    runner.kernel_cache = use_triton_cache(runner.device)  # before any Triton kernel is compiled or loaded
    if engine.kernel_precompile == "auto" and _starts_triton(runner.device) and "triton" in (
            runner.moe_kernels, runner.attention_kernels):  # its workers start now, beside the load
        runner._precompiler = KernelPrecompile(runner.device, _precompile_key(runner, engine),
                                               local_ranks=runner.parallel.world_size, progress=progress)
    triton_start = TritonStart(runner.device).start() if _starts_triton(runner.device) else None
    cublas_start = CublasStart(runner.device, runner.dtype).start() if runner.device.type == "cuda" else None
    runner.report.mark("cuda_init")
    with paused_gc():  # config, build and load make ~10 objects per checkpoint tensor, none of them garbage
        runner.config = ModelConfig.from_dir(runner.model_dir)
        reader = CheckpointReader(runner.model_dir)  # headers only: fails fast on a bad checkpoint
        runner.report.mark("config")
        # on CUDA the rotary table is computed beside the load (`TablesStart`; QUICKMOE_TABLES_START=0: here)
        tables_on_thread = tables_start_enabled() and runner.device.type == "cuda"  # the value checked everywhere
        runner.model = build_model(runner.config, dtype=runner.dtype, device=runner.device, parallel=runner.parallel,
                                   defer_tables=tables_on_thread)
    tables_start = TablesStart(runner.device, runner.model).start() if tables_on_thread else None
    moe_kernels, attention_kernels = runner.moe_kernels, runner.attention_kernels
    for module in runner.model.modules():  # the backends are chosen once, here
        if isinstance(module, (FusedMoE, GptOssMLP, SparseMoeBlock)):  # the experts and their routing
            module.kernels = moe_kernels
        elif isinstance(module, (Attention, RMSNorm)):  # attention, RoPE + KV write, the norms
            module.kernels = attention_kernels
    runner.report.mark("build")
    if triton_start is not None:
        triton_start.built()
    options = early_start.options if early_start is not None else LoaderOptions.from_env()
    with paused_gc():
        runner.load_stats = load_weights(
            runner.model, reader, progress=progress, num_threads=options.threads,
            chunk_bytes=options.chunk_bytes, num_buffers=options.buffers, host_buffers=host_buffers)
    if runner.device.type == "cuda":
        torch.cuda.synchronize(runner.device)
    if early_start is not None:
        early_start.stop_prefetch()
    runner.report.mark("load")
    if runner.device.type == "cuda":
        runner.report.info["gpu_bytes_after_load"] = torch.cuda.memory_allocated(runner.device)
        torch.cuda.reset_peak_memory_stats(runner.device)
    if triton_start is not None:  # Triton's own start ran beside the load
        runner.report.info["triton_start_seconds"] = triton_start.join()
    if cublas_start is not None:  # and cuBLAS's
        runner.report.info["cublas_start_seconds"] = cublas_start.join()
    if tables_start is not None:  # and the model's tables
        runner.report.info["tables_start_seconds"] = tables_start.join()
    fill_rotary_tables(runner.model)  # nothing left when the thread filled them; else here, raising what fails
    runner.model.process_weights_after_loading()
    runner.model.eval()
    if runner.device.type == "cuda":
        torch.cuda.synchronize(runner.device)
        runner.report.info["gpu_peak_bytes_during_process"] = torch.cuda.max_memory_allocated(runner.device)
        runner.report.info["gpu_bytes_after_process"] = torch.cuda.memory_allocated(runner.device)
    runner.report.mark("process")
    if early_start is not None:
        # Unpinning the ring takes ~0.1 s of driver time that stalls GPU work issued meanwhile, so it
        # waits until the weights are processed (it then overlaps the tokenizer and the first request).
        early_start.finish()
        runner.report.info["early_start"] = early_start.info()
    runner._init_kv_cache(engine)
    runner.sampler = Sampler()
    runner.prev_sampled = torch.zeros(engine.max_num_seqs, dtype=torch.long, device=runner.device)  # [max_num_seqs]
    runner.step_timer = StepTimer(runner.device)
    # page-locked memory for each step's host->device copies, reused step after step
    runner.staging = PinnedStaging(runner.device) if runner.device.type == "cuda" else None
    runner.report.mark("kv_cache")
    runner.graphs = runner.prefill_graphs = None
    graphs = None
    if engine.resolved_cuda_graphs(runner.device):
        if runner.device.type != "cuda":
            raise ConfigError(f"engine option 'cuda_graphs' = 'on' needs a CUDA device; the model is on "
                              f"{runner.device} (expected 'off')")
        graphs = DecodeGraphs(runner, decode_buckets(engine.max_num_seqs, engine.cuda_graph_sizes),
                              startup_max=engine.cuda_graphs_startup_max)
    prefill_graphs = None
    prefill_tokens = min(engine.cuda_graphs_prefill_tokens, engine.max_num_batched_tokens)
    # (captured while idle, never at start-up; not with compiled layers or several ranks: not measured there)
    if graphs is not None and prefill_tokens > 0 and engine.compile == "off" and not runner.parallel.sharded:
        prefill_graphs = PrefillGraphs(runner, prefill_token_buckets(prefill_tokens),
                                       prefill_seq_buckets(engine.max_num_seqs), pool=graphs.pool,
                                       logits=graphs.logits)
    runner.moe_warmup = MoEKernelWarmup(runner.model, runner.dtype, engine.max_num_batched_tokens)
    if runner._precompiler is not None:
        runner.report.info["precompile"] = _precompile(runner, engine, graphs, prefill_graphs)
        runner.report.mark("precompile")
    if engine.compile in ("on", "aot"):
        from quickmoe.executor.compile import compile_runner

        runner.report.info["compile"] = compile_runner(runner, aot=engine.compile == "aot")
        runner.layers_compiled = True
        runner.report.mark("compile")
    if graphs is not None:
        runner.graphs = graphs
        runner.report.info["cuda_graphs"] = runner.graphs.info  # later captures are added to it
        runner.moe_warmup.warm_sizes(list(runner.graphs.startup_buckets))  # compiled side by side, not in turn
        runner.graphs.capture_startup()
        runner.report.mark("capture")
        if prefill_graphs is not None:
            runner.prefill_graphs = prefill_graphs
            runner.report.info["prefill_graphs"] = prefill_graphs.info
    _record_ready(runner)


def _record_ready(runner: ModelRunner) -> None:
    """The start-up report's closing facts: the kernel and permutation caches, memory, the loader's figures, every
    rank's phases (sharded), the model and its device."""
    runner.report.info["triton_cache"] = runner.kernel_cache.info
    runner.kernel_cache.record("startup")
    cache = default_permutation_cache()
    runner.report.info["permutation_cache"] = dataclasses.asdict(cache.stats())
    cache.clear()  # the indices served every layer of this model; free them
    runner.report.info["peak_host_rss_bytes"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    stats = runner.load_stats
    runner.report.info["loader"] = {k: getattr(stats, k) for k in (
        "seconds", "num_buffers", "peak_host_buffer_bytes", "peak_device_buffer_bytes", "validate_seconds",
        "read_seconds", "wait_seconds", "deliver_seconds", "finish_seconds", "num_chunks", "chunk_bytes",
        "num_threads", "direct_copies", "copy_calls", "plan_cached")}
    if runner.parallel.sharded:  # every rank's phases, and the slowest rank's of each, on rank 0
        runner.report.info["ranks"] = gather_rank_phases(runner.report, runner.parallel)
        if runner.parallel.is_driver:
            slowest = runner.report.info["ranks"]["slowest"]
            logger.info("start-up over %d ranks, slowest rank per phase: %s", runner.parallel.world_size,
                        ", ".join(f"{k} {v['seconds']:.2f} s (rank {v['rank']})" for k, v in slowest.items()))
    runner.report.info.update(model=str(runner.model_dir), device=str(runner.device), moe_kernels=runner.moe_kernels,
                              attention_kernels=runner.attention_kernels,
                              dtype=str(runner.dtype).removeprefix("torch."), load_bytes=runner.load_stats.num_bytes,
                              load_gb_per_s=runner.load_stats.num_bytes / 1e9 / max(runner.report.phases["load"], 1e-9))
    logger.info("model %s on %s (%s) ready", runner.model_dir, runner.device, runner.report.info["dtype"])


def _precompile_key(runner: ModelRunner, engine: EngineConfig) -> dict:
    """What decides the kernels a start launches: the model's config.json, the engine options (but the seed and
    the checkpoint's path), the ranks and the device."""
    import hashlib

    from quickmoe.executor.kernel_cache import device_name

    try:
        config = hashlib.sha256((runner.model_dir / "config.json").read_bytes()).hexdigest()
    except OSError:
        config = None  # the config phase reports it
    options = {k: v for k, v in dataclasses.asdict(engine).items() if k not in ("seed", "model")}
    return {"config": config, "engine": options, "rank": runner.parallel.rank, "world": runner.parallel.world_size,
            "device": device_name(runner.device), "dtype": str(runner.dtype)}


def _precompile(runner: ModelRunner, engine: EngineConfig, graphs: DecodeGraphs | None,
                prefill_graphs: PrefillGraphs | None) -> dict:
    """Compile in worker processes the Triton kernels the start-up and the idle work will launch and the cache
    lacks (executor/kernel_precompile.py): dry launches of each decode bucket's step, of the MoE warm-up's
    ladder, of the warm-up steps of prefill shapes and of each prompt-step graph's step (its padding rows take
    the MoE's variants that skip them); the steps run the decoder layers' shortest prefix holding every pair of
    a layer's kind and the kind before it (executor/dry_layers.py)."""
    from quickmoe.executor.step_shapes import warmup_step_shapes

    if runner.parallel.sharded and runner.parallel.min_over_ranks(int(runner._precompiler.warm)) == 0:
        runner._precompiler.warm = False  # the dry launches hold collectives: every rank runs them, or none does
    dry_runs = []
    if graphs is not None:
        for size in graphs.buckets:
            dry_runs.append((f"decode bucket {size}", lambda size=size: graphs.dry_forward(size)))
    if runner.moe_warmup.pending:
        stream = torch.cuda.current_stream(runner.device)
        dry_runs.append(("MoE warm-up ladder",
                         lambda: [runner.moe_warmup.warm(t, stream) for t in runner.moe_warmup.pending]))
    for shape in warmup_step_shapes(engine.max_num_batched_tokens, runner.max_model_len, engine.max_num_seqs):
        def step(shape=shape) -> None:
            token_ids = [[0] * count for _, count in shape]
            tables = runner.scratch_block_tables([start + count for start, count in shape])
            runner.execute(token_ids, [start for start, _ in shape], tables)
        dry_runs.append((f"warm-up step of {sum(c for _, c in shape)} tokens", step))
    if prefill_graphs is not None:
        for key in prefill_graphs.deferred:
            dry_runs.append((f"prompt step of {key[0]} tokens over {key[1]} sequences",
                             lambda key=key: prefill_graphs.dry_forward(*key)))
    try:
        with dry_layers(runner.model, runner.kv_cache.layer_group) as layers:  # every (kind, kind before), fewer layers
            info = runner._precompiler.run(dry_runs)
        return {**info, "dry_layers": layers} if not info.get("warm") else info
    except Exception as exc:  # noqa: BLE001 (a dry launch the recording could not stand: start as without it)
        if runner.parallel.sharded:
            raise  # the other ranks' dry launches wait in collectives for this one's
        torch.cuda.synchronize(runner.device)  # a broken device raises here, as it would at the next step
        logger.warning("the kernel precompile's dry launches failed (%s: %s); kernels compile at their first "
                       "launch", type(exc).__name__, str(exc)[:300])
        return {"warm": False, "skipped": f"{type(exc).__name__}: {str(exc)[:300]}"}


def _starts_triton(device: torch.device) -> bool:
    """Whether Triton's start may run beside the load (a CUDA device with Triton installed)."""
    return device.type == "cuda" and importlib.util.find_spec("triton") is not None


def _await_cuda_preinit(device: torch.device, early_start: EarlyStart | None) -> list[torch.Tensor] | None:
    """Wait for the early start's CUDA context (so torch's CUDA init finds it ready); return its
    page-locked ring for the loader, or None (not started, failed, or made for another device)."""
    preinit = early_start.cuda if early_start is not None else None
    if preinit is None:
        return None
    if not preinit.wait():
        logger.info("CUDA pre-initialisation did not succeed (%s); initialising CUDA now", preinit.error)
        return None
    index = device.index if device.index is not None else torch.cuda.current_device()
    if index != preinit.ordinal:
        return None
    return preinit.host_tensors() or None  # none with QUICKMOE_CUDA_PREINIT=context: the loader pins its own
