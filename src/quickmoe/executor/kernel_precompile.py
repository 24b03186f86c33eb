"""Start-up's Triton kernels compiled side by side in worker processes, before anything launches them.

On an empty kernel cache a start compiles every kernel at its first launch, one after the other in the start-up's
thread: the decode graphs' warm-ups, the MoE warm-up's ladder of batch sizes and the prefill-shaped warm-up steps
spent 40 s of a fresh server's 48 s before /health on the H100 (docs/benchmarks.md, 2026-11-28 second session),
and threads gained only 1.2x there because Triton holds the GIL for most of a compile.

The precompile finds out first what those launches will compile, and compiles it in processes:
1. **Dry launches** (`recording`): the same work runs (each decode bucket's step over the graphs' static
   buffers, the MoE warm-up's experts at every batch size of its ladder, the warm-up steps), with Triton's JIT
   cache hook installed: a quickmoe kernel launch that would compile is recorded with its specialization
   (`compile_workers.KernelRequest`) and returns without compiling or running. While recording, the kernels
   already compiled in this process are set aside too, so that no Triton kernel runs on the dry launches' unset
   outputs; torch's own kernels do run, on those values, and nothing reads them back.
2. Each request whose kernel the cache lacks goes to a `CompilePool` of worker processes as soon as a dry launch
   records it (a `CompileStream`: the workers compile while the dry launches go on); they write kernels and
   launchers into the shared cache directory (their keys agree with this process's: executor/kernel_keys.py).
3. The start-up then runs as before; its launches load every kernel from the cache. One a worker could not
   compile (reported) is compiled at its launch, as before.

A manifest (`<quickmoe cache>/precompile/...json`, keyed by the kernel cache, the model's config.json and the
engine options) lists the cache entries a start found or compiled; the next start of the same model and options
that finds them all skips everything (a warm start: no dry launch, no worker). Without a manifest the workers are
started right after CUDA init, so that their imports overlap the weight load. `kernel_precompile` "off"
(`--kernel-precompile off`) skips it all.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import time
from collections.abc import Callable, Iterator

import torch

from quickmoe.executor.compile_pool import CompilePool, CompileStream
from quickmoe.executor.compile_workers import KernelRequest, cache_entry
from quickmoe.executor.kernel_keys import quickmoe_jit_functions
from quickmoe.paths import atomic_write_bytes

__all__ = ["KernelPrecompile", "LaunchRecorder", "compile_workers_count", "recording"]

logger = logging.getLogger(__name__)

MAX_WORKERS = 32
WORKERS_ENV = "QUICKMOE_COMPILE_WORKERS"  # the worker count (default: the CPUs this process may use, / ranks)


def compile_workers_count(local_ranks: int = 1) -> int:
    """Worker processes for one rank: QUICKMOE_COMPILE_WORKERS, else the CPUs this process may run on shared
    among the node's ranks (at most MAX_WORKERS, at least 1)."""
    configured = os.environ.get(WORKERS_ENV)
    if configured:
        try:
            count = int(configured)
        except ValueError:
            count = 0
        if count < 1:
            from quickmoe.errors import ConfigError

            raise ConfigError(f"{WORKERS_ENV}={configured!r}: expected an integer >= 1 (compile worker processes)")
        return count
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, min(MAX_WORKERS, cpus // max(local_ranks, 1)))


class LaunchRecorder:
    """Triton JIT cache hook that records, and stops, every launch of a quickmoe kernel that would compile; other
    libraries' kernels compile and run as usual. `requests` keeps the first of each distinct specialization;
    `on_new(request)`, when given, is called with each as it is first seen (the precompile hands it to a worker
    there, while the dry launches go on)."""

    def __init__(self, target, on_new: Callable[[KernelRequest], None] | None = None) -> None:
        self.target = (target.backend, target.arch, target.warp_size)
        self.requests: dict[tuple[str, str, str], KernelRequest] = {}
        self.on_new = on_new

    def __call__(self, *, key, repr, fn, compile, is_manual_warmup, already_compiled) -> bool:  # noqa: A002
        jit = fn.jit_function
        module = jit.fn.__module__
        if not module.startswith("quickmoe."):
            return False
        request = KernelRequest(module=module, qualname=jit.fn.__qualname__, fn_key=jit.cache_key,
                                spec=compile["specialization_data"], target=self.target)
        key = (module, request.qualname, request.spec)
        if key not in self.requests:
            self.requests[key] = request
            if self.on_new is not None:
                self.on_new(request)
        return True  # the JIT neither compiles nor launches it


@contextlib.contextmanager
def recording(device: torch.device, on_new: Callable[[KernelRequest], None] | None = None
              ) -> Iterator[LaunchRecorder]:
    """Within: quickmoe's Triton launches are recorded by a `LaunchRecorder` (with `on_new`), not compiled nor run
    (see the module docstring); the kernels this process had compiled are back in place on exit."""
    from triton import knobs
    from triton.runtime.driver import driver

    if knobs.runtime.jit_cache_hook is not None:
        raise RuntimeError("a Triton JIT cache hook is installed already; the precompile cannot record launches")
    recorder = LaunchRecorder(driver.active.get_current_target(), on_new)
    index = device.index if device.index is not None else torch.cuda.current_device()
    set_aside = []
    for fn in quickmoe_jit_functions():
        if index in fn.device_caches:
            kernels = fn.device_caches[index][0]
            set_aside.append((kernels, dict(kernels)))
            kernels.clear()
    knobs.runtime.jit_cache_hook = recorder
    try:
        yield recorder
    finally:
        knobs.runtime.jit_cache_hook = None
        for kernels, saved in set_aside:
            kernels.clear()
            kernels.update(saved)


class KernelPrecompile:
    """The precompile of one start (see the module docstring). Made right after CUDA init: when no manifest says
    that an earlier start of the same model and engine options found every kernel in this kernel cache, its worker
    processes are started at once, so their imports (torch, triton, the kernel modules: ~3 s) overlap the weight
    load. `run(dry_runs)` then records, compiles what is missing and writes the manifest; `close()` (idempotent)
    stops the workers. `warm` may be set False before `run` (a rank of a sharded model whose other ranks are cold:
    the dry launches hold collectives, so all run them); the workers are then started when something is missing."""

    def __init__(self, device: torch.device, key: dict, *, local_ranks: int = 1, progress: bool = False) -> None:
        from quickmoe.executor.kernel_cache import cache_key
        from quickmoe.paths import cache_dir

        from triton import knobs

        self.device, self.local_ranks, self.progress = device, local_ranks, progress
        triton_dir = knobs.cache.dir  # TRITON_CACHE_DIR: the runner's use_triton_cache set it
        self.manifest = (cache_dir() / "precompile" / cache_key({"triton_cache": triton_dir})
                         / f"{cache_key(key)}.json")
        self.warm = self._manifest_holds(triton_dir)
        self.pool: CompilePool | None = None
        if not self.warm:
            self.pool = CompilePool(compile_workers_count(local_ranks), low_priority=True)

    def _manifest_holds(self, triton_dir: str) -> bool:
        """Whether the manifest exists and every kernel it lists is still in the kernel cache."""
        try:
            entries = json.loads(self.manifest.read_text())["entries"]
        except (OSError, ValueError, KeyError, TypeError):
            return False
        return all(os.path.exists(os.path.join(triton_dir, e)) for e in entries)

    def run(self, dry_runs: list[tuple[str, Callable[[], None]]]) -> dict:
        """Record the Triton kernels `dry_runs` (named callables) launch, compile those the kernel cache lacks in the
        worker processes, write the manifest; returns the report's view (kernels seen, missing, compiled,
        workers, seconds, failures). With a warm manifest: nothing (`{"warm": True}`)."""
        from triton import knobs

        if self.warm:
            return {"warm": True, "manifest": str(self.manifest)}
        if knobs.runtime.jit_cache_hook is not None:  # someone else's (a profiler's): theirs stays, nothing recorded
            logger.warning("a Triton JIT cache hook is installed; kernels compile at their first launch instead of "
                           "ahead in worker processes")
            self.close()
            return {"warm": False, "skipped": "a Triton JIT cache hook is installed"}
        t0 = time.perf_counter()
        triton_dir = knobs.cache.dir
        missing: list[KernelRequest] = []
        entries: list[str] = []  # the cache entries of every kernel seen
        stream: CompileStream | None = None

        def compile_if_missing(request: KernelRequest) -> None:
            """A request first seen: to a worker at once when the cache lacks its kernel (the dry launches go on)."""
            nonlocal stream
            entries.append(cache_entry(request))
            if os.path.exists(os.path.join(triton_dir, entries[-1])):
                return
            if stream is None:
                if self.pool is None:
                    self.pool = CompilePool(compile_workers_count(self.local_ranks))
                logger.info("compiling the Triton kernels the kernel cache lacks in %d processes",
                            len(self.pool.workers))
                stream = self.pool.stream(progress=self.progress, priority=_first_the_longest)
            missing.append(request)
            stream.submit(request)

        try:
            with recording(self.device, compile_if_missing) as recorder, torch.inference_mode():
                for name, run in dry_runs:
                    before = len(recorder.requests)
                    run()
                    logger.debug("precompile: %s launches %d kernels not seen before", name,
                                 len(recorder.requests) - before)
            torch.cuda.synchronize(self.device)
            info = {"warm": False, "kernels": len(recorder.requests), "missing": len(missing),
                    "record_s": round(time.perf_counter() - t0, 3)}
            if stream is not None:
                info.update(self._finish(stream))
            if all(os.path.exists(os.path.join(triton_dir, e)) for e in entries):
                self.manifest.parent.mkdir(parents=True, exist_ok=True)
                atomic_write_bytes(self.manifest, json.dumps({"entries": sorted(set(entries))}).encode())
        finally:
            self.close()
        info["seconds"] = round(time.perf_counter() - t0, 3)
        return info

    def _finish(self, stream: CompileStream) -> dict:
        """Wait for the kernels handed to the workers while the dry launches ran; their report."""
        workers = len(self.pool.workers)
        t1 = time.perf_counter()
        results = stream.finish()
        failed = [r for r in results if r.error is not None]
        info = {"workers": workers, "compile_s": round(time.perf_counter() - t1, 3),
                "compiled": len(results) - len(failed), "worker_seconds": round(sum(r.seconds for r in results), 3),
                "failed": len(failed),
                "slowest": [f"{r.request.module.rsplit('.', 1)[-1]}.{r.request.qualname} {r.seconds:.2f} s"
                            for r in sorted(results, key=lambda r: -r.seconds)[:4]]}  # what held the phase
        if failed:
            info["failures"] = [f"{r.request.module}.{r.request.qualname}: {r.error}" for r in failed[:5]]
            logger.warning("%d of %d kernels could not be compiled ahead (they compile at their first launch); "
                           "first: %s", len(failed), len(results), info["failures"][0])
        logger.info("compiled %d Triton kernels (%.1f s of compiling over %d processes; %.2f s after the dry launches)",
                    info["compiled"], info["worker_seconds"], workers, info["compile_s"])
        return info

    def close(self) -> None:
        if self.pool is not None:
            self.pool.close()
            self.pool = None


# compiled first: the kernels that take longest to compile (the MoE GEMMs, attention), so that no worker starts one
# while the others run out of work; ranked by the module that defines each `@triton.jit` function (the MoE GEMMs'
# kernels live in moe_gemm1_kernel.py and moe_gemm2_kernel.py since 2026-11-30; the list named moe_gemm.py until then)
_LONGEST_FIRST = ("quickmoe.kernels.moe_gemm1_kernel", "quickmoe.kernels.moe_gemm2_kernel",
                  "quickmoe.kernels.prefill_attention", "quickmoe.kernels.fp8_gemm",
                  "quickmoe.kernels.decode_attention", "quickmoe.kernels.dense_gemm")


def _first_the_longest(request: KernelRequest) -> int:
    return _LONGEST_FIRST.index(request.module) if request.module in _LONGEST_FIRST else len(_LONGEST_FIRST)
