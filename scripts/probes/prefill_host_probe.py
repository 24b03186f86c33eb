"""Whether a lone prompt's prefill step is bound by the GPU or by the host that launches it.

`bench serve` at concurrency 1 gave Qwen3-30B-A3B FP8 prefill steps of 90.7 ms for 1,000 tokens and 94.9 ms for 504,
where 8,192 tokens take 100 ms in `bench generate` (docs/benchmarks.md, 2026-12-02 fourth session): nearly a fixed
cost a step. For each prompt length of `--lens` this runs one prompt (max_tokens 1) `--repeat` times after a
warm-up and reports the engine step's wall time, the StepTimer's device time, and under torch.profiler (CUDA and
CPU activities) the kernels' summed and union time against the step's span, the kernels a step, the host's time in
`cudaLaunchKernel` / `cuLaunchKernelEx` and in synchronising calls. Then one length under cProfile (`--cprofile-len`),
by own and by cumulative time, so the host's hot spots are named.

    python3 scripts/probes/prefill_host_probe.py /tmp/qwen3-fp8 --lens 500,1000,2000,8000
"""

from __future__ import annotations

import argparse
import collections
import cProfile
import io
import pstats
import random
import statistics
import time


def _prompt(rng: random.Random, length: int, vocab: int) -> list[int]:
    return [rng.randrange(100, min(30000, vocab)) for _ in range(length)]


def _run_one(engine, rid: str, prompt: list[int]) -> float:
    """One prompt through its prefill (max_tokens 1): the wall seconds of the steps until it finishes."""
    from quickmoe.engine.sampling_params import SamplingParams

    engine.add_request(rid, prompt, SamplingParams(max_tokens=1, temperature=0, ignore_eos=True))
    t0 = time.perf_counter()
    while engine.has_unfinished():
        engine.step()
    return time.perf_counter() - t0


def _profiled(engine, rid: str, prompt: list[int], cuda: bool) -> str:
    import torch
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    if cuda:
        torch.cuda.synchronize()
    with profile(activities=activities) as prof:
        wall = _run_one(engine, rid, prompt)
        if cuda:
            torch.cuda.synchronize()
    events = prof.events()
    kernels = sorted(((e.time_range.start, e.time_range.end, e.name) for e in events
                      if e.device_type == DeviceType.CUDA), key=lambda k: k[0])
    host = collections.Counter()
    calls = collections.Counter()
    for e in events:
        if e.device_type == DeviceType.CPU and (e.name.startswith("cuda") or e.name.startswith("cu")):
            host[e.name] += e.time_range.end - e.time_range.start
            calls[e.name] += 1
    line = f"wall {1e3 * wall:.2f} ms under the profiler"
    if kernels:
        busy, end = 0.0, kernels[0][0]
        for start, stop, _ in kernels:
            busy += max(0.0, stop - max(start, end))
            end = max(end, stop)
        total = sum(stop - start for start, stop, _ in kernels)
        line += (f"; {len(kernels)} kernels, summed {total / 1e3:.2f} ms, busy (union) {busy / 1e3:.2f} ms, "
                 f"span {(end - kernels[0][0]) / 1e3:.2f} ms")
        by_kernel = collections.Counter()
        count = collections.Counter()
        for start, stop, name in kernels:
            by_kernel[name[:60]] += stop - start
            count[name[:60]] += 1
        line += "\n    kernels: " + "; ".join(f"{n} x{count[n]} {t / 1e3:.2f} ms" for n, t in by_kernel.most_common(12))
    line += "\n    host API: " + "; ".join(f"{n} x{calls[n]} {t / 1e3:.2f} ms" for n, t in host.most_common(8))
    return line


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model")
    parser.add_argument("--lens", default="500,1000,2000,8000", help="comma-separated prompt lengths")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--cprofile-len", type=int, default=1000, help="0: no cProfile")
    parser.add_argument("--top", type=int, default=35)
    parser.add_argument("--prefill-graph-tokens", type=int, default=None,
                        help="the engine's cuda_graphs_prefill_tokens (default: the engine's; 0: prompt steps eager)")
    args = parser.parse_args()

    from quickmoe.llm import LLM

    options = {} if args.prefill_graph_tokens is None else {"cuda_graphs_prefill_tokens": args.prefill_graph_tokens}
    llm = LLM(args.model, device=args.device, **options)
    engine = llm.engine
    t0 = time.perf_counter()
    pieces = 0
    while engine.idle_work():  # as a server once idle: graphs, and the prefill sizes' MoE kernels
        pieces += 1
    print(f"idle work: {pieces} pieces in {time.perf_counter() - t0:.2f} s")
    prefill = getattr(llm.runner, "prefill_graphs", None)
    if prefill is not None:
        captures = prefill.info["captures"]
        print(f"prompt-step graphs: {len(prefill.graphs)} captured of {len(captures)} tried "
              f"({sum(c['warmup_s'] for c in captures):.2f} s of warm-ups, {sum(c['capture_s'] for c in captures):.2f} "
              f"s of captures); failed: {[(c['tokens'], c['seqs'], c['failed']) for c in captures if 'failed' in c]}")
    timer = llm.runner.step_timer
    vocab = llm.config.vocab_size
    rng = random.Random(0)
    cuda = args.device == "cuda"
    for length in (int(x) for x in args.lens.split(",")):
        for i in range(2):  # warm-up: kernels of this size compiled and launched once
            _run_one(engine, f"w{length}-{i}", _prompt(rng, length, vocab))
        timer.enabled, timer.keep = True, True
        timer.reset()
        walls = [_run_one(engine, f"r{length}-{i}", _prompt(rng, length, vocab)) for i in range(args.repeat)]
        summary = timer.summary()
        timer.enabled = False
        device = summary.get("gpu_ms_median", float("nan")) if summary else float("nan")
        host = summary.get("host_queue_ms_median", float("nan")) if summary else float("nan")
        print(f"prompt of {length} tokens: wall {1e3 * statistics.median(walls):.2f} ms (median of {args.repeat}; "
              f"min {1e3 * min(walls):.2f}), device {device:.2f} ms a step, host {host:.2f} ms to queue a step")
        print("  " + _profiled(engine, f"p{length}", _prompt(rng, length, vocab), cuda))
    if args.cprofile_len:
        profiler = cProfile.Profile()
        prompt = _prompt(rng, args.cprofile_len, vocab)
        profiler.enable()
        wall = _run_one(engine, "cprofile", prompt)
        profiler.disable()
        print(f"prompt of {args.cprofile_len} tokens under cProfile: {1e3 * wall:.2f} ms")
        for key in ("tottime", "cumulative"):
            out = io.StringIO()
            pstats.Stats(profiler, stream=out).sort_stats(key).print_stats(args.top)
            print(f"--- by {key}")
            print("\n".join(line for line in out.getvalue().splitlines() if line.strip())[:14000])
    llm.shutdown()


if __name__ == "__main__":
    main()
