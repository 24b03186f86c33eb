"""Regional compilation: each decoder layer compiled with torch.compile, one graph per layer *kind*.

All decoder layers share one forward (`models/decoder.py` `DecoderLayer.forward`); torch.compile treats a module's
parameters as graph inputs, and the layer takes its KV caches and the step's metadata as arguments
(`AttentionMetadata`: tensors only; `KVGroupMetadata`: the group's tensors and its sliding window, a symbolic int
to Dynamo), with MoE, KV writes and attention as custom ops (`forward/custom_ops.py`: tensors and plain numbers). So
the graphs differ only where the layers' modules do: gpt-oss compiles one graph for its sliding-window and
full-attention layers alike (two before the window became an input: 2026-11-30 fourth session, docs/benchmarks.md),
Qwen3-MoE one per MLP kind, whatever the depth, and nothing assumes the order in which layers run or that every
layer runs every step.

Caches: Inductor's on-disk caches live under `<quickmoe cache>/compile/<key>/`, the key hashing what invalidates
them (the model's config.json, dtype, device name, quickmoe, torch and triton versions); the Triton kernels Inductor
generates go to the persistent Triton cache every start uses (executor/kernel_cache.py). A warm start reuses them:
Dynamo still traces each kind once (0.6 s for gpt-oss on the H200), Inductor's codegen does not run (`CompileStats`),
and Inductor's pool of compile workers is not started (`compile_workers_allowed`: the last compile in that directory
left `WARM_MARKER`); `--compile aot` (executor/aot_layers.py) loads each kind's saved AOT artifact instead, without
tracing.

Where the time goes, in `CompileStats` and the report's `info.compile`: importing Dynamo and Inductor (once per
process; 1.3-2.3 s on the H200, the largest part of a warm compile; imported on a thread beside the load they slowed
the load and the processing by more than they saved, 2026-11-30 fourth session), Dynamo's tracing, the backend
(AOTAutograd + Inductor) and within it Inductor's codegen runs and cache loads, the hashing of torch's and triton's
sources that keys Inductor's caches, analysis restarts, and the warm-up steps themselves. Recompiles: the warm-up
steps run through `ModelRunner.execute` under inference mode, as serving does (tensors made outside it fail Dynamo's
dispatch-key guards and recompiled every kind at the first request), and float arguments are specialised up front
(otherwise Dynamo restarted its analysis of the first graph to specialise them); `TORCH_LOGS=recompiles` lists any
that remain.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from quickmoe.executor.kernel_cache import cache_key, device_name, versions
from quickmoe.executor.torch_key import use_cached_torch_key
from quickmoe.paths import cache_dir
from quickmoe.startup.gc_pause import paused_then_frozen_gc, startup_gc_paused

__all__ = ["WARM_MARKER", "CompileStats", "compile_cache_dir", "compile_decoder_layers", "compile_runner",
           "compile_stats", "compile_workers_allowed", "mark_static_inputs", "use_compile_caches",
           "use_compile_settings"]

logger = logging.getLogger(__name__)


def compile_cache_dir(model_config_json: dict, dtype: torch.dtype, device: torch.device) -> Path:
    """`<cache>/compile/<key>` ($QUICKMOE_COMPILE_CACHE_DIR/<key> when set): key = sha256 of the model
    config, dtype, device name and the versions."""
    key = cache_key({"config": model_config_json, "dtype": str(dtype), "device": device_name(device), **versions()})
    root = os.environ.get("QUICKMOE_COMPILE_CACHE_DIR")
    return (Path(root) if root else cache_dir() / "compile") / key


def use_compile_caches(path: Path) -> None:
    """Point Inductor's caches at `path` (before the first compilation of the process); its Triton kernels go to
    TRITON_CACHE_DIR, the persistent kernel cache the runner set."""
    path.mkdir(parents=True, exist_ok=True)
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(path / "inductor")
    import torch._inductor.config as inductor_config

    inductor_config.fx_graph_cache = True


@dataclass(frozen=True)
class CompileStats:
    """Totals since process start: graphs Dynamo compiled, Inductor graph-cache hits and misses, and the seconds
    torch reports for Dynamo (tracing and guards), the backend (AOTAutograd + Inductor, including cache loads),
    loading compiled graphs from the cache, Inductor's codegen (`codegen_runs` of them: 0 on a warm cache), the
    source hashing that keys Inductor's caches, and Dynamo's analysis restarts."""

    graphs: int
    cache_hits: int
    cache_misses: int
    dynamo_s: float = 0.0
    backend_s: float = 0.0
    cache_load_s: float = 0.0
    codegen_s: float = 0.0
    codegen_runs: int = 0
    key_s: float = 0.0
    restarts: int = 0

    @property
    def warm(self) -> bool:
        return self.cache_hits > 0 and self.cache_misses == 0

    def since(self, before: CompileStats) -> CompileStats:
        """What happened between `before` and this snapshot."""
        return CompileStats(**{f.name: getattr(self, f.name) - getattr(before, f.name)
                               for f in dataclasses.fields(self)})


def compile_stats() -> CompileStats:
    from torch._dynamo.utils import compilation_time_metrics, counters

    def seconds(*keys: str) -> float:
        return float(sum(sum(compilation_time_metrics.get(key, ())) for key in keys))

    backend = seconds("OutputGraph.call_user_compiler")
    return CompileStats(graphs=int(counters["stats"]["unique_graphs"]),
                        cache_hits=int(counters["inductor"]["fxgraph_cache_hit"]),
                        cache_misses=int(counters["inductor"]["fxgraph_cache_miss"]),
                        dynamo_s=max(seconds("_compile.compile_inner") - backend, 0.0), backend_s=backend,
                        cache_load_s=seconds("AOTAutogradCache.inductor_load"),
                        codegen_s=seconds("fx_codegen_and_compile"),
                        codegen_runs=len(compilation_time_metrics.get("fx_codegen_and_compile", ())),
                        key_s=seconds("CacheBase.get_system.triton_key", "inductor_codecache_torch_key"),
                        restarts=sum(len(v) for k, v in compilation_time_metrics.items()
                                     if k.startswith("compile_attempt_") and k != "compile_attempt_0"))


def compile_decoder_layers(layers: torch.nn.ModuleList, *, backend: str = "inductor") -> None:
    """Compile every layer in place (`nn.Module.compile`), with dynamic token and batch sizes. They share
    one code object, so Dynamo's cache serves all layers of a kind from the first one compiled.

    Process-wide settings keep one graph per kind for every step: sizes of 1 are not specialized
    (`backed_size_oblivious`: a 1-token decode and a 1-sequence batch reuse the general graph), equal sizes are
    not assumed equal forever (`use_duck_shape` off: a cache with as many slots as KV heads must not tie the two),
    and float arguments are specialised at once (`specialize_float`: no analysis restart)."""
    use_compile_settings()
    for layer in layers:
        layer.compile(backend=backend, dynamic=True, fullgraph=True)


def mark_static_inputs(runner) -> None:
    """Tell Dynamo which sizes of the layers' inputs never change, so it traces them as numbers, not symbols: every
    size of the KV cache tensors (and of the storage they view) but the number of blocks, which differs between
    layer groups (gpt-oss's sliding and full layers share one graph) and with the memory left for the cache, and
    the rotary table. 30 symbols become 16 for the embedded gpt-oss model, and Dynamo's trace of a warm start took 0.31-0.35 s instead of
    0.45-0.48 on the development machine (docs/benchmarks.md, 2026-12-01 sixth session). A static size is
    guarded by its value: a different one recompiles, never reuses a wrong graph."""
    import torch._dynamo

    cache = runner.kv_cache
    for tensor in cache.keys + cache.values:
        for t in (tensor, tensor._base):
            if t is not None and t.dim() > 1:
                torch._dynamo.mark_static(t, list(range(1, t.dim())))
    torch._dynamo.mark_static(runner.model.model.rotary.cos_sin_cache)


def use_compile_settings() -> None:
    """The process-wide settings of `compile_decoder_layers` (and of the AOT compile, executor/aot_layers.py)."""
    import torch._dynamo.config as dynamo_config
    import torch.fx.experimental._config as fx_config

    fx_config.backed_size_oblivious = True
    fx_config.use_duck_shape = False
    dynamo_config.specialize_float = True


# Written into a compile cache directory once a compile there found every graph in Inductor's cache (or put it
# there): the next start expects hits.
WARM_MARKER = "warm.json"


@contextlib.contextmanager
def compile_workers_allowed(allowed: bool):
    """With `allowed` False, Inductor compiles without its pool of worker processes (`compile_threads` 1) inside the
    block. Inductor starts that pool (one process per CPU, each importing torch) at the first graph of a process
    whatever its cache holds; on a warm cache nothing is compiled, so the pool only takes CPU from the main thread's
    tracing. A miss still compiles, in this process. `compile_threads` is not part of Inductor's cache keys."""
    if allowed:
        yield
        return
    import torch._inductor.config as inductor_config

    with inductor_config.patch(compile_threads=1):
        yield


def _mark_warm(cache_path: Path, stats: CompileStats) -> None:
    """Write (or remove) `WARM_MARKER`: present when every graph of this compile is now in the cache."""
    marker = cache_path / WARM_MARKER
    try:
        if stats.graphs > 0 and stats.cache_hits + stats.cache_misses >= stats.graphs:
            marker.write_text(json.dumps({"graphs": stats.graphs}) + "\n")
        else:
            marker.unlink(missing_ok=True)
    except OSError as exc:  # a read-only cache: the next start starts the workers, as without the marker
        logger.debug("compile cache marker %s not written: %s", marker, exc)


# The warm-up steps (token lists, start positions): a 1-token decode, a 2-sequence decode, a short prefill.
WARMUP_STEPS = (([[1]], [0]), ([[1], [2]], [1, 0]), ([[1, 2, 3]], [1]))


def compile_runner(runner, *, aot: bool = False) -> dict:
    """Compile `runner`'s decoder layers and run the warm-up steps through `runner.execute` (the serving path), so
    the graphs the first requests need exist before they arrive. aot: through saved AOT artifacts, one per layer
    kind (executor/aot_layers.py; `--compile aot`). Returns the report's `info.compile`: the stats of this
    compilation, `imports_s` (Dynamo, and Inductor's compiler unless aot, imported), `workers` (whether Inductor's
    compile workers were allowed: not when the last compile left every graph in the cache), `aot` (what was loaded
    and compiled) and `warmup_s` (the steps' own time, with whatever compiles at a kernel's first call, which no
    Dynamo timer covers)."""
    t0 = time.perf_counter()
    # QUICKMOE_STARTUP_GC=paused (the default): the collector paused through these imports, what they made frozen
    # after (paused through the tracing as well, Dynamo took 0.4 s longer on the development machine)
    with paused_then_frozen_gc() if startup_gc_paused() else contextlib.nullcontext():
        import torch._dynamo  # noqa: F401  (their imports are part of the compile phase: measured apart)

        if not aot:  # loading AOT artifacts needs none of Inductor's compiler
            import torch._inductor.compile_fx  # noqa: F401
    imports_s = time.perf_counter() - t0
    t1 = time.perf_counter()
    torch_key = "unused" if aot else use_cached_torch_key()  # Inductor's cache key of torch's sources
    torch_key_s = time.perf_counter() - t1
    raw_config = json.loads((runner.model_dir / "config.json").read_text())
    cache_path = compile_cache_dir(raw_config, runner.dtype, runner.device)
    use_compile_caches(cache_path)
    expect_warm = not aot and (cache_path / WARM_MARKER).is_file()
    before = compile_stats()
    aot_info = None
    if aot:
        from quickmoe.executor.aot_layers import aot_directory, install_aot_layers

        use_compile_settings()
        directory = aot_directory(cache_path)
        if runner.parallel.world_size > 1:  # each rank's layers hold its own shards
            directory = directory / f"rank{runner.parallel.rank}"
        aot_info = install_aot_layers(runner, directory, WARMUP_STEPS[-1])
    else:
        mark_static_inputs(runner)
        compile_decoder_layers(runner.model.model.layers)
    with compile_workers_allowed(not expect_warm):
        for tokens, starts in WARMUP_STEPS:
            lengths = [start + len(toks) for toks, start in zip(tokens, starts)]
            runner.execute(tokens, starts, runner.scratch_block_tables(lengths))
        if runner.device.type == "cuda":
            torch.cuda.synchronize(runner.device)
    seconds = time.perf_counter() - t0
    stats = compile_stats().since(before)
    if not aot:
        _mark_warm(cache_path, stats)
    info = {**dataclasses.asdict(stats), "warm": stats.warm, "cache_dir": str(cache_path),
            "imports_s": round(imports_s, 4), "workers": not expect_warm, "aot": aot_info, "torch_key": torch_key,
            "torch_key_s": round(torch_key_s, 4),
            "warmup_s": round(max(seconds - imports_s - torch_key_s - stats.dynamo_s - stats.backend_s, 0.0), 4)}
    if aot_info is not None:
        logger.info("AOT-compiled layers ready in %.2f s: %d artifacts loaded in %.2f s, %d compiled in %.2f s, "
                    "for %d layers (imports %.2f s; %s)", seconds, aot_info["artifacts_loaded"], aot_info["load_s"],
                    aot_info["artifacts_compiled"], aot_info["compile_s"], len(runner.model.model.layers), imports_s,
                    aot_info["directory"])
        return info
    logger.info("compiled %d graphs for %d layers in %.2f s (imports %.2f s, Dynamo %.2f s, backend %.2f s: "
                "%d Inductor codegen runs %.2f s, cache loads %.2f s, source hashing %.2f s (torch's key %s, %.2f s); "
                "%d restarts; warm-up steps %.2f s; %s cache: %d hits, %d misses, %s%s)", stats.graphs,
                len(runner.model.model.layers), seconds, imports_s, stats.dynamo_s, stats.backend_s,
                stats.codegen_runs, stats.codegen_s, stats.cache_load_s, stats.key_s, torch_key, torch_key_s,
                stats.restarts,
                info["warmup_s"], "warm" if stats.warm else "cold",
                stats.cache_hits, stats.cache_misses, cache_path,
                "" if info["workers"] else "; Inductor's compile workers not started: the cache was warm")
    return info
