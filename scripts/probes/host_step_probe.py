"""Where the host's time goes in a decode step at a large batch: the engine's step loop timed by phase, then
under cProfile; and what a CUDA-graph replay costs the host with and without work in flight.

At batch 256 the host can take as long to run a step (schedule, metadata, graph replay, sampling, then the
previous step's tokens: stop checks, detokenizer, outputs) as the GPU takes to compute one, so the step rate is
the host's. For each batch size of `--batch` this starts that many requests of `--input-len` random tokens, runs
the prefills, then times `--steps` decode steps:
- the wall time per step, the StepTimer's device time and the host's time to queue a step (medians);
- the phases, each function's own wall time per step (median, ms): the scheduler, the step's launch
  (`ModelRunner.execute`) and inside it the host metadata, `DecodeGraphs.run`, `CUDAGraph.replay`, the sampler,
  the rank broadcast; the wait for the previous step's tokens (`DeviceSample.to_host`) and the rest of `_collect`;
- the caching allocator's counters over those steps (a retry frees cached blocks and synchronises);
- 8 steps under torch.profiler: the kernels' summed time against the span they cover, the longest gaps, and the
  kernels that took the most time;
- the same number of steps under cProfile (by own time and by cumulative time, in the log).
Then, with the engine idle, the replay of the largest captured graph: after a synchronise (the launch alone),
right behind a replay of the same graph (its own launch still running), and behind a replay of another bucket's
graph, in microseconds of host time (medians of 20).

    python3 scripts/probes/host_step_probe.py /tmp/gpt-oss-20b --batch 256,128 --steps 40 [--tp 2]
"""

from __future__ import annotations

import argparse
import collections
import cProfile
import functools
import io
import pstats
import random
import statistics
import time

_PHASES: dict[str, list[float]] = collections.defaultdict(list)
_STEP: dict[str, float] = collections.defaultdict(float)


def _timed(owner, name: str, label: str) -> None:
    """Wrap owner.name so each call adds its wall time to the current step's `label`."""
    inner = getattr(owner, name)

    @functools.wraps(inner)
    def wrapper(*args, **kwargs):
        t0 = time.perf_counter()
        try:
            return inner(*args, **kwargs)
        finally:
            _STEP[label] += time.perf_counter() - t0

    setattr(owner, name, wrapper)


def _instrument(engine) -> None:
    import torch

    from quickmoe.executor import cuda_graphs, model_runner
    from quickmoe.layers import sampler

    _timed(engine.scheduler, "schedule", "schedule")
    _timed(engine, "_launch", "launch (all)")
    _timed(model_runner, "build_host_metadata", "launch: host metadata")
    _timed(cuda_graphs.DecodeGraphs, "run", "launch: DecodeGraphs.run (all)")
    _timed(torch.cuda.CUDAGraph, "replay", "launch: CUDAGraph.replay")
    _timed(sampler.Sampler, "sample", "launch: Sampler.sample")
    _timed(sampler.DeviceSample, "to_host_async", "launch: to_host_async")
    _timed(engine, "_collect", "collect (all)")
    _timed(sampler.DeviceSample, "to_host", "collect: to_host (waits)")
    runner = getattr(engine.runner, "_runner", engine.runner)
    _timed(type(runner.parallel), "broadcast_", "launch: broadcast_ tokens")
    driver = engine.runner
    if driver is not runner:  # several ranks: the step's message to the others
        from quickmoe.executor import workers
        _timed(workers, "_broadcast", "launch: message to ranks")


def _allocator() -> dict[str, int]:
    import torch

    stats = torch.cuda.memory_stats()
    keys = ("num_alloc_retries", "num_device_alloc", "num_device_free", "num_sync_all_streams", "num_ooms")
    return {k: int(stats.get(k, 0)) for k in keys}


def _replay_costs(runner) -> None:
    import torch

    graphs = runner.graphs
    sizes = sorted(graphs.graphs)
    if len(sizes) < 2:
        return
    big, other = graphs.graphs[sizes[-1]], graphs.graphs[sizes[-2]]

    def host_us(before, graph) -> float:
        samples = []
        for _ in range(20):
            torch.cuda.synchronize()
            if before is not None:
                before.replay()
            t0 = time.perf_counter()
            graph.replay()
            samples.append(1e6 * (time.perf_counter() - t0))
            torch.cuda.synchronize()
        return statistics.median(samples)

    print(f"replay of the batch-{sizes[-1]} graph, host us (median of 20): after a synchronise "
          f"{host_us(None, big):.1f}; behind its own replay {host_us(big, big):.1f}; behind the batch-{sizes[-2]} "
          f"graph's replay {host_us(other, big):.1f}")


def _kernel_timeline(engine, steps: int) -> None:
    """`steps` engine steps under torch.profiler: the kernels' summed time against the span from the first kernel's
    start to the last one's end, and the longest gaps between consecutive kernels (what precedes and follows)."""
    import torch
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            engine.step()
        torch.cuda.synchronize()
    kernels = sorted(((e.time_range.start, e.time_range.end, e.name) for e in prof.events()
                      if e.device_type == DeviceType.CUDA), key=lambda k: k[0])
    if not kernels:
        print("  profiler: no device events")
        return
    busy, end, gaps = 0.0, kernels[0][0], []
    for start, stop, name in kernels:
        if start > end:
            gaps.append((start - end, name))
        busy += max(0.0, stop - max(start, end))
        end = max(end, stop)
    span = end - kernels[0][0]
    total = sum(stop - start for start, stop, _ in kernels)
    print(f"  profiler over {steps} steps: {len(kernels) / steps:.0f} kernels a step, summed {total / 1e3 / steps:.3f} "
          f"ms a step, busy (union) {busy / 1e3 / steps:.3f} ms, span {span / 1e3 / steps:.3f} ms a step; gaps > 50 us:"
          f" {sum(g for g, _ in gaps if g > 50) / 1e3 / steps:.3f} ms a step")
    names = collections.Counter()
    for gap, name in gaps:
        if gap > 50:
            names[name[:70]] += gap
    for name, gap in names.most_common(8):
        print(f"    {gap / 1e3 / steps:8.3f} ms a step of gaps before {name}")
    by_kernel = collections.Counter()
    for start, stop, name in kernels:
        by_kernel[name[:70]] += stop - start
    for name, spent in by_kernel.most_common(10):
        print(f"    {spent / 1e3 / steps:8.3f} ms a step in {name}")


def _one_batch(llm, engine, batch: int, args) -> None:
    from quickmoe.engine.sampling_params import SamplingParams

    rng = random.Random(batch)
    params = SamplingParams(max_tokens=3 * args.steps + 64, temperature=0, ignore_eos=True)
    for i in range(batch):
        prompt = [rng.randrange(100, min(30000, llm.config.vocab_size)) for _ in range(args.input_len)]
        engine.add_request(f"b{batch}-p{i}", prompt, params)
    started: set[str] = set()
    while len(started) < batch:
        started.update(o.request_id for o in engine.step() if o.token_ids)
    for _ in range(8):
        engine.step()
    timer = llm.runner.step_timer
    timer.enabled, timer.keep = True, True
    timer.reset()
    _PHASES.clear()
    before = _allocator()
    walls = []
    for _ in range(args.steps):
        _STEP.clear()
        t0 = time.perf_counter()
        engine.step()
        walls.append(time.perf_counter() - t0)
        for key, value in _STEP.items():
            _PHASES[key].append(value)
    after = _allocator()
    summary = timer.summary()
    timer.enabled = False
    print(f"batch {batch}: {1e3 * statistics.median(walls):.3f} ms a step on the wall (median); device "
          f"{summary['gpu_ms_median']:.3f} ms; host {summary['host_queue_ms_median']:.3f} ms to queue a step")
    print(f"  allocator over {args.steps} steps: " + ", ".join(f"{k} +{after[k] - before[k]}" for k in after))
    for key in sorted(_PHASES):
        values = _PHASES[key]
        print(f"  {key:<34} {1e3 * statistics.median(values):8.3f} ms median, {1e3 * max(values):8.3f} max "
              f"({len(values)} of {args.steps} steps)")
    if args.device == "cuda":
        try:
            _kernel_timeline(engine, 8)
        except (AttributeError, RuntimeError) as exc:  # a profiler without these fields: the rest still runs
            print(f"  profiler timeline failed: {exc!r}")
    if args.cprofile:
        profiler = cProfile.Profile()
        t0 = time.perf_counter()
        profiler.enable()
        for _ in range(args.steps):
            engine.step()
        profiler.disable()
        print(f"  under cProfile: {1e3 * (time.perf_counter() - t0) / args.steps:.3f} ms a step")
        for key in ("tottime", "cumulative"):
            out = io.StringIO()
            pstats.Stats(profiler, stream=out).sort_stats(key).print_stats(args.top)
            print(f"--- batch {batch}, by {key}, over {args.steps} steps")
            print("\n".join(line for line in out.getvalue().splitlines() if line.strip())[:12000])
    for rid in [r for r in engine.live_request_ids() if r.startswith(f"b{batch}-")]:
        engine.abort(rid)
    while engine.has_unfinished():
        engine.step()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model")
    parser.add_argument("--batch", default="256", help="comma-separated batch sizes, run in this order")
    parser.add_argument("--input-len", type=int, default=1000)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--tp", type=int, default=1, help="tensor_parallel_size")
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument("--no-cprofile", dest="cprofile", action="store_false")
    parser.add_argument("--cuda-graph-sizes", default=None,
                        help="comma-separated decode graph batch sizes instead of the engine's default")
    args = parser.parse_args()

    from quickmoe.llm import LLM

    options = {"tensor_parallel_size": args.tp} if args.tp > 1 else {}
    if args.cuda_graph_sizes:
        options["cuda_graph_sizes"] = tuple(int(b) for b in args.cuda_graph_sizes.split(","))

    llm = LLM(args.model, device=args.device, **options)
    engine = llm.engine
    if llm.runner.graphs is not None:
        print(f"decode graph batch sizes: {llm.runner.graphs.buckets}")
    while engine.idle_work():  # every decode graph captured, as a server does once idle
        pass
    if args.device == "cuda":
        import torch

        print(f"GPU memory after the idle work: {torch.cuda.memory_allocated() / 2**30:.3f} GiB allocated, "
              f"{torch.cuda.memory_reserved() / 2**30:.3f} GiB reserved")
    _instrument(engine)
    for batch in (int(b) for b in args.batch.split(",")):
        _one_batch(llm, engine, batch, args)
    if args.device == "cuda" and args.tp == 1:  # (with several ranks a replay on rank 0 alone would hang)
        _replay_costs(llm.runner)
    llm.shutdown()


if __name__ == "__main__":
    main()
